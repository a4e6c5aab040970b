"""What a master's run reports: its statistics (:class:`MasterStats`) and :class:`RunReport`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from cosimrun.masters.events import AT_COMMUNICATION_POINTS

if TYPE_CHECKING:
    from cosimrun.core.component import StopRequest
    from cosimrun.core.steplog import StepLog
    from cosimrun.masters.coupling_error import CouplingError


@dataclass
class MasterStats:
    """What a master did during one run."""

    macro_steps: int = 0
    loop_solves: int = 0
    loop_iterations: int = 0
    newton_iterations: int = 0
    step_iterations: int = 0
    rollbacks: int = 0
    events: int = 0
    trial_steps: int = 0
    unconverged_loop_solves: int = 0
    """Loop solves and iterated macro steps that went on without converging (``on_nonconvergence="warn"``); only
    the first warns."""
    event_trial_steps: list[int] = field(default_factory=list)
    event_handling: str = AT_COMMUNICATION_POINTS
    """Where state events are handled: ``located`` (at their instants) or ``at communication points``."""
    discards: int = 0
    """Steps a component ended early (:class:`~cosimrun.errors.StepEndedEarly`), each cut where it stopped (a
    ``discard`` event, or the component's own)."""
    parallel_threads: int = 1
    """Components that could step at once (the ``parallel`` setting; 1: serial stepping)."""
    parallel_steps: int = 0
    """Component-steps taken concurrently with others (see :mod:`cosimrun.masters.parallel`)."""
    plan_steps: int = 0
    """Component-steps of the stepping plans while ``parallel`` was on: the base of ``parallel_fraction``."""
    parallel_pool: str = "none"
    """The pool started for the C calls of parallel steps: ``native`` (native threads), ``threads`` (Python threads,
    when the native pool is not built) or ``none`` (``parallel`` off, or no batch that could step in parallel)."""
    step_control: str = "fixed"
    """How communication steps were chosen: ``fixed`` (the step ``dt``), ``error`` or ``richardson`` (see
    :mod:`.step_control`)."""
    step_rejection: str = "none"
    """Under ``step_control: error``: ``rollback`` (steps over the tolerance were rolled back and taken again,
    shorter) or ``none`` (a component cannot roll back: estimates only shaped the next step)."""
    rejected_steps: int = 0
    half_steps: int = 0
    """Under ``step_control: richardson``: the half steps taken besides each trial step (two per trial, accepted or
    rejected)."""
    steps_over_tolerance: int = 0
    """Accepted steps whose error norm exceeded 1 (at ``min_step``, or without rollback)."""
    steps_at_min_step: int = 0
    """Accepted steps at ``min_step`` whose error norm exceeded 1: the tolerance was unreachable there (the first one
    warns)."""
    smallest_step: float = math.nan
    largest_step: float = math.nan
    """The shortest and longest accepted step under ``step_control: error`` (NaN under fixed steps)."""
    steps_without_estimate: int = 0
    """Accepted steps under ``step_control: error`` whose error norm was zero or not estimated (the first step, the
    first after an event, no coupled real input, inputs the extrapolation reproduces exactly): the estimate bounded
    nothing, so the next step grew to ``dt`` at most (see :mod:`.step_control`)."""
    event_delay: float = math.nan
    """The longest an event could be handled after its indicator crossed zero, in seconds: ``dt`` (or the
    longest step) at communication points, the step events are cut down to under error control with rollback
    (NaN without event indicators, and under the hybrid master, which locates them to ``time_tolerance``)."""
    global_error_ratio: float = math.nan
    """Under ``global_error: estimate``: the largest estimated global error of a recorded real output relative to
    its tolerance ``atol + rtol * s`` (see :mod:`.global_error`); NaN when not estimated."""
    estimate_steps: int = 0
    """Under ``global_error: estimate``: the steps the tight run took, rejected ones included (its cost)."""

    @property
    def trial_steps_per_event(self) -> float:
        """Mean number of trial steps spent localizing one event."""
        return sum(self.event_trial_steps) / len(self.event_trial_steps) if self.event_trial_steps else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Scalar statistics (for storage as attributes): every field but the list ``event_trial_steps``, whose
        mean is ``trial_steps_per_event``."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "event_trial_steps"}
        out["trial_steps_per_event"] = self.trial_steps_per_event
        out["parallel_fraction"] = self.parallel_fraction
        return out

    @property
    def parallel_fraction(self) -> float:
        """Share of the plans' component-steps taken concurrently with others (0 with ``parallel`` off)."""
        return self.parallel_steps / self.plan_steps if self.plan_steps else 0.0


@dataclass(frozen=True)
class RunReport:
    """What one run of a master returns (:meth:`~cosimrun.masters.base.MasterRun.run`)."""

    stats: MasterStats
    coupling_errors: list[CouplingError]
    """Estimated coupling error per coupled real input (empty when the run ended before its estimate)."""
    step_log: StepLog | None
    """Every step tried under ``step_control: error`` (``None`` under fixed steps)."""
    stopped: StopRequest | None
    """Set when a component asked to end the run: the run then ended normally at that instant."""
