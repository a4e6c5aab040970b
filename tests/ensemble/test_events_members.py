"""Ensembles under the hybrid master: every member's state events are located, handled and re-armed on its own.

The reference of each member is the scalar ``System.run`` of a freshly built bouncing ball with its parameters,
computed here: its events (instants and micro steps), its statistics, its samples at the communication points and,
for a member whose run ends in a Zeno accumulation, its error.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from cosimrun.config.build import build_experiment
from cosimrun.core.ode import OdeComponent
from cosimrun.ensemble import COMPLETE, FAILED, run_ensemble
from cosimrun.ensemble import events as located
from cosimrun.errors import ConfigError, EventLocalizationError, NonFiniteValueError, ZenoError
from cosimrun.masters import Hybrid
from cosimrun.storage.ensemble import load_member, write_ensemble
from cosimrun.system import System

T0, TF, DT = 0.0, 3.0, 0.01
TIME_TOLERANCE = 1e-10
COUNTS = ("macro_steps", "trial_steps", "rollbacks", "events")

BALL: dict[str, Any] = {
    "name": "bouncing_ball",
    "master": {"name": "hybrid", "time_tolerance": TIME_TOLERANCE},
    "components": {"ball": {"type": "bouncing_ball", "params": {"h0": 1.0, "v0": 0.0, "e": 0.8, "g": 9.81}}},
}


def build(cfg: dict[str, Any] = BALL) -> Any:
    return build_experiment(copy.deepcopy(cfg))


def scalar(params: dict[str, float], cfg: dict[str, Any] = BALL, tf: float = TF) -> dict[str, Any]:
    """One member's scalar run: its error (or ``None``), statistics, events ``(t, micro)`` and samples."""
    exp = build(cfg)
    for key, value in params.items():
        comp, _, name = key.partition(".")
        exp.system.components[comp].set_parameters(**{name: value})
    error, stats = None, None
    try:
        report = exp.system.run(T0, tf, DT, exp.master)
        stats = report.stats
    except ZenoError as exc:
        error = exc
    histories = exp.system.components["ball"].history.get_all_histories()
    h = histories["h"]  # each event handled leaves a sample after it at its instant, micro step 1, 2, ...
    events = [(t, micro - 1) for t, micro in zip(h.time.tolist(), h.micro.tolist(), strict=True) if micro > 0]
    return {"error": error, "stats": stats, "events": events,
            "samples": {port: (histories[port].time, histories[port].values, histories[port].micro)
                        for port in ("h", "v")}}


def assert_samples(result: Any, m: int, key: str, time: np.ndarray, values: np.ndarray, micro: np.ndarray) -> None:
    """Member *m*'s samples of *key* are the scalar run's *time*, *values* and *micro*: every sample, those before
    and after each event at its instant included, bit for bit (observed difference: 0)."""
    mine = result.member_history(m, key)
    np.testing.assert_array_equal(mine[0], time)
    np.testing.assert_array_equal(mine[1], micro)
    np.testing.assert_array_equal(mine[2], values)


def assert_member_equals_scalar(result: Any, m: int, params: dict[str, np.ndarray], cfg: dict[str, Any] = BALL,
                                tf: float = TF) -> dict[str, Any]:
    reference = scalar({k: float(v[m]) for k, v in params.items()}, cfg, tf)
    assert reference["error"] is None and result.status[m] == COMPLETE
    events = result.member_events(m)
    expected = np.array([t for t, _ in reference["events"]])
    assert len(events["time"]) == len(expected), m
    # every event instant within time_tolerance of the scalar run's; observed: the same instant to the bit
    assert np.max(np.abs(events["time"] - expected), initial=0.0) <= TIME_TOLERANCE
    np.testing.assert_array_equal(events["time"], expected)
    assert list(events["micro"]) == [micro for _, micro in reference["events"]]
    assert set(events["component"]) <= {"ball"} and set(events["event"]) <= {"bounce"}
    stats = reference["stats"]
    assert {k: int(result.member_stats[k][m]) for k in COUNTS} == {k: getattr(stats, k) for k in COUNTS}, m
    for port in ("h", "v"):
        time, values, micro = reference["samples"][port]
        assert_samples(result, m, f"ball.{port}", time, values, micro)
        assert result.final[f"ball.{port}"][m] == values[-1]
    return reference


@pytest.mark.parametrize("compact", [False, True])
def test_each_member_locates_its_own_events_as_its_scalar_run(compact: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Restitution, drop height and throw vary; some members start on the floor (one at rest), others rest early
    (a large ``v_rest``): each member's events, counts and samples are its scalar run's. With *compact* the run
    shrinks its arrays to the members still stepping as soon as half of them are done (as a large ensemble does)."""
    if compact:
        monkeypatch.setattr(located, "COMPACT", 2)
    rng = np.random.default_rng(25)
    m = 40
    params = {"ball.e": rng.uniform(0.3, 0.95, m), "ball.h0": rng.uniform(0.0, 2.0, m),
              "ball.v0": rng.uniform(-1.0, 3.0, m), "ball.v_rest": rng.choice([1e-3, 0.5, 2.0], m)}
    params["ball.h0"][:3] = 0.0
    params["ball.v0"][:3] = [0.0, 1.0, 4.0]  # at rest from the start; thrown up from the floor
    exp = build()
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * m
    events = result.member_stats["events"]
    assert events[0] == 0 and events.max() >= 10 and len(set(events.tolist())) > 5  # their own event counts
    assert result.stats.macro_steps == round((TF - T0) / DT)
    sample = sorted({0, 1, 2, *rng.choice(m, 9, replace=False).tolist()})
    resting = 0
    for i in sample:
        reference = assert_member_equals_scalar(result, i, params)
        resting += reference["samples"]["v"][1][-1] == 0.0
    assert resting >= 2  # members that came to rest before the end (and the one at rest from the start)


def test_a_zeno_member_fails_alone_with_its_scalar_runs_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a rest state (``v_rest = 0``) the ball's bounces accumulate: its scalar run stops with a ZenoError,
    so the member fails with that error at that instant; the others run on, as their scalar runs."""
    params = {"ball.e": np.array([0.8, 0.5, 0.7]), "ball.v_rest": np.array([1e-3, 0.0, 1e-3]),
              "ball.h0": np.array([1.0, 0.5, 1.5])}
    monkeypatch.setattr(located, "COMPACT", 2)  # the failed member is left out of the rounds after it failed
    exp = build()
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE]
    reference = scalar({k: float(v[1]) for k, v in params.items()})
    error = reference["error"]
    assert isinstance(error, ZenoError)
    failure = result.failures[1]
    assert failure.cause == str(error) and failure.time == error.time
    assert (failure.component, failure.variable) == ("ball", "bounce")
    # the events it handled before are its scalar run's; its samples end at the last point it was sound at
    np.testing.assert_array_equal(result.member_events(1)["time"], [t for t, _ in reference["events"]])
    time, values, micro = reference["samples"]["h"]
    assert_samples(result, 1, "ball.h", time, values, micro)
    assert result.final["ball.h"][1] == values[time == failure.last_time][-1]
    for m in (0, 2):
        assert_member_equals_scalar(result, m, params)


def test_indicators_of_several_components_are_located_per_member_as_its_scalar_run_locates_them() -> None:
    """Two balls: each member locates the earliest of its crossings, handles the events its scalar run handles at
    each instant (member 0 drops both balls from the same height: both bounce at one instant, one event each),
    with its scalar run's counts and samples."""
    cfg = copy.deepcopy(BALL)
    cfg["components"]["other"] = {"type": "bouncing_ball", "params": {"h0": 1.0, "e": 0.7}}
    params = {"ball.h0": np.array([1.0, 0.6, 1.4]), "other.e": np.array([0.8, 0.5, 0.9])}
    exp = build(cfg)
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=1.5, dt=DT)
    assert list(result.status) == [COMPLETE] * 3
    for m in range(3):
        single = build(cfg)
        for key, values in params.items():
            comp, _, name = key.partition(".")
            single.system.components[comp].set_parameters(**{name: float(values[m])})
        report = single.system.run(T0, 1.5, DT, single.master)
        mine = result.member_events(m)
        assert list(zip(mine["component"], mine["event"], mine["micro"], strict=True)) == [
            (comp, name, dense.micro) for dense, comp, name in report.events]
        np.testing.assert_array_equal(mine["time"], [dense.t for dense, _, _ in report.events])
        assert {k: int(result.member_stats[k][m]) for k in COUNTS} == {k: getattr(report.stats, k) for k in COUNTS}
        for comp in ("ball", "other"):
            h = single.system.components[comp].history.get_all_histories()["h"]
            assert_samples(result, m, f"{comp}.h", h.time, h.values, h.micro)
    both = result.member_events(0)
    assert both["time"][0] == both["time"][1] and set(both["component"][:2]) == {"ball", "other"}


def test_chunks_give_the_events_of_the_ensemble_run_at_once() -> None:
    params = {"ball.e": np.linspace(0.5, 0.9, 7), "ball.h0": np.linspace(0.2, 1.8, 7)}
    exp = build()
    whole = run_ensemble(exp.system, exp.master, params, t0=T0, tf=1.5, dt=DT)
    parts = run_ensemble(exp.system, exp.master, params, t0=T0, tf=1.5, dt=DT, chunk=3)
    assert len(whole.events["member"]) > 7
    for key, values in whole.events.items():
        np.testing.assert_array_equal(parts.events[key], values)
    for key, values in whole.member_stats.items():
        np.testing.assert_array_equal(parts.member_stats[key], values)
    np.testing.assert_array_equal(parts.history["ball.h"], whole.history["ball.h"])


def test_coupled_components_without_events_step_as_the_hybrid_master_steps_them() -> None:
    """Two coupled masses under the hybrid master: its trial steps (fresh outputs, in order), member for member."""
    cfg = {"name": "two_mass", "master": {"name": "hybrid"},
           "components": {"mass1": {"type": "mass_spring_damper", "params": {"stiffness": 10.0, "x0": 1.0}},
                          "mass2": {"type": "mass_spring_damper_force", "params": {"coupling_stiffness": 100.0}}},
           "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"]}
    params = {"mass1.stiffness": np.array([5.0, 10.0, 20.0]), "mass2.mass": np.array([0.5, 1.0, 2.0])}
    exp = build(cfg)
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=0.2, dt=0.001)
    for m in range(3):
        single = build(cfg)
        for key, values in params.items():
            comp, _, name = key.partition(".")
            single.system.components[comp].set_parameters(**{name: float(values[m])})
        stats = single.system.run(T0, 0.2, 0.001, single.master).stats
        assert {k: int(result.member_stats[k][m]) for k in COUNTS} == {k: getattr(stats, k) for k in COUNTS}
        for comp in ("mass1", "mass2"):
            _, values = single.system.components[comp].get_history_arrays()
            np.testing.assert_array_equal(result.history[f"{comp}.x"][:, m], values["x"])


@pytest.mark.parametrize(("change", "key", "text"), [
    (lambda cfg: cfg["components"].update(src={"type": "step"}), "components.src", "has time events"),
    (lambda cfg: cfg["components"]["ball"]["params"].update(max_substep=1e-3), "components.ball.params.max_substep",
     "max_substep is not supported"),
])
def test_what_the_hybrid_ensemble_does_not_run_is_refused_in_one_keyed_line(change: Any, key: str,
                                                                            text: str) -> None:
    assert_refused(BALL, change, {"ball.e": [0.5, 0.6]}, key, text)


def assert_refused(base: dict[str, Any], change: Any, parameters: dict[str, Any], key: str, text: str) -> None:
    """An ensemble of *parameters* of the experiment *base* with *change* applied is refused before it runs, in one
    line keyed *key* that says *text*."""
    cfg = copy.deepcopy(base)
    change(cfg)
    exp = build(cfg)
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, parameters, t0=T0, tf=0.1, dt=DT)
    assert info.value.key == key and text in str(info.value) and "\n" not in str(info.value)


def test_the_file_holds_each_members_events_and_counts(tmp_path: Path) -> None:
    params = {"ball.e": np.array([0.9, 0.6, 0.75]), "ball.h0": np.array([1.0, 0.4, 2.0])}
    exp = build()
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=2.0, dt=DT)
    path = write_ensemble(tmp_path / "balls.h5", result)
    for m in range(3):
        reference = scalar({k: float(v[m]) for k, v in params.items()}, tf=2.0)
        member = load_member(path, m)
        expected = pd.DataFrame({"time": [t for t, _ in reference["events"]],
                                 "micro": np.array([k for _, k in reference["events"]], dtype=np.int32),
                                 "component": np.array(["ball"] * len(reference["events"]), dtype=object),
                                 "event": np.array(["bounce"] * len(reference["events"]), dtype=object)})
        pd.testing.assert_frame_equal(member.events, expected)
        assert {k: member.stats[k] for k in COUNTS} == {k: getattr(reference["stats"], k) for k in COUNTS}
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:  # without cosimrun
        np.testing.assert_array_equal(ds["event.member"].values, result.events["member"])
        np.testing.assert_array_equal(ds["event.time"].values, result.events["time"])
        assert set(ds["event.name"].values) == {"bounce"} and ds["stats.events"].values.sum() == ds.sizes["event"]


def test_a_member_whose_event_falls_just_before_a_point_skips_it_as_its_scalar_run() -> None:
    """An impact 3e-10 s before the point t = 0.45 is located within ``clock.snap`` of it: the scalar run takes its
    next step from the impact to t = 0.46, with no sample at 0.45; the member does the same (the others take
    0.45)."""
    t_impact = 0.45 - 3e-10
    params = {"ball.h0": np.array([9.81 / 2 * t_impact * t_impact, 1.0]), "ball.e": np.array([0.8, 0.7])}
    exp = build()
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=1.0, dt=DT)
    reference = scalar({k: float(v[0]) for k, v in params.items()}, tf=1.0)
    time, values, micro = reference["samples"]["h"]
    assert 0.45 not in time.tolist() and 0.45 in result.member_history(1, "ball.h")[0].tolist()
    (t_e, _), = reference["events"][:1]
    assert 0.45 - 6e-10 < t_e < 0.45
    np.testing.assert_array_equal(result.member_events(0)["time"], [t for t, _ in reference["events"]])
    assert {k: int(result.member_stats[k][0]) for k in COUNTS} == {k: getattr(reference["stats"], k) for k in COUNTS}
    assert_samples(result, 0, "ball.h", time, values, micro)
    assert_member_equals_scalar(result, 1, params, tf=1.0)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the scalar run's arithmetic
def test_a_member_whose_state_overflows_fails_alone_where_its_scalar_run_stops() -> None:
    """A ball thrown up from near the largest float: its height overflows in the first step, where its scalar run
    stops with a NonFiniteValueError; the member fails there with its values of t0, the others run on."""
    params = {"ball.h0": np.array([1.0, 1.7976e308, 0.5]), "ball.v0": np.array([0.0, 1e307, 0.0])}
    exp = build()
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=1.0, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE]
    one = build()
    one.system.components["ball"].set_parameters(h0=float(params["ball.h0"][1]), v0=1e307)
    with pytest.raises(NonFiniteValueError) as info:
        one.system.run(T0, 1.0, DT, one.master)
    failure = result.failures[1]
    assert failure.time == info.value.time == DT and failure.last_time == T0
    assert (failure.component, failure.cause) == ("ball", "non-finite value")
    assert result.final["ball.h"][1] == params["ball.h0"][1]
    np.testing.assert_array_equal(result.member_history(1, "ball.h")[0], [T0])  # no sample after its last sound one
    for m in (0, 2):
        assert_member_equals_scalar(result, m, params, tf=1.0)



@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_member_that_overflows_at_its_event_fails_at_the_instant_its_scalar_run_stops() -> None:
    """Balls thrown down so fast that their height overflows before the bounce (v0 = -1e308) or their rebound is
    computed from an overflowed speed (v0 = -1e200): each scalar run stops at the event's instant, a few 1e-11 s
    or 1e-14 s in, not at the next communication point; so does each member, the others run on."""
    params = {"ball.h0": np.array([1.0, 1.0, 0.5]), "ball.v0": np.array([0.0, -1e308, -1e200])}
    exp = build()
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=0.5, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, FAILED]
    for m in (1, 2):
        one = build()
        one.system.components["ball"].set_parameters(h0=float(params["ball.h0"][m]), v0=float(params["ball.v0"][m]))
        with pytest.raises(NonFiniteValueError) as info:
            one.system.run(T0, 0.5, DT, one.master)
        failure = result.failures[m]
        assert 0.0 < failure.time == info.value.time < DT
        assert (failure.component, failure.cause, failure.last_time) == ("ball", "non-finite value", T0)
        h = one.system.history.get_component_history("ball").get_port_history("h")  # the samples before the fault
        assert_samples(result, m, "ball.h", h.time, h.values, h.micro)
    assert_member_equals_scalar(result, 0, params, tf=0.5)

class Flip(OdeComponent):
    """x' = -1 until x crosses zero; the event reflects x (micro step 1), then lifts it by 1 (micro step 2,
    no crossing). With ``endless`` on it reflects x at every micro step: a cascade that never settles."""

    vectorizable = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.parameters["endless"] = 0.0
        self.add_state("x", initial=0.25)
        self.add_state_event("zero", lambda t, x, u: x[0], update=self._flip)

    def derivatives(self, t: Any, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return -np.ones_like(x)

    def _flip(self, t: Any, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        endless = self.parameters["endless"]
        return np.where(endless > 0, -x, np.where(x < 0, -x, x + 1.0))


def flip_system() -> tuple[System, Hybrid]:
    system = System("flip")
    system.add_component(Flip("f"))
    return system, Hybrid(max_micro_steps=20)


def test_events_that_cascade_take_each_members_micro_steps_and_an_endless_one_fails_alone() -> None:
    """Members 0 and 1 reach zero at the same instant, handled together: from micro step 2 on only member 1's
    event goes on (the others' sub-ensemble narrowed to it) until it fails, alone."""
    params = {"f.x0": np.array([0.25, 0.25, 0.4]), "f.endless": np.array([0.0, 1.0, 0.0])}
    system, master = flip_system()
    result = run_ensemble(system, master, params, t0=T0, tf=1.5, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE]
    for m in range(3):
        single, master = flip_system()
        single.components["f"].set_parameters(**{k.split(".")[1]: float(v[m]) for k, v in params.items()})
        if m == 1:
            with pytest.raises(EventLocalizationError) as info:
                single.run(T0, 1.5, DT, master)
            assert result.failures[1].cause == str(info.value) and result.failures[1].time == info.value.time
            continue
        stats = single.run(T0, 1.5, DT, master).stats
        history = single.components["f"].history.get_all_histories()["x"]
        events = [(t, k - 1) for t, k in zip(history.time.tolist(), history.micro.tolist(), strict=True) if k > 0]
        mine = result.member_events(m)
        assert [k for _, k in events] == [0, 1, 0, 1] == list(mine["micro"])  # two events, two micro steps each
        np.testing.assert_array_equal(mine["time"], [t for t, _ in events])
        assert {k: int(result.member_stats[k][m]) for k in COUNTS} == {k: getattr(stats, k) for k in COUNTS}
        assert_samples(result, m, "f.x", history.time, history.values, history.micro)


@pytest.mark.parametrize("settings", [{"root_finder": "bisection"}, {"use_hints": False},
                                      {"sign_tolerance": 1e-9, "time_tolerance": 1e-8}])
def test_the_masters_root_finder_settings_locate_each_member_as_its_scalar_run(settings: dict[str, Any]) -> None:
    cfg = copy.deepcopy(BALL)
    cfg["master"].update(settings)
    params = {"ball.e": np.array([0.8, 0.6, 0.9]), "ball.h0": np.array([1.0, 0.3, 1.7])}
    exp = build(cfg)
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=2.0, dt=DT)
    for m in range(3):
        assert_member_equals_scalar(result, m, params, cfg, tf=2.0)
