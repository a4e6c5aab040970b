"""Ensembles of ``pendulum_switch`` under the hybrid master: every member keeps its own mode.

The pendulum is a ``multi`` component (linear while ``|q| < 0.25``, nonlinear above 0.35, a dwell time of 0.05 s)
with an end stop, driven by a PID controller that follows a sine reference. Members differ in the controller's
gains, the reference's amplitude and the pendulum's initial state and damping, so that they switch at their own
instants, hit the end stop or not, and some never leave the linear mode. The reference of each member is the
scalar ``System.run`` of its parameters, computed here: its mode switches, its events, its statistics and its
samples at the communication points.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_coupling_error_members import assert_tables_equal, table, table_of
from test_events_members import assert_refused

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import COMPLETE, run_ensemble, run_members
from cosimrun.ensemble import events as located
from cosimrun.storage.ensemble import load_member, write_ensemble

T0, TF, DT = 0.0, 1.5, 0.01
TIME_TOLERANCE = 1e-10
COUNTS = ("macro_steps", "trial_steps", "rollbacks", "events")
PENDULUM = {"mass": 1.0, "length": 1.0, "damping": 0.2, "q_max": 0.75, "restitution": 0.6, "q0": 0.5, "omega0": 3.0}
SWITCH: dict[str, Any] = {
    "name": "pendulum_switch",
    "master": {"name": "hybrid", "time_tolerance": TIME_TOLERANCE},
    "components": {
        "ref": {"type": "sine", "params": {"amplitude": 40.0, "unit": "deg", "frequency": 0.25}},
        "ctrl": {"type": "pid", "params": {"kp": 60.0, "ki": 20.0, "kd": 8.0, "N": 50.0, "u_min": -40.0,
                                           "u_max": 40.0, "input_unit": "rad", "output_unit": "N*m"}},
        "pendulum": {
            "type": "multi",
            "modes": {"linear": {"type": "pendulum_linear", "params": dict(PENDULUM)},
                      "nonlinear": {"type": "pendulum", "params": dict(PENDULUM)}},
            "initial_mode": "linear",
            "selector": {"type": "threshold", "port": "q", "abs": True, "below": "linear", "above": "nonlinear",
                         "lower": 0.25, "upper": 0.35},
            "hysteresis": {"dwell_time": 0.05},
        },
    },
    "connections": ["ref.y -> ctrl.r", "pendulum.q -> ctrl.y", "ctrl.u -> pendulum.torque"],
}
MEMBERS = 12
FIRST = {"ctrl.kp": [60.0, 40.0, 46.0], "ctrl.kd": [8.0, 8.0, 7.1], "ref.amplitude": [40.0, 5.0, 10.9],
         "pendulum.q0": [0.5, 0.05, 0.37], "pendulum.omega0": [3.0, 0.2, -4.8], "pendulum.damping": [0.2, 0.2, 0.35]}
"""Member 0 is the experiment as configured (a switch at the start, the end stop hit twice), member 1 stays in
the linear mode, member 2 switches at the start and crosses back within the dwell time: its switch back waits for
the end of the dwell window, a communication point of its own at t = 0.05."""


def build(cfg: dict[str, Any] = SWITCH) -> Any:
    return build_experiment(copy.deepcopy(cfg))


def member_parameters() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    rest = MEMBERS - len(FIRST["ctrl.kp"])
    draws = {"ctrl.kp": rng.uniform(20, 80, rest), "ctrl.kd": rng.uniform(2, 10, rest),
             "ref.amplitude": rng.uniform(5, 45, rest), "pendulum.q0": rng.uniform(-0.6, 0.6, rest),
             "pendulum.omega0": rng.uniform(-6, 6, rest), "pendulum.damping": rng.uniform(0.05, 1.0, rest)}
    return {key: np.concatenate([FIRST[key], draws[key]]) for key in FIRST}


def scalar(params: dict[str, float], tf: float = TF, kinds: str = "f") -> dict[str, Any]:
    """One member's scalar run: its result and its samples of every recorded port of the dtype *kinds* (real;
    ``"fb"``: event ports too)."""
    exp = build()
    for key, value in params.items():
        comp, _, name = key.partition(".")
        exp.system.components[comp].set_parameters(**{name: value})
    report = exp.system.run(T0, tf, DT, exp.master)
    samples = {}
    for comp in ("ref", "ctrl", "pendulum"):
        for port, series in exp.system.components[comp].history.get_all_histories().items():
            if series.values.dtype.kind in kinds:
                samples[f"{comp}.{port}"] = (series.time, series.micro, series.values)
    return {"report": report, "samples": samples}


@pytest.fixture(scope="module")
def ensemble() -> tuple[Any, dict[str, np.ndarray]]:
    """The ensemble run once; it shrinks its arrays to the members still stepping as soon as half of them are
    done, as a large ensemble does."""
    params = member_parameters()
    exp = build()
    compact, located.COMPACT = located.COMPACT, 2
    try:
        result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    finally:
        located.COMPACT = compact
    return result, params


def test_each_member_switches_modes_and_handles_events_as_its_scalar_run(ensemble: Any) -> None:
    result, params = ensemble
    assert list(result.status) == [COMPLETE] * MEMBERS
    switches = result.member_stats["mode_switches"]
    assert switches[1] == 0 and len(set(switches.tolist())) >= 3  # one in the linear mode, the others their own
    stops = [int((result.member_events(m)["event"] == "end_stop").sum()) for m in range(MEMBERS)]
    assert stops[0] == 2 and 0 < stops.count(0) < MEMBERS  # the end stop hit by some
    held = result.member_switches(2)
    assert list(held["time"][:2]) == [0.0, 0.05] and not (result.member_events(2)["time"] == 0.05).any()
    for m in (0, 1, 2, 8):
        reference = scalar({key: float(values[m]) for key, values in params.items()})
        report = reference["report"]
        mine = result.member_switches(m)
        theirs = report.mode_switches
        assert list(mine["from_mode"]) == [s.from_mode for s in theirs], m
        assert list(mine["to_mode"]) == [s.to_mode for s in theirs], m
        assert set(mine["component"]) <= {"pendulum"}
        # every switch instant within time_tolerance of the scalar run's; observed: the same instant to the bit
        np.testing.assert_allclose(mine["time"], [s.time for s in theirs], rtol=0, atol=TIME_TOLERANCE)
        events = result.member_events(m)
        assert list(events["event"]) == [name for _, _, name in report.events], m
        assert list(events["micro"]) == [dense.micro for dense, _, _ in report.events]
        np.testing.assert_allclose(events["time"], [dense.t for dense, _, _ in report.events], rtol=0,
                                   atol=TIME_TOLERANCE)  # observed: equal to the bit
        assert {k: int(result.member_stats[k][m]) for k in COUNTS} == {k: getattr(report.stats, k) for k in COUNTS}
        assert switches[m] == len(theirs)
        assert_tables_equal(table_of(result, m), table(report.coupling_errors), f"member {m}: coupling errors")
        for key, expected in reference["samples"].items():
            # every sample, before and after each event at its instant: equal to the bit
            for mine, theirs in zip(result.member_history(m, key), expected, strict=True):
                np.testing.assert_array_equal(mine, theirs, err_msg=f"member {m}: {key}")


def test_chunks_give_the_switches_of_the_ensemble_run_at_once(ensemble: Any) -> None:
    result, params = ensemble
    exp = build()
    few = {key: values[:3] for key, values in params.items()}
    chunked = run_ensemble(exp.system, exp.master, few, t0=T0, tf=0.3, dt=DT, chunk=2)
    whole = run_ensemble(exp.system, exp.master, few, t0=T0, tf=0.3, dt=DT)
    assert len(chunked.switches["member"]) >= 3
    for key in whole.switches:
        np.testing.assert_array_equal(chunked.switches[key], whole.switches[key])
    for key in ("member", "time", "event"):
        np.testing.assert_array_equal(chunked.events[key], whole.events[key])


def test_the_file_holds_each_members_switches(ensemble: Any, tmp_path: Path) -> None:
    result, _ = ensemble
    path = write_ensemble(tmp_path / "switch.h5", result)
    for m in (0, 2, 5):
        member = load_member(path, m)
        mine = result.member_switches(m)
        expected = pd.DataFrame({"time": mine["time"], "component": mine["component"],
                                 "from_mode": mine["from_mode"], "to_mode": mine["to_mode"]})
        pd.testing.assert_frame_equal(member.mode_switches, expected)
        assert member.stats["mode_switches"] == len(expected) > 0
    assert load_member(path, 1).mode_switches.empty
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:  # without cosimrun
        np.testing.assert_array_equal(ds["switch.member"].values, result.switches["member"])
        np.testing.assert_array_equal(ds["switch.time"].values, result.switches["time"])
        assert set(ds["switch.to_mode"].values) == {"linear", "nonlinear"}
        assert ds.sizes["switch"] == ds["stats.mode_switches"].values.sum()


def test_a_modes_own_parameters_differ_between_members_as_a_sweep_names_them() -> None:
    """A multi component's parameter named by its mode (``components.pendulum.modes.M.params.P``) is that mode's
    alone: here the initial (linear) mode's initial angle and the nonlinear mode's damping."""
    rows = [{"components.pendulum.modes.linear.params.q0": 0.3, "pendulum.nonlinear.damping": 0.9},
            {"components.pendulum.modes.linear.params.q0": -0.1, "pendulum.nonlinear.damping": 0.05}]
    exp = build()
    result = run_members(exp.system, exp.master, rows, t0=T0, tf=1.0, dt=DT)
    for m, row in enumerate(rows):
        cfg = copy.deepcopy(SWITCH)
        modes = cfg["components"]["pendulum"]["modes"]
        modes["linear"]["params"]["q0"] = row["components.pendulum.modes.linear.params.q0"]
        modes["nonlinear"]["params"]["damping"] = row["pendulum.nonlinear.damping"]
        single = build(cfg)
        report = single.system.run(T0, 1.0, DT, single.master)
        switches = result.member_switches(m)
        assert list(switches["to_mode"]) == [s.to_mode for s in report.mode_switches] and len(switches["time"])
        np.testing.assert_array_equal(switches["time"], [s.time for s in report.mode_switches])
        assert result.final["pendulum.q"][m] == single.system.components["pendulum"].outputs["q"].value
    models = exp.system.components["pendulum"].models  # the system keeps its own parameters
    assert [(m.parameters["q0"], m.parameters["damping"]) for m in models.values()] == [(0.5, 0.2), (0.5, 0.2)]



def test_members_switch_at_their_own_thresholds_and_dwell_times_as_their_scalar_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The threshold selector's bounds and the dwell time differ between members (as a sweep names them or as
    ``component.setting``): a wide band, a narrow one, a long dwell time that holds a switch back, none; each
    member's switches and samples are its scalar run's, with the configs set so. The ensemble shrinks to the
    members still stepping (their settings with them)."""
    settings = {"components.pendulum.selector.lower": [0.25, 0.1, 0.3, 0.2, 0.05],
                "pendulum.selector.upper": [0.35, 0.35, 0.6, 0.21, 0.7],
                "pendulum.hysteresis.dwell_time": [0.05, 0.05, 0.2, 0.0, 0.013]}
    exp = build()
    monkeypatch.setattr(located, "COMPACT", 2)
    result = run_ensemble(exp.system, exp.master, settings, t0=T0, tf=TF, dt=DT)
    counts = []
    for m in range(5):
        cfg = copy.deepcopy(SWITCH)
        pendulum = cfg["components"]["pendulum"]
        lower, upper, dwell = (float(values[m]) for values in settings.values())
        pendulum["selector"].update(lower=lower, upper=upper)
        pendulum["hysteresis"]["dwell_time"] = dwell
        single = build(cfg)
        report = single.system.run(T0, TF, DT, single.master)
        mine = result.member_switches(m)
        assert list(mine["to_mode"]) == [s.to_mode for s in report.mode_switches], m
        np.testing.assert_array_equal(mine["time"], [s.time for s in report.mode_switches])  # observed: equal
        q = single.system.components["pendulum"].history.get_all_histories()["q"]
        for ours, theirs in zip(result.member_history(m, "pendulum.q"), (q.time, q.micro, q.values), strict=True):
            np.testing.assert_array_equal(ours, theirs)
        counts.append(len(mine["time"]))
    assert len(set(counts)) >= 3 and result.member_switches(2)["time"][0] > 0.05  # held by its dwell time
    np.testing.assert_array_equal(result.parameters["pendulum.selector.upper"], settings["pendulum.selector.upper"])
    assert exp.system.components["pendulum"].hysteresis.dwell_time == 0.05  # the system keeps its own settings


@pytest.mark.parametrize(("settings", "key", "text"), [
    ({"ctrl.selector.lower": [0.1, 0.2]}, "ctrl.selector.lower", "component 'ctrl' (PID) does not switch modes"),
    ({"pendulum.selector.lower": [0.2, 0.4]}, "pendulum.selector.lower",
     "member 1: SwitchRegions(port='q'): bounds[0] has lower 0.4 > upper 0.35"),
    ({"components.pendulum.hysteresis.dwell_time": [0.1, -1.0]}, "components.pendulum.hysteresis.dwell_time",
     "member 1: must be a finite number >= 0, got -1.0"),
    ({"pendulum.selector.upper": [0.4, "high"]}, "pendulum.selector.upper", "member 1: must be a number"),
])
def test_switch_settings_given_per_member_are_checked_as_the_scalar_component_checks_them(
        settings: dict[str, Any], key: str, text: str) -> None:
    assert_refused(SWITCH, lambda cfg: None, settings, key, text)

def _substeps(cfg: dict[str, Any]) -> None:
    cfg["components"]["pendulum"]["modes"]["nonlinear"]["params"]["substeps"] = 5


def _iterated(cfg: dict[str, Any]) -> None:
    cfg["master"] = {"name": "ijcsa", "iterate_steps": True}


@pytest.mark.parametrize(("change", "key", "text"), [
    (_iterated, "master.iterate_steps", "ijcsa without iterate_steps only"),
    (_substeps, "components.pendulum.modes.nonlinear", "differ in their states, ports, state events or substeps"),
])
def test_what_mode_switching_ensembles_do_not_run_is_refused_in_one_keyed_line(change: Any, key: str,
                                                                              text: str) -> None:
    assert_refused(SWITCH, change, {"ctrl.kp": [50.0, 60.0]}, key, text)
