"""State events under masters without localization: handled at the communication point after the crossing.

Reference values are analytic (the bouncing ball's impact times) or bounds of
one macro step (how far a body travels past a surface before the step ends).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import h5py
import helpers
import numpy as np
import pytest
import yaml
from test_hybrid import Counter, Integrator, samples_at

from cosimrun.components.mechanics import BouncingBall
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master
from cosimrun.masters.events import UNLOCATED_NOTICE
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results
from cosimrun.system import System

ROOT = Path(__file__).resolve().parents[2]
H0, E, G, DT = 1.0, 0.8, 9.81, 0.01
MASTERS = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel, "ijcsa": IJCSA}


def bounce_times(n: int) -> list[float]:
    """Analytic instants of the first *n* impacts of the ball of these tests."""
    return helpers.bounce_times(n, H0, E, G)


def ball_system() -> tuple[System, BouncingBall]:
    system = System("ball")
    ball = BouncingBall("ball")
    ball.set_parameters(h0=H0, v0=0.0, e=E, g=G)
    system.add_component(ball)
    return system, ball


def run_quiet(system: System, tf: float, master: Master) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return system.run(0.0, tf, DT, master=master)


@pytest.mark.parametrize("name", list(MASTERS))
def test_the_ball_bounces_at_communication_points_within_one_step_of_the_analytic_impacts(name: str) -> None:
    system, _ = ball_system()
    result = run_quiet(system, 3.0, MASTERS[name]())
    events = result.events
    assert len(events) >= 5 and {(c, n) for _, c, n in events} == {("ball", "bounce")}
    assert result.stats.events == len(events)
    assert result.stats.event_handling == "at communication points"
    h = system.history.get_component_history("ball").get_port_history("h")
    v = system.history.get_component_history("ball").get_port_history("v")
    times = [t.t for t, _, _ in events]
    # every impact is handled at the first communication point after its analytic instant: the
    # ball's update traces the flight back to the impact, so handling late shifts no later bounce
    ref = bounce_times(len(times))
    for t, t_ref in zip(times, ref, strict=True):
        assert 0.0 <= t - t_ref < DT
        assert t == pytest.approx(round(t / DT) * DT, abs=1e-12)
    v1 = math.sqrt(2 * G * H0)
    for k, (t, t_ref) in enumerate(zip(times, ref, strict=True)):
        h_at, v_at = samples_at(h, t), samples_at(v, t)
        # pre-event sample (micro 0) below the floor by at most one step's fall; post-event (micro 1)
        # the analytic rebound state, ``late`` seconds after the impact
        assert sorted(h_at) == [0, 1]
        assert -(G * DT**2 / 2 + abs(v_at[0]) * DT) <= h_at[0] <= 0.0
        late, v_rebound = t - t_ref, E ** (k + 1) * v1
        assert h_at[1] == pytest.approx(v_rebound * late - G * late**2 / 2, abs=1e-9)
        assert v_at[1] == pytest.approx(v_rebound - G * late, abs=1e-9)
    # never through the floor by more than one step's fall, over the whole run
    v_max = math.sqrt(2 * G * H0) + G * DT
    assert np.min(h.values) >= -(G * DT**2 / 2 + v_max * DT)


def test_the_ball_never_falls_through_the_floor_under_gauss_seidel() -> None:
    """Bounces shorter than one step after an event are still caught (hints, or the probe after the event)."""
    system, _ = ball_system()
    result = run_quiet(system, 5.0, GaussSeidel())
    _, h = system.history.get_port_trajectory("ball", "h")
    assert len(result.events) > 10
    assert h.min() >= -(G * DT**2 / 2 + math.sqrt(2 * G * H0) * DT)


def test_pendulum_switch_under_gauss_seidel_respects_the_end_stop(tmp_path: Path) -> None:
    cfg = yaml.safe_load((ROOT / "experiments" / "pendulum_switch.yaml").read_text())
    cfg.pop("defaults")
    cfg["master"] = {"name": "gauss_seidel"}
    cfg["run"]["tf"] = 4.0
    exp = prepare(cfg)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        outcome = run_experiment(cfg, tmp_path, experiment=exp)
    assert outcome.ok, outcome.error
    assert [str(w.message) for w in record if w.category is UserWarning] == [UNLOCATED_NOTICE]
    results = load_results(outcome.path)
    assert "end_stop" in set(results.events["event"])
    history = results.history("pendulum")
    (_, q), (_, omega) = history["q"], history["omega"]
    # past the stop by at most one step's travel at the largest speed
    assert np.max(np.abs(q)) <= 0.75 + np.max(np.abs(omega)) * 0.01
    with h5py.File(outcome.path, "r") as f:
        assert f["stats"].attrs["event_handling"] == "at communication points"
        assert f["stats"].attrs["events"] == len(results.events) > 0


def test_the_notice_is_warned_once_per_run_and_not_for_the_hybrid_master() -> None:
    for master, expected in ((GaussSeidel(), [UNLOCATED_NOTICE]), (Hybrid(), [])):
        system, _ = ball_system()
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            result = system.run(0.0, 1.0, DT, master=master)
        assert [str(w.message) for w in record] == expected
        assert result.stats.event_handling == ("located" if expected == [] else "at communication points")


def test_a_system_without_indicators_gives_no_notice() -> None:
    system = System("plain")
    system.add_component(Integrator())
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = system.run(0.0, 0.1, DT, master=Jacobi())
    assert record == [] and result.events == []


def test_subscribers_receive_events_under_jacobi() -> None:
    system, _ = ball_system()
    counter = system.add_component(Counter())
    system.connect_event("ball.bounce", "counter")
    result = run_quiet(system, 2.0, Jacobi())
    times = [t.t for t, _, _ in result.events]
    assert len(times) >= 3
    assert counter.received == [(["bounce"], t) for t in times]
    count = system.history.get_component_history("counter").get_port_history("count")
    for k, t in enumerate(times, 1):
        assert samples_at(count, t) == {0: k - 1, 1: k}
