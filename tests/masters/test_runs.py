"""A master is frozen settings; every run is a run object of its own.

One master object runs several systems, one after the other or initialized
side by side, and each run gives bitwise what a fresh master gives it: nothing
of one run stays in the master for the next.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import two_mass_split

from cosimrun.components.mechanics import BouncingBall
from cosimrun.errors import ConfigError, LoopConvergenceError
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master, MasterRun
from cosimrun.system import RunResult, System

pytestmark = pytest.mark.filterwarnings("ignore:events are handled:UserWarning")

MASTERS: dict[str, Callable[[], Master]] = {
    "jacobi_error_control": lambda: Jacobi(extrapolation=2, step_control="error", rtol=1e-5),
    "gauss_seidel": lambda: GaussSeidel(extrapolation=1),
    "ijcsa_iterate": lambda: IJCSA(iterate_steps=True),
    "hybrid": lambda: Hybrid(),
}


def oscillator(k1: float) -> System:
    """Two masses coupled by a spring, split into two components (mass 1 on a spring of stiffness *k1*)."""
    return two_mass_split(k1, 20.0, 15.0, substeps=10)


def ball(h0: float) -> System:
    """A bouncing ball dropped from *h0* next to the oscillator: events as well as coupling."""
    system = oscillator(5.0)
    ball = BouncingBall("ball")
    ball.set_parameters(h0=h0, v0=0.0, e=0.8, g=9.81, v_rest=1e-3)
    system.add_component(ball)
    return system


SYSTEMS = (lambda: oscillator(10.0), lambda: ball(0.7))


def run(system: System, master: Master) -> RunResult:
    return system.run(0.0, 1.0, 0.01, master=master)


def stats(result: RunResult) -> dict[str, Any]:
    """The run's statistics, NaN written as a string so that two equal runs compare equal."""
    return {k: "nan" if isinstance(v, float) and math.isnan(v) else v for k, v in result.stats.as_dict().items()}


def assert_bitwise_equal(result: RunResult, reference: RunResult) -> None:
    assert result.events == reference.events
    assert stats(result) == stats(reference)
    assert result.coupling_errors == reference.coupling_errors and result.coupling_errors
    assert (result.steps is None) == (reference.steps is None)
    if result.steps is not None:
        for column, values in result.steps.items():
            assert np.array_equal(values, reference.steps[column], equal_nan=True), column
    for name, history in result.history.get_all_histories().items():
        for port in history.port_names:
            t, y = result.history.get_port_trajectory(name, port)
            t_ref, y_ref = reference.history.get_port_trajectory(name, port)
            assert np.array_equal(t, t_ref) and np.array_equal(y, y_ref), (name, port)


@pytest.mark.parametrize("name", list(MASTERS))
def test_one_master_runs_two_systems_one_after_the_other_as_two_fresh_masters_do(name: str) -> None:
    make = MASTERS[name]
    master = make()
    results = [run(system(), master) for system in SYSTEMS]
    fresh = [run(system(), make()) for system in SYSTEMS]
    for result, reference in zip(results, fresh, strict=True):
        assert_bitwise_equal(result, reference)
    assert results[0].stats is not results[1].stats
    assert len(results[1].events) >= 1  # the ball bounced: the second run had events of its own
    assert master == make()  # the runs left the settings as they were


@pytest.mark.parametrize("name", list(MASTERS))
def test_one_master_serves_two_systems_initialized_side_by_side(name: str) -> None:
    """Each ``initialize`` starts a run object of its own: running the second system first changes nothing."""
    make = MASTERS[name]
    master = make()
    first, second = (system() for system in SYSTEMS)
    first.initialize(0.0, master)
    second.initialize(0.0, master)
    assert isinstance(first.master_run, MasterRun) and first.master_run is not second.master_run
    later = run(second, master)
    earlier = run(first, master)
    assert_bitwise_equal(earlier, run(SYSTEMS[0](), make()))
    assert_bitwise_equal(later, run(SYSTEMS[1](), make()))


def test_settings_are_frozen_and_checked_when_replaced() -> None:
    master = Jacobi(extrapolation=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        master.extrapolation = 2  # type: ignore[misc]
    assert dataclasses.replace(master, rtol=1e-6).rtol == 1e-6
    with pytest.raises(ConfigError) as info:
        dataclasses.replace(master, rtol=-1.0)
    assert info.value.key == "rtol" and str(info.value) == "rtol: must be >= 0, got -1.0"


def test_a_run_reports_what_it_did_and_the_system_keeps_it_after_a_failure() -> None:
    system = oscillator(10.0)
    master = IJCSA(iterate_steps=True, max_step_iterations=1, step_tolerance=1e-30)
    with pytest.raises(LoopConvergenceError, match="did not converge in 1 iterations"):
        run(system, master)
    assert system.master_run is not None and system.master_run.stats.step_iterations == 1
    assert system.master_run.stats.macro_steps == 0


def test_a_run_is_checked_before_it_starts_only_on_an_initialized_system() -> None:
    system = oscillator(10.0)
    with pytest.raises(ConfigError, match="^check_run needs an initialized system: call initialize"):
        system.check_run(0.0, 1.0, 0.01)
    system.initialize(0.0, Jacobi())
    system.check_run(0.0, 1.0, 0.01)  # nothing to refuse
    with pytest.raises(ConfigError) as info:
        system.check_run(0.0, 1.0, 0.0)
    assert info.value.key == "dt" and str(info.value) == "dt: must be a positive number, got 0.0"


def test_an_event_source_that_cannot_roll_back_is_refused_by_the_hybrid_master() -> None:
    class Stuck(BouncingBall):
        @property
        def can_always_roll_back(self) -> bool:
            return False

    system = System("stuck")
    system.add_component(Stuck("ball"))
    with pytest.raises(ConfigError) as info:
        system.run(0.0, 1.0, 0.01, master=Hybrid())
    assert info.value.key is None and str(info.value) == (
        "component 'ball' has event indicators but cannot roll back (supports_rollback is False, for itself or one "
        "of its modes), so it cannot be an event source under the hybrid master")
