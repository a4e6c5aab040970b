"""Parallel stepping (the masters' ``parallel`` setting): independent components of a stepping plan step at once.

A stepping plan (:meth:`~cosimrun.masters.base.Master.stepping_plan`) is cut
into *batches*: runs of consecutive entries none of which reads a fresh output
of another entry of the same run. Under Jacobi that is the whole plan; under
Gauss-Seidel and the hybrid master's trial plan, which follow the priority
order, it is (at most) the components of one priority level. In a batch, the
components that declare :attr:`~cosimrun.core.component.CoSimComponent.steps_in_parallel`
(those whose step is one C call) offer their step split around that call
(:class:`~cosimrun.core.cstep.CStep`): the main thread begins each of them
(inputs), the C calls run on a pool's threads and the main thread at once,
without the GIL, and the main thread ends each (outputs, recording). The other
components step on the main thread, in plan order, after them. The pool is
the one the C steps' runner (:attr:`~cosimrun.core.cstep.CStep.runner`)
starts for the run; this module knows nothing of the calls it runs.

**Bitwise the same as serial stepping.** The fresh reads and input pushes of
a whole batch are done first, on the main thread and in plan order; no member
reads what another one writes, and ``begin``, the call and ``end`` are the code
of ``do_step``, so every component computes exactly what it computes serially.
Serially, a step that fails or ends early
(:class:`~cosimrun.errors.StepEndedEarly`) stops the plan there; in parallel,
every call of the batch is waited for, then the steps are ended in plan order:
the first failure is raised as it is (type, message, traceback), and the
components after it are not ended (nor, on the main thread, stepped). A
component stepped concurrently *after* one that may end its step early is
speculative: its C job saves its state before stepping, and it is undone when
that component does end the step early, so the components after it are where
serial stepping leaves them (unstepped, with the inputs of the step set) and
the master's cut works as it does serially. Only components that can always
roll back step speculatively; others after such a component step on the main
thread, once the ones before them have finished. What a speculative step
leaves besides its state (log messages) stays. A pool's threads are
started when the first plan is cut into batches, by the thread that steps,
whose floating-point environment they inherit, and
:meth:`ParallelStepper.close` joins them when the run ends, however it ends.

**Hand-offs.** The pool's threads and the main thread take the jobs of a
batch one at a time, so the main thread steps its share instead of waiting
idle, and each job runs exactly once. A waiting pool thread polls for
:data:`SPIN_S` before it blocks: waking a blocked thread costs 40-180 µs on a
small cloud VM whose idle cores halt, and the next macro step usually hands
over its batch well within that time.

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

import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cosimrun.core.cstep import CStep, CStepPool, CStepRunner
from cosimrun.errors import SimulationError, StepEndedEarly
from cosimrun.masters.base import MasterStats, Step, may_discard, step_serially

MIN_BATCH_S = 30e-6
"""A batch whose serial step takes less than this (seconds) always steps serially."""
WINDOW = 100
"""Steps of a batch's first window; its wall time each way is the least measured in a window."""
MAX_WINDOW = 1600
"""Longest window: one doubles each time the faster way stays the same."""
SPIN_S = 200e-6
"""How long a pool thread waiting for a batch polls before it blocks (seconds)."""
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
    runner: CStepRunner
    """What runs the pooled components' C jobs (the runner of their C steps)."""
    reads: list[Any]
    """The entries that read fresh links or push inputs, each with a no-op in place of its component."""
    pooled: list[int]
    """Positions (in ``steps``) of the components stepped concurrently."""
    speculative: list[int]
    """Positions of pooled components after the first pooled one that may end its step early: the C job of
    each saves its state before stepping, and it is undone when a step before it ends early."""
    serial_s: float | None = None
    """Wall time of a serial step (seconds): the least of the last window in which it was measured."""
    parallel_s: float | None = None
    """Wall time of a parallel step, likewise."""
    timed: bool = False
    """Whether the step being taken is to be timed (:meth:`measured`)."""
    concurrent: frozenset[int] = field(init=False)
    speculative_at: frozenset[int] = field(init=False)
    pool: CStepPool | None = field(init=False, default=None)
    """The run's pool of :attr:`runner` (set by :class:`ParallelStepper`)."""
    addresses: Any = field(init=False)
    """The C jobs of the step being taken (an array of pointers, as the pool's threads read it)."""
    begun: list[CStep | BaseException | None] = field(init=False)
    """By position, the pooled components' C steps begun for the step being taken, or what ``begin`` raised."""
    _phase: int = 0
    _window: int = WINDOW
    _least: list[float] = field(init=False)
    _faster_before: bool | None = None
    _first: bool = True

    def __post_init__(self) -> None:
        self.concurrent = frozenset(self.pooled)
        self.speculative_at = frozenset(self.speculative)
        self.addresses = (ctypes.c_void_p * max(len(self.pooled), 1))()
        self.begun = [None] * len(self.steps)
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
    """*steps* as a batch, or ``None`` when fewer than two of them can step concurrently: those whose C steps have
    the runner of the first one's, at most its ``max_jobs``."""
    pooled: list[int] = []
    speculative: list[int] = []
    runner: CStepRunner | None = None
    ending_early = False
    for i, (comp, _, _) in enumerate(steps):
        c_step = comp.c_step() if comp.steps_in_parallel else None
        if c_step is None:
            continue
        runner = c_step.runner if runner is None else runner
        if c_step.runner is not runner or len(pooled) == runner.max_jobs:  # the rest step on the main thread
            continue
        if ending_early:
            if not comp.can_always_roll_back:
                continue
            speculative.append(i)
        pooled.append(i)
        ending_early = ending_early or may_discard(comp)
    if runner is None or len(pooled) < 2:
        return None
    reads = [(_READ_ONLY, push, fresh) for _, push, fresh in steps if push is not None or fresh]
    return Batch(steps, runner, reads, pooled, speculative)


def _outcome(step: Callable[[float, float], None], t: float, h: float) -> BaseException | None:
    """Call *step* (a ``do_step`` on the main thread, or a C step's ``end``); its exception, or ``None``."""
    try:
        step(t, h)
    except BaseException as exc:  # noqa: BLE001 - raised by the caller in plan order
        return exc
    return None


class ParallelStepper:
    """Steps plans for a master with ``parallel`` on, over one run: ``threads - 1`` pool threads and the main one.

    :meth:`close` stops and joins the pools' threads; it is called at the end
    of every run, also one that failed.
    """

    def __init__(self, threads: int, stats: MasterStats) -> None:
        self.threads = threads
        self.stats = stats
        self._segments: dict[int, tuple[list[Step], list[Segment]]] = {}
        self.pools: dict[CStepRunner, CStepPool] = {}
        """The run's pool of each runner (``pooled``: the C steps its threads took, ``alive``: how many run)."""
        stats.parallel_threads = threads

    def close(self) -> None:
        """Stop the pools' threads, wait for them and forget the batches."""
        pools, self.pools = list(self.pools.values()), {}
        self._segments.clear()
        for pool in pools:
            pool.close()

    def _split(self, plan: list[Step]) -> list[Segment]:
        """*plan* cut into batches, each given the run's pool of its runner (started here when it is the first)."""
        segments = split_plan(plan)
        for _, batch in segments:
            if batch is None:
                continue
            pool = self.pools.get(batch.runner)
            if pool is None:
                pool = self.pools[batch.runner] = batch.runner.start(self.threads - 1, SPIN_S)
                self.stats.parallel_pool = ", ".join(sorted({p.kind for p in self.pools.values()}))
            batch.pool = pool
        return segments

    # ------------------------------------------------------------------ stepping
    def step(self, plan: list[Step], t: float, h: float) -> None:
        """Step *plan* from *t* to *t + h* as :func:`step_serially` does, independent components concurrently."""
        cached = self._segments.get(id(plan))
        if cached is None or cached[0] is not plan:
            if len(self._segments) > 64:  # plans cut short by an early end are built afresh each time
                self._segments.clear()
            cached = self._segments[id(plan)] = (plan, self._split(plan))
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
        """Step *batch* with its pooled components' C calls concurrently (see the module docstring)."""
        steps = batch.steps
        step_serially(batch.reads, t, h)
        self._run_pooled(batch, t, h)
        begun = batch.begun
        for i, (comp, _, _) in enumerate(steps):
            c_step = begun[i]
            if c_step is None:
                exc = _outcome(comp.do_step, t, h)
            elif isinstance(c_step, BaseException):
                exc = c_step
            else:
                exc = _outcome(c_step.end, t, h)
            if exc is None:
                continue
            if isinstance(exc, StepEndedEarly):
                for j in batch.speculative:
                    later = begun[j]
                    if j > i and later is not None and not isinstance(later, BaseException):
                        later.undo()
            raise exc

    def _run_pooled(self, batch: Batch, t: float, h: float) -> None:
        """Begin the pooled components of *batch* (:attr:`Batch.begun`) and run their C calls on its pool's
        threads and this one; returns once every call has run. One whose ``begin`` raised is not stepped."""
        begun, addresses, steps = batch.begun, batch.addresses, batch.steps
        speculative = batch.speculative_at
        count = 0
        for i in batch.pooled:
            comp = steps[i][0]
            c_step = comp.c_step()
            try:
                if c_step is None or c_step.runner is not batch.runner:
                    raise SimulationError(f"component {comp.name!r} steps in parallel but offers no C step of the "
                                          "runner it was batched with (c_step() changed): is it initialized?",
                                          component=comp.name, time=t)
                c_step.begin(t, h, i in speculative)
            except BaseException as exc:  # noqa: BLE001 - raised in plan order by _step_batch
                begun[i] = exc
                continue
            begun[i] = c_step
            addresses[count] = c_step.address
            count += 1
        assert batch.pool is not None
        batch.pool.run(ctypes.addressof(addresses), count)
