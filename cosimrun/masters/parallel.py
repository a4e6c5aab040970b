"""Parallel stepping (the masters' ``parallel`` setting): independent components of a stepping plan step at once.

A stepping plan (:meth:`~cosimrun.masters.base.Master.stepping_plan`) is cut
into *batches*: runs of consecutive entries none of which reads a fresh output
of another entry of the same run. Under Jacobi that is the whole plan; under
Gauss-Seidel and the hybrid master's trial plan, which follow the priority
order, it is (at most) the components of one priority level. In a batch, the
components that declare :attr:`~cosimrun.core.component.CoSimComponent.steps_in_parallel`
(FMUs: their C step releases the GIL) step concurrently on the run's threads,
the main thread among them; the others step on the main thread, in plan order,
after them.

**Bitwise the same as serial stepping.** The fresh reads and input pushes of
a whole batch are done first, on the main thread and in plan order; no member
reads what another one writes, so every component computes exactly what it
computes serially. Serially, a step that fails or ends early
(:class:`~cosimrun.errors.StepDiscarded`) stops the plan there; in parallel,
every step of the batch is waited for, then the outcomes are taken in plan
order: the first failure is raised as it is (type, message, traceback), and the
main-thread components after it are not stepped. A component stepped
concurrently *after* an FMU that may end its step early is speculative: the
thread that steps it snapshots it first, and it is restored when that FMU does
end the step early, so the components after the FMU are where serial stepping
leaves them (unstepped) and the master's cut works as it does serially. Only
components that can always roll back step speculatively; others after such an
FMU step on the main thread, once the FMUs before them have finished. What a
speculative step leaves besides its state (an FMU's log messages) stays. The
pool threads are started by the main thread, whose floating-point environment
they inherit, and :meth:`ParallelStepper.close` joins them when the run ends,
however it ends.

**Hand-offs.** The main thread and the pool threads take the pooled
components of a batch one at a time from one shared iterator, so the main
thread steps its share instead of waiting idle, and a batch costs one hand-off
to each pool thread it needs and one wait for each one's end. A waiting thread
(a pool thread between batches, the main thread for a batch's end) polls for
up to :data:`SPIN_S`, yielding its core and the GIL in between, before it
blocks: waking a blocked thread costs 40-90 µs on a small cloud VM, and the
next macro step usually hands over its batch well within that time. What
remains per batch is the GIL: a pool thread needs it for the Python part of
each step, and a thread waiting for the GIL sleeps, so a batch still costs
about one wake-up more than its longest share.

**When it pays off.** Every batch measures its wall time both ways and steps
in parallel only while that is the faster way. The first :data:`TIMED` steps
of a window are timed, taken alternately the way judged slower and the way
judged faster; each way's time is the least of its samples in the window
(noise only adds time), taken once they are all in (in the first window, at
once). A window that does not change the faster way makes the next one twice
as long (up to :data:`MAX_WINDOW` steps), so probing a way that does not pay
costs next to nothing. A batch whose serial step takes less than
:data:`MIN_BATCH_S` cannot gain and always steps serially.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from cosimrun.core.component import CoSimComponent
from cosimrun.errors import StepDiscarded
from cosimrun.masters.base import MasterStats, Step, may_discard, step_serially

MIN_BATCH_S = 30e-6
"""A batch whose serial step takes less than this (seconds) always steps serially."""
WINDOW = 100
"""Steps of a batch's first window; its wall time each way is the least measured in a window."""
MAX_WINDOW = 1600
"""Longest window: one doubles each time the faster way stays the same."""
SPIN_S = 200e-6
"""How long a thread waiting for a batch or for its end polls before it blocks (seconds)."""
TIMED = 4
"""Steps at the start of each window that are timed, taken alternately the way judged slower (to measure it
again) and the way judged faster, so that both ways' least times come from as many samples of the same moment."""


class _ReadOnly:
    """Stands in for a component in a plan whose entries should only read their fresh links and push inputs."""

    @staticmethod
    def do_step(t: float, h: float) -> None:
        pass


_READ_ONLY = _ReadOnly()


@dataclass
class Batch:
    """Consecutive plan entries that may step concurrently, and how fast they step each way."""

    steps: list[Step]
    reads: list[Any]
    """The entries that read fresh links or push inputs, each with a no-op in place of its component."""
    pooled: list[int]
    """Positions (in ``steps``) of the components stepped concurrently."""
    speculative: list[int]
    """Positions of pooled components after the first pooled one that may end its step early: each is
    snapshotted by its thread before its step, and restored when a step before it ends early."""
    serial_s: float | None = None
    """Wall time of a serial step (seconds): the least of the last window in which it was measured."""
    parallel_s: float | None = None
    """Wall time of a parallel step, likewise."""
    timed: bool = False
    """Whether the step being taken is to be timed (:meth:`measured`)."""
    concurrent: frozenset[int] = field(init=False)
    speculative_at: frozenset[int] = field(init=False)
    snapshots: list[Any] = field(init=False)
    """The speculative components' snapshots of the step being taken, by position (taken by their threads)."""
    _phase: int = 0
    _window: int = WINDOW
    _least: list[float] = field(init=False)
    _faster_before: bool | None = None
    _first: bool = True

    def __post_init__(self) -> None:
        self.concurrent = frozenset(self.pooled)
        self.speculative_at = frozenset(self.speculative)
        self.snapshots = [None] * len(self.steps)
        self._least = [math.inf, math.inf]

    def parallel_now(self) -> bool:
        """Whether to step in parallel this time (see the module's *When it pays off*)."""
        phase = self._phase
        if phase >= self._window:
            self._next_window()
            phase = 0
        self._phase = phase + 1
        self.timed = phase < TIMED
        serial, parallel = self.serial_s, self.parallel_s
        if serial is None or serial < MIN_BATCH_S:
            return False
        if parallel is None:
            return True
        return (parallel < serial) != (phase < TIMED and phase % 2 == 0)

    def measured(self, parallel: bool, seconds: float) -> None:
        """Note the wall time of a timed step.

        Each way's time becomes the least of its samples in the window once the
        window's timed steps are all taken, so that one noisy sample cannot
        flip the choice; in the first window, which has no times yet, at once.
        """
        way = int(parallel)
        self._least[way] = min(self._least[way], seconds)
        if self._first or self._phase >= TIMED:
            serial, parallel_s = self._least
            self.serial_s = serial if serial < math.inf else self.serial_s
            self.parallel_s = parallel_s if parallel_s < math.inf else self.parallel_s

    def _next_window(self) -> None:
        """Start a window; one after a window that did not change the faster way is twice as long."""
        faster = self._faster_way()
        self._window = min(2 * self._window, MAX_WINDOW) if self._faster_before in (None, faster) else WINDOW
        self._faster_before = faster
        self._first = False
        self._least = [math.inf, math.inf]

    def _faster_way(self) -> bool | None:
        serial, parallel = self.serial_s, self.parallel_s
        return None if serial is None or parallel is None else parallel < serial


Segment = tuple[list[Step], Batch | None]
"""Plan entries stepped serially (``None``) or a batch that may step in parallel."""


def split_plan(plan: list[Step]) -> list[Segment]:
    """Cut *plan* into batches (see the module docstring); adjacent entries that never step concurrently merge."""
    groups: list[list[Step]] = []
    outputs: set[int] = set()
    for entry in plan:
        comp, _, fresh = entry
        if not groups or any(id(src) in outputs for _, src, _, _, _ in fresh):
            groups.append([])
            outputs = set()
        groups[-1].append(entry)
        outputs.update(id(port) for port in comp.outputs.values())
    segments: list[Segment] = []
    for group in groups:
        batch = _batch(group)
        if batch is not None:
            segments.append((group, batch))
        elif segments and segments[-1][1] is None:
            segments[-1][0].extend(group)
        else:
            segments.append((list(group), None))
    return segments


def _batch(steps: list[Step]) -> Batch | None:
    """*steps* as a batch, or ``None`` when fewer than two of them can step concurrently."""
    pooled: list[int] = []
    speculative: list[int] = []
    discarding = False
    for i, (comp, _, _) in enumerate(steps):
        if not comp.steps_in_parallel:
            continue
        if discarding:
            if not comp.can_always_roll_back:
                continue
            speculative.append(i)
        pooled.append(i)
        discarding = discarding or may_discard(comp)
    if len(pooled) < 2:
        return None
    reads = [(_READ_ONLY, push, fresh) for _, push, fresh in steps if push is not None or fresh]
    return Batch(steps, reads, pooled, speculative)


def _step_one(comp: CoSimComponent, t: float, h: float) -> BaseException | None:
    """Step *comp*; its exception (any: it is raised again on the main thread), or ``None``."""
    try:
        comp.do_step(t, h)
    except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
        return exc
    return None


def _step_pooled(batch: Batch, i: int, t: float, h: float) -> BaseException | None:
    """Step the component at position *i* of *batch*, snapshotted first when it steps speculatively.

    Runs on whichever thread takes it, so the snapshots cost no main-thread
    time; a snapshot replaced here is freed here too.
    """
    comp = batch.steps[i][0]
    if i in batch.speculative_at:
        batch.snapshots[i] = None
        try:
            batch.snapshots[i] = comp.snapshot_state()
        except BaseException as exc:  # noqa: BLE001 - as a failure of its step
            return exc
    return _step_one(comp, t, h)


_yield: Callable[[], None] = getattr(os, "sched_yield", partial(time.sleep, 0))
"""Lets other ready threads run on this core, with the GIL released."""


def acquire_polling(lock: threading.Lock) -> None:
    """Acquire *lock*, waiting first up to :data:`SPIN_S` in a loop that yields the core and the GIL, then blocked.

    Waking a blocked thread costs 40-90 µs on a small cloud VM whose idle
    cores halt; a thread whose lock is released while it still polls skips that
    wake-up (it still waits for the GIL like any thread, and may sleep there).
    """
    if lock.acquire(False):
        return
    deadline = time.perf_counter() + SPIN_S
    while time.perf_counter() < deadline:
        _yield()
        if lock.acquire(False):
            return
    lock.acquire()


def _take(batch: Batch, pending: Iterator[int], outcomes: list[BaseException | None], t: float, h: float) -> None:
    """Step the pooled components of *batch* that *pending* (shared by the threads of the batch) hands out."""
    for i in pending:
        outcomes[i] = _step_pooled(batch, i, t, h)


class _Worker:
    """A pool thread: the main thread hands it a task by releasing ``todo``, it tells the end by releasing ``done``."""

    def __init__(self, name: str, errors: dict[str, str]) -> None:
        self.task: Callable[[], None] | None = None
        self.todo, self.done = threading.Lock(), threading.Lock()
        self.todo.acquire()
        self.done.acquire()
        self.thread = threading.Thread(target=self._run, args=(errors,), name=name, daemon=True)
        self.thread.start()

    def _run(self, errors: dict[str, str]) -> None:
        np.seterr(**errors)
        while True:
            acquire_polling(self.todo)
            task = self.task
            if task is None:
                return
            try:
                task()
            finally:  # the main thread waits for this whatever happens
                self.done.release()

    def start(self, task: Callable[[], None]) -> None:
        """Hand *task* to the thread."""
        self.task = task
        self.todo.release()

    def finish(self) -> None:
        """Wait until the thread has done its task."""
        acquire_polling(self.done)

    def stop(self) -> None:
        """End the thread and wait for it."""
        self.task = None
        self.todo.release()
        self.thread.join()


class ParallelStepper:
    """Steps plans for a master with ``parallel`` on, over one run: ``threads - 1`` pool threads and the main one.

    The pool threads start with the numpy error state of the thread that
    creates the stepper (a run ignores floating-point warnings) and inherit its
    floating-point environment. :meth:`close` stops and joins them; it is
    called at the end of every run, also one that failed.
    """

    def __init__(self, threads: int, stats: MasterStats) -> None:
        self.threads = threads
        self.stats = stats
        self._segments: dict[int, tuple[list[Step], list[Segment]]] = {}
        errors = np.geterr()
        self._workers = [_Worker(f"cosimrun-step-{i}", errors) for i in range(threads - 1)]
        stats.parallel_threads = threads

    def close(self) -> None:
        """Stop the pool threads, wait for them and free the batches' snapshots."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()
        self._segments.clear()

    # ------------------------------------------------------------------ stepping
    def step(self, plan: list[Step], t: float, h: float) -> None:
        """Step *plan* from *t* to *t + h* as :func:`step_serially` does, independent components concurrently."""
        cached = self._segments.get(id(plan))
        if cached is None or cached[0] is not plan:
            if len(self._segments) > 64:  # plans cut short by a discard are built afresh each time
                self._segments.clear()
            cached = self._segments[id(plan)] = (plan, split_plan(plan))
        self.stats.plan_steps += len(plan)
        for steps, batch in cached[1]:
            if batch is None:
                step_serially(steps, t, h)
                continue
            concurrent = batch.parallel_now()
            start = time.perf_counter()
            if concurrent:
                self._step_batch(batch, t, h)
                self.stats.parallel_steps += len(batch.pooled)
            else:
                step_serially(steps, t, h)
            if batch.timed:
                batch.measured(concurrent, time.perf_counter() - start)

    def _step_batch(self, batch: Batch, t: float, h: float) -> None:
        """Step *batch* with its pooled components concurrently (see the module docstring for the guarantees)."""
        steps = batch.steps
        step_serially(batch.reads, t, h)
        outcomes = self._run_pooled(batch, t, h)
        for exc in outcomes:
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM while the main thread stepped: not a failure
                raise exc
        concurrent = batch.concurrent
        for i, (comp, _, _) in enumerate(steps):
            exc = outcomes[i] if i in concurrent else _step_one(comp, t, h)
            if exc is None:
                continue
            if isinstance(exc, StepDiscarded):
                for j in batch.speculative:
                    snap = batch.snapshots[j]
                    if j > i and snap is not None:
                        steps[j][0].restore_state(snap, t)
            raise exc

    def _run_pooled(self, batch: Batch, t: float, h: float) -> list[BaseException | None]:
        """Step the pooled components of *batch* on the pool and the main thread; their exceptions by position.

        Returns only once every one of them has finished, also when the main
        thread is interrupted meanwhile.
        """
        pending = iter(batch.pooled)
        outcomes: list[BaseException | None] = [None] * len(batch.steps)
        workers = self._workers[:len(batch.pooled) - 1]
        task = partial(_take, batch, pending, outcomes, t, h)
        for worker in workers:
            worker.start(task)
        try:
            task()
        finally:
            for worker in workers:  # no component may still be stepping when the run goes on (or fails)
                worker.finish()
        return outcomes
