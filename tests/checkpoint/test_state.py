"""The state form and System.save_state / restore_state: a run continued from a saved state equals the
uninterrupted run bit for bit, for every master; foreign states and components without a state form are refused."""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from helpers import StoppingClock

from cosimrun.checkpoint import CheckpointSettings, StateFormError, SystemState, pack, unpack
from cosimrun.config.build import Experiment, build_experiment
from cosimrun.core.component import StopRequest
from cosimrun.errors import ComponentStateError, ConfigError
from cosimrun.masters import GaussSeidel
from cosimrun.plugins import create_component
from cosimrun.system import RunResult, System

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def experiment(name: str, master: dict[str, Any], tf: float, **params: Any) -> Experiment:
    """Experiment *name* of experiments/ under *master*, ending at *tf*, initialized; *params*:
    ``{component: {param: value}}`` changes."""
    cfg = yaml.safe_load((EXPERIMENTS / f"{name}.yaml").read_text())
    cfg.pop("defaults")
    cfg["master"] = master
    cfg["run"]["tf"] = tf
    for comp, values in params.items():
        cfg["components"][comp]["params"].update(values)
    exp = build_experiment(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp.system.initialize(exp.run.t0, exp.master)
    return exp


def run(exp: Experiment, **kwargs: Any) -> RunResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master, **kwargs)


def histories(exp: Experiment) -> dict[str, tuple[np.ndarray, dict[str, np.ndarray]]]:
    return {name: comp.get_history_arrays() for name, comp in exp.system.components.items()}


def stats(result: RunResult) -> dict[str, Any]:
    """The statistics, NaN made comparable."""
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
            for k, v in dataclasses.asdict(result.stats).items()}


def assert_continues(whole: Experiment, first: RunResult, rest: Experiment, second: RunResult) -> None:
    """*rest*'s samples equal the tail of *whole*'s bit for bit, and everything summed over the run is equal."""
    full, tail = histories(whole), histories(rest)
    for name, (t1, v1) in full.items():
        t2, v2 = tail[name]
        n = len(t2)
        assert n > 0
        assert np.array_equal(t2, t1[-n:])
        for port, values in v1.items():
            assert np.array_equal(np.asarray(v2[port]), np.asarray(values)[-n:]), f"{name}.{port}"
    assert stats(second) == stats(first)
    assert second.mode_switches == first.mode_switches
    assert second.coupling_errors == first.coupling_errors
    if first.steps is None:
        assert second.steps is None
    else:
        assert second.steps is not None
        for key, column in first.steps.items():
            assert np.array_equal(second.steps[key], column, equal_nan=True), key
    tail_events = second.events
    assert tail_events == first.events[len(first.events) - len(tail_events):]


CASES = {
    "jacobi_extrapolation": ("coupled_oscillators", {"name": "jacobi", "extrapolation": 2}, 2.0, 1.3),
    "gauss_seidel_error_control": ("coupled_oscillators", {"name": "gauss_seidel", "extrapolation": 1,
                                                           "step_control": "error", "rtol": 1e-3}, 2.0, 1.3),
    "ijcsa_iterated": ("coupled_oscillators", {"name": "ijcsa", "iterate_steps": True}, 1.0, 0.6),
    "gauss_seidel_events": ("bouncing_ball", {"name": "gauss_seidel", "step_control": "error", "rtol": 1e-3},
                            3.0, 1.0),
    "jacobi_switching": ("pendulum_switch", {"name": "jacobi", "extrapolation": 1}, 3.0, 1.5),
    "hybrid_events": ("bouncing_ball", {"name": "hybrid"}, 3.0, 1.0),
    "hybrid_fmu_mode": ("pendulum_switch_fmu", {"name": "hybrid"}, 3.0, 1.5),
}


@pytest.mark.parametrize("case", list(CASES))
def test_restored_state_continues_the_run_bit_for_bit(case):
    name, master, tf, tc = CASES[case]
    whole = experiment(name, master, tf)
    first = run(whole, checkpoint=CheckpointSettings(at=(tc,)))
    assert [s.time for s in first.checkpoints][-1] == tf  # the final state is always saved
    state = first.checkpoints[0]
    assert tc <= state.time < tc + 0.02
    rest = experiment(name, master, tf)
    rest.system.restore_state(state)
    second = run(rest)
    assert_continues(whole, first, rest, second)


def test_hybrid_restart_just_after_a_mode_switch_with_the_dwell_timer_pending():
    """pendulum_switch under the hybrid master: the checkpoint falls 0.02 s after a mode switch, inside the
    0.05 s dwell window; the run goes on with the timer pending and switches again as the uninterrupted one."""
    probe = run(experiment("pendulum_switch", {"name": "hybrid"}, 4.0))
    switch = probe.mode_switches[1].time
    tc = switch + 0.02
    whole = experiment("pendulum_switch", {"name": "hybrid"}, 4.0)
    first = run(whole, checkpoint=CheckpointSettings(at=(tc,)))
    state = first.checkpoints[0]
    pendulum = state.component("pendulum")
    assert pendulum["last_switch_time"] == switch
    assert state.time < switch + 0.05  # the dwell window is still open at the checkpoint
    assert pendulum["mode"] == probe.mode_switches[1].to_mode
    later = [s for s in first.mode_switches if s.time > state.time]
    assert later, "the run switches again after the checkpoint"
    rest = experiment("pendulum_switch", {"name": "hybrid"}, 4.0)
    rest.system.restore_state(state)
    second = run(rest)
    assert_continues(whole, first, rest, second)


def test_save_state_after_a_run_and_continue_to_a_later_end():
    """save_state() of a completed run, restored into a system with a later end: the samples from there equal
    those of one run to that end."""
    master = {"name": "gauss_seidel", "extrapolation": 1}
    whole = experiment("coupled_oscillators", master, 1.0)
    first = run(whole)
    part = experiment("coupled_oscillators", master, 0.5)
    run(part)
    state = part.system.save_state()
    assert state.time == 0.5
    rest = experiment("coupled_oscillators", master, 1.0)
    rest.system.restore_state(state)
    second = run(rest)
    full, tail = histories(whole), histories(rest)
    for name, (t1, v1) in full.items():
        t2, v2 = tail[name]
        assert np.array_equal(t2, t1[-len(t2):]) and t2[0] > 0.5 and len(t2) == 500
        for port in v1:
            assert np.array_equal(v2[port], np.asarray(v1[port])[-len(t2):])
    assert second.stats.macro_steps == first.stats.macro_steps == 1000


def test_the_state_form_is_typed_arrays_and_strings():
    whole = experiment("pendulum_switch", {"name": "hybrid"}, 0.5)
    result = run(whole)
    state = whole.system.save_state()
    assert isinstance(state, SystemState)
    for name, value in state.entries.items():
        assert isinstance(value, str) or (isinstance(value, np.ndarray) and value.dtype.kind in "fibu"), name
    assert state.entries["format"] == "cosimrun-state/1"
    assert "component pendulum: cosimrun.components.multi.ConfiguredMultiComponent" in state.fingerprint
    assert "master.time_tolerance = 1e-10" in state.fingerprint
    ctrl = state.component("ctrl")
    assert ctrl["t"] == 0.5 and ctrl["x"].shape == (2,)
    assert ctrl["outputs"]["u"][0] == whole.system.components["ctrl"].outputs["u"].value
    master = state.master()
    assert master["stats"]["macro_steps"] == result.stats.macro_steps
    assert master["tick"] == [50, 0]  # grid point 50 of run.dt, exactly
    assert state.recorder() == {"samples": {name: len(t) for name, (t, _) in histories(whole).items()},
                                "events": len(result.events)}
    assert len(state.checksum()) == 64


def test_pack_round_trip_keeps_values_and_kinds():
    value = {"f": 0.1 + 0.2, "i": -(2**62), "b": True, "s": "x/y", "n": None, "a": np.array([1.5, -0.0, np.inf]),
             "t": (1, [2.0, (None, "z")]), "e": np.zeros(0, dtype=np.int64), "nan": math.nan}
    entries: dict[str, Any] = {}
    pack(value, "v", entries)
    back = unpack(entries, "v")
    assert back["f"] == 0.1 + 0.2 and type(back["i"]) is int and back["i"] == -(2**62) and back["b"] is True
    assert back["s"] == "x/y" and back["n"] is None and back["t"] == (1, [2.0, (None, "z")])
    assert np.array_equal(back["a"], value["a"]) and np.signbit(back["a"][1]) and back["e"].dtype == np.int64
    assert math.isnan(back["nan"])


def test_pack_refuses_what_has_no_state_form():
    with pytest.raises(StateFormError, match=r"v\.k\[1\]: a object has no state form"):
        pack({"k": (1, object())}, "v", {})
    with pytest.raises(StateFormError, match="does not fit 64 bits"):
        pack(2**64, "v", {})


def test_a_state_of_another_system_is_refused_naming_the_first_difference():
    first = experiment("coupled_oscillators", {"name": "jacobi"}, 0.2)
    run(first)
    state = first.system.save_state()
    other = experiment("coupled_oscillators", {"name": "jacobi"}, 0.2, mass2={"coupling_stiffness": 50.0})
    with pytest.raises(ConfigError) as info:
        other.system.restore_state(state)
    assert str(info.value) == ("the checkpoint belongs to another system or settings: this system has 'parameter "
                               "mass2.coupling_stiffness = 50.0' where the checkpoint has 'parameter "
                               "mass2.coupling_stiffness = 100.0'")
    settings = experiment("coupled_oscillators", {"name": "gauss_seidel"}, 0.2)
    with pytest.raises(ConfigError, match="this system has 'master gauss_seidel' where the checkpoint has 'master "
                                          "jacobi'"):
        settings.system.restore_state(state)


def test_a_restored_run_must_keep_the_macro_step():
    first = experiment("coupled_oscillators", {"name": "jacobi"}, 0.2)
    run(first)
    rest = experiment("coupled_oscillators", {"name": "jacobi"}, 0.4)
    rest.system.restore_state(first.system.save_state())
    with pytest.raises(ConfigError, match=r"run.dt: 0.002 differs from the checkpoint's run.dt=0.001"):
        rest.system.run(0.0, 0.4, 0.002, rest.master)


def test_save_state_needs_a_completed_run():
    exp = experiment("coupled_oscillators", {"name": "jacobi"}, 0.2)
    with pytest.raises(ComponentStateError, match="save_state needs a system whose run completed"):
        exp.system.save_state()


def test_a_component_without_a_state_form_is_refused_before_the_run():
    from helpers import Affine

    from cosimrun.masters import Jacobi
    from cosimrun.system import System

    system = System("s")
    system.add_component(Affine("a"))
    master = Jacobi()
    with pytest.raises(ComponentStateError) as info:
        system.run(0.0, 1.0, 0.1, master, checkpoint=CheckpointSettings(every=0.5))
    assert str(info.value) == "component 'a' (Affine) cannot be checkpointed: it gives no state form (checkpoint_state)"
    assert system.master_run is not None and system.master_run.stats.macro_steps == 0
    result = system.run(0.0, 1.0, 0.1, master)  # without checkpoints it runs
    assert result.stats.macro_steps == 10


def test_checkpoints_every_and_at_fall_on_communication_points():
    exp = experiment("coupled_oscillators", {"name": "jacobi"}, 1.0)
    result = run(exp, checkpoint=CheckpointSettings(every=0.25, at=(0.1, 0.6)))
    times = [s.time for s in result.checkpoints]
    assert times == pytest.approx([0.1, 0.25, 0.5, 0.6, 0.75, 1.0], abs=1e-12)
    assert all(abs(t / 0.001 - round(t / 0.001)) < 1e-6 for t in times)


def test_checkpoint_settings_are_checked():
    with pytest.raises(ConfigError, match=r"every: must be a positive number of seconds, got -1"):
        CheckpointSettings(every=-1)
    with pytest.raises(ConfigError, match=r"at: must be a list of times in seconds, got 'x'"):
        CheckpointSettings(at=("x",))  # type: ignore[arg-type]


def test_a_state_at_rest_on_an_event_surface_continues():
    """The ball at rest (h = 0, its indicator on the surface): the master probes the components at the start of the
    run it sets up, before the state is restored, so the probe sees the components as initialized."""
    master = {"name": "gauss_seidel"}
    whole = experiment("bouncing_ball", master, 10.0)
    first = run(whole, checkpoint=CheckpointSettings(at=(8.0,)))
    state = first.checkpoints[0]
    assert state.component("ball")["extra"] is True  # resting
    rest = experiment("bouncing_ball", master, 10.0)
    rest.system.restore_state(state)
    second = run(rest)
    assert_continues(whole, first, rest, second)


def _clocked() -> System:
    system = System("clocked")
    system.add_component(StoppingClock("clock", t_stop=1.0))
    system.add_component(create_component("integrator", "i"))
    system.connect("clock.t", "i.u")
    return system


def test_a_run_a_component_ended_early_stays_ended_when_continued_from_its_final_state():
    """The final state of a run that a component ended at t=1 (of 3) carries that stop: continued from it, the
    run ends there at once, with the same stop, instead of stepping on past it."""
    whole = _clocked()
    first = whole.run(0.0, 3.0, 0.25, GaussSeidel(), checkpoint=CheckpointSettings(at=(0.5,)))
    stop = StopRequest(1.0, "clock", "reached its end")
    assert first.stopped == stop
    final = first.checkpoints[-1]
    assert final.time == 1.0
    rest = _clocked()
    rest.initialize(0.0, GaussSeidel())
    rest.restore_state(final)
    second = rest.run(0.0, 3.0, 0.25, GaussSeidel())
    assert second.stopped == stop
    assert second.stats.macro_steps == first.stats.macro_steps == 4
    time, _ = rest.history.get_component_history("i").to_arrays()
    assert len(time) == 0  # no sample past the stop (the samples up to it are the first run's)
    assert [(e[0].t, e[1], e[2]) for e in second.events] == []  # nor the stop event a second time
