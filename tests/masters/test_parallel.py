"""Parallel stepping (``parallel``): bitwise the results of serial stepping, the same failures, no thread left.

The systems mix FMUs (``tests/fmus``: ``discard.c``, ``x' = u`` ending a step
early at ``t_discard`` and busy for ``work`` seconds per step; ``feedthrough.c``,
``y = k u``) with Python ODE components, under every master. The runs compared
here force every batch of two or more FMUs onto the pool's threads
(``Batch.parallel_now``), while the policy itself is tested apart. Every run
in parallel is made with both pools (``cosimrun.fmi.pool``): the native one
and the Python threads that stand in for it when it is not built.
"""

from __future__ import annotations

import _thread
import ast
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

from cosimrun.components.fmu import FMUComponent
from cosimrun.components.fmu.build import find_c_compiler
from cosimrun.components.mechanics import BouncingBall
from cosimrun.config.build import build_master
from cosimrun.core import cstep
from cosimrun.core.ode import OdeComponent
from cosimrun.errors import ConfigError, FMUError
from cosimrun.fmi import pool as fmi_pool
from cosimrun.fmi.pool import ENV_POOL, MAX_JOBS, RUNNER, CStepJob, ThreadPool
from cosimrun.fmi.step import FMUCStep
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master, parallel
from cosimrun.masters.base import thread_count
from cosimrun.runner.run import run_experiment
from cosimrun.system import System

pytestmark = pytest.mark.filterwarnings("ignore:events are handled at communication points")
DT, TF = 0.1, 1.0
WORK = 2e-4
"""Seconds of C work per step of the discard FMUs: long enough for the pool's threads to take their share."""
MASTERS: dict[str, Callable[..., Master]] = {
    "jacobi": Jacobi,
    "jacobi_extrapolated": lambda **kw: Jacobi(extrapolation=1, **kw),
    "gauss_seidel": GaussSeidel,
    "gauss_seidel_lines": lambda **kw: GaussSeidel(extrapolation=1, **kw),
    "ijcsa": IJCSA,
    "hybrid": Hybrid,
}


@pytest.fixture(autouse=True)
def fmu_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extraction cache of these tests (never the user's)."""
    monkeypatch.setenv("COSIMRUN_FMU_CACHE", str(tmp_path_factory.getbasetemp() / "fmu-cache"))


@pytest.fixture(scope="module")
def fmus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("parallel-fmus")
    return {
        "discard": builders.discard(directory),
        "interpolating": builders.discard(directory, interpolate=True),
        "passive": builders.discard(directory, rollback=False),
        "feedthrough": builders.feedthrough(directory),
    }


@pytest.fixture(params=fmi_pool.KINDS)
def pool_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The pool parallel runs start (:data:`~cosimrun.fmi.pool.ENV_POOL`): ``native`` or ``threads``."""
    monkeypatch.setenv(ENV_POOL, request.param)
    return request.param


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch, pool_kind: str) -> list[tuple[int, int]]:
    """``(steps taken by the pool's threads, threads still running)`` of each run's pool, when it closed (each of
    the kind :func:`pool_kind` chose)."""
    return record_pools(monkeypatch, pool_kind)


def record_pools(monkeypatch: pytest.MonkeyPatch, kind: str) -> list[tuple[int, int]]:
    """See :func:`pools`: the runs' pools, each of the kind *kind*."""
    closed: list[tuple[int, int]] = []
    close = parallel.ParallelStepper.close

    def closing(self: parallel.ParallelStepper) -> None:
        started = list(self.pools.values())
        close(self)
        assert [pool.kind for pool in started] == [kind] * len(started)
        closed.extend((pool.pooled, pool.alive) for pool in started)

    monkeypatch.setattr(parallel.ParallelStepper, "close", closing)
    return closed


@pytest.fixture
def always_parallel(monkeypatch: pytest.MonkeyPatch, pools: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every batch of two or more FMUs steps on the pool's threads; the pools of the runs (see :func:`pools`)."""
    monkeypatch.setattr(parallel.Batch, "parallel_now", lambda self: True)
    return pools


class Spring(OdeComponent):
    """``v' = -x``; with an FMU's ``x' = v`` an oscillator (*unit*: of ``v``)."""

    def __init__(self, name: str, v0: float = 0.5, unit: str = "m/s") -> None:
        super().__init__(name)
        self.add_state("v", unit, initial=v0)
        self.add_input("x", "m")

    def derivatives(self, t, x, u):
        return np.array([-u[0]])


def fmu(name: str, path: Path, **params: Any) -> FMUComponent:
    comp = FMUComponent(name)
    comp.set_parameters(path=str(path), **params)
    return comp


def mixed_system(fmus: dict[str, Path], *, discards: bool, passive: bool = False, kind: str = "discard") -> System:
    """Springs driving FMUs (``x' = v``) and driven by them, a feedthrough FMU and a bouncing ball (events).

    With *discards*, ``f1`` and ``f3`` end the step from 0.5 early (at 0.53 and 0.57); with *passive*, an FMU
    without FMU state joins them (it cannot be stepped speculatively, nor be the hybrid master's trial).
    """
    system = System("mixed")
    late = {"t_discard": 0.53} if discards else {}
    later = {"t_discard": 0.57} if discards else {}
    for comp in (Spring("s1"), Spring("s2", v0=-0.3), Spring("pull", unit="N"),
                 fmu("f1", fmus[kind], work=WORK, **late), fmu("f2", fmus[kind], work=WORK),
                 fmu("f3", fmus[kind], work=WORK, **later), fmu("g", fmus["feedthrough"], k=3.0),
                 BouncingBall("ball")):
        system.add_component(comp)
    system.components["ball"].set_parameters(h0=1.3)  # the bounce at 0.515 s, in the step the FMUs cut
    for link in ("f1.x -> s1.x", "s1.v -> f1.u", "f2.x -> s2.x", "s2.v -> f2.u", "s1.v -> f3.u", "f3.x -> pull.x",
                 "pull.v -> g.u"):
        system.connect(link)
    if passive:
        system.add_component(fmu("p", fmus["passive"], work=WORK))
        system.connect("s2.v -> p.u")
    return system


def run(system: System, master: Master) -> Any:
    try:
        return system.run(0.0, TF, DT, master=master)
    finally:
        system.free()


def recorded(result: Any) -> dict[tuple[str, str], tuple[np.ndarray, ...]]:
    """Every recorded array: ``(time, values, micro)`` by component and port."""
    out = {}
    for comp, history in result.history.get_all_histories().items():
        for port, ports in history.get_all_histories().items():
            out[comp, port] = ports.slice(0, len(ports))
    return out


def assert_bitwise_equal(result: Any, reference: Any) -> None:
    got, expected = recorded(result), recorded(reference)
    assert got.keys() == expected.keys()
    for key, arrays in expected.items():
        for name, a, b in zip(("time", "values", "micro"), got[key], arrays, strict=True):
            assert np.array_equal(a, b), f"{key} {name}"
    assert result.events == reference.events
    assert result.mode_switches == reference.mode_switches


def serial_stats(result: Any) -> dict[str, Any]:
    stats = result.stats.as_dict()
    for key in ("parallel_threads", "parallel_steps", "plan_steps", "parallel_fraction", "parallel_pool"):
        stats.pop(key)
    return stats


# ---------------------------------------------------------------------------- the same bits as serial stepping
@pytest.mark.parametrize("discards", [False, True], ids=["steps", "discards"])
@pytest.mark.parametrize("name", list(MASTERS))
def test_parallel_stepping_records_bitwise_what_serial_stepping_records(
    name: str, discards: bool, fmus: dict[str, Path], always_parallel: list[tuple[int, int]],
    monkeypatch: pytest.MonkeyPatch, pool_kind: str,
) -> None:
    kind = "interpolating" if name.endswith(("lines", "extrapolated")) else "discard"
    undone: list[str] = []
    undo = FMUCStep.undo
    monkeypatch.setattr(FMUCStep, "undo", lambda self: (undone.append(self.comp.name), undo(self))[1])
    reference = run(mixed_system(fmus, discards=discards, kind=kind), MASTERS[name]())
    assert always_parallel == []
    result = run(mixed_system(fmus, discards=discards, kind=kind), MASTERS[name](parallel=2))
    (pooled, alive), = always_parallel
    # a pool's thread takes a share only when it is scheduled before the caller has taken every job itself, which a
    # loaded machine may never do in a short run (seen for the native pool at a load of 8 on 2 cores): that the
    # threads take steps is the counting test's, whose steps are long enough (COUNTING_WORK)
    assert alive == 0  # the threads ended with the run
    assert_bitwise_equal(result, reference)
    assert serial_stats(result) == serial_stats(reference)
    assert result.stats.parallel_steps > 0 and result.stats.parallel_threads == 2
    assert reference.stats.parallel_steps == reference.stats.plan_steps == 0
    events = [e for _, _, e in result.events]
    assert events.count("bounce") == 1 and events.count("discard") == (2 if discards else 0)
    assert bool(undone) == discards  # the steps taken alongside a discarding FMU, after it in plan order, undone


COUNTING_WORK = {"native": 0.0, "threads": 2e-5}
"""Seconds each step of the counting FMUs waits, by pool: the caller of a batch would take jobs that do not wait all
by itself before a Python pool thread got the GIL."""


def counting_system(path: Path, work: float, **first: Any) -> System:
    """FMUs ``x' = u`` that count their steps (``steps``): ``a0``, ``a1`` drive ``b0``-``b4``, ``b0`` and ``b1`` drive
    them back (oscillators); under Gauss-Seidel two priority levels, batches of 2 and 5 FMUs alternating. *first*:
    parameters of ``a0``. Each step waits *work* seconds."""
    system = System("counting")
    for k in range(2):
        system.add_component(fmu(f"a{k}", path, work=work, **(first if k == 0 else {})))
    for k in range(5):
        system.add_component(fmu(f"b{k}", path, work=work))
        system.connect(f"a{k % 2}.x -> b{k}.u", scale=1.0 + k / 4, convert_units=False)
    for k in range(2):
        system.connect(f"b{k}.x -> a{k}.u", scale=-1.0 - k, convert_units=False)
    return system


def assert_each_step_counted_once(result: Any) -> None:
    """Every FMU's ``steps`` output, recorded at each communication point, counts the steps up to it: 0, 1, 2, ..."""
    counts = {comp: arrays for (comp, port), arrays in recorded(result).items() if port == "steps"}
    assert sorted(counts) == ["a0", "a1", "b0", "b1", "b2", "b3", "b4"]
    for comp, (times, steps, _) in counts.items():
        assert np.array_equal(steps, np.arange(len(times))), comp


@pytest.mark.parametrize(("discards", "steps"), [
    pytest.param(False, 2000, id="steps"),
    pytest.param(True, 2000, id="discards"),
    pytest.param(False, 20_000, id="many-steps", marks=pytest.mark.slow),
])
@pytest.mark.parametrize("name", ["gauss_seidel", "jacobi"])
def test_parallel_fmus_take_each_step_exactly_once(
    name: str, discards: bool, steps: int, fmus: dict[str, Path], always_parallel: list[tuple[int, int]],
    pool_kind: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FMUs that count their steps, stepped in parallel in batches of 2 and 5 (Gauss-Seidel's two levels) or 7
    (Jacobi's one), record bitwise what serial stepping records, and each takes one step per macro step. With
    *discards*, ``a0`` ends the step from 0.5 early: that macro step is cut in two (one step more for every FMU),
    and the steps taken alongside ``a0`` after it in plan order are undone, each once (the count is part of the
    FMU state, so an undone step is uncounted)."""
    if pool_kind == "threads":  # the many steps hunt rare races of the native claim word; Python threads claim
        steps = min(steps, 4000)  # under a lock, and each of their steps waits 20 µs
    undone: list[str] = []
    undo = FMUCStep.undo
    monkeypatch.setattr(FMUCStep, "undo", lambda self: (undone.append(self.comp.name), undo(self))[1])
    dt = 1.0 / steps
    first = {"t_discard": 0.5 + dt / 2} if discards else {}
    system = counting_system(fmus["discard"], COUNTING_WORK[pool_kind], **first)
    try:
        reference = system.run(0.0, 1.0, dt, master=MASTERS[name]())
    finally:
        system.free()
    system = counting_system(fmus["discard"], COUNTING_WORK[pool_kind], **first)
    try:
        result = system.run(0.0, 1.0, dt, master=MASTERS[name](parallel=3))
    finally:
        system.free()
    (pooled, alive), = always_parallel
    assert pooled > 0 and alive == 0
    assert_each_step_counted_once(result)
    times, counts, _ = recorded(result)["a0", "steps"]
    assert len(times) == steps + 1 + discards and counts[-1] == steps + discards
    assert_bitwise_equal(result, reference)
    if not discards:
        assert undone == [] and result.stats.parallel_steps == 7 * steps
    else:
        assert undone == (["a1", "b0", "b1", "b2", "b3", "b4"] if name == "jacobi" else ["a1"])


@pytest.mark.parametrize("name", ["jacobi", "gauss_seidel", "hybrid"])
def test_fmi3_fmus_that_return_early_step_in_parallel_to_the_same_bits(
    name: str, tmp_path_factory: pytest.TempPathFactory, always_parallel: list[tuple[int, int]]
) -> None:
    """FMI 3.0 balls with different restitutions return early at their impacts (fmi3DoStep on the pool's threads)."""
    path = builders.bouncing_ball3(tmp_path_factory.mktemp("fmi3-parallel"))

    def system() -> System:
        system = System("balls")
        for k, e in enumerate((0.7, 0.6, 0.5)):
            system.add_component(fmu(f"b{k}", path, e=e))
        return system

    reference = run(system(), MASTERS[name]())
    result = run(system(), MASTERS[name](parallel=2))
    assert_bitwise_equal(result, reference)
    assert result.stats.parallel_steps > 0
    assert {comp for _, comp, _ in result.events} == {"b0", "b1", "b2"}  # every ball's impacts, cut and handled
    assert [alive for _, alive in always_parallel] == [0]


@pytest.mark.parametrize("spin", [0.0, 10.0], ids=["blocking", "polling"])
def test_threads_that_block_and_threads_that_poll_step_the_same_bits(
    spin: float, fmus: dict[str, Path], always_parallel: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool thread waiting for a batch blocks at once, or polls through the whole run (and still ends)."""
    reference = run(mixed_system(fmus, discards=True), Jacobi())
    monkeypatch.setattr(parallel, "SPIN_S", spin)
    result = run(mixed_system(fmus, discards=True), Jacobi(parallel=2))
    (pooled, alive), = always_parallel
    assert pooled > 0 and alive == 0
    assert_bitwise_equal(result, reference)


@pytest.mark.parametrize("name", ["jacobi", "gauss_seidel", "hybrid"])
def test_an_fmu_without_fmu_state_steps_on_the_main_thread_where_it_cannot_be_undone(
    name: str, fmus: dict[str, Path], always_parallel: list[tuple[int, int]]
) -> None:
    reference = run(mixed_system(fmus, discards=False, passive=True), MASTERS[name]())
    master = MASTERS[name](parallel="threads")
    result = run(mixed_system(fmus, discards=False, passive=True), master)
    assert_bitwise_equal(result, reference)
    assert result.stats.parallel_steps > 0


def test_jacobi_batches_every_fmu_and_snapshots_those_after_the_first_that_may_discard(
    fmus: dict[str, Path],
) -> None:
    system = mixed_system(fmus, discards=False, passive=True)
    master = Jacobi(parallel=2)
    system.initialize(0.0, master)
    try:
        compiled = system.master_run
        segments = parallel.split_plan(compiled.schedule.stepping_plan(compiled._step_order(), fresh=False)[0])
    finally:
        system.free()
    (steps, batch), = segments
    names = [c.name for c, _, _ in steps]
    assert names[:4] == ["f1", "f2", "f3", "p"]  # Jacobi steps the FMUs that may end a step early first
    assert [names[i] for i in batch.pooled] == ["f1", "f2", "f3", "g"]  # p cannot be restored: main thread
    assert [names[i] for i in batch.speculative] == ["f2", "f3", "g"]


def test_gauss_seidel_batches_hold_no_fresh_link_between_their_members(fmus: dict[str, Path]) -> None:
    system = mixed_system(fmus, discards=False)
    master = GaussSeidel(parallel=2)
    system.initialize(0.0, master)
    try:
        compiled = system.master_run
        segments = parallel.split_plan(compiled.schedule.stepping_plan(compiled.order, fresh=True)[0])
        levels = system.analysis.levels
    finally:
        system.free()
    assert [c.name for steps, _ in segments for c, _, _ in steps] == system.analysis.order
    level = {name: k for k, names in enumerate(levels) for name in names}
    assert [[c.name for c, _, _ in steps] for steps, batch in segments if batch is not None] == [["f1", "f2", "f3"]]
    for steps, batch in segments:
        if batch is None:
            continue
        members = {id(p) for c, _, _ in steps for p in c.outputs.values()}
        assert not any(id(src) in members for _, _, fresh in steps for _, src, _, _, _ in fresh)
        assert len({level[c.name] for c, _, _ in steps}) == 1  # within one priority level
        assert len(batch.pooled) >= 2


# ---------------------------------------------------------------------------- failures
def failing_config(fmu_path: Path, master: str, parallel_setting: Any) -> dict[str, Any]:
    """Two feedthrough FMUs, both failing the first step they take with u = 6 > u_max = 5, and a Python ramp."""
    fmu_params = {"path": str(fmu_path), "u_max": 5.0}
    return {
        "name": "failing",
        "run": {"t0": 0.0, "tf": 1.0, "dt": 0.1},
        "components": {
            "ramp": {"type": "ramp", "params": {"slope": 10.0, "unit": "N"}},
            "a": {"type": "fmu", "params": fmu_params},
            "b": {"type": "fmu", "params": fmu_params},
        },
        "connections": ["ramp.y -> a.u", "ramp.y -> b.u"],
        "master": {"name": master, "parallel": parallel_setting},
    }


@pytest.mark.parametrize("master", ["jacobi", "gauss_seidel", "hybrid"])
def test_a_failing_threaded_step_fails_the_run_as_serial_stepping_does(
    master: str, fmus: dict[str, Path], tmp_path: Path, always_parallel: list[tuple[int, int]], pool_kind: str
) -> None:
    outcomes = {}
    for setting in (False, 2):
        outcome = run_experiment(failing_config(fmus["feedthrough"], master, setting), tmp_path / str(setting))
        with h5py.File(outcome.path) as f:
            outcomes[setting] = (outcome.status, outcome.failed_at, type(outcome.cause), str(outcome.cause),
                                 f.attrs["status"], f.attrs["error"])
            assert f["stats"].attrs["parallel_threads"] == (setting or 1)
            assert f["stats"].attrs["parallel_pool"] == (pool_kind if setting else "none")
    assert outcomes[2] == outcomes[False]
    status, _, cause, _, file_status, error = outcomes[2]
    assert (status, file_status, cause) == ("failed", "failed", FMUError)  # exit status 1
    assert error.startswith("FMUError: FMU component 'a' (feedthrough.fmu): fmi2DoStep from t=")
    assert "returned fmi2Discard" in error  # both fail: the first in plan order is the one reported
    assert [alive for _, alive in always_parallel] == [0]


def test_an_exception_ending_a_parallel_step_is_raised_as_it_is_the_first_in_plan_order(
    fmus: dict[str, Path], always_parallel: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not an FMU's error: any exception, raised with its type, message and traceback, the first in plan order."""
    stepped = FMUComponent._stepped

    def failing(self: FMUComponent, t: float) -> None:
        if self.name != "a" and t >= 0.4 - 1e-12:
            raise ZeroDivisionError(f"{self.name} at t={t:.3g}")
        stepped(self, t)

    monkeypatch.setattr(FMUComponent, "_stepped", failing)
    errors = []
    for setting in (False, 3):
        system = System("s")
        for name in ("a", "b", "c"):
            system.add_component(fmu(name, fmus["discard"], work=WORK))
        with pytest.raises(ZeroDivisionError) as info:
            run(system, Jacobi(parallel=setting))
        errors.append(str(info.value))
        assert info.value.__traceback__ is not None
    assert errors == ["b at t=0.4"] * 2
    (pooled, alive), = always_parallel
    assert pooled > 0 and alive == 0


def test_an_interrupt_during_parallel_steps_ends_the_run_once_they_are_done(
    fmus: dict[str, Path], pools: list[tuple[int, int]]
) -> None:
    """Ctrl-C while the pool's threads step: the run ends interrupted, with every step of the batch finished."""
    system = System("s")
    for name in ("a", "b"):
        system.add_component(fmu(name, fmus["discard"], work=0.02))
    timer = threading.Timer(0.15, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            system.run(0.0, 10.0, DT, master=Jacobi(parallel=2))
        a, b = (system.components[n] for n in ("a", "b"))
        assert 0.0 < a.t < 10.0 and abs(a.t - b.t) <= DT + 1e-12  # ended mid-run, within the step it was in
        (_, alive), = pools
        assert alive == 0
    finally:
        timer.cancel()
        system.free()


COUNTING_STEP = """
#define _POSIX_C_SOURCE 199309L
#include <stdatomic.h>
#include <time.h>

/* fmi2DoStep's signature: counts its calls in the 64-bit counter that `instance` points to, then waits h s. */
int counting_step(void *instance, double t, double h, int no_prior)
{
    (void)t; (void)no_prior;
    atomic_fetch_add((_Atomic long long *)instance, 1);
    if (h > 0.0) {
        struct timespec pause = {0, (long)(h * 1e9)};
        nanosleep(&pause, NULL);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def counting_step(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, int]:
    """The library of :data:`COUNTING_STEP`, compiled here, and the address of its step function."""
    import fmpy

    directory = tmp_path_factory.mktemp("counting-step")
    source, library = directory / "counting.c", directory / f"counting{fmpy.sharedLibraryExtension}"
    source.write_text(COUNTING_STEP)
    subprocess.run([find_c_compiler(), "-shared", "-fPIC", "-O2", "-std=c11", "-o", str(library), str(source)],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(library))
    return lib, ctypes.cast(lib.counting_step, ctypes.c_void_p).value


POOL_TYPES = {"native": fmi_pool._cpool.Pool if fmi_pool._cpool else None, "threads": ThreadPool}


@pytest.fixture(params=fmi_pool.KINDS)
def pool_type(request: pytest.FixtureRequest) -> Any:
    """The class of the native pool, or of the Python threads' pool (:class:`~cosimrun.fmi.pool.ThreadPool`)."""
    assert POOL_TYPES[request.param] is not None, f"the native pool is {fmi_pool.NATIVE_MISSING}"
    return POOL_TYPES[request.param]


WAITING_BATCHES = 20
"""Batches at the end of :func:`alternating_batches` whose jobs wait 1 ms: the pool's threads take some of them (the
caller of a batch takes all jobs that do not wait before a Python pool thread gets the GIL)."""


def alternating_batches(pool_type: Any, step: int, batches: int, threads: int,
                        spin_us: float) -> tuple[list[int], list[int], int]:
    """*batches* batches of 2 and 5 jobs alternating (a Gauss-Seidel plan of two levels), each job calling *step*
    with its own counter, on a pool of *threads* threads, then :data:`WAITING_BATCHES` more: the calls each job
    made, each job's status and how many jobs the pool's threads ran."""
    counters = (ctypes.c_int64 * 7)()
    jobs = [CStepJob(step=step, instance=ctypes.addressof(counters) + 8 * k, version=2, status=-7) for k in range(7)]
    first = (ctypes.c_void_p * 2)(*(ctypes.addressof(j) for j in jobs[:2]))
    second = (ctypes.c_void_p * 5)(*(ctypes.addressof(j) for j in jobs[2:]))
    pool = pool_type(threads, spin_us)
    try:
        run, first_at, second_at = pool.run, ctypes.addressof(first), ctypes.addressof(second)
        for _ in range(batches // 2):
            run(first_at, 2)
            run(second_at, 5)
        for job in jobs:
            job.h = 1e-3
        for _ in range(WAITING_BATCHES // 2):
            run(first_at, 2)
            run(second_at, 5)
    finally:
        pool.close()
    return list(counters), [j.status for j in jobs], pool.pooled


POOLS = pytest.mark.parametrize(("threads", "spin_us"), [(1, 200.0), (3, 0.0)], ids=["polling", "blocking"])
"""A pool thread that polls for the next batch, and three (more than the cores of a small machine) that block."""


@POOLS
def test_the_pools_run_each_job_exactly_once_in_batches_of_alternating_sizes(
    pool_type: Any, threads: int, spin_us: float, counting_step: tuple[ctypes.CDLL, int]
) -> None:
    """C steps that count their calls: a thread that read the claim word of a finished batch of 2 must not take
    jobs 2-4 of the next batch of 5 (with the next batch's count, as it could), nor any job twice."""
    batches = 20_000
    calls, statuses, pooled = alternating_batches(pool_type, counting_step[1], batches, threads, spin_us)
    assert calls == [(batches + WAITING_BATCHES) // 2] * 7
    assert statuses == [0] * 7 and pooled > 0


@pytest.mark.slow
@POOLS
@pytest.mark.parametrize("pool_type", [POOL_TYPES["native"]], ids=["native"])
def test_the_pools_run_each_job_exactly_once_in_a_million_batches(
    pool_type: Any, threads: int, spin_us: float, counting_step: tuple[ctypes.CDLL, int]
) -> None:
    """The same over 10^6 batches: a race that hits one batch in 10^5 shows here in every run. The native pool
    only: it claims jobs with one atomic word, where such a race can hide; Python threads claim under a lock."""
    batches = 1_000_000
    calls, statuses, pooled = alternating_batches(pool_type, counting_step[1], batches, threads, spin_us)
    assert calls == [(batches + WAITING_BATCHES) // 2] * 7
    assert statuses == [0] * 7 and pooled > 0


def test_a_batch_holds_at_most_max_jobs(
    fmus: dict[str, Path], pool_type: Any, always_parallel: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool refuses a larger batch in one line; a plan level with more FMUs steps the rest on the main thread."""
    assert MAX_JOBS == RUNNER.max_jobs == 0xFFFF  # count and next job have 16 bits each in the native claim word
    pool = pool_type(1)
    addresses = (ctypes.c_void_p * 1)()
    try:
        with pytest.raises(ValueError, match=r"^count 65536 out of range: a batch holds 0 to 65535 jobs \(MAX_JOBS\)$"):
            pool.run(ctypes.addressof(addresses), MAX_JOBS + 1)
    finally:
        pool.close()
    monkeypatch.setattr(RUNNER, "max_jobs", 2)
    master = Jacobi(parallel=2)
    system = mixed_system(fmus, discards=True)
    system.initialize(0.0, master)
    try:
        compiled = system.master_run
        (steps, batch), = parallel.split_plan(compiled.schedule.stepping_plan(compiled._step_order(), fresh=False)[0])
    finally:
        system.free()
    assert [steps[i][0].name for i in batch.pooled] == ["f1", "f2"]  # f3 and g step on the main thread
    reference = run(mixed_system(fmus, discards=True), Jacobi())
    assert_bitwise_equal(run(mixed_system(fmus, discards=True), Jacobi(parallel=2)), reference)
    (pooled, alive), = always_parallel
    assert pooled > 0 and alive == 0


def test_the_pools_run_every_job_of_every_batch_once(pool_type: Any) -> None:
    """Many short batches in a row, more jobs than threads: each job runs once, some on the pool's threads."""
    jobs = [CStepJob(version=0) for _ in range(5)]
    addresses = (ctypes.c_void_p * 5)(*(ctypes.addressof(j) for j in jobs))
    pool = pool_type(2, 50.0)
    seen: set[int] = set()
    try:
        for batch in range(20000):
            count = 1 + batch % 5
            for job in jobs:
                job.thread, job.status = -1, -7
            pool.run(ctypes.addressof(addresses), count)
            assert [j.status for j in jobs[:count]] == [0] * count
            assert all(j.status == -7 for j in jobs[count:])
            seen.update(j.thread for j in jobs[:count])
        assert seen <= {0, 1, 2} and 0 in seen
    finally:
        pool.close()
    assert pool.alive == 0
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(ctypes.addressof(addresses), 1)
    if pool_type is not ThreadPool:
        assert (ctypes.sizeof(CStepJob), MAX_JOBS) == (fmi_pool._cpool.JOB_SIZE, fmi_pool._cpool.MAX_JOBS)


# ---------------------------------------------------------------------------- settings
@pytest.mark.parametrize(("value", "message"), [
    (0, "0 is not valid"),
    ("abc", "'abc' is not valid"),
    ("thread", "'thread' is not valid; did you mean 'threads'?"),
    (True, "True is not valid"),
    (1.5, "1.5 is not valid"),
])
def test_an_invalid_parallel_setting_is_one_config_error_naming_the_key(value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_master({"name": "jacobi", "parallel": value})
    assert str(info.value) == f"master.parallel: {message} (valid: false, threads or an integer >= 1)"
    assert info.value.key == "master.parallel" and "\n" not in str(info.value)
    assert info.value.suggestion == ("threads" if value == "thread" else None)


def test_parallel_settings_and_thread_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert [thread_count(v) for v in (False, 1, 4, "threads")] == [1, 1, 4, 6]
    for name in ("jacobi", "gauss_seidel", "ijcsa", "hybrid"):
        assert build_master({"name": name, "parallel": "threads"}).parallel == "threads"
        assert build_master({"name": name}).parallel is False


# ---------------------------------------------------------------------------- statistics and the policy
def test_stats_say_how_much_of_the_stepping_ran_in_parallel_and_on_which_pool(
    fmus: dict[str, Path], always_parallel: list[tuple[int, int]], pool_kind: str
) -> None:
    system = System("s")
    system.add_component(Spring("s1"))
    for name in ("a", "b", "c"):
        system.add_component(fmu(name, fmus["discard"]))
    system.connect("s1.v -> a.u")
    result = run(system, Jacobi(parallel=2))
    stats = result.stats.as_dict()
    steps = round(TF / DT)
    assert stats["parallel_threads"] == 2 and stats["plan_steps"] == 4 * steps
    assert stats["parallel_steps"] == 3 * steps and stats["parallel_fraction"] == 0.75
    assert stats["parallel_pool"] == pool_kind
    off = run(mixed_system(fmus, discards=False), Jacobi()).stats.as_dict()
    assert (off["parallel_threads"], off["parallel_steps"], off["parallel_fraction"]) == (1, 0, 0.0)
    assert off["parallel_pool"] == "none"


def test_a_batch_steps_in_parallel_only_while_that_is_measured_faster() -> None:
    def steps(batch: parallel.Batch, serial: float, concurrent: float, n: int) -> list[bool]:
        """*n* choices, each step measured (when timed) as taking *serial* or *concurrent* seconds."""
        choices = []
        for _ in range(n):
            choices.append(batch.parallel_now())
            if batch.timed:
                batch.measured(choices[-1], concurrent if choices[-1] else serial)
        return choices

    window, timed = parallel.WINDOW, parallel.TIMED
    probes = timed // 2  # the timed steps taken the slower way, per window
    short = parallel.Batch([], RUNNER, [], [0, 1], [])
    assert not any(steps(short, parallel.MIN_BATCH_S / 2, 0.0, 3 * window))  # too short to gain: never tried
    batch = parallel.Batch([], RUNNER, [], [0, 1], [])
    choices = steps(batch, 1e-3, 0.6e-3, 31 * window)
    assert choices[:timed + 1] == [False, True] * probes + [True]  # each way timed alternately, then the faster
    assert choices[window:window + timed + 1] == [False, True] * probes + [True]  # again at the next window
    assert choices.count(False) == 5 * probes  # windows of 100, 200, 400, 800, 1600 steps: probes cost little
    choices = steps(batch, 1e-3, 1.5e-3, 2 * parallel.MAX_WINDOW)  # parallel became slower: seen at a window's end
    assert (batch.serial_s, batch.parallel_s) == (1e-3, 1.5e-3)
    assert choices[-window:].count(True) <= probes
    noisy = parallel.Batch([], RUNNER, [], [0, 1], [])  # one-sided noise: the least time of a window counts
    choices = []
    for k in range(3 * window):
        choices.append(noisy.parallel_now())
        noisy.measured(choices[-1], (0.6e-3 if k % 2 else 5e-3) if choices[-1] else 1e-3)
    assert noisy.parallel_s == 0.6e-3 and choices.count(False) == 2 * probes
    late = parallel.Batch([], RUNNER, [], [0, 1], [])  # the first parallel step waited for a thread to wake up
    samples = iter([1e-3, 2e-3, 0.6e-3, 0.6e-3])
    choices = []
    for _ in range(window):
        choices.append(late.parallel_now())
        if late.timed:
            late.measured(choices[-1], next(samples))
    assert choices[:timed] == [False, True, True, True]  # the faster sample of the window counts at once
    assert all(choices[timed:]) and late.parallel_s == 0.6e-3
    # serial faster; a later window opens with one noisy serial sample
    steady = parallel.Batch([], RUNNER, [], [0, 1], [])
    samples = iter([1e-3, 2e-3, 1e-3, 2e-3] + [2e-3, 5e-3, 2e-3, 1e-3])
    choices = []
    for _ in range(2 * window):
        choices.append(steady.parallel_now())
        if steady.timed:
            steady.measured(choices[-1], next(samples))
    assert choices[window:window + timed] == [True, False, True, False]  # the probes, then the faster way
    assert not any(choices[window + timed:]) and (steady.serial_s, steady.parallel_s) == (1e-3, 2e-3)


def test_a_slow_batch_ends_up_on_the_threads_by_itself(fmus: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without forcing: the stepper times a batch's first steps each way, and a batch measured faster on the threads
    steps there from then on but for its probes. The times the policy receives are those of a machine with a core
    free for each thread (serial: the two FMUs' work one after the other; parallel: side by side), so that a
    loaded machine decides the same; whether threads are faster in fact is measured by benchmarks/bench_parallel.py.
    """
    timed: list[tuple[bool, float]] = []
    measured = parallel.Batch.measured

    def as_on_free_cores(self: parallel.Batch, concurrent: bool, seconds: float) -> None:
        timed.append((concurrent, seconds))
        measured(self, concurrent, 2e-3 if concurrent else 4e-3)

    monkeypatch.setattr(parallel.Batch, "measured", as_on_free_cores)
    system = System("s")
    for name in ("a", "b"):
        system.add_component(fmu(name, fmus["discard"], work=WORK))
    result = run(system, Jacobi(parallel=2))
    probes = parallel.TIMED // 2
    assert [way for way, _ in timed] == [False, True] * probes and all(seconds > 0 for _, seconds in timed)
    assert result.stats.parallel_steps == 2 * (round(TF / DT) - probes)  # all but the first step and a probe


# ---------------------------------------------------------------------------- without the native pool
def two_fmus(fmus: dict[str, Path]) -> System:
    system = System("pair")
    for name in ("a", "b"):
        system.add_component(fmu(name, fmus["discard"], work=WORK))
    return system


@pytest.mark.parametrize(("value", "message", "suggestion"), [
    ("thread", "'thread' is not valid; did you mean 'threads'? (valid: native or threads)", "threads"),
    ("c", "'c' is not valid (valid: native or threads)", None),
    ("native", "the native pool (cosimrun.fmi._cpool) is not built", None),
])
def test_a_bad_pool_choice_fails_the_run_in_one_line_naming_the_variable(
    value: str, message: str, suggestion: str | None, fmus: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_POOL, value)
    monkeypatch.setattr(fmi_pool, "NATIVE_MISSING", "not built")
    monkeypatch.setattr(parallel.Batch, "parallel_now", lambda self: True)
    with pytest.raises(ConfigError) as info:
        run(two_fmus(fmus), Jacobi(parallel=2))
    assert str(info.value) == f"COSIMRUN_PARALLEL_POOL: {message}"
    assert (info.value.key, info.value.suggestion) == (ENV_POOL, suggestion)


def test_without_the_native_pool_parallel_steps_run_on_python_threads_with_one_notice(
    fmus: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset, the choice falls back to the Python threads when the extension is missing; one notice per process."""
    monkeypatch.delenv(ENV_POOL, raising=False)
    monkeypatch.setattr(parallel.Batch, "parallel_now", lambda self: True)
    closed = record_pools(monkeypatch, "threads")
    monkeypatch.setattr(fmi_pool, "NATIVE_MISSING", "not built")
    monkeypatch.setattr(fmi_pool, "_cpool", None)
    monkeypatch.setattr(fmi_pool, "_told", False)
    reference = run(mixed_system(fmus, discards=True), Jacobi())
    with pytest.warns(UserWarning) as notices:
        results = [run(mixed_system(fmus, discards=True), Jacobi(parallel=2)) for _ in range(2)]
    assert [str(w.message) for w in notices if "native pool" in str(w.message)] == [
        "the native pool (cosimrun.fmi._cpool) is not built: parallel FMU steps run on Python threads, with slower "
        "hand-offs (reinstall cosimrun with a C compiler to build it)"]
    for result in results:
        assert_bitwise_equal(result, reference)
        assert result.stats.parallel_pool == "threads" and result.stats.parallel_steps > 0
    assert len(closed) == 2 and all(pooled > 0 and alive == 0 for pooled, alive in closed)


UNBUILT = """
import importlib.abc, sys

class Unbuilt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "cosimrun.fmi._cpool":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Unbuilt())
import json, warnings
from cosimrun.components.fmu import FMUComponent
from cosimrun.fmi import pool
from cosimrun.masters import Jacobi, parallel
from cosimrun.system import System

parallel.Batch.parallel_now = lambda self: True
runs = []
with warnings.catch_warnings(record=True) as notices:
    warnings.simplefilter("always")
    for setting in (False, 2, 2):
        system = System("pair")
        for name in ("a", "b"):
            comp = FMUComponent(name)
            comp.set_parameters(path=sys.argv[1], t_discard=0.55, start={"u": 0.3 if name == "a" else -0.7})
            system.add_component(comp)
        try:
            result = system.run(0.0, 1.0, 0.1, master=Jacobi(parallel=setting))
        finally:
            system.free()
        x = result.history.get_component_history("b").get_port_history("x")
        runs.append([result.stats.parallel_pool, result.stats.parallel_steps, x.slice(0, len(x))[1].tolist()])
print(json.dumps({"missing": pool.NATIVE_MISSING, "runs": runs, "notices": [str(w.message) for w in notices]}))
"""


def test_an_install_without_the_extension_steps_fmus_in_parallel_on_python_threads(
    fmus: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh process in which ``cosimrun.fmi._cpool`` cannot be found (not built): same values, ``threads``, and
    one notice over two parallel runs."""
    monkeypatch.delenv(ENV_POOL, raising=False)
    done = subprocess.run([sys.executable, "-c", UNBUILT, str(fmus["discard"])], capture_output=True, text=True,
                          check=True)
    out = json.loads(done.stdout)
    assert out["missing"] == "not built"
    (serial, steps, values), *threaded = out["runs"]
    assert (serial, steps) == ("none", 0) and len(values) == 12  # 10 steps, one of them cut at 0.55
    assert values[-1] == pytest.approx(1.0 - 0.7 * 1.0, abs=1e-12)  # x' = u from x = 1
    assert threaded[0][1] > 0 and threaded == [["threads", threaded[0][1], values]] * 2
    assert [n for n in out["notices"] if "native pool" in n] == [
        "the native pool (cosimrun.fmi._cpool) is not built: parallel FMU steps run on Python threads, with slower "
        "hand-offs (reinstall cosimrun with a C compiler to build it)"]


def test_the_extension_is_optional_a_build_without_a_c_compiler_skips_it_with_one_warning(tmp_path: Path) -> None:
    """The ``ext-modules`` entry of pyproject.toml, built by setuptools with ``CC=/bin/false``: the build succeeds
    without the extension, saying so in one line."""
    root = Path(__file__).resolve().parents[2]
    (entry,) = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    assert entry["name"] == "cosimrun.fmi._cpool" and entry["optional"] is True
    arguments = {key.replace("-", "_"): value for key, value in entry.items()}
    source = tmp_path / "src"  # the sources alone: this setuptools is not the one pyproject.toml asks for
    for path in entry["sources"]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_bytes((root / path).read_bytes())
    script = ("import sys, setuptools; setuptools.setup(name='cpool', ext_modules=[setuptools.Extension(**eval("
              "sys.argv[1]))], script_args=['-q', 'build_ext', '-b', sys.argv[2], '-t', sys.argv[2]])")
    done = subprocess.run([sys.executable, "-c", script, repr(arguments), str(tmp_path / "build")], cwd=source,
                          env={**os.environ, "CC": "/bin/false"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    failed = [line for line in (done.stdout + done.stderr).splitlines() if "_cpool" in line]
    assert len(failed) == 1 and 'building extension "cosimrun.fmi._cpool" failed' in failed[0]
    assert not list(tmp_path.rglob("_cpool*.so")) and not list(tmp_path.rglob("_cpool*.pyd"))


@pytest.mark.parametrize("module", [parallel, cstep], ids=lambda m: m.__name__)
def test_the_parallel_stepper_and_the_c_step_protocol_import_nothing_of_fmi(module: Any) -> None:
    """The stepper gets its pools from the C steps' runners: neither it nor the protocol imports the FMI code."""
    imported = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.ImportFrom):
            imported.update([node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names])
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    fmi = re.compile(r"fmi|fmu|fmpy|_cpool|StepDiscarded|cosimrun\.components", re.IGNORECASE)
    assert imported and not [name for name in imported if fmi.search(name)]
