"""Parallel stepping (the masters' ``parallel`` setting): independent components of a stepping plan step at once.

A stepping plan (:meth:`~cosimrun.masters.base.Master.stepping_plan`) is cut
into *batches*: runs of consecutive entries none of which reads a fresh output
of another entry of the same run. Under Jacobi that is the whole plan; under
Gauss-Seidel and the hybrid master's trial plan, which follow the priority
order, it is (at most) the components of one priority level. In a batch, the
components that declare :attr:`~cosimrun.core.component.CoSimComponent.steps_in_parallel`
(FMUs: their C step releases the GIL) step concurrently on the run's threads;
the others step on the main thread, in plan order, after them.

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

**When it pays off.** Handing steps to other threads costs a thread wake-up
each way per batch (some 10 µs on a typical machine, 40 µs on a small cloud VM),
so every batch measures its wall time both ways and steps in parallel only
while that is the faster way. The first :data:`TIMED` steps of a window are
timed, taken alternately the way judged slower and the way judged faster;
each way's time is the least of its samples (noise only adds time). A window that
changes nothing makes the next one twice as long (up to :data:`MAX_WINDOW`
steps), so probing a way that does not pay costs next to nothing. A batch
whose serial step takes less than :data:`MIN_BATCH_S` cannot gain and always
steps serially.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass, field
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
        """Note the wall time of a timed step (the first of each way counts at once)."""
        way = int(parallel)
        self._least[way] = min(self._least[way], seconds)
        if parallel and self.parallel_s is None:
            self.parallel_s = seconds
        elif not parallel and self.serial_s is None:
            self.serial_s = seconds

    def _next_window(self) -> None:
        """Take each way's least time of the window that ends; a window that changed nothing makes the next longer."""
        before = self._faster_way()
        serial, parallel = self._least
        self.serial_s = serial if serial < math.inf else self.serial_s
        self.parallel_s = parallel if parallel < math.inf else self.parallel_s
        self._least = [math.inf, math.inf]
        self._window = min(2 * self._window, MAX_WINDOW) if self._faster_way() == before else WINDOW

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
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        errors = np.geterr()
        self._workers = [threading.Thread(target=self._work, args=(errors,), name=f"cosimrun-step-{i}", daemon=True)
                         for i in range(threads - 1)]
        for worker in self._workers:
            worker.start()
        stats.parallel_threads = threads

    def close(self) -> None:
        """Drop any step not started, stop the pool threads, wait for them and free the batches' snapshots."""
        while True:
            try:
                self._tasks.get_nowait()
            except queue.Empty:
                break
        for _ in self._workers:
            self._tasks.put(None)
        for worker in self._workers:
            worker.join()
        self._workers = []
        self._segments.clear()

    def _work(self, errors: dict[str, str]) -> None:
        np.seterr(**errors)
        tasks = self._tasks
        while True:
            task = tasks.get()
            if task is None:
                return
            batch, i, t, h, done = task
            done.put((i, _step_pooled(batch, i, t, h)))

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
        for exc in outcomes.values():
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM while the main thread stepped: not a failure
                raise exc
        concurrent = batch.concurrent
        for i, (comp, _, _) in enumerate(steps):
            exc = outcomes.get(i) if i in concurrent else _step_one(comp, t, h)
            if exc is None:
                continue
            if isinstance(exc, StepDiscarded):
                for j in batch.speculative:
                    snap = batch.snapshots[j]
                    if j > i and snap is not None:
                        steps[j][0].restore_state(snap, t)
            raise exc

    def _run_pooled(self, batch: Batch, t: float, h: float) -> dict[int, BaseException]:
        """Step the pooled components of *batch* on the pool and the main thread; their exceptions by position.

        Returns only once every one of them has finished, also when the main
        thread is interrupted while it waits.
        """
        tasks = self._tasks
        done: queue.SimpleQueue[tuple[int, BaseException | None]] = queue.SimpleQueue()
        for i in batch.pooled:
            tasks.put((batch, i, t, h, done))
        outcomes: dict[int, BaseException] = {}
        waiting = len(batch.pooled)
        while True:
            try:
                _, i, _, _, _ = tasks.get_nowait()
            except queue.Empty:
                break
            exc = _step_pooled(batch, i, t, h)
            waiting -= 1
            if exc is not None:
                outcomes[i] = exc
        try:
            while waiting:
                i, exc = done.get()
                waiting -= 1
                if exc is not None:
                    outcomes[i] = exc
        finally:
            while waiting:  # interrupted: no component may still be stepping when the run goes on to fail
                done.get()
                waiting -= 1
        return outcomes
