"""Events located on an FMU output that is piecewise constant in time, against analytic truth.

The bouncing-ball test FMU with ``internal_step`` advances only on its own grid
``k * internal_step`` (exactly, impacts included) and holds h and v in between,
as an FMU output that changes only at the FMU's internal steps. The impacts
happen inside ``fmi2DoStep``; the indicator is v rising through zero, which stays
on its new side after each impact. v first becomes positive at the first grid
point after an analytic impact, so each located event must lie within
``time_tolerance`` after that grid point, and the hybrid master's safeguarded
root finder must locate it in at most ``ceil(log2(dt / time_tolerance)) + 4``
trial steps (30 on average), whatever the indicator's flat shape.
"""

from __future__ import annotations

import math
from pathlib import Path

import helpers
import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu

from cosimrun.masters import Hybrid
from cosimrun.system import System

G, E, H0 = 9.81, 0.8, 1.0
TOL, DT, STEP = 1e-10, 0.01, 1e-3
TF = 3.95
"""The run ends before the flights get shorter than ``2 * (DT + STEP)``: a shorter descent can fall between
two communication points, and v then returns to its side within one macro step, unseen from outside."""
BOUND = math.ceil(math.log2(DT / TOL)) + 4


@pytest.fixture(scope="module")
def ball_fmu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.bouncing_ball(tmp_path_factory.mktemp("held-ball-fmu"))


def grid_truth(tf: float) -> tuple[list[float], list[float]]:
    """For each analytic impact before *tf*: the first grid point ``k * STEP`` after it, where v (held) first
    becomes positive, and the analytic v there."""
    impacts = [t for t in helpers.bounce_times(60, H0, E, G) if t < tf]
    v1 = math.sqrt(2 * G * H0)
    grid, v_grid = [], []
    for i, t_imp in enumerate(impacts):
        k = math.floor(t_imp / STEP) + 1
        v = E ** (i + 1) * v1 - G * (k * STEP - t_imp)
        grid.append(k * STEP)
        v_grid.append(v)
    return grid, v_grid


def test_an_fmu_output_held_between_internal_steps_is_located_on_its_grid_point(ball_fmu: Path) -> None:
    """Time_tolerance 1e-10, dt 0.01, internal step 1 ms: every impact found at its grid point, cheaply."""
    impacts = [t for t in helpers.bounce_times(60, H0, E, G) if t < TF]
    flights = np.diff([0.0, *impacts, next(t for t in helpers.bounce_times(60, H0, E, G) if t >= TF)])
    assert flights[1:].min() > 2 * (DT + STEP)  # every descent spans a communication point
    grid, v_grid = grid_truth(TF)
    # the truth is well defined: the grid point is no closer than 1 us to its impact, and v is positive there
    assert min(g - t for g, t in zip(grid, impacts, strict=True)) > 1e-6 and min(v_grid) > 0.0

    system = System("held")
    ball = fmu("ball", ball_fmu, internal_step=STEP, events={"bounce": {"port": "v", "direction": 1}})
    system.add_component(ball)
    result = system.run(0.0, TF, DT, master=Hybrid(time_tolerance=TOL))
    found = np.array([when.t for when, comp, name in result.events if comp == "ball" and name == "bounce"])

    assert len(found) == len(grid) == 16
    late = found - np.array(grid)
    # the end of a bracket no wider than TOL that holds the grid point (2e-15 s: the float grid point's rounding)
    assert late.min() >= -2e-15 and late.max() <= TOL
    trials = result.stats.event_trial_steps
    assert len(trials) == len(found)
    assert max(trials) <= BOUND and sum(trials) / len(trials) <= 30.0
    # the FMU's v at each event is the analytic v of the grid point: held, and restored by every rollback
    t, values = ball.get_history_arrays(["v"])
    v_event = np.array([values["v"][np.flatnonzero(t == t_ev)[-1]] for t_ev in found])
    np.testing.assert_allclose(v_event, v_grid, rtol=0, atol=1e-12)
    system.free()
