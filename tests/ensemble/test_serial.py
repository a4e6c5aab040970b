"""Ensembles whose members run one after the other (:func:`cosimrun.ensemble.serial.run_serially`): each member's
histories, micro steps, final values, events, statistics and coupling-error estimates are those of ``System.run``
with its parameters, computed here as ``cosimrun`` runs an experiment (bitwise: the same code runs each member)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import Constant

from cosimrun import PortType
from cosimrun.components.fmu import build_example
from cosimrun.core.history import ComponentHistory, SystemHistory
from cosimrun.ensemble import COMPLETE, FAILED
from cosimrun.ensemble.serial import RUN_TIME, run_serially
from cosimrun.errors import ConfigError
from cosimrun.fmi.instance import REUSE, drop_kept_instances, keep_instances
from cosimrun.masters import Jacobi
from cosimrun.runner.run import prepare
from cosimrun.system import System
from cosimrun.system.recorder import MemorySink, Recorder

OSCILLATORS = {
    "name": "oscillators", "run": {"t0": 0.0, "tf": 0.31, "dt": 0.01}, "master": {"name": "jacobi"},
    "components": {
        "mass1": {"type": "mass_spring_damper",
                  "params": {"stiffness": 10.0, "x0": 1.0, "integrator": "radau"}},  # not vectorized
        "mass2": {"type": "mass_spring_damper_force", "params": {"coupling_stiffness": 100.0}},
    },
    "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"],
    "storage": {"decimate": 3},
}
BALL = {"name": "ball", "run": {"t0": 0.0, "tf": 1.2, "dt": 0.01}, "master": {"name": "hybrid"},
        "components": {"ball": {"type": "bouncing_ball", "params": {"h0": 1.0, "e": 0.8}}},
        "storage": {"record": ["ball.h", "ball.v", "ball.bounce"]}}


def _config(base: dict[str, Any], **params: Any) -> dict[str, Any]:
    """*base* with ``component.parameter`` values set."""
    cfg = copy.deepcopy(base)
    for key, value in params.items():
        comp, name = key.split("__")
        cfg["components"][comp]["params"][name] = value
    return cfg


def _scalar(cfg: dict[str, Any]) -> tuple[Any, Any]:
    """``(run result, {component.port: port history}, events)`` of the experiment *cfg* run as ``cosimrun`` runs it
    (the samples and events a results file gets)."""
    exp = prepare(cfg)
    kept = SystemHistory("kept")  # apart from the components' own histories, as a results file is
    for name in exp.recorded:
        kept.add_component(name, ComponentHistory(name))
    recorder = Recorder(MemorySink(kept), decimate=exp.storage.decimate)
    recorder.attach(exp.system.components, exp.recorded)
    result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, master=exp.master, recorder=recorder)
    histories = {f"{comp}.{port}": kept.get_component_history(comp).get_port_history(port)
                 for comp, ports in exp.recorded.items() for port in ports}
    exp.system.free()
    return result, histories, kept.event_log()


def _serial(configs: list[dict[str, Any]], parameters: dict[str, list[Any]]) -> Any:
    first = prepare(configs[0])
    run, recorded, decimate = first.run, first.recorded, first.storage.decimate
    first.system.free()

    built: list[int] = []

    def build(m: int) -> tuple[System, Any]:
        built.append(m)
        exp = prepare(configs[m])
        return exp.system, exp.master

    result = run_serially(build, len(configs), parameters, t0=run.t0, tf=run.tf, dt=run.dt, recorded=recorded,
                          record_every=decimate)
    assert built == list(range(len(configs)))  # each member built (and run) once, in order
    return result


def _assert_members_are_their_runs(result: Any, configs: list[dict[str, Any]]) -> None:
    for m, cfg in enumerate(configs):
        run, histories, events = _scalar(cfg)
        assert result.status[m] == COMPLETE
        assert sorted(result.history) == sorted(histories)
        for key, series in histories.items():
            time, micro, values = result.member_history(m, key)
            assert np.array_equal(time, series.time) and np.array_equal(micro, series.micro), key
            assert np.array_equal(values, series.values.astype(float)), key
            assert result.units[key] == series.unit
            if series.port_type.value == "real":
                assert result.final[key][m] == series.values[-1]
        stats = run.stats.as_dict()
        for name in ("macro_steps", "events", "trial_steps", "rollbacks"):
            assert result.member_stats[name][m] == stats[name], name
        assert result.member_stats[RUN_TIME][m] > 0
        expected = [(e.t, e.micro, c, name) for e, c, name in events]
        rows = [] if not result.events else [
            (result.events["time"][i], result.events["micro"][i], result.events["component"][i],
             result.events["event"][i]) for i in np.flatnonzero(result.events["member"] == m)]
        assert rows == expected
        errors = {} if result.coupling_error is None else {e.connection: e for e in result.coupling_error.member(m)}
        assert errors == {e.connection: e for e in run.coupling_errors}


def test_members_of_a_system_the_vectorized_engine_refuses_are_their_scalar_runs() -> None:
    stiffness = [5.0, 10.0, 20.0]
    configs = [_config(OSCILLATORS, mass1__stiffness=k) for k in stiffness]
    result = _serial(configs, {"mass1.stiffness": stiffness})
    # every member has the same samples at micro step 0: one time axis for all, thinned by storage.decimate
    assert result.time.ndim == 1 and result.micro is None and len(result.time) == 12  # and the last
    assert list(result.parameters["mass1.stiffness"]) == stiffness and result.stats.complete == 3
    assert result.coupling_error is not None and len(result.coupling_error.connections) == 3
    _assert_members_are_their_runs(result, configs)


def test_members_with_events_keep_their_own_samples_micro_steps_and_events() -> None:
    restitution = [0.5, 0.9]
    configs = [_config(BALL, ball__e=e) for e in restitution]
    result = _serial(configs, {"ball.e": restitution})
    # each member's own instants (events located where it bounces): (sample, member), padded after its last
    assert result.time.ndim == 2 and result.micro is not None and result.micro.max() >= 1
    assert result.kinds == {"ball.bounce": "event"} and list(np.bincount(result.events["member"])) == [3, 1]
    assert np.isnan(result.time[-1]).any() and (result.micro[-1] == -1).any()
    _assert_members_are_their_runs(result, configs)


def test_a_member_whose_build_or_run_fails_fails_alone_with_its_cause() -> None:
    configs = [_config(OSCILLATORS, mass1__stiffness=k) for k in (5.0, -1.0, 1e300, 10.0)]
    result = _serial(configs, {"mass1.stiffness": [5.0, -1.0, 1e300, 10.0]})
    assert list(result.status) == [COMPLETE, FAILED, FAILED, COMPLETE]
    assert str(result.failures[1]).startswith("member 1: ConfigError: components.mass1.params.stiffness: ")
    assert str(result.failures[2]) == "member 2: ValueError: array must not contain infs or NaNs at t=0"  # radau's
    for m in (1, 2):
        assert np.isnan(result.history["mass1.x"][:, m]).all() and np.isnan(result.final["mass1.x"][m])
        assert np.isnan(result.coupling_error.max[:, m]).all()  # type: ignore[union-attr]
    for m in (0, 3):  # the others' samples are their runs'
        cfg = configs[m]
        _, histories, _ = _scalar(cfg)
        assert np.array_equal(result.history["mass1.x"][:, m], histories["mass1.x"].values)


def test_a_run_whose_results_an_ensemble_file_cannot_hold_fails_its_member() -> None:
    def build(m: int) -> tuple[System, Any]:
        system = System("counts")
        system.add_component(Constant("c", 3, port_type=PortType.INT))
        master = Jacobi()
        system.initialize(0.0, master)
        return system, master

    result = run_serially(build, 2, {}, t0=0.0, tf=0.1, dt=0.05, recorded={"c": ["y"]})
    assert list(result.status) == [FAILED, FAILED]
    assert str(result.failures[0]) == ("member 0: Unrecordable: c.y is a int port, which an ensemble's file does "
                                       "not record at t=0")


def test_fmu_instances_kept_between_members_leak_no_parameter(tmp_path: Path) -> None:
    path = str(build_example("pendulum", tmp_path))
    base = {"name": "fmu", "run": {"t0": 0.0, "tf": 0.5, "dt": 0.01},
            "components": {"p": {"type": "fmu", "params": {"path": path, "start": {"q": 0.5}}}}}
    # member 0 sets the damping, member 1 leaves the FMU's default: its kept instance is reset in between
    configs = [_config(base, p__damping=0.9, p__length=0.8), _config(base, p__length=1.2)]
    keep_instances()
    try:
        result = _serial(configs, {"p.length": [0.8, 1.2]})
    finally:
        keep_instances(False)
        drop_kept_instances()
    assert list(result.status) == [COMPLETE, COMPLETE]
    _assert_members_are_their_runs(result, configs)  # fresh instances, not kept
    assert not np.array_equal(result.history["p.q"][:, 0], result.history["p.q"][:, 1])


def test_no_fmu_instance_a_member_failed_in_starts_the_next(tmp_path: Path) -> None:
    path = str(build_example("pendulum", tmp_path))
    base = {"name": "fmu", "run": {"t0": 0.0, "tf": 0.2, "dt": 0.01},
            "components": {"p": {"type": "fmu", "params": {"path": path, "start": {"q": 0.5}}},
                           "m": {"type": "mass_spring_damper", "params": {"x0": 1.0}}}}
    stiffness = [10.0, 1e300, 10.0]  # the second member's mass goes non-finite in its run
    configs = [_config(base, m__stiffness=k) for k in stiffness]
    keep_instances()
    try:
        before = REUSE.reused
        result = _serial(configs, {"m.stiffness": stiffness})
        reused = REUSE.reused - before
    finally:
        keep_instances(False)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE]
    assert reused == 2  # members 0 and 1 started on the kept instance, member 2 on a fresh one
    _assert_members_are_their_runs(result, [configs[0]])
    _, histories, _ = _scalar(configs[2])
    assert np.array_equal(result.history["p.q"][:, 2], histories["p.q"].values)


def test_an_unknown_parameter_fails_the_member_not_the_ensemble() -> None:
    configs = [_config(OSCILLATORS, mass1__stiffness=5.0), _config(OSCILLATORS, mass1__stifness=5.0)]
    result = _serial(configs, {"mass1.stiffness": [5.0, 5.0]})
    assert list(result.status) == [COMPLETE, FAILED]
    assert "stifness" in result.failures[1].cause
    with pytest.raises(ConfigError):
        prepare(configs[1])
