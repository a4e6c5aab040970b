"""A component step whose work is one C call, split so that the call can run on another thread without Python.

A component that declares :attr:`~cosimrun.core.component.CoSimComponent.steps_in_parallel`
offers its step as a :class:`CStep` (:meth:`~cosimrun.core.component.CoSimComponent.c_step`):
:meth:`CStep.begin` (on the main thread: inputs to the model, the step's
arguments into its C job), the C call the job describes (on any thread, with
the GIL released) and :meth:`CStep.end` (on the main thread: the call's
outcome, outputs, the rest of ``do_step``). ``begin``, the call and ``end`` do
exactly what ``do_step`` does, so parallel steps compute the same bits.

What a job holds and how it is called is the component's business: its C
step names the :class:`CStepRunner` that runs batches of such jobs (for FMUs,
:mod:`cosimrun.fmi.pool`), and the masters' parallel stepper hands each batch
to the :class:`CStepPool` that runner started, knowing nothing of the jobs.
"""

from __future__ import annotations

from typing import Protocol


class CStepPool(Protocol):
    """Threads that run batches of C jobs with the calling thread, started for one run."""

    kind: str
    """Which threads run the jobs besides the caller (``native``, ``threads``): ``/stats/parallel_pool``."""
    pooled: int
    """Jobs run so far by the pool's threads (not the caller)."""
    alive: int
    """The pool's threads still running (0 once closed)."""

    def run(self, jobs: int, count: int, /) -> None:
        """Run the *count* jobs of the array of job pointers at address *jobs*, each exactly once, on the pool's
        threads and the calling thread; returns once all have run."""

    def close(self) -> None:
        """Stop the pool's threads and wait for them."""


class CStepRunner(Protocol):
    """Starts the pools that run one kind of C job (:attr:`CStep.runner`)."""

    max_jobs: int
    """The most jobs one batch may hold (more components step on the main thread)."""

    def start(self, threads: int, spin_s: float) -> CStepPool:
        """A pool of *threads* threads besides the caller, each polling *spin_s* seconds for a batch before it
        blocks; started on (and inheriting the floating-point environment of) the calling thread."""


class CStep(Protocol):
    """A component's step split around one C call (see the module docstring)."""

    runner: CStepRunner
    """What runs batches of this step's kind of job; steps with the same runner may share a batch."""
    address: int
    """The address of the C job, filled by :meth:`begin`, run by a :class:`CStepPool`, read by :meth:`end`."""

    def begin(self, t: float, h: float, snapshot: bool) -> None:
        """Prepare the step from *t* by *h*: what ``do_step`` does before its C call. With *snapshot*, the job
        saves the model's state before stepping, so that :meth:`undo` can return to it."""

    def end(self, t: float, h: float) -> None:
        """Finish the step after the job ran: what ``do_step`` does after its C call (raises as it does)."""

    def undo(self) -> None:
        """Return the model to the state the job saved (a step whose :meth:`end` did not run is undone)."""
