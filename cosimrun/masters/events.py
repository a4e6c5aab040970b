"""State events shared by every master: indicator snapshots, crossings, subscribers, micro steps.

A master that locates events (hybrid) hands the located instant to
:meth:`StateEvents.handle`; masters that do not (Jacobi, Gauss-Seidel, IJCSA)
compare the indicators before and after each macro step and hand the
communication point to the same method, so events are handled the same way
everywhere, only up to one step late without localization.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cosimrun.core.component import CoSimComponent
from cosimrun.errors import EventLocalizationError

if TYPE_CHECKING:
    from cosimrun.masters.base import Master

Indicators = dict[str, dict[str, float]]
"""Indicator values by component and indicator name."""
Crossing = tuple[CoSimComponent, str]
"""A component and the name of one of its indicators that crossed zero."""
Hints = dict[tuple[str, str], Any]
"""The earliest internal event hint by ``(component, event)``."""

LOCATED = "located"
AT_COMMUNICATION_POINTS = "at communication points"
UNLOCATED_NOTICE = "events are handled at communication points, up to dt late; use master=hybrid to locate them"


class StateEvents:
    """The event sources of one run and what every master does with their indicators."""

    def __init__(self, master: Master, sources: list[CoSimComponent]) -> None:
        assert master.system is not None
        self.master = master
        self.sources = sources
        self.subscribers: dict[tuple[str, str], list[CoSimComponent]] = {}
        for ev in master.system.event_connections:
            self.subscribers.setdefault((ev.source, ev.event), []).append(master.system.components[ev.subscriber])
        self.stand_ins: set[tuple[str, str]] = set()
        self.probes: dict[tuple[str, str], float] = {}

    def indicators(self) -> Indicators:
        """Current indicator values of every source."""
        return {c.name: c.evaluate_event_indicators() for c in self.sources}

    def crossings(self, before: Indicators, after: Indicators) -> list[Crossing]:
        """Indicators that crossed from *before* to *after*.

        One compared from a stand-in (see :meth:`reference`) must end strictly
        past the surface: staying on it is not a crossing.
        """
        out = []
        tol = self.master.sign_tolerance
        for comp in self.sources:
            for name in comp.detect_event_crossings(before[comp.name], after[comp.name], tol):
                if (comp.name, name) in self.stand_ins and abs(after[comp.name][name]) <= tol:
                    continue
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

    def reference(self, g_a: Indicators, hints: Hints) -> Indicators:
        """Indicator values to compare a step's end against.

        Right after an event an indicator may sit on its surface (sign 0), where
        a step's end points cannot show a crossing, though the component may
        leave the surface and cross back within one step (a ball bouncing faster
        than the macro step). Such an indicator is compared from the side it
        leaves towards: the value before the crossing when the component
        reported a hint, else the value of the probe taken just after the event
        (see :meth:`probe`). One that stays on the surface cannot cross.
        """
        probes, self.probes = self.probes, {}
        tol = self.master.sign_tolerance
        self.stand_ins = set()
        out: Indicators | None = None
        for comp in self.sources:
            for name, value in g_a[comp.name].items():
                if abs(value) > tol:
                    continue
                hint = hints.get((comp.name, name))
                if hint is not None and hint.indicator_before is not None and abs(hint.indicator_before) > tol:
                    stand_in = hint.indicator_before
                elif (comp.name, name) in probes:
                    stand_in = probes[(comp.name, name)]
                else:
                    continue
                if out is None:
                    out = {c: dict(v) for c, v in g_a.items()}
                out[comp.name][name] = stand_in
                self.stand_ins.add((comp.name, name))
        return g_a if out is None else out

    def probe(
        self, t: float, g_now: Indicators, components: list[CoSimComponent], trial: Callable[[float], Indicators],
        length: float,
    ) -> None:
        """Note which side indicators on their surface at *t* leave towards.

        A short trial step of *length* over *components* (``trial(t1)`` steps
        them from *t* to ``t1`` and returns the indicators), rolled back at
        once, tells e.g. a ball that bounced (leaving upwards, so coming down
        again is an event) from a clock that passed its threshold (moving on).
        """
        tol = self.master.sign_tolerance
        on_surface = [(c.name, n) for c in self.sources for n, v in g_now[c.name].items() if abs(v) <= tol]
        if not on_surface:
            return
        master = self.master
        saved = master.checkpoint(components)
        g_probe = trial(t + length)
        self.drain_hints(components)
        master.roll_back(saved, t)
        self.probes = {key: g_probe[key[0]][key[1]] for key in on_surface if abs(g_probe[key[0]][key[1]]) > tol}

    def handle(self, t_e: float, crossings: list[Crossing]) -> Indicators:
        """Handle events at *t_e* in micro steps until no indicator crosses again; the indicators after."""
        master = self.master
        recorder = master.recorder
        self.stand_ins = set()
        micro = 1
        g_now = self.indicators() if not crossings else {}
        while crossings:
            if micro > master.max_micro_steps:
                names = ", ".join(f"{c.name}.{n}" for c, n in crossings)
                raise EventLocalizationError(
                    f"more than {master.max_micro_steps} event iterations at t={t_e:.12g} ({names}): "
                    "an event cascade that does not settle"
                )
            by_comp: dict[str, tuple[CoSimComponent, list[str]]] = {}
            for comp, name in crossings:
                by_comp.setdefault(comp.name, (comp, []))[1].append(name)
                recorder.event(t_e, micro - 1, comp.name, name)
                master.stats.events += 1
                for sub in self.subscribers.get((comp.name, name), ()):
                    by_comp.setdefault(sub.name, (sub, []))[1].append(name)
            before = self.indicators()
            for comp, names in by_comp.values():
                comp.handle_event(names, t_e, micro)
            master.settle(t_e)
            recorder.sample(t_e, micro)
            g_now = self.indicators()
            crossings = self.crossings(before, g_now)
            micro += 1
        return g_now


def notice_unlocated(sources: list[CoSimComponent]) -> None:
    """Warn once per run that a master without localization handles *sources*' events late."""
    if sources:
        warnings.warn(UNLOCATED_NOTICE, UserWarning, stacklevel=3)
