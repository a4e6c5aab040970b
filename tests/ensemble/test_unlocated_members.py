"""Ensembles under the fixed-step masters: every member's state events handled, and its modes switched, at the
communication points, as its scalar run handles and switches them.

The reference of each member is the scalar ``System.run`` of its parameters, computed here: its events (instants and
micro steps), its event count, its mode switches, its samples (at the communication points and, where it handled
events, after each micro step there) and, for a member whose run stops, its error.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import test_events_members as balls
import test_modes_members as pendulums
from test_coupling_error_members import BALL as HYBRID_BALL
from test_coupling_error_members import assert_tables_equal, table, table_of
from test_events_members import Flip, assert_refused, assert_samples

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import COMPLETE, FAILED, run_ensemble
from cosimrun.errors import EventLocalizationError
from cosimrun.masters import Jacobi, coupling_error
from cosimrun.runner.ensembles import Group, _experiment_refusal
from cosimrun.storage.ensemble import load_member, write_ensemble
from cosimrun.system import System

pytestmark = pytest.mark.filterwarnings("ignore:events are handled:UserWarning")

DT = 0.01
BALL = {**balls.BALL, "master": {"name": "jacobi"}}
SWITCH = {**pendulums.SWITCH, "master": {"name": "gauss_seidel"}}


def build(cfg: dict[str, Any]) -> Any:
    return build_experiment(copy.deepcopy(cfg))


def test_bouncing_balls_under_jacobi_bounce_at_the_points_their_scalar_runs_bounce_at() -> None:
    """Drop heights, throws and restitutions differ, so the members bounce at their own points; member 3 starts at
    rest on the floor (its indicator on its surface: a departure probe at the start), member 1 comes to rest early
    (a large ``v_rest``). Each member's events, micro steps, event count and samples are its scalar run's."""
    params = {"ball.e": np.array([0.8, 0.5, 0.7, 0.9, 0.6]), "ball.h0": np.array([1.0, 0.5, 1.5, 0.0, 0.3]),
              "ball.v0": np.array([0.0, 0.0, 1.0, 0.0, 2.0]), "ball.v_rest": np.array([1e-3, 0.5, 1e-3, 1e-3, 0.2])}
    exp = build(BALL)
    result = run_ensemble(exp.system, exp.master, params, t0=0.0, tf=3.0, dt=DT)
    assert list(result.status) == [COMPLETE] * 5 and result.coupling_error is None
    counts = result.member_stats["events"]
    assert counts[3] == 0 and len(set(counts.tolist())) == 4
    for m in range(5):
        reference = balls.scalar({k: float(v[m]) for k, v in params.items()}, BALL)
        assert reference["error"] is None
        events = result.member_events(m)
        # handled at the communication point each scalar run handles it at: the same instant, to the bit
        np.testing.assert_array_equal(events["time"], [t for t, _ in reference["events"]])
        assert list(events["micro"]) == [k for _, k in reference["events"]], m
        assert set(events["event"]) <= {"bounce"} and counts[m] == reference["stats"].events
        for port in ("h", "v"):
            time, values, micro = reference["samples"][port]
            assert_samples(result, m, f"ball.{port}", time, values, micro)
            assert result.final[f"ball.{port}"][m] == values[-1]
    assert result.final["ball.v"][1] == 0.0  # at rest before the end


LAGGED_BALL = {**HYBRID_BALL, "master": {"name": "jacobi"}}
"""A ball whose speed a lag takes in mm/s and whose height an integrator takes, under a fixed-step master."""


@pytest.mark.parametrize(("master", "extrapolation"), [("jacobi", 0), ("gauss_seidel", 0), ("jacobi", 2),
                                                       ("gauss_seidel", 1)])
def test_bouncing_balls_coupling_errors_are_their_scalar_runs_across_their_bounces(
        master: str, extrapolation: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each member bounces at its own points: there its values before the bounce end its step and those after
    it start the next, as its run's recorder hands them to its estimate (the jump counts towards the range, not
    the estimates), the links held or extrapolated and interpolated as its master gives them. Each member's
    table is its scalar run's (1e-12 relative; observed: equal to the bit), its estimate folded at every point
    (the buffer moved to its front each time)."""
    monkeypatch.setattr(coupling_error, "MEMBER_BUFFER", 1)
    cfg = {**LAGGED_BALL, "master": {"name": master, "extrapolation": extrapolation}}
    params = {"ball.e": np.array([0.8, 0.5, 0.3, 0.5]), "ball.h0": np.array([1.0, 0.4, 0.0, 1.0]),
              "ball.v0": np.array([0.0, 1.0, 2.0, 0.0]), "lag.time_constant": np.array([0.05, 0.1, 0.02, 0.2])}
    exp = build(cfg)
    result = run_ensemble(exp.system, exp.master, params, t0=0.0, tf=1.0, dt=DT)
    counts = result.member_stats["events"]
    assert list(result.status) == [COMPLETE] * 4 and (counts > 0).all() and len(set(counts.tolist())) >= 3
    for m in range(4):
        single = build(cfg)
        for key, values in params.items():
            comp, _, name = key.partition(".")
            single.system.components[comp].set_parameters(**{name: float(values[m])})
        expected = table(single.system.run(0.0, 1.0, DT, single.master).coupling_errors)
        assert_tables_equal(table_of(result, m), expected, f"member {m}")


@pytest.fixture(scope="module")
def switching() -> tuple[Any, dict[str, np.ndarray]]:
    params = {key: values[:5] for key, values in pendulums.member_parameters().items()}
    exp = build(SWITCH)
    exp.system.initialize(pendulums.T0, exp.master)
    record = [f"{name}.{port}" for name, comp in exp.system.components.items() for port in comp.outputs]
    return run_ensemble(exp.system, exp.master, params, t0=pendulums.T0, tf=pendulums.TF, dt=DT,
                        record=record), params


def pendulum_scalar(params: dict[str, float]) -> dict[str, Any]:
    """:func:`test_modes_members.scalar` of the Gauss-Seidel experiment."""
    saved = copy.deepcopy(pendulums.SWITCH)
    pendulums.SWITCH.update(copy.deepcopy(SWITCH))
    try:
        return pendulums.scalar(params, kinds="fb")  # its event ports too
    finally:
        pendulums.SWITCH.clear()
        pendulums.SWITCH.update(saved)


def test_pendulums_under_gauss_seidel_switch_and_hit_the_stop_as_their_scalar_runs(switching: Any) -> None:
    """Member 1 stays linear; the others switch at the start of their steps and at their boundary events, and some
    hit the end stop. Switches, events, counts, samples (event ports too) and coupling-error estimates are each
    member's scalar run's (the estimates: 1e-12 relative; observed: equal to the bit), a member's with events too
    (the values before them end its step, those after them start the next)."""
    result, params = switching
    assert list(result.status) == [COMPLETE] * 5
    switches, counts = result.member_stats["mode_switches"], result.member_stats["events"]
    assert switches[1] == 0 and len(set(switches.tolist())) >= 3 and counts.max() > 0
    assert "end_stop" in set(result.events["event"]) and len(set(result.events["event"])) >= 2
    for m in range(5):
        reference = pendulum_scalar({key: float(values[m]) for key, values in params.items()})
        report = reference["report"]
        mine, theirs = result.member_switches(m), report.mode_switches
        assert list(mine["from_mode"]) == [s.from_mode for s in theirs], m
        assert list(mine["to_mode"]) == [s.to_mode for s in theirs], m
        np.testing.assert_array_equal(mine["time"], [s.time for s in theirs])  # at the same points, to the bit
        events = result.member_events(m)
        assert list(events["event"]) == [name for _, _, name in report.events], m
        assert list(events["micro"]) == [dense.micro for dense, _, _ in report.events]
        np.testing.assert_array_equal(events["time"], [dense.t for dense, _, _ in report.events])
        assert counts[m] == report.stats.events and switches[m] == len(theirs)
        for key, (time, micro, values) in reference["samples"].items():
            assert_samples(result, m, key, time, values, micro)
        assert_tables_equal(table_of(result, m), table(report.coupling_errors), f"member {m}: coupling errors")


def test_the_file_keeps_the_events_and_switches_of_each_member(switching: Any, tmp_path: Path) -> None:
    result, _ = switching
    path = write_ensemble(tmp_path / "switch.h5", result)
    for m in range(5):
        member = load_member(path, m)
        mine, events = result.member_switches(m), result.member_events(m)
        pd.testing.assert_frame_equal(member.mode_switches, pd.DataFrame(
            {"time": mine["time"], "component": mine["component"], "from_mode": mine["from_mode"],
             "to_mode": mine["to_mode"]}))
        pd.testing.assert_frame_equal(member.events, pd.DataFrame(
            {"time": events["time"], "micro": events["micro"], "component": events["component"],
             "event": events["event"]}))
        assert member.stats["events"] == len(events["time"]) and member.stats["mode_switches"] == len(mine["time"])


def flip_system() -> tuple[System, Jacobi]:
    system = System("flip")
    system.add_component(Flip("f"))
    return system, Jacobi(max_micro_steps=20)


def flip_scalar(params: dict[str, float]) -> tuple[Any, Any]:
    """A member's scalar run of the flip system: its report (else the error it stopped with), its samples of x."""
    system, master = flip_system()
    system.components["f"].set_parameters(**{key.split(".")[1]: value for key, value in params.items()})
    try:
        outcome = system.run(0.0, 1.0, DT, master)
    except EventLocalizationError as exc:
        outcome = exc
    return outcome, system.components["f"].history.get_all_histories()["x"]


def test_a_cascade_that_does_not_settle_fails_its_member_alone_with_its_scalar_runs_error() -> None:
    """Member 1's event reflects its state at every micro step: its scalar run stops with the cascade's error at
    the communication point; member 0, handled at the same point with it, takes its two micro steps and runs on.
    (The fixed-step masters keep no Zeno guard: their events are at least a step apart.)"""
    params = {"f.x0": np.array([0.25, 0.25, 0.405]), "f.endless": np.array([0.0, 1.0, 0.0])}
    system, master = flip_system()
    result = run_ensemble(system, master, params, t0=0.0, tf=1.0, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE]
    outcomes = [flip_scalar({key: float(values[m]) for key, values in params.items()}) for m in range(3)]
    error = outcomes[1][0]
    assert isinstance(error, EventLocalizationError)
    failure = result.failures[1]
    assert failure.cause == str(error) and failure.time == error.time
    assert (failure.component, failure.variable) == ("f", "zero") and failure.last_time == failure.time - DT
    assert len(result.member_events(1)["time"]) == 20  # the micro steps it took before it gave up
    for m in (0, 2):
        report, x = outcomes[m]
        events = [(t, k - 1) for t, k in zip(x.time.tolist(), x.micro.tolist(), strict=True) if k > 0]
        mine = result.member_events(m)
        assert list(mine["micro"]) == [k for _, k in events] == [0, 1]  # one event, two micro steps
        np.testing.assert_array_equal(mine["time"], [t for t, _ in events])
        assert result.member_stats["events"][m] == report.stats.events
        assert_samples(result, m, "f.x", x.time, x.values, x.micro)


def test_a_member_whose_dwell_window_ends_between_points_fails_alone() -> None:
    """A dwell time of 0.055 s holds member 2's switch back to its own communication point between the grid's
    points (its scalar run switches there): the member fails at the start of that step with that cause; member 0,
    with a window of whole steps, equals its scalar run."""
    params = {key: values[[0, 2]] for key, values in pendulums.member_parameters().items()}
    params["pendulum.hysteresis.dwell_time"] = np.array([0.05, 0.055])
    exp = build(SWITCH)
    result = run_ensemble(exp.system, exp.master, params, t0=0.0, tf=0.3, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED]
    failure = result.failures[1]
    assert (failure.component, failure.variable, failure.time) == ("pendulum", "mode", 0.05)
    assert "dwell window until t=0.055" in failure.cause
    assert result.member_history(1, "pendulum.q")[0].max() == 0.05  # no sample after its last sound point
    cfg = copy.deepcopy(SWITCH)
    cfg["components"]["pendulum"]["hysteresis"]["dwell_time"] = 0.055
    single = build(cfg)
    for key, values in params.items():
        if key != "pendulum.hysteresis.dwell_time":
            comp, _, name = key.partition(".")
            single.system.components[comp].set_parameters(**{name: float(values[1])})
    report = single.system.run(0.0, 0.3, DT, single.master)
    assert [s.time for s in report.mode_switches][:2] == [0.0, 0.055]  # its scalar run switches back between points


def _iterated(cfg: dict[str, Any]) -> None:
    cfg["master"] = {"name": "ijcsa", "iterate_steps": True}


@pytest.mark.parametrize("base", [BALL, SWITCH])
def test_events_and_modes_under_ijcsa_with_iterated_steps_are_refused_in_one_keyed_line(base: Any) -> None:
    parameters = {"ball.e": [0.5, 0.6]} if base is BALL else {"ctrl.kp": [50.0, 60.0]}
    assert_refused(base, _iterated, parameters, "master.iterate_steps", "ijcsa without iterate_steps only")


def test_the_sweep_planner_groups_mode_switching_experiments_under_the_fixed_step_masters() -> None:
    """Each member records what its job records (its samples at its event instants too): the planner groups them."""
    for master in ("jacobi", "gauss_seidel", "ijcsa"):
        exp = build({**SWITCH, "master": {"name": master}})
        assert _experiment_refusal(exp, {}, Group(("components.ctrl.params.kp",))) == ""
