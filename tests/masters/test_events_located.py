"""The hybrid master's event guarantees: no indicator changes sign without an event, events located in time.

Reference values are analytic: the bouncing ball's impact sequence
(``helpers.bounce_times``), its instant of rest (the sum of the geometric
series of flights), and impacts placed on a communication point by choice of
gravity and height.
"""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import helpers
import numpy as np
import pytest
from test_hybrid import Ball

from cosimrun.components.mechanics import BouncingBall
from cosimrun.masters import Hybrid, ZenoError
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.system import System

G = 9.81


def ball_system(h0: float = 1.0, e: float = 0.8, v_rest: float = 1e-3, g: float = G, name: str = "ball",
                system: System | None = None) -> System:
    system = system or System("ball")
    ball = BouncingBall(name)
    ball.set_parameters(h0=h0, e=e, v_rest=v_rest, g=g)
    system.add_component(ball)
    return system


def impacts(result, name: str = "ball") -> np.ndarray:
    return np.array([t.t for t, comp, ev in result.events if comp == name and ev == "bounce"])


@pytest.mark.parametrize("tol", [1e-10, 1e-12])
def test_the_shipped_ball_matches_the_analytic_impacts_over_the_whole_run(tol: float) -> None:
    """All 38 impacts of the shipped experiment (5 s, dt 0.01) within one time_tolerance, late, never early."""
    system = ball_system()
    result = system.run(0.0, 5.0, 0.01, master=Hybrid(time_tolerance=tol))
    found = impacts(result)
    ref = np.array(helpers.bounce_times(len(found), 1.0, 0.8, G))
    assert len(found) == 38 and system.components["ball"].resting
    late = found - ref
    # each impact is located at most one tolerance after the analytic one (the bracket's right end,
    # where h < 0); the ball's update removes that lateness from the flights that follow, so the
    # error does not accumulate (1e-13 s allowance for rounding in the float analytic sequence and
    # in the update)
    assert late.min() >= -1e-13 and late.max() <= tol
    _, h = system.history.get_port_trajectory("ball", "h")
    assert h.min() > -G * tol  # past the floor by at most one tolerance's fall at the largest speed


@pytest.mark.parametrize(("v_rest", "tol"), [(1e-6, 1e-10), (1e-3, 1e-13), (1e-5, 1e-12)])
def test_a_ball_coming_to_rest_never_tunnels(v_rest: float, tol: float) -> None:
    """Short, slow flights at the end (down to 2e-7 s) and tight tolerances: every impact is an event."""
    system = ball_system(v_rest=v_rest)
    result = system.run(0.0, 5.0, 0.01, master=Hybrid(time_tolerance=tol))
    ball = system.components["ball"]
    _, h = system.history.get_port_trajectory("ball", "h")
    assert ball.resting and h[-1] == 0.0
    assert h.min() > -1e-9
    found = impacts(result)
    # the bounces until the rebound speed drops below v_rest: e^k v1 > v_rest
    v1 = math.sqrt(2 * G)
    expected = 1 + math.floor(math.log(v_rest / v1) / math.log(0.8))
    assert len(found) == expected
    ref = np.array(helpers.bounce_times(len(found), 1.0, 0.8, G))
    assert np.max(np.abs(found - ref)) <= 2 * tol


def test_a_ball_without_rest_state_stops_with_a_zeno_error() -> None:
    system = ball_system(v_rest=0.0)
    with pytest.raises(ZenoError) as info:
        system.run(0.0, 5.0, 0.01, master=Hybrid(time_tolerance=1e-10))
    err = info.value
    t_rest = math.sqrt(2 / G) + 2 * math.sqrt(2 * G) * 0.8 / (G * 0.2)
    assert err.component == "ball" and err.indicator == "bounce"
    assert err.time == pytest.approx(t_rest, abs=1e-6)
    assert str(err) == (
        f"component 'ball': event indicator 'bounce' fired 10 times in a row less than 1e-07 s apart, up to "
        f"t={err.time:.12g} (a Zeno accumulation: give the component a rest state, or change "
        "master.min_event_interval or master.zeno_events)"
    )
    _, h = system.history.get_port_trajectory("ball", "h")
    assert h.min() > -1e-9  # never through the floor before stopping


def test_a_zeno_run_fails_with_its_reason_and_keeps_what_it_computed(tmp_path: Path) -> None:
    cfg = {
        "name": "zeno",
        "run": {"t0": 0.0, "tf": 5.0, "dt": 0.01},
        "master": {"name": "hybrid", "min_event_interval": 1e-6, "zeno_events": 5},
        "components": {"ball": {"type": "bouncing_ball", "params": {"v_rest": 0.0}}},
    }
    outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert not outcome.ok
    assert outcome.error.startswith("ZenoError: component 'ball': event indicator 'bounce' fired 5 times")
    with h5py.File(outcome.path, "r") as f:
        assert f.attrs["status"] == "failed"
        assert f.attrs["error"].startswith("ZenoError: component 'ball'")
        t = f["components/ball/time"][:]
        assert 4.0 < t[-1] < 4.07  # computed up to the accumulation at 4.0637 s, kept
        assert len(f["events/time"]) > 30


def test_an_impact_exactly_on_a_communication_point_is_located_once() -> None:
    """g = 8, h0 = 1: the impact is at t = 0.5 exactly, on the grid (RK4 is exact on the parabola)."""
    system = ball_system(g=8.0)
    result = system.run(0.0, 0.9, 0.01, master=Hybrid(time_tolerance=1e-10))
    found = impacts(result)
    assert len(found) == 1
    assert 0.5 <= found[0] <= 0.5 + 1e-10
    _, h = system.history.get_port_trajectory("ball", "h")
    assert h.min() >= -8.0 * 0.5 * 1e-10


def test_two_impacts_in_one_step_are_both_located() -> None:
    """Two balls whose first impacts are 1 ms apart inside one 10 ms step."""
    h_a, h_b = 1.0, None
    t_a = math.sqrt(2 * h_a / G)
    t_b = t_a + 1e-3
    h_b = G * t_b**2 / 2
    system = ball_system(h0=h_a, name="a")
    ball_system(h0=h_b, name="b", system=system)
    result = system.run(0.0, 0.6, 0.01, master=Hybrid(time_tolerance=1e-10))
    assert [(c, n) for _, c, n in result.events] == [("a", "bounce"), ("b", "bounce")]
    assert math.floor(t_a / 0.01) == math.floor(t_b / 0.01)
    for name, t_ref in (("a", t_a), ("b", t_b)):
        (t,) = impacts(result, name)
        assert 0.0 <= t - t_ref <= 1e-10


def test_a_handler_that_leaves_the_indicator_past_zero_is_re_armed_by_its_departure() -> None:
    """A ball whose update only reverses the velocity leaves h below the floor, moving up.

    Its flights (e = 0.3: 271 ms, 81 ms, 24 ms, 7 ms, 2 ms) are shorter than a 20 ms step from
    the fourth on; re-armed from the side it departs towards, every bounce is still an event.
    """
    system = System("ball")
    system.add_component(Ball("ball", e=0.3))
    result = system.run(0.0, 0.838, 0.02, master=Hybrid(time_tolerance=1e-10))
    found = impacts(result)
    ref = helpers.bounce_times(8, 1.0, 0.3, G)
    n = sum(t < 0.838 for t in ref)
    assert len(found) == n >= 6
    # each reversal keeps the ball up to one tolerance late: n tolerances at most in total
    assert np.max(np.abs(found - ref[:n])) <= n * 1e-10
    _, h = system.history.get_port_trajectory("ball", "h")
    assert h.min() > -1e-9


def test_sign_tolerance_is_zero_by_default_and_settings_are_checked() -> None:
    master = Hybrid()
    assert master.sign_tolerance == 0.0
    assert master.event_interval == pytest.approx(1e-7)
    assert Hybrid(time_tolerance=1e-9, min_event_interval=1e-3).event_interval == 1e-3
    with pytest.raises(ValueError, match="min_event_interval"):
        Hybrid(min_event_interval=0.0)
    with pytest.raises(ValueError, match="zeno_events"):
        Hybrid(zeno_events=1)
