"""Hybrid master: state events located by rollback, handled at superdense time.

Each macro step is first taken as a trial: rollback-capable components step in
priority order (fresh outputs used at once, as in Gauss-Seidel) and every event
indicator at its end is compared with the side of zero it is armed with (see
:mod:`cosimrun.masters.events`), so no sign change goes without an event,
however short the excursion. Without a crossing the step is
accepted. With one, every component is rolled back and re-stepped to trial
times chosen by a bracketing root finder on the earliest crossing indicator
(Illinois regula falsi, started from the components' internal event hints when
they report any, safeguarded by bisection: whenever the bracket falls behind
bisection's pace by more than ``SLACK_STEPS`` steps the next step bisects, and
once a trial repeats an end's indicator value every step does, so an indicator
that is piecewise constant in time, such as an FMU output held over its
internal steps, costs about as many steps as bisection) until the bracket is
narrower than ``time_tolerance``; the event instant is the bracket's right end,
where the indicator is strictly past zero: each event is located at most
``time_tolerance`` after its crossing.
Events are then handled at ``(t, 1), (t, 2), ...`` until no indicator crosses
again, at most ``max_micro_steps`` times, and the indicators are re-armed with
the side each departs towards (a probe step of ``time_tolerance``, longer while
one stays exactly on its surface). An indicator that fires ``zeno_events`` times
in a row, each less than ``min_event_interval`` after the last, is a Zeno
accumulation: the run stops with :class:`~cosimrun.errors.ZenoError` unless the
component reaches a rest state of its own first (the bouncing ball's
``v_rest``).

Components that cannot roll back step once per accepted step, from the inputs
at its start; they cannot host event indicators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ConfigError, StepEndedEarly
from cosimrun.masters.base import Master, MasterRun
from cosimrun.masters.cutting import StepCut
from cosimrun.masters.events import Hints, Indicators, secant_root
from cosimrun.masters.plan import Checkpoint, may_discard
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.system.system import System

ROOT_FINDERS = ("illinois", "bisection")
SLACK_STEPS = 3
"""Trial steps a localization may spend beyond bisection's count before it must keep bisection's pace."""


def _on_budget(width0: int, width: int, step: int) -> bool:
    """Whether trial *step* may be one that does not shrink the bracket of *width* (from *width0*).

    The bracket after trial step ``k`` stays within ``width0 / 2**(k - SLACK_STEPS)``, so a
    localization takes at most ``SLACK_STEPS`` steps more than bisection, whatever the indicator.
    """
    return width * 2 ** max(0, step - SLACK_STEPS) <= width0


@dataclass(frozen=True)
class Hybrid(Master):
    """Event-locating master for systems with state events and mode switches."""

    time_tolerance: float = 1e-10
    """Width of the final bracket around an event instant, in seconds."""
    root_finder: str = "illinois"
    use_hints: bool = True
    min_event_interval: float | None = None
    """Events of one indicator closer together than this count towards a Zeno accumulation, and the
    departure after an event is judged over this span; default ``1000 * time_tolerance``."""
    zeno_events: int = 10
    """Events in a row, each closer than ``min_event_interval`` to the last, that stop the run."""

    name: ClassVar[str] = "hybrid"
    locates_events: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choice("root_finder", self.root_finder, ROOT_FINDERS)
        self._check("time_tolerance", self.time_tolerance > 0, "must be positive")
        if self.min_event_interval is not None:
            self._check("min_event_interval", self.min_event_interval > 0, "must be positive")
        self._check("zeno_events", int(self.zeno_events) >= 2, "must be >= 2")

    @property
    def event_interval(self) -> float:
        """``min_event_interval``, or its default ``1000 * time_tolerance``."""
        return 1000.0 * self.time_tolerance if self.min_event_interval is None else self.min_event_interval

    def start(self, system: System) -> HybridRun:
        return HybridRun(self, system)


class HybridRun(MasterRun):
    """A run of :class:`Hybrid`: trial steps, events located by rollback, passive components stepped once."""

    master: Hybrid

    def __init__(self, master: Hybrid, system: System) -> None:
        super().__init__(master, system)
        self._cut_guard: list[CoSimComponent] | None = None
        self._passive_order: list[CoSimComponent] = []
        self._trial_saved: Checkpoint | None = None
        self._ahead: tuple[CoSimComponent, StepEndedEarly, float] | None = None
        self._pending: tuple[float, str] | None = None

    # ------------------------------------------------------------------ setup
    def begin(self, t0: float) -> None:
        master, schedule = self.master, self.schedule
        comps = list(self.order)
        self._rollback = [c for c in comps if c.can_always_roll_back]
        self._passive = [c for c in comps if not c.can_always_roll_back]
        for comp in self._passive:
            if comp.event_indicators:
                raise ConfigError(None, (
                    f"component {comp.name!r} has event indicators but cannot roll back (supports_rollback is "
                    "False, for itself or one of its modes), so it cannot be an event source under the hybrid master"))
        self._sources = [c for c in self._rollback if c.has_state_events]
        self._plan, _ = schedule.stepping_plan(self._rollback, fresh=True)
        self._passive_inputs = [p for c in self._passive for p in c.inputs.values()]
        self._events = self.events = self.new_events(self._sources, min_interval=master.event_interval,
                                                     zeno_events=int(master.zeno_events))
        schedule.hold_mode_switches(True)
        self._switch_modes(t0)
        if self._sources:
            self._depart(t0, self._events.indicators())

    def finish(self) -> None:
        self.schedule.hold_mode_switches(False)

    # ------------------------------------------------------------------ helpers
    def _depart(self, t: float, g_now: Indicators) -> None:
        """Re-arm the indicators at *t* (see :meth:`StateEvents.depart`) from probes of ``time_tolerance`` on."""
        master = self.master
        self._events.depart(t, g_now, self._rollback, lambda t1: self._trial(t, t1), master.time_tolerance,
                            self.clock.dt, master.event_interval)

    def _trial(self, t: float, t1: float) -> Indicators:
        """Step the rollback components from *t* to *t1* (see :meth:`_cut_trial` for a component that ends it early)."""
        if self.fixed:
            self.cutter.require_fixed_step(self._rollback, t, t1, "locating or probing a state event")
        guard = self._cut_guard if self._cut_guard is not None else self._prepare_cuts()
        saved = self._trial_saved = self.schedule.checkpoint(guard) if guard else None
        try:
            self.step_all(self._plan, t, t1 - t)
        except StepEndedEarly as exc:
            self._cut_trial(t, t1, exc, saved)
        self.schedule.settle(t1)
        self.stats.trial_steps += 1
        return self._events.indicators()

    def _drain_hints(self) -> Hints:
        return self._events.drain_hints(self._rollback)

    # ------------------------------------------------------------------ stepping
    def advance(self, clock: Clock, a: int, b: int) -> int:
        t = clock.time(a)
        saved = self.schedule.checkpoint(self._rollback) if self._sources else None
        passive_in = [p.value for p in self._passive_inputs]
        g_b = self._trial(t, clock.time(b))
        hints = self._drain_hints()
        if not self._sources:
            self._accept(t, clock.time(b), passive_in)
            self.schedule.switch_modes(clock.time(b))
            return b
        g_a = self._events.reference(hints)
        crossings = self._events.crossings(g_a, g_b)
        if not crossings:
            self._accept(t, clock.time(b), passive_in)
            self._events.arm(g_b)
            self._switch_modes(clock.time(b))
            return b
        trials_before = self.stats.trial_steps
        hi, _, crossings = self._localize(clock, a, b, g_a, g_b, crossings, hints, saved)
        t_e = clock.time(hi)
        self._accept(t, t_e, passive_in)
        self.stats.event_trial_steps.append(self.stats.trial_steps - trials_before)
        g_now = self._events.handle(t_e, crossings)
        if self.schedule.switch_modes(t_e):
            g_now = self._events.indicators()
        self._depart(t_e, g_now)
        return hi

    def _accept(self, t: float, t1: float, passive_in: list[Any]) -> None:
        """Step the passive components over the accepted interval; *t1* is an accepted sample.

        A passive component that ends its step early cuts the step (see :meth:`_cut_accept`).
        """
        self.step_open = False
        if self._passive:
            if self.fixed:
                self.cutter.require_fixed_step(self._passive, t, t1, "accepting a step up to a state event")
            if self._cut_guard is None:
                self._prepare_cuts()
            now = [p.value for p in self._passive_inputs]
            for port, value in zip(self._passive_inputs, passive_in, strict=True):
                port.value = value
            ahead, stepped = self._ahead, []
            try:
                for comp in self._passive_order:
                    if ahead is not None and comp is ahead[0]:
                        self._catch_up(ahead, t1)
                        continue
                    push = self.schedule.pushers[comp.name]
                    if push is not None:
                        push(t)
                    comp.do_step(t, t1 - t)
                    stepped.append(comp)
            except StepEndedEarly as exc:
                self._cut_accept(t, t1, exc, stepped)
            self._ahead = None
            for port, value in zip(self._passive_inputs, now, strict=True):
                port.value = value
            self.schedule.settle(t1)
        self.recorder.sample(t1)
        pending, self._pending = self._pending, None
        self._end_events(t1, pending[1] if pending is not None and pending[0] == t1 else None)

    def _switch_modes(self, t: float) -> None:
        """Switch modes at the accepted instant *t*; arm the indicators of the modes now active."""
        if self.schedule.switch_modes(t) and self._sources:
            self._events.arm(self._events.indicators())

    def _localize(
        self,
        clock: Clock,
        a: int,
        b: int,
        g_a: Indicators,
        g_b: Indicators,
        crossings: list[tuple[CoSimComponent, str]],
        hints: dict[tuple[str, str], Any],
        saved: Any,
    ) -> tuple[int, Indicators, list[tuple[CoSimComponent, str]]]:
        """Shrink ``[a, b]`` around the earliest crossing; return (tick, indicators there, crossings).

        Trial points are hint guesses, then Illinois secant points, each only while the bracket
        keeps within bisection's pace plus ``SLACK_STEPS`` steps (see :func:`_on_budget`) and no
        trial has repeated an end's indicator value (flat: secant points carry no information),
        else the bracket's midpoint.
        """
        t_a = clock.time(a)
        lo, hi = a, b
        g_lo, g_hi = g_a, g_b
        target = self._earliest(crossings, clock, lo, hi, g_lo, g_hi, hints)
        # A crossing ends in the zero band |g| <= sign_tolerance, so the root bracketed is the band's
        # edge on the starting side: an end inside the band would otherwise have the sign of the
        # start and stall the secant steps (bisection fallback).
        master = self.master
        shift = math.copysign(master.sign_tolerance, g_lo[target[0]][target[1]])
        f_lo, f_hi = g_lo[target[0]][target[1]] - shift, g_hi[target[0]][target[1]] - shift
        guesses = self._hint_guesses(target, hints, clock) if master.use_hints else []
        retained = 0
        at_hi = True
        tol_ticks = max(1, int(master.time_tolerance / clock.tick))
        width0, steps, flat = hi - lo, 0, False
        while hi - lo > tol_ticks:
            tau = None
            if not flat and _on_budget(width0, hi - lo, steps + 1):
                while guesses and tau is None:
                    guess = guesses.pop(0)
                    tau = guess if lo < guess < hi else None
                if tau is None and master.root_finder != "bisection" and f_lo != f_hi and f_lo * f_hi <= 0:
                    tau = lo + round((hi - lo) * (f_lo / (f_lo - f_hi)))
            if tau is None:
                tau = lo + (hi - lo) // 2
            tau = min(max(tau, lo + 1), hi - 1)
            steps += 1
            self.schedule.roll_back(saved, t_a)
            g_tau = self._trial(t_a, clock.time(tau))
            self._drain_hints()
            found = self._events.crossings(g_a, g_tau)
            value = g_tau[target[0]][target[1]]
            flat = flat or value in (g_lo[target[0]][target[1]], g_hi[target[0]][target[1]])
            if found:
                hi, g_hi, crossings, at_hi = tau, g_tau, found, True
                if target not in [(c.name, n) for c, n in found]:
                    target = self._earliest(found, clock, lo, hi, g_lo, g_hi, {})
                    shift = math.copysign(master.sign_tolerance, g_lo[target[0]][target[1]])
                    f_lo, retained = g_lo[target[0]][target[1]] - shift, 0
                f_hi = g_tau[target[0]][target[1]] - shift
                if retained < 0:
                    f_lo *= 0.5
                retained = -1
            else:
                lo, g_lo, at_hi = tau, g_tau, False
                f_lo = g_tau[target[0]][target[1]] - shift
                if retained > 0:
                    f_hi *= 0.5
                retained = 1
        if not at_hi:
            self.schedule.roll_back(saved, t_a)
            g_hi = self._trial(t_a, clock.time(hi))
            self._drain_hints()
        return hi, g_hi, crossings

    def _earliest(self, crossings, clock: Clock, lo: int, hi: int, g_lo, g_hi, hints) -> tuple[str, str]:
        """The crossing whose estimated instant comes first (hints, else linear interpolation)."""
        best, best_t = None, None
        t_lo, t_hi = clock.time(lo), clock.time(hi)
        for comp, name in crossings:
            hint = hints.get((comp.name, name))
            if hint is not None:
                est = hint.t_before
            else:
                g0, g1 = g_lo[comp.name][name], g_hi[comp.name][name]
                est = secant_root(t_lo, t_hi, g0, g1) if g0 != g1 else t_lo
            if best_t is None or est < best_t:
                best, best_t = (comp.name, name), est
        assert best is not None
        return best

    def _hint_guesses(self, target: tuple[str, str], hints, clock: Clock) -> list[int]:
        """Trial ticks from an internal hint: just before and after its interpolated root, then its ends.

        Guesses outside the bracket reached by then are skipped, so the hint's
        ends close the bracket around the root when the interpolation missed it.
        """
        hint = hints.get(target)
        if hint is None:
            return []
        ends = [clock.ticks(hint.t_after), clock.ticks(hint.t_before)]
        g0, g1 = hint.indicator_before, hint.indicator_after
        width = hint.t_after - hint.t_before
        if g0 is None or g1 is None or g0 == g1:
            return ends
        root = hint.t_before + width * g0 / (g0 - g1)
        margin = max(self.master.time_tolerance, 1e-3 * width)
        return [clock.ticks(root - margin), clock.ticks(root + margin), *ends]

    # ------------------------------------------------------------------ steps ended early
    def _prepare_cuts(self) -> list[CoSimComponent]:
        """What a trial checkpoints so that a component ending a step early can be handled (once per run).

        A step is cut by taking it again up to the instant that component
        reached, from its start: a trial therefore checkpoints the rollback
        components up to the last one among them that may end a step early, or
        all of them when a passive one (no rollback) may, since those step
        after the trial is accepted. Passive components step from the inputs at
        the step's start, so their order changes nothing: such ones step first.
        """
        plan = [c for c, _, _ in self._plan]
        self._passive_order = sorted(self._passive, key=lambda c: not may_discard(c))
        if any(may_discard(c) for c in self._passive):
            self._cut_guard = plan
        else:
            self._cut_guard = plan[:max((i + 1 for i, c in enumerate(plan) if may_discard(c)), default=0)]
        return self._cut_guard

    def _cut_trial(self, t: float, t1: float, exc: StepEndedEarly, saved: Checkpoint | None) -> None:
        """A component ended a trial step from *t* to *t1* early.

        While the step is open (nothing accepted yet), everything goes back to
        *t* and :class:`StepCut` makes :meth:`MasterRun.run` take the step
        again up to the instant it reached, with events located inside it as
        usual; its event (``discard``) is recorded when the instant is
        accepted. A probe after an accepted instant is only cut short there.
        """
        if not self.step_open:
            self.cutter.cut(self._plan, t, t1, exc, saved)
            return
        plan = [c for c, _, _ in self._plan]
        ender = plan[self.cutter.ender(plan, exc)]
        tick = self.cutter.check(ender, exc, t1, [], {})
        assert saved is not None  # the trial checkpointed every component up to that one
        self.schedule.roll_back(saved, t)
        self._cut_at(tick, ender.name)

    def _cut_accept(self, t: float, t1: float, exc: StepEndedEarly, stepped: list[CoSimComponent]) -> None:
        """A passive component ended its step from *t* to the accepted *t1* early: take the step again up to there.

        The rollback components go back to *t* (the last trial's checkpoint);
        the component, which cannot roll back, stays where it stopped until
        the step taken again reaches it (see :meth:`_catch_up`). Passive
        components stepped before it cannot roll back: the run then fails.
        """
        ender = self._passive_order[self.cutter.ender(self._passive_order, exc)]
        tick = self.cutter.check(ender, exc, t1, stepped, {})
        if self._trial_saved is not None:
            self.schedule.roll_back(self._trial_saved, t)
        self._ahead = (ender, exc, t1)
        self._cut_at(tick, ender.name)

    def _catch_up(self, ahead: tuple[CoSimComponent, StepEndedEarly, float], t1: float) -> None:
        """The passive component that ended the step early is already at the accepted *t1*: read its outputs."""
        ender, exc, end = ahead
        if self.clock.ticks(t1) != self.clock.ticks(exc.reached):
            raise self.cutter.error(ender, exc, end, (
                f"a state event was located at t={t1:.12g} before that, and the component cannot roll back to it"))
        ender.refresh_outputs(t1)

    def _cut_at(self, tick: int, name: str) -> None:
        """Note that component *name* ended the step at the instant of *tick*; take the open step again up to it."""
        self._pending = (self.clock.time(tick), name)
        raise StepCut(tick)
