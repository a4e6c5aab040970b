"""Non-iterative masters (Jacobi, Gauss-Seidel): settings and the run that takes one pass per communication step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from cosimrun.console import notice
from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortType
from cosimrun.errors import ConfigError, StepEndedEarly
from cosimrun.masters.base import Master, MasterRun
from cosimrun.masters.events import (
    CAPPED_NOTICE,
    SHORTENED_NOTICE,
    UNLOCATED_NOTICE,
    Hints,
    Indicators,
    notice_unlocated,
)
from cosimrun.masters.extrapolation import Extrapolation
from cosimrun.masters.global_error import GLOBAL_ERRORS, GlobalErrorEstimate
from cosimrun.masters.loops import give_up
from cosimrun.masters.plan import Checkpoint, cut_guard, fixed_step_only, may_discard
from cosimrun.masters.step_control import STEP_CONTROLS, ErrorControl
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.system.connection import Link
    from cosimrun.system.system import System

PROBE_FRACTION = 1e-6
"""Length of the probe after an event under masters without localization, as a fraction of the step."""


@dataclass(frozen=True)
class ExplicitMaster(Master):
    """Non-iterative masters: one pass over the components per macro step.

    ``extrapolation`` (0, 1 or 2) replaces each lagging real input by the
    polynomial through its latest 1, 2 or 3 communication-point values: a
    component that interpolates inputs (ODE, DAE and equation components)
    evaluates it inside its integrator, any other gets its mean over the step.
    The global coupling error is then of order ``p + 1`` in ``dt`` (held
    inputs: order ``p + 1`` for ``p <= 1``); for ``p = 2`` from the start,
    the first step, which has no samples to extrapolate, is taken twice when
    every component can roll back (see ``ExplicitRun._start_up_to``). With ``extrapolation >= 1`` under
    Gauss-Seidel, a fresh input is the line from its value at the step start to
    the producer's at the step end (order 2) instead of the end value held.

    ``step_control: error`` chooses each communication step from the coupling
    error estimated over the last one (``rtol``, ``atol``, ``min_step``,
    ``max_step``; the first step is ``rtol * dt``; without evidence of the
    estimate, and while components have event indicators, steps stay within
    ``dt``; see :mod:`.step_control`). ``step_control: richardson`` estimates each step by
    taking it again as two half steps (see :mod:`.step_control`).
    """

    extrapolation: int = 0
    step_control: str = "fixed"
    """``fixed`` (every step ``dt``), ``error`` (steps chosen from the estimated coupling error) or ``richardson``
    (from step doubling: each step also taken as two half steps, which stand; needs rollback in every component)."""
    rtol: float = 1e-4
    """Under ``step_control: error``: relative tolerance of each input's local coupling error (to its magnitude)."""
    atol: float = 1e-8
    """Under ``step_control: error``: absolute tolerance of each input's local coupling error, in its unit."""
    min_step: float | None = None
    """Under ``step_control: error``: the shortest step (default ``1e-6 * dt``); a step this short stands
    whatever its error."""
    max_step: float | None = None
    """Under ``step_control: error``: the longest step (default: the whole run; ``dt`` at most while components
    have event indicators)."""

    sweeps: int = 1
    """Most sweeps over one macro step (iterated Gauss-Seidel, or Jacobi): with N > 1 a step is rolled back and
    taken again, the lagging inputs given their producers' latest end-of-step values (as fresh inputs are), until
    those change by at most ``sweep_tolerance * (1 + max|value|)`` between two sweeps, or N sweeps
    (``on_nonconvergence``); needs rollback in every component."""
    sweep_tolerance: float = 1e-9
    """Under ``sweeps > 1``: the change of the lagging inputs' end-of-step values a step's sweeps converge to."""
    global_error: str = "none"
    """Under step control: ``none``, or ``estimate`` (after the run, run again from the start at ``rtol / 10`` and
    ``atol / 10`` and report the difference per recorded real output as its estimated global error, warning over 10
    times its tolerance; see :mod:`.global_error`)."""

    fresh_outputs: ClassVar[bool] = False
    """Whether a component reads the outputs of components stepped before it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choice("extrapolation", self.extrapolation, (0, 1, 2))
        self._check_choice("step_control", self.step_control, STEP_CONTROLS)
        for key in ("rtol", "atol"):
            value = getattr(self, key)
            self._check(key, isinstance(value, int | float) and math.isfinite(value) and value >= 0, "must be >= 0")
        self._check("rtol", self.rtol > 0 or self.atol > 0, "and atol must not both be 0")
        for key in ("min_step", "max_step"):
            value = getattr(self, key)
            self._check(key, value is None or (isinstance(value, int | float) and math.isfinite(value) and value > 0),
                        "must be a positive number (or null for its default)")
        if self.min_step is not None and self.max_step is not None:
            self._check("min_step", self.min_step <= self.max_step, f"must not exceed max_step={self.max_step!r}")
        self._check("sweeps", isinstance(self.sweeps, int) and not isinstance(self.sweeps, bool) and self.sweeps >= 1,
                    "must be an integer >= 1")
        self._check("sweep_tolerance", self.sweep_tolerance > 0, "must be positive")
        self._check_choice("global_error", self.global_error, GLOBAL_ERRORS)
        if self.global_error == "estimate" and self.step_control == "fixed":
            raise ConfigError("global_error", "'estimate' needs step control (step_control=error or richardson): "
                                              "under fixed steps there is no tolerance to tighten")

    def global_error_estimate(self) -> GlobalErrorEstimate | None:
        """Under ``global_error: estimate``, the estimate a run fills in (see :mod:`.global_error`); else ``None``."""
        return GlobalErrorEstimate(self) if self.global_error == "estimate" else None

    def start(self, system: System) -> ExplicitRun:
        return ExplicitRun(self, system)


class ExplicitRun(MasterRun):
    """A run of an :class:`ExplicitMaster`: step the plan, exchange, record, handle events at the step's end."""

    master: ExplicitMaster

    def __init__(self, master: ExplicitMaster, system: System) -> None:
        super().__init__(master, system)
        self.lagging: list[Link] = []
        """The lagging real inputs that are extrapolated (``extrapolation >= 1``)."""
        self.extrapolation: Extrapolation
        self.control: ErrorControl | None = None
        self._hints: Hints | None = None
        self._swept: list[Link] = []
        """The lagging inputs iterated under ``sweeps > 1`` (empty: each step is swept once)."""
        self._swept_line: list[bool] = []
        """Event hints drained while checking a controlled step for crossings, for handling its events."""
        self._start_up = False
        """Whether the first step is still to be taken twice (:meth:`_start_up_to`)."""
        self._richardson = False
        self._samples: dict[str, Any] | None = None
        """Under ``step_control: richardson``: the extrapolation's samples at the start of the step being tried."""

    def _check_run(self, clock: Clock) -> None:
        super()._check_run(clock)
        control = self.master.step_control
        if control != "fixed" and self.fixed:
            comp = self.fixed[0]
            raise ConfigError("step_control", (
                f"{control!r} cannot be used: component {comp.name!r} cannot handle variable communication step "
                f"sizes ({comp.fixed_step_reason}); use step_control=fixed"))
        stuck = [c for c in self.order if not c.can_always_roll_back]
        if control == "richardson" and stuck:
            raise ConfigError("step_control", (
                f"'richardson' needs rollback in every component (each step is taken again as two half steps); "
                f"component {stuck[0].name!r} cannot roll back; use step_control=error"))

    def begin(self, t0: float) -> None:
        master, schedule = self.master, self.schedule
        self.plan, lagging = schedule.stepping_plan(self._step_order(), master.fresh_outputs,
                                                    interpolate=master.extrapolation >= 1)
        self._guarded = cut_guard(self.plan)
        self._start_extrapolation(lagging, t0)
        self._start_sweeps(lagging)
        self._start_up = (master.extrapolation == 2 and bool(self.lagging) and not self._swept
                          and all(c.supports_rollback for c in self.order))
        sources = [c for c in self.order if c.has_state_events]
        lateness = UNLOCATED_NOTICE
        self.stats.event_delay = self.clock.dt if sources else math.nan
        if master.step_control != "fixed":
            lateness = self._start_error_control(t0, bool(sources))
        self.events = self.new_events(sources) if sources else None
        if self.events is not None:
            notice_unlocated(sources, lateness)
            probing = all(c.can_always_roll_back and not fixed_step_only(c) for c in sources)
            self._probe_plan = schedule.stepping_plan(sources, fresh=False)[0] if probing else None
            self._probe_guarded = cut_guard(self._probe_plan) if self._probe_plan is not None else []
            self._depart(t0, self.events.indicators(), self.clock.dt)

    def _step_order(self) -> list[CoSimComponent]:
        """The order components step in: the priority order, with fresh outputs (Gauss-Seidel).

        Without them (Jacobi) every component steps from the last exchange, so
        the order changes no result: components that may end a step early go
        first, and nothing stepped before one of them needs a checkpoint (only
        those stepped before a second such component).
        """
        if self.master.fresh_outputs:
            return list(self.order)
        return sorted(self.order, key=lambda c: not may_discard(c))

    def _start_coupling_estimate(self) -> None:
        """As every master, except under ``step_control: richardson``: its inputs were extrapolated over the half
        steps, whose middles are not recorded, so an estimate from the recorded samples would be of steps not taken
        (none is made)."""
        if self.master.step_control == "richardson":
            self.coupling = None
            return
        super()._start_coupling_estimate()

    def _start_extrapolation(self, links: list[Link], t0: float) -> None:
        order = self.master.extrapolation
        self.lagging = [lk for lk in links if lk.dst.spec.type is PortType.REAL] if order > 0 else []
        self.extrapolation_order = order
        components = self.system.components
        taylor = [components[lk.connection.dst_component].interpolates_inputs for lk in self.lagging]
        self.extrapolation = Extrapolation(self.lagging, taylor, order, t0)
        if self.lagging:
            self.cutter.extrapolate = self.extrapolation.extrapolate

    def _start_sweeps(self, lagging: list[Link]) -> None:
        """Set up ``sweeps > 1``: every component must roll back; the lagging inputs iterated are the numeric ones,
        each re-swept as the line to its latest end value where fresh inputs are lines, else as that value held."""
        if self.master.sweeps == 1:
            return
        numeric = (PortType.REAL, PortType.INT, PortType.BOOL)
        self._swept = [lk for lk in lagging if lk.dst.spec.type in numeric]
        stuck = [c.name for c in self.order if not c.supports_rollback]
        if stuck and self._swept:
            raise ConfigError("sweeps", (
                f"sweeps > 1 needs rollback in every component; {', '.join(stuck)} cannot roll back (use sweeps=1)"))
        components = self.system.components
        self._swept_line = [self.master.extrapolation >= 1 and lk.dst.spec.type is PortType.REAL
                            and components[lk.connection.dst_component].interpolates_inputs for lk in self._swept]

    # ------------------------------------------------------------------ steps
    def advance(self, clock: Clock, a: int, b: int) -> int:
        if self.control is not None:
            return self._advance_controlled(clock, a, b)
        t = clock.time(a)
        if self._swept:
            saved = self.schedule.checkpoint(self.order)
            b, t1, ended = self._sweep_to(t, clock.time(b), b, saved)
        elif self._start_up:
            self._start_up = False
            b, t1, ended = self._start_up_to(t, clock.time(b), b, self.schedule.checkpoint(self.order))
        else:
            saved = self.schedule.checkpoint(self._guarded) if self._guarded else None
            b, t1, ended = self._step_to(t, clock.time(b), b, saved)
        self._close_step(t1, t1 - t, ended)
        if self.lagging:
            self.extrapolation.sample(t1)
        return b

    def _step_to(self, t: float, t1: float, b: int, saved: Checkpoint | None) -> tuple[int, float, str | None]:
        """Step the plan from *t* to *t1* (tick *b*) and exchange there; cut short where a component ends it early."""
        if self.lagging:
            self.extrapolation.extrapolate(t, t1 - t)
        return self._step_plan_to(t, t1, b, saved, extrapolate=True)

    def _step_plan_to(self, t: float, t1: float, b: int, saved: Checkpoint | None,
                      extrapolate: bool) -> tuple[int, float, str | None]:
        """Step the plan from *t* to *t1* with the inputs as they are given, and exchange; where a component ends the
        step early, cut it there (the lagging inputs extrapolated again over the shorter step with *extrapolate*)."""
        ended = None
        try:
            self.step_all(self.plan, t, t1 - t)
        except StepEndedEarly as exc:
            b, t1, ended = self.cutter.cut(self.plan, t, t1, exc, saved, extrapolate=extrapolate)
        self.schedule.settle(t1)
        return b, t1, ended

    def _start_up_to(self, t: float, t1: float, b: int, saved: Checkpoint) -> tuple[int, float, str | None]:
        """The first step under ``extrapolation: 2``: :meth:`_step_to`, then again from *saved* (at *t*) along the
        line from each lagging input's value at *t* to its value at the step's end (its mean over the step to a
        component that holds inputs).

        With no samples before *t* the first step can only hold the inputs. That one step's local error,
        ``O(dt**2)``, would cap the whole run's coupling error at order 2; stepped again along the line it is
        ``O(dt**3)``, and the run keeps order 3. Taken when every component can roll back (under ``sweeps > 1``
        the first step is iterated anyway). Under ``step_control: error`` the step's error estimate stays that
        of the held inputs, and a rejected first step is taken twice again, shorter.
        """
        b, t1, ended = self._step_to(t, t1, b, saved)
        if ended is not None:  # cut short by a component: that step stands
            return b, t1, ended
        h = t1 - t
        ends = [lk.dst.value for lk in self.lagging]
        self.schedule.roll_back(saved, t)
        extrapolation = self.extrapolation
        for lk, start, end, taylor in zip(self.lagging, extrapolation.values, ends, extrapolation.taylor, strict=True):
            if taylor:
                lk.dst.value, lk.dst.derivatives = start[-1], ((end - start[-1]) / h,)
            else:
                lk.dst.value = 0.5 * (start[-1] + end)
        return self._step_plan_to(t, t1, b, saved, extrapolate=False)

    def _sweep_to(self, t: float, t1: float, b: int, saved: Checkpoint) -> tuple[int, float, str | None]:
        """:meth:`_step_to`, then again from *saved* (at *t*) with the lagging inputs at their producers' latest
        end-of-step values, until those settle (``sweeps``, ``sweep_tolerance``, ``on_nonconvergence``)."""
        master, schedule, stats = self.master, self.schedule, self.stats
        swept, lines = self._swept, self._swept_line
        # held inputs (extrapolation 0): the first sweep already settled if they end where they were held
        held = [lk.dst.value for lk in swept] if master.extrapolation == 0 else None
        t_was = t1
        b, t1, ended = self._step_to(t, t1, b, saved)
        stats.step_iterations += 1
        ends = [lk.dst.value for lk in swept]
        if held is not None and t1 == t_was and self._settled(held, ends):
            return b, t1, ended
        change = np.zeros(len(swept))
        for _ in range(2, master.sweeps + 1):
            h = t1 - t
            schedule.roll_back(saved, t)
            for lk, end, line in zip(swept, ends, lines, strict=True):
                if line:
                    lk.dst.derivatives = ((end - lk.dst.value) / h,)
                else:
                    lk.dst.value = end
                    lk.dst.derivatives = ()
            t_was = t1
            try:
                self.step_all(self.plan, t, h)
            except StepEndedEarly as exc:
                b, t1, ended = self.cutter.cut(self.plan, t, t1, exc, saved, extrapolate=True)
            schedule.settle(t1)
            stats.step_iterations += 1
            new = [lk.dst.value for lk in swept]
            change = np.abs(np.subtract(new, ends, dtype=float))
            settled = t1 == t_was and self._settled(ends, new)
            ends = new
            if settled:
                return b, t1, ended
        worst = int(np.argmax(change))
        give_up(f"iterated step t={t:.9g} -> {t1:.9g} did not settle in {master.sweeps} sweeps: change "
                f"{float(change[worst]):.3g} on input {swept[worst].connection.dst} (sweep_tolerance "
                f"{master.sweep_tolerance:g})", master.on_nonconvergence, stats)
        return b, t1, ended

    def _settled(self, used: list[float], ends: list[float]) -> bool:
        """Whether the swept inputs' end values *ends* are those a sweep used (*used*), to ``sweep_tolerance``."""
        ends_ = np.asarray(ends, dtype=float)
        change = float(np.max(np.abs(ends_ - np.asarray(used, dtype=float))))
        return change <= self.master.sweep_tolerance * (1.0 + float(np.max(np.abs(ends_))))

    def _end_step(self, t1: float, h: float, ended: str | None) -> None:
        """After the components stepped to *t1* (by *h*): exchange, record the sample, note a step the component
        named *ended* ended early, handle the events seen over the step."""
        self.schedule.settle(t1)
        self._close_step(t1, h, ended)

    def _close_step(self, t1: float, h: float, ended: str | None) -> None:
        """Record the accepted sample at *t1*, note a step the component named *ended* ended early, handle the
        events seen over the step (of length *h*)."""
        self.recorder.sample(t1)
        if ended is not None or self._event_leavers:
            self._end_events(t1, ended)
        if self.events is not None:
            self._handle_events(t1, h)

    # ------------------------------------------------------------------ checkpoints
    def save_state(self, tick: int) -> dict[str, Any]:
        """The base run's state plus the extrapolation's samples and the error control's memory."""
        state = super().save_state(tick)
        state["extrapolation"] = self.extrapolation.save_state()
        state["control"] = self.control.save_state() if self.control is not None else None
        return state

    def restore_state(self, state: dict[str, Any]) -> int:
        tick = super().restore_state(state)
        self._start_up = self._start_up and tick == 0  # the first step was taken before the checkpoint
        self.extrapolation.restore_state(state["extrapolation"])
        if self.control is not None:
            self.control.restore_state(state["control"])
            self.step_log = self.control.log
        return tick

    # ------------------------------------------------------------------ error-controlled steps
    def _start_error_control(self, t0: float, events: bool) -> str:
        """Set up ``step_control: error`` at *t0* (see :mod:`.step_control`); *events*: whether components have
        event indicators. Returns the notice on how late events are handled.

        Without rollback, and always while components have event indicators, no step is longer than
        ``dt``; with rollback a step in which an indicator crosses zero is taken again up to just before
        the crossing, so that the step the event is handled at is at most the first step's length (see
        :meth:`_advance_controlled`). Components keep their internal steps as at ``dt``
        (:meth:`~cosimrun.core.component.CoSimComponent.bound_internal_steps`).
        """
        master, clock = self.master, self.clock
        span = clock.time(clock.end) - t0
        min_step = master.min_step if master.min_step is not None else 1e-6 * clock.dt
        max_step = master.max_step if master.max_step is not None else max(span, clock.dt)
        blind = min(max_step, max(min_step, clock.dt))
        if events:
            max_step = blind
        real = self.schedule.real_links
        if not real:
            notice(f"step control has no coupled real input to estimate an error from; steps are limited to "
                   f"{blind:.3g} s ({'run.dt' if blind == clock.dt else 'max_step'})", stacklevel=4)
        self._richardson = master.step_control == "richardson"
        """Whether each trial step is estimated by step doubling (:meth:`_doubled_step`)."""
        self._start_up = self._start_up and not self._richardson
        self.control = ErrorControl(real, self.coupling_kinds(real), self.extrapolation_order, rtol=master.rtol,
                                    atol=master.atol, min_step=min_step, max_step=max_step, blind_step=blind,
                                    richardson=self._richardson)
        self.control.start(t0)
        self.controlled = True
        self._min_ticks = max(clock.snap + 1, round(min_step / clock.tick))
        """``min_step`` in ticks, as steps are taken: a step this many ticks long or shorter stands."""
        self._first_step = min(max_step, max(min_step, master.rtol * clock.dt if master.rtol > 0 else clock.dt))
        self.next_step = self._first_step
        self._event_step = max(self._first_step, (clock.snap + 1) * clock.tick)
        """The longest step an event is handled at, with rollback: the first step, or the clock's shortest."""
        self._rejects = all(c.can_always_roll_back for c in self.order)
        self.step_log = self.control.log
        self.stats.step_control = master.step_control
        self.stats.step_rejection = "rollback" if self._rejects else "none"
        for comp in self.order:
            comp.bound_internal_steps(clock.dt)
        if self._rejects:
            self.schedule.hold_mode_switches(True)
            self.schedule.switch_modes(t0)
            self.stats.event_delay = self._event_step if events else math.nan
            return SHORTENED_NOTICE.format(resolution=self._event_step)
        self.stats.event_delay = blind if events else math.nan
        return CAPPED_NOTICE.format(limit=blind)

    def _advance_controlled(self, clock: Clock, a: int, b: int) -> int:
        """One accepted step from *a* towards *b* under error control: steps whose error norm exceeds 1 are
        rolled back and taken again, shorter, while every component can roll back.

        With rollback, a step longer than the first step in which an event indicator crosses zero (seen at its
        end or reported inside it by a component's integrator) is rolled back too and taken again up to half a
        first step before the crossing's estimated instant (at most 0.9 of it); the step after that is at most
        one first step past that instant. The step the event is handled at is thus at most a first step long,
        and the controller starts again after it.
        """
        control, schedule, stats = self.control, self.schedule, self.stats
        assert control is not None
        t = clock.time(a)
        rejects = self._rejects
        events = self.events if rejects else None
        resolution = self._event_step
        due = None
        rejected = stats.rejected_steps
        while True:
            if self._richardson:
                b, t1, ended, saved, norm = self._doubled_step(clock, a, b)
            else:
                b, t1, ended, saved = self._controlled_step(t, clock.time(b), b)
                norm = control.estimate(t1)
            h = t1 - t
            shortest = b - a <= self._min_ticks  # min_step (or the clock cannot take it shorter)
            crossing = None
            if events is not None:
                self._hints = events.drain_hints(events.sources)
                if h > resolution * (1.0 + 1e-9) and ended is None and not shortest:
                    crossing = events.earliest_crossing(t, t1, self._hints)
            accepted = crossing is None and (not norm > 1.0 or not rejects or ended is not None or shortest)
            control.log.append(t, h, norm, accepted)
            if accepted:
                break
            assert saved is not None
            schedule.roll_back(saved, t)
            if self._richardson and self.lagging:
                self.extrapolation.restore_state(self._samples)
            stats.rejected_steps += 1
            if crossing is not None:
                due = crossing + 0.5 * resolution
                shorter = min(0.9 * h, max(crossing - t - 0.5 * resolution, resolution))
            else:
                shorter = control.next_step(h, norm, accepted=False)
            b = a + max(clock.snap + 1, min(b - a - 1, round(shorter / clock.tick)))
        self._start_up = False
        if norm > 1.0:
            stats.steps_over_tolerance += 1
            if shortest:
                self._unreachable(t, h, norm)
        stats.smallest_step = h if not stats.smallest_step <= h else stats.smallest_step
        stats.largest_step = h if not stats.largest_step >= h else stats.largest_step
        if not norm > 0.0:
            stats.steps_without_estimate += 1
        self.next_step = control.next_step(h, norm, accepted=True)
        if self.cut_proposal is not None and norm <= 1.0 and stats.rejected_steps == rejected:
            self.next_step = max(self.next_step, self.cut_proposal)  # the step was short for a forced stop only
        if due is not None:
            self.next_step = min(self.next_step, max(due - t1, resolution))
        before = stats.events
        self._close_step(t1, h, ended)
        if rejects:
            schedule.switch_modes(t1)
        if stats.events > before:
            control.restart(t1)
            self.next_step = self._first_step
        else:
            control.accept(t1)
        if self.lagging:
            self.extrapolation.sample(t1)
        return b

    def _controlled_step(self, t: float, t1: float, b: int) -> tuple[int, float, str | None, Checkpoint | None]:
        """One trial of :meth:`_advance_controlled` from *t* to *t1* (tick *b*), exchanged at its end: the tick and
        instant reached, the component that ended it early (or ``None``) and the checkpoint at *t* (``None``: none
        taken, the step cannot be rejected)."""
        schedule = self.schedule
        if self._swept:
            saved = schedule.checkpoint(self.order)
            return (*self._sweep_to(t, t1, b, saved), saved)
        if self._start_up:
            saved = schedule.checkpoint(self.order)
            return (*self._start_up_to(t, t1, b, saved), saved)
        saved = schedule.checkpoint(self.order) if self._rejects else (
            schedule.checkpoint(self._guarded) if self._guarded else None)
        return (*self._step_to(t, t1, b, saved), saved)

    def _doubled_step(self, clock: Clock, a: int, b: int) -> tuple[int, float, str | None, Checkpoint, float]:
        """One trial under ``step_control: richardson`` from tick *a* to *b*: the step taken whole, rolled back, and
        taken again as two half steps (exchanged at the middle), whose end stands if the trial is accepted.

        The error norm compares the coupled outputs the whole step ended with against the half steps' (see
        :meth:`~.step_control.ErrorControl.estimate_doubled`). The half steps are kept, being the more accurate
        (their local error is ``2**-p`` of the whole step's) and the ones the estimate is of. The middle of an
        accepted step is a communication point of the extrapolation's history but not a recorded sample. A trial
        that a component ends early is halved over the span it reached; a half step ended early stands, with no
        estimate (NaN). Returns the tick and instant reached, the component that ended the step early (or
        ``None``), the checkpoint at the step's start and the error norm."""
        control, schedule, stats = self.control, self.schedule, self.stats
        assert control is not None
        t = clock.time(a)
        saved = schedule.checkpoint(self.order)
        self._samples = self.extrapolation.save_state() if self.lagging else None
        b, t1, ended = self._trial(t, clock.time(b), b, saved)
        coarse = control.values()
        schedule.roll_back(saved, t)
        middle = a + (b - a) // 2
        stats.half_steps += 2
        m, tm, ended_half = self._trial(t, clock.time(middle), middle, saved)
        if ended_half is None:
            if self.lagging:
                self.extrapolation.sample(tm)
            b, t1, ended_half = self._trial(tm, t1, b, self._trial_checkpoint())
            return b, t1, ended_half, saved, control.estimate_doubled(coarse)
        return m, tm, ended_half, saved, math.nan

    def _trial(self, t: float, t1: float, b: int, saved: Checkpoint | None) -> tuple[int, float, str | None]:
        """Step every component from *t* (at *saved*) to *t1* (tick *b*) and exchange there, as the master takes a
        step (iterated under ``sweeps > 1``)."""
        if self._swept:
            assert saved is not None
            return self._sweep_to(t, t1, b, saved)
        return self._step_to(t, t1, b, saved)

    def _trial_checkpoint(self) -> Checkpoint | None:
        """The checkpoint a step from now needs to be taken by :meth:`_trial` (cut short, or iterated)."""
        if self._swept:
            return self.schedule.checkpoint(self.order)
        return self.schedule.checkpoint(self._guarded) if self._guarded else None

    def _unreachable(self, t: float, h: float, norm: float) -> None:
        """The step of *h* from *t* stands at ``min_step`` with the error *norm* over 1: count it, and say so at the
        first (one line naming the input, what a discontinuity or a tolerance too tight for the coupling's order
        makes)."""
        stats, control = self.stats, self.control
        assert control is not None
        stats.steps_at_min_step += 1
        if stats.steps_at_min_step > 1:
            return
        worst = control.worst()
        link = control.links[worst]
        near_zero = (" (the input has been near 0 so far, so its tolerance is atol)"
                     if control.near_zero(worst) else "")
        notice(f"step control: the tolerance (rtol={self.master.rtol:g}, atol={self.master.atol:g}) is unreachable at "
               f"min_step={h:.3g} s at t={t:.9g} (error norm {norm:.3g} on input {link.connection.dst}){near_zero}; "
               f"such steps are taken once, over the tolerance, and counted in stats.steps_at_min_step", stacklevel=4)

    def finish(self) -> None:
        super().finish()
        if self.control is not None:
            for comp in self.order:
                comp.bound_internal_steps(None)
            if self._rejects:
                self.schedule.hold_mode_switches(False)

    def coupling_kinds(self, links: list[Link]) -> list[str]:
        """Fresh inputs: ``line`` or ``held`` (their end value); lagging ones: ``taylor``/``mean`` when
        extrapolated, else ``held``."""
        fresh = {id(entry[0]): entry[4] for _, _, reads in self.plan for entry in reads}
        fresh.update({id(lk.dst): line for lk, line in zip(self._swept, self._swept_line, strict=True)})
        taylor = {id(lk.dst): use for lk, use in zip(self.lagging, self.extrapolation.taylor, strict=True)}
        kinds = []
        for lk in links:
            key = id(lk.dst)
            if key in fresh:
                kinds.append("line" if fresh[key] else "held")
            elif key in taylor:
                kinds.append("taylor" if taylor[key] else "mean")
            else:
                kinds.append("held")
        return kinds

    # ------------------------------------------------------------------ events at communication points
    def _handle_events(self, t: float, h: float) -> None:
        """Handle the events whose indicators crossed over the step of length *h* ending at *t*.

        Modes may switch after the events; the indicators are then re-armed
        with the side each departs towards (see :meth:`StateEvents.depart`), so
        that leaving and crossing back within the next step is still seen.
        """
        events = self.events
        assert events is not None
        hints, self._hints = self._hints, None
        g_ref = events.reference(events.drain_hints(events.sources) if hints is None else hints)
        g = events.indicators()
        crossings = events.crossings(g_ref, g)
        if crossings:
            g = events.handle(t, crossings)
        if self.schedule.switch_modes(t):
            g = events.indicators()
        if crossings:
            self._depart(t, g, h)
        else:
            events.arm(g)

    def _depart(self, t: float, g: Indicators, h: float) -> None:
        """Re-arm the indicators at *t*, probing over ``PROBE_FRACTION * h`` when the sources can roll back."""
        assert self.events is not None
        trial = None if self._probe_plan is None else (lambda t1: self._probe_step(t, t1))
        self.events.depart(t, g, self.events.sources, trial, PROBE_FRACTION * h, h, h)

    def _probe_step(self, t: float, t1: float) -> Indicators:
        """Step the event sources from *t* to *t1* for a probe (cut short where a component ends it early)."""
        assert self.events is not None and self._probe_plan is not None
        saved = self.schedule.checkpoint(self._probe_guarded) if self._probe_guarded else None
        try:
            self.step_all(self._probe_plan, t, t1 - t)
        except StepEndedEarly as exc:
            self.cutter.cut(self._probe_plan, t, t1, exc, saved)
        return self.events.indicators()

