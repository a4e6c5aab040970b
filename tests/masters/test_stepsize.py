"""Communication times: exact grid, time events, max steps, end time, no residual steps."""

import numpy as np
import pytest
from helpers import LimitedStep, Probe, Ramp, TimeEventSource

from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.masters.stepsize import Clock
from cosimrun.system import System

MASTERS = [pytest.param(Jacobi, id="jacobi"), pytest.param(GaussSeidel, id="gauss_seidel")]
SHORTEST = 1e-9  # no communication step may be shorter than this (no residual steps)


# ---------------------------------------------------------------------- Clock
def test_grid_times_are_exact_after_a_million_steps():
    clock = Clock(0.0, 0.1, 1e6)
    r = clock.resolution
    assert all(clock.time(k * r) == k * 0.1 for k in range(1_000_001))
    # no drift, unlike accumulating the step
    t = 0.0
    for _ in range(1_000_000):
        t += 0.1
    assert t != 1e6 * 0.1
    assert clock.time(1_000_000 * r) == 1e6 * 0.1 == 100000.0


def test_grid_times_with_an_offset_start():
    clock = Clock(1.3, 0.01, 1e4)
    r = clock.resolution
    assert all(clock.time(k * r) == 1.3 + k * 0.01 for k in range(0, 1_000_000, 997))
    assert clock.time(0) == 1.3


def test_ticks_and_times_round_trip():
    clock = Clock(0.0, 0.1, 10.0)
    for t in (0.0, 0.1, 0.37, 0.30000000000000004, 2.5, 9.99):
        tick = clock.mark(t)
        assert clock.time(tick) == t
        assert clock.ticks(t) == tick
    assert clock.grid_index(clock.mark(0.37)) == 3
    assert clock.next_grid(clock.mark(0.37)) == 4 * clock.resolution


def test_end_time_is_kept_exactly():
    for tf in (0.3, 0.35, 1.05, 7.0, 128.332):
        clock = Clock(0.0, 0.1, tf)
        assert clock.time(clock.end) == tf


def test_a_tick_marked_after_its_time_was_asked_for_gives_the_marked_time():
    clock = Clock(0.0, 0.1, 1.0)
    r = clock.resolution
    tick = clock.ticks(0.3)
    assert clock.time(tick) == 3 * 0.1 != 0.3  # the grid's time: t0 + 3 dt
    assert clock.mark(0.3) == tick
    assert clock.time(tick) == 0.3  # the marked time from now on, however often asked
    assert clock.time(2 * r) == 0.2 and clock.time(tick) == 0.3
    restored = Clock(0.0, 0.1, 1.0)
    assert restored.time(tick) == 3 * 0.1
    restored.restore_marks(clock.marks())
    assert restored.time(tick) == 0.3


def test_clock_rejects_bad_settings():
    with pytest.raises(ConfigError, match="^dt: must be a positive number") as info:
        Clock(0.0, 0.0, 1.0)
    assert info.value.key == "dt"
    with pytest.raises(ConfigError, match="^dt: must be a positive number"):
        Clock(0.0, float("nan"), 1.0)
    with pytest.raises(ConfigError, match="^tf: must not be before t0") as info:
        Clock(1.0, 0.1, 0.5)
    assert info.value.key == "tf"


# ---------------------------------------------------------------------- helpers
def ramp_probe(source) -> System:
    s = System("timing")
    s.add_component(source)
    s.add_component(Probe("probe"))
    s.connect(f"{source.name}.y -> probe.u")
    return s


def times_of(result, component="probe") -> np.ndarray:
    t, _ = result.history.get_port_trajectory(component, "y")
    return t


def assert_no_residual_steps(t: np.ndarray) -> None:
    steps = np.diff(t)
    assert steps.min() > SHORTEST, steps.min()


def communication_points(system: System, t0: float, tf: float, dt: float) -> list[int]:
    """Every tick the master stops at, without stepping the components."""
    m = GaussSeidel()
    system.initialize(t0, m)
    clock = Clock(t0, dt, tf)
    ticks = [0]
    while ticks[-1] < clock.end:
        ticks.append(system.master_run.next_point(clock, ticks[-1]))
    return ticks


# ---------------------------------------------------------------------- end time
@pytest.mark.parametrize("master", MASTERS)
def test_end_time_not_a_multiple_of_dt_is_reached_exactly(master):
    r = ramp_probe(Ramp("src")).run(0.0, 1.05, 0.1, master=master())
    t = times_of(r)
    assert t[-1] == 1.05
    assert r.stats.macro_steps == 11
    assert np.diff(t)[-1] == pytest.approx(0.05)
    assert_no_residual_steps(t)


@pytest.mark.parametrize("tf", [0.3, 0.7, 2.9])
def test_end_time_on_the_grid_gives_no_residual_step(tf):
    r = ramp_probe(Ramp("src")).run(0.0, tf, 0.1, master=GaussSeidel())
    t = times_of(r)
    assert t[-1] == tf
    assert r.stats.macro_steps == round(tf / 0.1)
    assert_no_residual_steps(t)


def test_end_time_a_rounding_error_past_a_grid_point_gives_no_residual_step():
    # 128.332 lies a few ticks after grid point 128332 of dt = 1e-3 (float rounding)
    clock = Clock(0.0, 1e-3, 128.332)
    assert 0 < clock.end - 128332 * clock.resolution < clock.snap
    ticks = communication_points(ramp_probe(Ramp("src")), 0.0, 128.332, 1e-3)
    assert len(ticks) == 128333
    assert ticks[-1] == clock.end
    assert min(np.diff(ticks)) > clock.resolution // 2


# ---------------------------------------------------------------------- time events
@pytest.mark.parametrize("master", MASTERS)
def test_time_event_becomes_an_exact_communication_point(master):
    src = TimeEventSource("src", [0.37])
    r = ramp_probe(src).run(0.0, 1.0, 0.1, master=master())
    for comp in ("src", "probe"):
        t = times_of(r, comp)
        assert 0.37 in t.tolist()  # exactly, not 0.37000000000000005
        assert len(t) == 12
        assert r.stats.macro_steps == 11
        assert_no_residual_steps(t)
        np.testing.assert_allclose(np.delete(t, 4), np.linspace(0.0, 1.0, 11), atol=1e-15)  # grid kept
    assert 0.37 in src.asked  # asked again from the event instant


@pytest.mark.parametrize("master", MASTERS)
def test_components_step_to_the_time_event(master):
    probe_system = ramp_probe(TimeEventSource("src", [0.37, 0.5, 0.73]))
    probe_system.run(0.0, 1.0, 0.1, master=master())
    steps = probe_system.components["probe"].steps
    starts = [t for t, _, _ in steps]
    ends = [t + dt for t, dt, _ in steps]
    assert 0.37 in starts and 0.73 in starts
    assert 0.37 in ends and 0.73 in ends
    assert len(steps) == 12  # 0.5 is a grid point already


@pytest.mark.parametrize("offset", [1e-12, -1e-12, 3e-15, -3e-15])
def test_time_event_a_rounding_error_from_a_grid_point_gives_no_residual_step(offset):
    te = 0.4 + offset
    r = ramp_probe(TimeEventSource("src", [te])).run(0.0, 1.0, 0.1, master=GaussSeidel())
    t = times_of(r)
    assert_no_residual_steps(t)
    assert len(t) == 11  # the event instant replaces the grid point it sits on
    assert te in t.tolist() or abs(te - 0.4) < 1e-13


# ---------------------------------------------------------------------- max step
@pytest.mark.parametrize("max_step", [0.03, 0.01, 0.05, 0.07])
@pytest.mark.parametrize("master", MASTERS)
def test_max_step_of_a_component_limits_the_step(master, max_step):
    src = LimitedStep("src", max_step)
    r = ramp_probe(src).run(0.0, 0.3, 0.1, master=master())
    t = times_of(r)
    steps = np.diff(t)
    assert steps.max() <= max_step * (1 + 1e-9)
    assert_no_residual_steps(t)
    for grid in (0.1, 0.2, 0.3):  # grid points are kept
        assert np.min(np.abs(t - grid)) < 1e-15
    per_interval = int(np.ceil(0.1 / max_step - 1e-9))
    assert r.stats.macro_steps == 3 * per_interval
    assert src.dts == pytest.approx(steps.tolist())


def test_max_step_larger_than_dt_changes_nothing():
    r = ramp_probe(LimitedStep("src", 0.25)).run(0.0, 1.0, 0.1, master=GaussSeidel())
    assert r.stats.macro_steps == 10


def test_max_step_and_time_event_together():
    class Both(TimeEventSource):
        max_step = 0.04

    r = ramp_probe(Both("src", [0.37])).run(0.0, 0.5, 0.1, master=GaussSeidel())
    t = times_of(r)
    assert 0.37 in t.tolist()
    assert np.diff(t).max() <= 0.04 * (1 + 1e-9)
    assert_no_residual_steps(t)
