"""State events shared by every master: armed indicator sides, crossings, subscribers, micro steps.

An indicator is *armed* with the side of zero it is on: the sign of its last
nonzero value at an accepted instant, or after an event the side it departs
towards. A crossing is a strict change of sign against that side, so an
indicator that reaches zero and turns back is no event, one that passes zero is
one however briefly it stays past it, and no band on indicator values decides
where an event is (``sign_tolerance``, 0 by default, only treats noise around
zero as zero).

A master that locates events (hybrid) hands the located instant to
:meth:`StateEvents.handle`; masters that do not (Jacobi, Gauss-Seidel, IJCSA)
compare the indicators after each macro step against their armed sides and hand
the communication point to the same method, so events are handled the same way
everywhere, only up to one step late without localization. Under error-controlled
steps those masters keep that step short (see :meth:`StateEvents.earliest_crossing`
and :func:`unlocated_notice`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cosimrun.console import notice
from cosimrun.core.component import CoSimComponent
from cosimrun.errors import EventLocalizationError, ZenoError

if TYPE_CHECKING:
    from cosimrun.masters.plan import Schedule
    from cosimrun.masters.stats import MasterStats
    from cosimrun.system.recorder import Recorder

Indicators = dict[str, dict[str, float]]
"""Indicator values by component and indicator name."""
Crossing = tuple[CoSimComponent, str]
"""A component and the name of one of its indicators that crossed zero."""
Hints = dict[tuple[str, str], Any]
"""The earliest internal event hint by ``(component, event)``."""
Trial = Callable[[float], Indicators]
"""Steps the event sources from the current instant to a later time and returns their indicators."""

LOCATED = "located"
AT_COMMUNICATION_POINTS = "at communication points"
UNLOCATED_NOTICE = "events are handled at communication points, up to dt late; use master=hybrid to locate them"
SHORTENED_NOTICE = ("events are handled at the end of the step they occur in, and step control takes a step in which "
                    "an event indicator crosses zero again, shorter, until it is at most {resolution:.3g} s (the first "
                    "step, rtol * run.dt): each is handled at most that late; use master=hybrid to locate them")
CAPPED_NOTICE = ("events are handled at communication points, up to one step late, and step control keeps steps at "
                 "most {limit:.3g} s (run.dt) while components have event indicators (a component cannot roll back "
                 "to shorten the step an event occurs in); use master=hybrid to locate them")
PROBE_GROWTH = 16
"""Factor by which a departure probe grows while an indicator stays exactly on its surface."""


class StateEvents:
    """The event sources of one run, the sides their indicators are armed with, and event handling.

    *schedule* settles the system after events and checkpoints probes, *recorder* records the events and the
    samples after them, *stats* counts them; *sign_tolerance* and *max_micro_steps* are the master's settings.
    *min_interval* and *zeno_events* guard against a Zeno accumulation: when
    one indicator fires *zeno_events* times in a row, each less than
    *min_interval* after the one before, the run stops with :class:`ZenoError`
    (0 disables the guard).
    """

    def __init__(self, sources: list[CoSimComponent], schedule: Schedule, recorder: Recorder, stats: MasterStats,
                 stop_pending: Callable[[], bool], *, sign_tolerance: float, max_micro_steps: int,
                 min_interval: float = 0.0, zeno_events: int = 0) -> None:
        self.sources = sources
        self.schedule = schedule
        self.recorder = recorder
        self.stats = stats
        self.stop_pending = stop_pending
        """Whether a component asked to end the run at the current instant (nothing is probed past it)."""
        self.sign_tolerance = sign_tolerance
        self.max_micro_steps = max_micro_steps
        system = schedule.system
        self.subscribers: dict[tuple[str, str], list[CoSimComponent]] = {}
        for ev in system.event_connections:
            self.subscribers.setdefault((ev.source, ev.event), []).append(system.components[ev.subscriber])
        self.armed: Indicators = {}
        self.fired: set[tuple[str, str]] = set()
        """The indicators handled at the last event instant."""
        self.min_interval = min_interval
        self.zeno_events = zeno_events
        self._runs: dict[tuple[str, str], tuple[float, int]] = {}

    def indicators(self) -> Indicators:
        """Current indicator values of every source."""
        return {c.name: c.evaluate_event_indicators() for c in self.sources}

    def _signed(self, value: float) -> bool:
        return abs(value) > self.sign_tolerance

    def arm(self, g: Indicators) -> None:
        """Arm each indicator with the side of its value in *g*, taken at an accepted instant.

        An indicator exactly on its surface keeps the side it had (it touched
        zero without crossing); a new one (a mode switch added it) has none yet.
        """
        armed = {}
        for comp in self.sources:
            old = self.armed.get(comp.name, {})
            armed[comp.name] = {n: v if self._signed(v) else old.get(n, 0.0) for n, v in g[comp.name].items()}
        self.armed = armed

    def reference(self, hints: Hints) -> Indicators:
        """The armed sides to compare a step's end against.

        An indicator with no side yet (on its surface since an event, its
        departure unknown) takes the side its component's internal hint says it
        left towards before crossing back within the step, if there is one.
        """
        out: Indicators | None = None
        for comp in self.sources:
            for name, value in self.armed[comp.name].items():
                if value != 0.0:
                    continue
                hint = hints.get((comp.name, name))
                if hint is None or hint.indicator_before is None or not self._signed(hint.indicator_before):
                    continue
                if out is None:
                    out = {c: dict(v) for c, v in self.armed.items()}
                out[comp.name][name] = hint.indicator_before
        return self.armed if out is None else out

    def crossings(self, before: Indicators, after: Indicators) -> list[Crossing]:
        """Indicators whose value in *after* is strictly past zero from their side in *before*, in their direction."""
        out = []
        tol = self.sign_tolerance
        for comp in self.sources:
            for name in comp.detect_event_crossings(before[comp.name], after[comp.name], tol):
                out.append((comp, name))
        return out

    @staticmethod
    def drain_hints(components: list[CoSimComponent]) -> Hints:
        """Collect (and clear) the internal event hints of *components*, the earliest per event."""
        hints: Hints = {}
        for comp in components:
            for hint in comp.get_internal_event_hints():
                key = (comp.name, hint.event_name)
                if key not in hints or hint.t_after < hints[key].t_after:
                    hints[key] = hint
        return hints

    def earliest_crossing(self, t: float, t1: float, hints: Hints) -> float | None:
        """The earliest estimated instant in ``[t, t1]`` at which an indicator crossed over the step from *t* to
        *t1* (the sources stepped there), or ``None`` when none did.

        A crossing is one the indicators at *t1* show against their armed sides
        (:meth:`reference` with *hints*), or one a component's integrator reported
        inside the step (its internal event hint) that the step's end does not
        show (the indicator crossed and came back). Its instant is the secant root
        of the hint's bracket when there is one, else of the armed side and the
        value at *t1* over the step.
        """
        g_ref = self.reference(hints)
        g_now = self.indicators()
        roots = [secant_root(t, t1, g_ref[comp.name][name], g_now[comp.name][name])
                 for comp, name in self.crossings(g_ref, g_now) if (comp.name, name) not in hints]
        roots += [secant_root(h.t_before, h.t_after, h.indicator_before, h.indicator_after) for h in hints.values()]
        return min(max(min(roots), t), t1) if roots else None

    def depart(
        self, t: float, g_now: Indicators, components: list[CoSimComponent] | None, trial: Trial | None,
        length: float, longest: float, window: float,
    ) -> None:
        """Arm the indicators after the events at *t* (or at the start) with the side each departs towards.

        Indicators that fired at *t* or sit exactly on their surface are
        probed: *components* take a trial step of *length* (``trial(t1)``),
        growing ``PROBE_GROWTH`` times up to *longest* while one stays on its
        surface, and are rolled back. One on its surface departs to the probe's
        side; one the probe shows across zero (an event handler that reversed
        its motion) departs to that side unless that crossing is itself an
        event; one heading back to zero that the probe's secant says gets there
        within *window* is armed across likewise. Without a *trial* (sources
        that cannot roll back), signed values arm as they are and the rest take
        their side from the next step's hints or end. Nothing is probed once a
        component asked to end the run there.
        """
        self.arm(g_now)
        keys = [(c, n) for c in self.sources for n, v in g_now[c.name].items()
                if (c.name, n) in self.fired or not self._signed(v)]
        if not keys:
            return
        if trial is None or components is None or self.stop_pending():  # no probe past a stop
            for comp, name in keys:
                if not self._signed(g_now[comp.name][name]):
                    self.armed[comp.name][name] = 0.0
            return
        schedule = self.schedule
        saved = schedule.checkpoint(components)
        while True:
            g_probe = trial(t + length)
            self.drain_hints(components)
            schedule.roll_back(saved, t)
            if length >= longest or all(self._signed(g_probe[c.name][n]) for c, n in keys):
                break
            length = min(longest, length * PROBE_GROWTH)
        for comp, name in keys:
            self.armed[comp.name][name] = self._departure(comp, name, g_now[comp.name][name],
                                                          g_probe[comp.name][name], length, window)

    def _departure(self, comp: CoSimComponent, name: str, now: float, probe: float, length: float,
                   window: float) -> float:
        """The side an indicator at *now* departs towards, given its value *probe* after *length*."""
        if not self._signed(now):
            return probe if self._signed(probe) else 0.0
        if not self._signed(probe):
            return now
        if (now > 0) != (probe > 0):
            across = probe
        elif abs(probe) < abs(now) and length * now / (now - probe) <= window:
            across = -now
        else:
            return now
        tol = self.sign_tolerance
        return now if comp.detect_event_crossings({name: now}, {name: across}, tol) else across

    def save_state(self) -> dict[str, Any]:
        """The armed sides, the indicators handled last and the Zeno counters, as plain values."""
        return {
            "armed": {c: dict(v) for c, v in self.armed.items()},
            "fired": [[c, n] for c, n in sorted(self.fired)],
            "runs": [[c, n, t, run] for (c, n), (t, run) in self._runs.items()],
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`save_state`'s *state*."""
        self.armed = {c: dict(v) for c, v in state["armed"].items()}
        self.fired = {(c, n) for c, n in state["fired"]}
        self._runs = {(c, n): (t, run) for c, n, t, run in state["runs"]}

    def handle(self, t_e: float, crossings: list[Crossing]) -> Indicators:
        """Handle events at *t_e* in micro steps until no indicator crosses again; the indicators after."""
        recorder, stats = self.recorder, self.stats
        self.fired = {(c.name, n) for c, n in crossings}
        self._guard_zeno(t_e)
        micro = 1
        g_now = self.indicators() if not crossings else {}
        while crossings:
            if micro > self.max_micro_steps:
                names = ", ".join(f"{c.name}.{n}" for c, n in crossings)
                raise EventLocalizationError(
                    f"more than {self.max_micro_steps} event iterations at t={t_e:.12g} ({names}): "
                    "an event cascade that does not settle", time=t_e
                )
            by_comp: dict[str, tuple[CoSimComponent, list[str]]] = {}
            for comp, name in crossings:
                by_comp.setdefault(comp.name, (comp, []))[1].append(name)
                recorder.event(t_e, micro - 1, comp.name, name)
                stats.events += 1
                for sub in self.subscribers.get((comp.name, name), ()):
                    by_comp.setdefault(sub.name, (sub, []))[1].append(name)
            before = self.indicators()
            for comp, names in by_comp.values():
                comp.handle_event(names, t_e, micro)
            self.schedule.settle(t_e)
            recorder.sample(t_e, micro)
            g_now = self.indicators()
            crossings = self.crossings(before, g_now)
            self.fired.update((c.name, n) for c, n in crossings)
            micro += 1
        return g_now

    def _guard_zeno(self, t_e: float) -> None:
        """Count, per indicator, events less than ``min_interval`` apart; raise at ``zeno_events`` in a row."""
        if not self.zeno_events:
            return
        for key in self.fired:
            last = self._runs.get(key)
            run = last[1] + 1 if last is not None and t_e - last[0] < self.min_interval else 1
            self._runs[key] = (t_e, run)
            if run >= self.zeno_events:
                comp, name = key
                raise ZenoError(
                    f"component {comp!r}: event indicator {name!r} fired {run} times in a row less than "
                    f"{self.min_interval:.3g} s apart, up to t={t_e:.12g} (a Zeno accumulation: give the component "
                    "a rest state, or change master.min_event_interval or master.zeno_events)",
                    component=comp, time=t_e, indicator=name,
                )


def secant_root(t0: float, t1: float, g0: float | None, g1: float | None) -> float:
    """The secant root of an indicator going from *g0* at *t0* to *g1* at *t1* (the midpoint without values)."""
    if g0 is None or g1 is None or g0 == g1:
        return 0.5 * (t0 + t1)
    return t0 + (t1 - t0) * (g0 / (g0 - g1))


def notice_unlocated(sources: list[CoSimComponent], text: str = UNLOCATED_NOTICE) -> None:
    """Warn once per run that a master without localization handles *sources*' events late (*text*: how late)."""
    if sources:
        notice(text, stacklevel=3)
