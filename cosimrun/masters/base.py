"""A master: frozen settings, and the run they start on a system.

A master (:class:`Master` and its subclasses) is only its settings, checked
when it is constructed and never changed after: one master can run any number
of systems, one after the other or at once. :meth:`Master.start` compiles a
:class:`~cosimrun.system.System` whose graph was analysed into a
:class:`MasterRun`, and :meth:`MasterRun.run` advances it in time; everything
that changes during a run lives in the run object.

**What a run holds.** Besides the settings and the system, a run is composed
of collaborators, each given only what it needs:

- :class:`~cosimrun.masters.plan.Schedule`: the compiled links, input pushing,
  re-evaluation of direct feedthrough and algebraic loops (each loop a
  :class:`~cosimrun.masters.loops.LoopSolver`), stepping plans, checkpoints;
- :class:`~cosimrun.masters.parallel.ParallelStepper` with ``parallel`` on;
- :class:`~cosimrun.masters.events.StateEvents`: the event sources and the
  sides their indicators are armed with;
- :class:`~cosimrun.masters.step_control.ErrorControl` under
  ``step_control: error`` (the proposed next step, the step log);
- :class:`~cosimrun.masters.coupling_error.CouplingErrorEstimate`;
- :class:`~cosimrun.masters.extrapolation.Extrapolation`: the lagging inputs'
  latest samples;
- :class:`~cosimrun.masters.cutting.StepCutter`: steps that components end
  early (:class:`~cosimrun.errors.StepEndedEarly`) and fixed-step components;

and the run's :class:`~cosimrun.masters.stats.MasterStats`, clock, recorder
and stop request. :meth:`MasterRun.run` returns them as one
:class:`~cosimrun.masters.stats.RunReport`.

**Ensembles and checkpoints.** Per-member state of an ensemble is one run
object per member (the settings are shared). A checkpoint of a run at a
communication point (:meth:`MasterRun.save_state`, see :mod:`cosimrun.checkpoint`)
holds, beside the components' states, the clock's tick and exact times, the
statistics, and the collaborators' state: the armed indicator sides and Zeno
counters of :class:`StateEvents`, the extrapolation samples, the error
control's memory, limits and log, the coupling-error estimate's partial sums
and the steps cut short; the recorder's position is the system's. The compiled
schedule and the stepping plans are derived from the system and not saved:
:meth:`MasterRun.run` sets the run up as at its start, then restores the
checkpoint (``resume``) before the first step.
"""

from __future__ import annotations

import bisect
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cosimrun.core.component import StopRequest
from cosimrun.errors import ConfigError, did_you_mean, suggest
from cosimrun.masters.coupling_error import CouplingErrorEstimate
from cosimrun.masters.cutting import (
    DISCARD_EVENT,
    StepCut,
    StepCutter,
    off_grid,
    refuse_fixed_steps,
    variable_step_error,
)
from cosimrun.masters.events import AT_COMMUNICATION_POINTS, LOCATED, StateEvents
from cosimrun.masters.loops import LoopSettings
from cosimrun.masters.plan import Schedule, Step, fixed_step_only, may_discard, step_serially
from cosimrun.masters.stats import MasterStats, RunReport
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.core.steplog import StepLog
    from cosimrun.masters.parallel import ParallelStepper
    from cosimrun.system.recorder import Recorder
    from cosimrun.system.system import System

Resume = Callable[["MasterRun"], int]
"""Restores the components and a run set up by :meth:`MasterRun.run` to a checkpoint; the tick to go on from."""
Checkpoints = Callable[["MasterRun", int, bool], None]
"""Called after each accepted step with the run, the tick reached and whether the run completed there."""

__all__ = ["Checkpoints", "Master", "MasterRun", "MasterStats", "Resume", "RunReport", "Step", "may_discard",
           "step_serially", "thread_count"]

LOOP_SOLVERS = ("jacobi", "gauss_seidel", "newton")
ON_NONCONVERGENCE = ("raise", "warn")
STOP_EVENT = "stop"
"""The event recorded where a component asked to end the run (:attr:`CoSimComponent.stop_requested`)."""


def thread_count(setting: Any) -> int | None:
    """How many components may step at once under the ``parallel`` setting *setting*; ``None`` if it is invalid.

    ``false``: 1 (serial); ``threads``: one per core (``os.cpu_count()``); an integer N >= 1: N (the main
    thread and N - 1 pool threads).
    """
    if setting is False:
        return 1
    if setting == "threads":
        return os.cpu_count() or 1
    if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        return setting
    return None


@dataclass(frozen=True)
class Master:
    """A master's settings, checked at construction; :meth:`start` begins a run of a system."""

    loop_solver: str = "gauss_seidel"
    """How algebraic loops are solved at a communication point: jacobi, gauss_seidel or newton."""
    loop_tolerance: float = 1e-10
    """Value tolerance of loop iteration: ``max|residual| <= tol * (1 + max|x|)``."""
    max_loop_iterations: int = 100
    aitken: bool = False
    """Aitken dynamic relaxation of fixed-point loop iteration."""
    relaxation: float = 1.0
    """Initial (or constant, without Aitken) relaxation factor of fixed-point iteration."""
    fd_step: float = 1e-7
    """Relative finite-difference step of interface Jacobians."""
    on_nonconvergence: str = "raise"
    """``raise`` or ``warn`` when a loop, or an iterated macro step (``iterate_steps``, ``sweeps``), does not
    converge: ``warn`` warns at the first such solve of a run and counts them all in
    ``stats.unconverged_loop_solves``."""
    sign_tolerance: float = 0.0
    """Indicator values within this distance of zero count as zero (on the surface): only for indicators
    with numerical noise around zero; events are located in time whatever it is."""
    max_micro_steps: int = 100
    """Most event iterations at one instant before the run stops (Zeno guard)."""
    parallel: bool | int | str = False
    """Step independent thread-safe components (FMUs) of one priority level concurrently: ``false``, ``threads``
    (one thread per core) or the number of threads N >= 1; results are bitwise those of serial stepping (see
    :mod:`cosimrun.masters.parallel`)."""

    name: ClassVar[str] = "master"
    locates_events: ClassVar[bool] = False
    """Whether state events are located between communication points (else handled at them)."""

    def __post_init__(self) -> None:
        self._check_choice("loop_solver", self.loop_solver, LOOP_SOLVERS)
        self._check_choice("on_nonconvergence", self.on_nonconvergence, ON_NONCONVERGENCE)
        for key in ("loop_tolerance", "fd_step", "relaxation"):
            self._check(key, getattr(self, key) > 0, "must be positive")
        self._check("max_loop_iterations", int(self.max_loop_iterations) >= 1, "must be >= 1")
        self._check("sign_tolerance", self.sign_tolerance >= 0, "must be >= 0")
        self._check("max_micro_steps", int(self.max_micro_steps) >= 1, "must be >= 1")
        if thread_count(self.parallel) is None:
            value, close = self.parallel, did_you_mean(str(self.parallel), ["threads"])
            raise ConfigError("parallel", f"{value!r} is not valid{suggest(str(value), ['threads'])} (valid: false, "
                                          "threads or an integer >= 1)", suggestion=close[0] if close else None)

    def _check(self, key: str, ok: bool, requirement: str) -> None:
        """Raise :class:`ConfigError` keyed by setting *key* unless *ok*."""
        if not ok:
            raise ConfigError(key, f"{requirement}, got {getattr(self, key)!r}")

    @staticmethod
    def _check_choice(key: str, value: Any, valid: tuple[Any, ...]) -> None:
        if value not in valid:
            close = did_you_mean(str(value), map(str, valid))
            raise ConfigError(
                key,
                f"{value!r} is not valid{suggest(str(value), map(str, valid))} (valid: {', '.join(map(str, valid))})",
                suggestion=close[0] if close else None,
            )

    def settings(self) -> dict[str, Any]:
        """The master's settings by name."""
        return asdict(self)

    def loop_settings(self) -> LoopSettings:
        """The settings loop solving uses."""
        return LoopSettings(self.loop_solver, self.loop_tolerance, self.max_loop_iterations, self.aitken,
                            self.relaxation, self.fd_step, self.on_nonconvergence)

    def start(self, system: System) -> MasterRun:
        """A run of *system* (initialized, its graph analysed) under these settings."""
        return MasterRun(self, system)


class MasterRun:
    """One run of a master over one system: the time loop, and every state that changes during it.

    Built by :meth:`Master.start` right after the system's components were
    initialized; :meth:`initialize_outputs` makes the system consistent at the
    start, :meth:`check` refuses a run that cannot be taken, :meth:`run` takes it.
    Subclasses say how one communication step is taken (:meth:`advance`).
    """

    def __init__(self, master: Master, system: System) -> None:
        self.master = master
        self.system = system
        self.stats = MasterStats(event_handling=LOCATED if master.locates_events else AT_COMMUNICATION_POINTS)
        self.schedule = Schedule(system, master.loop_settings(), self.stats)
        self.order = self.schedule.order
        self.fixed = [c for c in self.order if fixed_step_only(c)]
        self._timed = [c for c in self.order if c.max_step is not None or c.has_time_events]
        self._event_leavers = [c for c in self.order if c.leaves_events]
        self._stoppers = [c for c in self.order if c.may_request_stop]
        self.stopped: StopRequest | None = None
        """Set when a component asked to end the run: the run then ended normally at that instant."""
        self.step_open = False
        """Whether the step being taken is still tentative (nothing accepted in it yet)."""
        self.next_step = 0.0
        """The step error control proposes next (``step_control: error``)."""
        self.controlled = False
        """Whether steps are chosen by error control (:attr:`next_step`) instead of the grid."""
        self.extrapolation_order = 0
        """The degree of the lagging inputs' extrapolation (see :mod:`.extrapolation`)."""
        self.step_log: StepLog | None = None
        self.coupling: CouplingErrorEstimate | None = None
        self.stepper: ParallelStepper | None = None
        self.events: StateEvents | None = None
        self.clock: Clock
        self.recorder: Recorder
        self.cutter: StepCutter
        self.tick: int | None = None
        """The tick a run that completed ended at (``None`` before)."""
        self.forced_times: Sequence[float] = ()
        """Instants the run must stop at besides its own (sorted; set before :meth:`run`): the tight run of a
        global-error estimate stops where the run it checks recorded samples (see :mod:`.global_error`)."""
        self._forced: list[int] = []
        """:attr:`forced_times` as ticks, after :meth:`run` began."""
        self.cut_proposal: float | None = None
        """The step error control proposed, when a forced stop cut the step to be taken shorter (else ``None``):
        a step that is short only because of it need not shrink the next."""

    def initialize_outputs(self, t0: float) -> None:
        """Make inputs and outputs consistent at *t0* (tear inputs keep their initial values)."""
        self.schedule.initialize_outputs(t0)

    def check(self, t0: float, tf: float, dt: float) -> None:
        """Refuse, before the run, a run from *t0* to *tf* by *dt* that this master cannot take with this system:
        a :class:`ConfigError` keyed by the master setting at fault, if any (:meth:`run` checks the same first)."""
        self._check_run(Clock(t0, dt, tf))

    def _check_run(self, clock: Clock) -> None:
        refuse_fixed_steps(self.fixed, self.order, clock)

    # ------------------------------------------------------------------ time loop
    def run(self, t0: float, tf: float, dt: float, recorder: Recorder,
            progress: Callable[[float], None] | None = None, *, resume: Resume | None = None,
            checkpoints: Checkpoints | None = None) -> RunReport:
        """Advance the system from *t0* to *tf* by steps of *dt*, telling *recorder* every accepted sample.

        The first sample is the consistent state at *t0*; the recorder is
        flushed at the end, also when the run fails. A component that asks to
        stop ends the run at the instant it was accepted with (:attr:`stopped`).

        *resume*, when given, is called once the run is set up (before the first step): it restores the
        components and this run to a checkpoint (:meth:`restore_state`) and returns the tick the run goes on
        from; the sample at that instant is the checkpoint's, not taken again. *checkpoints*, when given, is
        called after every accepted communication step with the run, the tick reached and ``False``, and once
        more with ``True`` at the end of a run that completed (see :mod:`cosimrun.checkpoint`).
        """
        clock = self.clock = Clock(t0, dt, tf)
        self.recorder = recorder
        self.cutter = StepCutter(self.schedule, clock, self.step_all)
        a, end = 0, clock.end
        self._forced = [tick for tick in map(clock.mark, self.forced_times) if 0 < tick < end]
        stride = max(1, end // 200)
        stoppers = self._stoppers
        try:
            self._start_coupling_estimate()  # before the first sample, which the recorder may hand over at once
            if resume is None:
                recorder.sample(t0)
            self._check_run(clock)
            self._start_parallel()
            self.begin(t0)
            if self.coupling is not None:
                self.coupling.set_coupling(self.coupling_kinds(self.schedule.real_links), self.extrapolation_order)
            try:
                if resume is not None:
                    a = resume(self)
                report = a + stride
                stop = self.stopped is not None or (bool(stoppers) and self._stop_at(clock.time(a)))
                while a < end and not stop:
                    b = self.next_point(clock, a)
                    self.step_open = True
                    try:
                        a = self.advance(clock, a, b)
                    except StepCut as cut:
                        a = self._advance_cut(clock, a, cut)
                    self.stats.macro_steps += 1
                    stop = bool(stoppers) and self._stop_at(clock.time(a))
                    if checkpoints is not None:
                        checkpoints(self, a, False)
                    if progress is not None and a >= report:
                        report = a + stride
                        progress(clock.time(a))
                self.tick = a
                if checkpoints is not None:
                    checkpoints(self, a, True)
            finally:
                self.finish()
        finally:
            self._stop_parallel()
            recorder.flush()
        errors = self.coupling.result() if self.coupling is not None else []
        return RunReport(self.stats, errors, self.step_log, self.stopped)

    def next_point(self, clock: Clock, a: int) -> int:
        """Next communication tick after *a*: grid (or the step error control proposes), forced stops
        (:attr:`forced_times`), components' max steps and time events, end.

        Stops closer together than ``clock.snap`` ticks (a rounding error of a float
        time) are merged, so no step is a residual of a few ulp: a grid point just
        after *a* is skipped, a time event just after *a* is ignored, and the end or
        a time event just after the chosen stop is taken instead of it. A component's
        ``max_step`` splits the step into equal parts no longer than the largest
        allowed step.
        """
        snap = clock.snap
        if not self.controlled:
            grid = clock.next_grid(a)
            if grid - a <= snap:
                grid = clock.next_grid(grid)
        else:
            grid = a + max(snap + 1, round(self.next_step / clock.tick))
        end = clock.end
        b = min(grid, end)
        extend = [end]
        forced = self._forced
        if forced:
            self.cut_proposal = None
            i = bisect.bisect_right(forced, a + snap)
            if i < len(forced):
                if forced[i] < b and self.controlled:
                    self.cut_proposal = self.next_step
                b = min(b, forced[i])
                extend.append(forced[i])
        limit = None
        if self._timed:
            t = clock.time(a)
            for comp in self._timed:
                if comp.max_step is not None:
                    limit = comp.max_step if limit is None else min(limit, comp.max_step)
                te = comp.next_time_event(t)
                if te is not None and te > t:
                    tick = clock.mark(te)
                    if a + snap < tick < end:
                        b = min(b, tick)
                        extend.append(tick)
        later = [s for s in extend if b < s <= b + snap]
        if later:
            b = max(later)
        if limit is not None:
            span, most = b - a, limit / clock.tick
            if span > most:
                parts = math.ceil(span / most * (1.0 - 1e-12))
                b = a + max(1, round(span / parts))
        if self.fixed and off_grid(clock, a, b):
            raise variable_step_error(self.fixed[0], clock, clock.time(a), clock.time(b), self._cut_by(clock, a, b))
        return b

    def _cut_by(self, clock: Clock, a: int, b: int) -> str:
        """What makes the step from tick *a* end at *b* (for a fixed-step component's failure)."""
        t = clock.time(a)
        for comp in self._timed:
            te = comp.next_time_event(t)
            if te is not None and abs(clock.ticks(te) - b) <= clock.snap:
                return f"the time event of component {comp.name!r} at t={te:.12g}"
        return "the master's step schedule"

    def _advance_cut(self, clock: Clock, a: int, cut: StepCut) -> int:
        """Advance from *a* again, up to the tick of *cut* (and shorter again if another cut comes)."""
        while True:
            self.step_open = True
            try:
                return self.advance(clock, a, cut.tick)
            except StepCut as again:
                cut = again

    def advance(self, clock: Clock, a: int, b: int) -> int:
        """Advance from tick *a* towards *b*; return the tick reached."""
        raise NotImplementedError

    def begin(self, t0: float) -> None:  # noqa: B027 (optional hook)
        """Hook called before the first step."""

    def finish(self) -> None:  # noqa: B027 (optional hook)
        """Hook called after the last step (also on failure)."""

    def step_all(self, plan: list[Step], t: float, h: float) -> None:
        """Step every component of *plan* from *t* to *t + h* (see :func:`step_serially`); with ``parallel`` on,
        independent components concurrently, with the same results (see :mod:`cosimrun.masters.parallel`)."""
        if self.stepper is None:
            step_serially(plan, t, h)
        else:
            self.stepper.step(plan, t, h)

    # ------------------------------------------------------------------ checkpoints
    def save_state(self, tick: int) -> dict[str, Any]:
        """The run's state at the accepted communication point *tick*, as plain values (see
        :mod:`cosimrun.checkpoint.form`): the tick and the clock's exact times, the statistics so far, the step
        control's proposal, the steps cut short, the coupling-error estimate's sums, the state events (armed
        sides, Zeno counters) and a component's request to end the run there (:attr:`stopped`). The recorder
        must have handed over every sample (the estimate has seen them). The schedule and the stepping plans
        are derived from the system and not saved."""
        stats = asdict(self.stats)
        return {
            "tick": self.clock.split(tick),
            "marks": self.clock.marks(),
            "stats": stats,
            "next_step": self.next_step,
            "cut_events": dict(self.cutter.events),
            "coupling": self.coupling.save_state() if self.coupling is not None else None,
            "events": self.events.save_state() if self.events is not None else None,
            "stopped": None if self.stopped is None else {
                "time": self.stopped.time, "component": self.stopped.component, "reason": self.stopped.reason},
        }

    def restore_state(self, state: dict[str, Any]) -> int:
        """Continue from :meth:`save_state`'s *state* (the run set up by :meth:`run`, before its first step); the
        tick to go on from."""
        clock = self.clock
        clock.restore_marks(state["marks"])
        for key, value in state["stats"].items():
            setattr(self.stats, key, value)
        self.next_step = state["next_step"]
        self.cutter.events = dict(state["cut_events"])
        if (state["coupling"] is None) != (self.coupling is None) or (state["events"] is None) != (self.events is None):
            raise ConfigError(None, "the checkpoint was taken by a run of another kind (coupling estimate or state "
                                    "events differ)")
        if self.coupling is not None:
            self.coupling.restore_state(state["coupling"])
        if self.events is not None:
            self.events.restore_state(state["events"])
        stopped = state.get("stopped")
        if stopped is not None:  # a component had ended the run there: it stays ended
            self.stopped = StopRequest(float(stopped["time"]), str(stopped["component"]), str(stopped["reason"]))
        return clock.join(state["tick"])

    # ------------------------------------------------------------------ collaborators of the run
    def _start_parallel(self) -> None:
        """Start the run's threads when ``parallel`` allows more than one (see :meth:`step_all`)."""
        threads = thread_count(self.master.parallel)
        if threads is not None and threads > 1:
            from cosimrun.masters.parallel import ParallelStepper

            self.stepper = ParallelStepper(threads, self.stats)

    def _stop_parallel(self) -> None:
        """Stop the run's threads and wait for them (at the end of every run, also one that failed)."""
        stepper, self.stepper = self.stepper, None
        if stepper is not None:
            stepper.close()

    def _start_coupling_estimate(self) -> None:
        """Estimate the coupling error of every connection into a real input (see :mod:`.coupling_error`); how
        each reaches its consumer (:meth:`coupling_kinds`) is set once the run began."""
        real = self.schedule.real_links
        self.coupling = CouplingErrorEstimate(real) if real else None
        if self.coupling is not None:
            self.recorder.watch(self.coupling.take)

    def coupling_kinds(self, links: list[Any]) -> list[str]:
        """How each of *links* reaches its consumer over a step (see :mod:`.coupling_error`): held here."""
        return ["held"] * len(links)

    def new_events(self, sources: list[Any], **guard: Any) -> StateEvents:
        """The run's :class:`StateEvents` of *sources* (*guard*: its Zeno guard)."""
        master = self.master
        return StateEvents(sources, self.schedule, self.recorder, self.stats, self.stop_pending,
                           sign_tolerance=master.sign_tolerance, max_micro_steps=master.max_micro_steps, **guard)

    # ------------------------------------------------------------------ stops and events components end steps on
    def stop_pending(self) -> bool:
        """Whether a component asked to end the run at the current instant (see :meth:`_stop_at`)."""
        return any(c.stop_requested is not None for c in self._stoppers)

    def _stop_at(self, t: float) -> bool:
        """Whether a component asked to end the run at the accepted instant *t* (:attr:`stop_requested`): the
        run then ends there, normally, with :attr:`stopped` and a ``stop`` event of the component at *t*."""
        for comp in self._stoppers:
            reason = comp.stop_requested
            if reason is not None:
                self.stopped = StopRequest(t, comp.name, reason)
                self.recorder.event(t, 0, comp.name, STOP_EVENT)
                return True
        return False

    def _end_events(self, t: float, ended: str | None) -> None:
        """After the sample at the accepted instant *t*: record the cut by the component named *ended* (if the
        step was cut where it ended early: a ``discard`` event, or the event it names), then
        handle the events components ended their steps on
        (:attr:`~cosimrun.core.component.CoSimComponent.pending_event`): each is recorded at micro 0 (that of
        the component named *ended* already is), handled, and the sample after them is taken at micro 1."""
        if ended is not None:
            self.recorder.event(t, 0, ended, self.cutter.events.get(ended, DISCARD_EVENT))
            self.stats.discards += 1
        pending = [(c, c.pending_event) for c in self._event_leavers if c.pending_event is not None]
        if not pending:
            return
        for comp, event in pending:
            if comp.name != ended:
                self.recorder.event(t, 0, comp.name, event)
                self.stats.events += 1
            comp.handle_event([event], t, 1)
        self.schedule.settle(t)
        self.recorder.sample(t, 1)
