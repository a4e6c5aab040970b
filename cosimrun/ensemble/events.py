"""State events located per member under the hybrid master, each member on its own clock.

Every member runs its scalar :class:`~cosimrun.masters.hybrid.HybridRun`'s sequence of trial steps: its
communication step (every indicator compared with its armed side, ``StateEvents.reference``), when one crosses
zero the points of the bracket of its earliest crossing (``HybridRun._earliest``: internal hints, Illinois secant
points within bisection's pace, bisection, over integer ticks; a trial that finds other indicators crossed, but
not the one it chased, chases the earliest of those) and the bracket's end again if its last point fell below the
event, then its events handled in micro steps at its own instant (the components' updates and a ``multi``
component's boundary switches, on those members alone), its departure probes, and its next step from the event to
the point its scalar run steps to. Members do not wait for each other: each round takes one trial step of every
member at once, each from its own accepted state to its own instant (an array of starts and steps), so the
ensemble takes as many rounds as its busiest member takes trial steps, and a member's event rolls back no other
member. Mode switches (:mod:`cosimrun.ensemble.modes`) happen per member where its scalar run switches: at its
start, at every instant it accepts, at its boundary events; a dwell window that holds a switch back ends in a
communication point of that member's own. The arithmetic of every trial is the scalar run's: every member takes
the trial steps, the event instants, the switches, the statistics and the samples of its scalar run. Each member
writes its samples at the communication points as it passes them, and hands every instant it accepts to its
coupling-error estimate (:class:`~cosimrun.ensemble.coupling.OwnClockEstimate`) as its scalar run's recorder hands
its samples there: before the events at that instant, after each micro step, before its mode switches. With
indicators or modes a member's samples are its run's (:class:`~cosimrun.ensemble.samples.SampleLog`): one at every
instant it accepts, the one before its events and the one after each micro step at an event instant, its event
ports.

What this does not run is refused before the run (:func:`refuse_located`): components other than ODE components,
memoryless ones and ``multi`` components of ODE modes, time events and ``max_step``, ``max_substep``, adaptive
integrators, event subscriptions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.core.ode import OdeComponent
from cosimrun.core.ports import PortType
from cosimrun.ensemble.coupling import own_clock_estimate
from cosimrun.ensemble.members import (
    OdeMember,
    arm_members,
    crossed_members,
    narrow_parameters,
    reference_sides,
    restore_parameters,
)
from cosimrun.ensemble.modes import MultiMember, is_multi, parameter_owners, refuse_multi, timed_ok
from cosimrun.ensemble.samples import SampleLog
from cosimrun.errors import ConfigError, EventLocalizationError, ZenoError
from cosimrun.masters.events import PROBE_GROWTH
from cosimrun.masters.hybrid import SLACK_STEPS

if TYPE_CHECKING:
    from cosimrun.ensemble.coupling import OwnClockEstimate
    from cosimrun.ensemble.run import EnsembleResult, _EnsembleRun
    from cosimrun.masters.hybrid import Hybrid
    from cosimrun.masters.stepsize import Clock
    from cosimrun.system.system import System

COUNTS = ("macro_steps", "trial_steps", "rollbacks", "events")
"""The hybrid master's statistics kept per member (``member_stats``), counted as its scalar run counts them."""
SWITCH_COUNT = "mode_switches"
"""The count of mode switches per member (``member_stats``), with a ``multi`` component."""
PER_MEMBER = ("phase", "pos", "next", "lo", "hi", "target", "g_a", "g_lo", "g_hi", "f_lo", "f_hi", "shift", "used",
              "retained", "steps", "width0", "at_hi", "flat", "guess", "valid", "length", "g_now", "probe", "armed",
              "chase", "cross", "keys", "mark_tick", "mark_time")
"""The run's arrays over the members it steps, members first (shrunk by :meth:`LocatedEvents.compact`)."""
COMPACT = 256
"""Fewest members an ensemble shrinks to those still stepping (once at most half of them do)."""
STEP, LOC, RETRY, PROBE, DONE, DEAD = range(6)
"""What a member's next trial step is: its communication step, a point of its event's bracket, the bracket's end
again (its last point fell below the event), a departure probe; or none (done at the end, failed)."""


def refuse_located(system: System) -> None:
    """Refuse, keyed by what is at fault, a system whose events an ensemble cannot locate per member under the
    hybrid master (the components are vectorizable, see :func:`~cosimrun.ensemble.members.refuse`)."""
    for name, comp in system.components.items():
        key = f"components.{name}"
        if is_multi(comp):
            refuse_multi(comp)  # type: ignore[arg-type]
            models = list(comp.models.values())  # type: ignore[attr-defined]
        elif isinstance(comp, OdeComponent):
            models = [comp]
        elif timed_ok(comp):
            models = []
        else:
            raise ConfigError(key, f"component {name!r} ({type(comp).__name__}) is neither an ODE component nor "
                                   "memoryless; under the hybrid master ensembles step ODE components, memoryless "
                                   "ones and multi components of ODE modes only")
        for model in models:
            if model.parameters["integrator"] != "rk4":
                raise ConfigError(f"{key}.params.integrator", f"{model.parameters['integrator']!r}: ensembles under "
                                                              "the hybrid master integrate with 'rk4' only")
            if model.parameters["max_substep"] is not None:
                raise ConfigError(f"{key}.params.max_substep", "ensembles under the hybrid master take the "
                                                               "configured substeps (max_substep is not supported)")
        if comp.max_step is not None or (comp.has_time_events and not is_multi(comp)) or any(
                m.max_step is not None or m.has_time_events for m in models):
            raise ConfigError(key, f"component {name!r} limits steps or has time events, which ensembles under "
                                   "the hybrid master do not run")
    if system.event_connections:
        raise ConfigError("events", "ensembles under the hybrid master do not run event subscriptions")


def exact_marks(clock: Clock) -> list[tuple[int, float]]:
    """The ticks whose exact times *clock* remembers (``Clock.mark``), with those times."""
    marks = clock.marks()
    return [(int(k) * clock.resolution + int(r), float(t))
            for k, r, t in zip(marks["grid"], marks["rest"], marks["time"], strict=True)]


def tick_times(clock: Clock, marks: list[tuple[int, float]], ticks: np.ndarray) -> np.ndarray:
    """:meth:`Clock.time` of every tick in *ticks* (*marks*: :func:`exact_marks`)."""
    k, r = np.divmod(ticks, clock.resolution)
    base = clock.t0 + k * clock.dt
    t = np.where(r == 0, base, base + r * clock.tick)
    for tick, exact in marks:
        t[ticks == tick] = exact
    return t


@dataclass(frozen=True)
class Column:
    """One event indicator of the system: its stepper, its name and direction, and either its place among the
    stepper's state events (``event``) or among a multi component's boundary indicators (``boundary``)."""

    st: OdeMember
    name: str
    direction: int
    event: int | None
    boundary: int | None


class Saved:
    """One copy per member of what a trial changes: the ODE states, their discrete state and the real port values
    (a member's accepted state, or its state at its event's bracket end), saved and loaded member by member."""

    def __init__(self, odes: list[OdeMember], ports: list[Any]) -> None:
        self.odes, self.ports = odes, ports
        self.x = [st.x.copy() for st in self.odes]
        self.state = [[np.array(getattr(st.holder, a)) for a in st.member_state] for st in self.odes]
        self.values = [np.array(p.value, dtype=float) for p in self.ports]

    def save(self, mask: np.ndarray) -> None:
        """Keep the live values of the members *mask*."""
        for st, x, state in zip(self.odes, self.x, self.state, strict=True):
            x[:, mask] = st.x[:, mask]
            for name, values in zip(st.member_state, state, strict=True):
                values[mask] = getattr(st.holder, name)[mask]
        for p, values in zip(self.ports, self.values, strict=True):
            values[mask] = np.broadcast_to(p.value, values.shape)[mask]

    def load(self, mask: np.ndarray | None = None) -> None:
        """Make the kept values of the members *mask* (all by default) the live ones."""
        for st, x, state in zip(self.odes, self.x, self.state, strict=True):
            if mask is None:
                np.copyto(st.x, x)
            else:
                st.x[:, mask] = x[:, mask]
            for name, values in zip(st.member_state, state, strict=True):
                if mask is None:
                    setattr(st.holder, name, values.copy())
                else:
                    getattr(st.holder, name)[mask] = values[mask]
        for p, values in zip(self.ports, self.values, strict=True):
            if mask is None:
                p.value = values.copy()
            else:
                live = np.array(np.broadcast_to(p.value, values.shape), dtype=float)
                live[mask] = values[mask]
                p.value = live


class MemberEvents:
    """The state events and mode switches of an ensemble's members, handled per member: the indicators of every
    source in its scalar master's order, their armed sides, Zeno runs and counts, the micro steps of the events
    at an instant (:meth:`handle`), the side each indicator departs towards (:meth:`departure`) and the logs of
    events and switches. The hybrid master's run (:class:`LocatedEvents`) and the fixed-step masters' runs
    (:class:`~cosimrun.ensemble.unlocated.UnlocatedEvents`) build on it."""

    coupling: OwnClockEstimate | None = None
    """The estimate the samples after each micro step go to (the hybrid master's run's)."""
    fail: Callable[[int, float, int, str], None]
    """Current member *i* stops at instant *t_e* with a cause (of indicator *column*), as its scalar run does."""

    def __init__(self, run: _EnsembleRun, master: Any, counts: tuple[str, ...], interval: float,
                 zeno_events: int) -> None:
        self.run, self.master = run, master
        self.interval, self.zeno_events = interval, zeno_events
        """The Zeno guard: *zeno_events* events of one indicator in a row, each less than *interval* after the
        last, fail the member (0: no guard, as ``StateEvents``)."""
        members = run.members
        self.odes = [st for st in run.steppers.values() if isinstance(st, OdeMember)]
        self.multis = [st for st in self.odes if isinstance(st, MultiMember)]
        self.columns: list[Column] = []
        for comp in run.order:  # the scalar master's sources, in its order; each one's indicators in its order
            st = run.steppers[comp.name]
            if not isinstance(st, OdeMember):
                continue
            for j, (name, direction, _) in enumerate(st.events):
                self.columns.append(Column(st, name, direction, j, None))
            if isinstance(st, MultiMember):
                for j, (name, _) in enumerate(st.boundaries):
                    self.columns.append(Column(st, name, 1, None, j))
        self.sources = list(dict.fromkeys(c.st for c in self.columns))
        self.spans = {id(st): [k for k, c in enumerate(self.columns) if c.st is st] for st in self.sources}
        self.dirs = np.array([c.direction for c in self.columns], dtype=np.int64)
        self.ports = [p for p in run.schedule.ports if p.spec.type is PortType.REAL]
        owners: dict[int, tuple[Any, list[str]]] = {}
        for comp in run.order:
            for name in run.checked.varying[comp.name]:
                for owner, own in parameter_owners(comp, name):
                    owners.setdefault(id(owner), (owner, []))[1].append(own)
        self.varying = list(owners.values())
        """Every component holding parameters that differ between members, with their names."""
        self.tol = master.sign_tolerance
        self.ids = np.arange(members)
        """The members (of the whole ensemble) at the current narrowing."""
        k = len(self.columns)
        self.zeno_t = np.full((members, k), np.nan)
        self.zeno_n = np.zeros((members, k), dtype=np.int64)
        for name in counts:
            run.member_stats[name] = np.zeros(members, dtype=np.int64)
        if self.multis:
            run.member_stats[SWITCH_COUNT] = np.zeros(members, dtype=np.int64)
        self.counts = run.member_stats
        self.samples: SampleLog | None = None
        """Where each member's samples go (:meth:`keep_samples`; ``None``: the run keeps them itself)."""
        self.log: list[tuple[np.ndarray, np.ndarray, int, int]] = []
        self.switch_log: list[tuple[np.ndarray, np.ndarray, str, np.ndarray, np.ndarray]] = []

    def keep_samples(self, record_every: int) -> SampleLog:
        """Keep each member's samples as its scalar run records them (:mod:`cosimrun.ensemble.samples`), thinned by
        *record_every*: the samples after each micro step go to the log with the event ports of the recorded
        ``component.port`` keys. An event port is true in the sample after the micro step its event fired in and
        stays so in the later micro steps at that instant in which its component handles nothing (unless the
        component is a multi component that the exchange refreshes, which clears it)."""
        run = self.run
        self.samples = SampleLog(run.members, list(run.outputs), list(run.event_ports), record_every)
        self.flag_columns = {key: [c for c, col in enumerate(self.columns) if f"{col.st.comp.name}.{col.name}" == key]
                             for key in run.event_ports}
        refreshed = {id(st) for st, _ in run.resolution}
        self.cleared = [c for c, col in enumerate(self.columns)
                        if isinstance(col.st, MultiMember) and id(col.st) in refreshed]
        return self.samples

    def sample_after(self, rows: np.ndarray, t_e: np.ndarray, micro: int, flags: np.ndarray) -> None:
        """The samples of the current members *rows* after micro step *micro* of their events at *t_e*, their
        event ports from *flags* ``(members, indicators)``."""
        assert self.samples is not None
        local = np.flatnonzero(rows)
        k = len(self.ids)
        values = {key: np.broadcast_to(np.asarray(port.value, dtype=float), (k,))[local]
                  for key, port in self.run.outputs.items()}
        events = {key: flags[np.ix_(local, cols)].any(axis=1) for key, cols in self.flag_columns.items()}
        self.samples.after(self.ids[local], t_e[local], micro, values, events)

    @contextmanager
    def narrowed(self, idx: np.ndarray) -> Iterator[None]:
        """Step the members *idx* (of the current narrowing) alone until the block ends, then write them back."""
        k = len(self.ids)
        states = [(st, st.narrow(idx)) for st in self.odes]
        params = narrow_parameters(self.varying, idx)
        ports = [(p, p.value) for p in self.ports]
        for p, value in ports:
            if isinstance(value, np.ndarray) and value.shape == (k,):
                p.value = value[idx]
        ids, self.ids = self.ids, self.ids[idx]
        try:
            yield
        finally:
            self.ids = ids
            # inputs first: an input given its producer's array (a link passes it on) shares it, and the
            # producer's part, which the block may have changed, is the one to keep
            for p, whole in sorted(ports, key=lambda item: item[0].spec.direction == "out"):
                part = p.value
                if isinstance(whole, np.ndarray) and whole.shape == (k,):
                    whole[idx] = part
                elif not (np.ndim(part) == 0 and part == whole):
                    whole = np.array(np.broadcast_to(np.asarray(whole, dtype=float), (k,)))
                    whole[idx] = part
                p.value = whole
            restore_parameters(params)
            for st, saved in reversed(states):
                st.widen(saved, idx)

    def indicator(self, t: Any) -> np.ndarray:
        """Every indicator of every current member, ``(members, indicators)``."""
        k = len(self.ids)
        out = np.empty((k, len(self.columns)))
        col = 0
        for st in self.sources:
            for _, g in st.indicators(t):
                out[:, col] = g
                col += 1
        return out

    def hints(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The sources' internal hints of the last trial, ``(members, indicators)`` each: before value (0: none),
        bracket times, after value."""
        k = len(self.ids)
        shape = (k, len(self.columns))
        before, t0, t1, after = np.zeros(shape), np.zeros(shape), np.zeros(shape), np.zeros(shape)
        for c, col in enumerate(self.columns):
            if col.event is None:
                continue
            st, j = col.st, col.event
            before[:, c], after[:, c] = st.hinted[j], st.hint_after[j]
            t0[:, c], t1[:, c] = st.hint_times[j]
        return before, t0, t1, after

    def crossed(self, before: np.ndarray, after: np.ndarray) -> np.ndarray:
        """Which indicators crossed zero from *before* to *after*, each in its direction."""
        return crossed_members(before, after, self.dirs, self.tol)

    def arm(self, mask: np.ndarray, g: np.ndarray) -> None:
        """Arm the indicators of members *mask* with their signed values *g* (``StateEvents.arm``)."""
        arm_members(self.armed, g, self.tol, mask)

    def count(self, name: str, mask: np.ndarray, by: Any = 1) -> None:
        """Count one more *name* (or *by*) for the current members *mask*."""
        np.add.at(self.counts[name], self.ids[mask], by)

    def switch_logger(self, st: MultiMember) -> Any:
        """What :class:`MultiMember` calls with each switch: logged with the members' numbers and counted."""

        def log(mask: np.ndarray, t: np.ndarray, old: np.ndarray, new: np.ndarray) -> None:
            self.switch_log.append((self.ids[mask], np.asarray(t, dtype=float)[mask], st.comp.name, old[mask],
                                    new[mask]))
            self.count(SWITCH_COUNT, mask)

        return log

    def handle(self, t_e: np.ndarray, crossing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``StateEvents.handle`` at each current member's instant *t_e* for its indicators *crossing*: the Zeno
        guard, then micro steps while indicators cross again. Returns which members are still alive (a Zeno run or
        a cascade fails its member) and which indicators fired."""
        master = self.master
        ids = self.ids
        interval = self.interval
        live = np.ones(len(ids), dtype=bool)
        for c in range(crossing.shape[1]):
            on = crossing[:, c]
            if not on.any():
                continue
            last, run_n = self.zeno_t[ids, c], self.zeno_n[ids, c]
            n = np.where(~np.isnan(last) & (t_e - last < interval), run_n + 1, 1)
            self.zeno_t[ids[on], c], self.zeno_n[ids[on], c] = t_e[on], n[on]
            if self.zeno_events:
                col = self.columns[c]
                for i in np.flatnonzero(on & live & (n >= self.zeno_events)).tolist():
                    exc = ZenoError(
                        f"component {col.st.comp.name!r}: event indicator {col.name!r} fired {n[i]} times in a row "
                        f"less than {interval:.3g} s apart, up to t={t_e[i]:.12g} (a Zeno accumulation: give the "
                        "component a rest state, or change master.min_event_interval or master.zeno_events)",
                        component=col.st.comp.name, time=float(t_e[i]), indicator=col.name)
                    self.fail(i, float(t_e[i]), c, str(exc))
                    live[i] = False
        fired = crossing.copy()
        crossing = crossing & live[:, None]
        flags = np.zeros_like(crossing) if self.samples is not None else None
        micro = 1
        while crossing.any():
            rows = crossing.any(axis=1)
            if micro > master.max_micro_steps:
                for i in np.flatnonzero(rows).tolist():
                    names = ", ".join(f"{self.columns[c].st.comp.name}.{self.columns[c].name}"
                                      for c in np.flatnonzero(crossing[i]).tolist())
                    exc = EventLocalizationError(
                        f"more than {master.max_micro_steps} event iterations at t={t_e[i]:.12g} ({names}): an "
                        "event cascade that does not settle", time=float(t_e[i]))
                    self.fail(i, float(t_e[i]), int(np.flatnonzero(crossing[i])[0]), str(exc))
                    live[i] = False
                break
            for c in range(crossing.shape[1]):
                on = crossing[:, c]
                if on.any():
                    self.log.append((ids[on], t_e[on], micro - 1, c))
            self.count("events", rows, crossing.sum(axis=1)[rows])
            before = self.indicator(t_e)
            for st in self.sources:
                self.apply(st, crossing[:, self.spans[id(st)]], t_e)
            self.run.settle(t_e)
            if flags is not None:
                for st in self.sources:
                    span = self.spans[id(st)]
                    handled = crossing[:, span].any(axis=1)
                    flags[np.ix_(handled, span)] = crossing[np.ix_(handled, span)]
                flags[:, self.cleared] = False
                self.sample_after(rows, t_e, micro, flags)
            if self.coupling is not None:
                local = np.flatnonzero(rows)
                live_values = [np.broadcast_to(np.asarray(p.value, dtype=float), rows.shape) for p in self.coupled]
                self.coupling.sample(ids[local], self.coupling.convert([v[local] for v in live_values]))
            crossing = self.crossed(before, self.indicator(t_e)) & rows[:, None]
            fired |= crossing
            micro += 1
        return live, fired

    def apply(self, st: OdeMember, crossing: np.ndarray, t_e: np.ndarray) -> None:
        """The handling of *st*'s indicators *crossing* ``(members, its indicators)`` on the current members
        (``handle_event``): each state event's update in order (``ContinuousComponent._handle_events_internal``),
        then a multi component's boundary switches, the outputs afresh."""
        rows = crossing.any(axis=1)
        if not rows.any():
            return
        updates = st.updates
        for j, update in enumerate(updates):
            on = crossing[:, j]
            if update is None or not on.any():
                continue
            if on.all():
                self._update(st, update, t_e)
            else:
                idx = np.flatnonzero(on)
                with self.narrowed(idx):
                    self._update(st, update, t_e[idx])
        if isinstance(st, MultiMember):
            bounds = crossing[:, len(updates):]
            if bounds.any():
                st.boundary_switch(bounds, t_e, self.switch_logger(st))

    @staticmethod
    def _update(st: OdeMember, update: Any, t_e: np.ndarray) -> None:
        new = update(t_e, st.x, st.gather())
        if new is not None:
            np.copyto(st.x, np.asarray(new, dtype=float))
        st.refresh(t_e)

    def departure(self, now: np.ndarray, probe: np.ndarray, length: np.ndarray, window: float) -> np.ndarray:
        """``StateEvents._departure`` per member and indicator."""
        tol = self.tol
        s_now, s_probe = np.abs(now) > tol, np.abs(probe) > tol
        with np.errstate(all="ignore"):
            heading = (np.abs(probe) < np.abs(now)) & (length * now / (now - probe) <= window)
        opposite = (now > 0) != (probe > 0)
        across = np.where(opposite, probe, -now)
        crossing_back = s_probe & (opposite | heading)
        kept = self.crossed(now, across)
        side = np.where(crossing_back & ~kept, across, now)
        return np.where(~s_now, np.where(s_probe, probe, 0.0), np.where(s_probe, side, now))

    def table(self) -> dict[str, np.ndarray]:
        """Every event handled, ordered by member, time and micro step (in the order handled): ``member, time,
        micro, component, event``."""
        if not self.log:
            members, times, micro = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int32)
            comps, names = np.zeros(0, dtype=object), np.zeros(0, dtype=object)
        else:
            members = np.concatenate([m for m, _, _, _ in self.log])
            times = np.concatenate([t for _, t, _, _ in self.log])
            micro = np.concatenate([np.full(len(m), k, dtype=np.int32) for m, _, k, _ in self.log])
            column = np.concatenate([np.full(len(m), c, dtype=np.int64) for m, _, _, c in self.log])
            order = np.lexsort((micro, times, members))
            members, times, micro, column = members[order], times[order], micro[order], column[order]
            comps = np.array([c.st.comp.name for c in self.columns], dtype=object)[column]
            names = np.array([c.name for c in self.columns], dtype=object)[column]
        return {"member": members, "time": times, "micro": micro, "component": comps, "event": names}

    def switch_table(self) -> dict[str, np.ndarray]:
        """Every mode switch, ordered by member and time (in the order made): ``member, time, component,
        from_mode, to_mode`` (empty without a multi component)."""
        if not self.multis:
            return {}
        names = {st.comp.name: np.array(st.mode_names, dtype=object) for st in self.multis}
        parts = [(m, t, np.full(len(m), c, dtype=object), names[c][a], names[c][b])
                 for m, t, c, a, b in self.switch_log]
        if not parts:
            empty = np.zeros(0, dtype=object)
            return {"member": np.zeros(0, np.int64), "time": np.zeros(0), "component": empty, "from_mode": empty,
                    "to_mode": empty}
        members, times, comps, old, new = (np.concatenate(p) for p in zip(*parts, strict=True))
        order = np.lexsort((times, members))
        return {"member": members[order], "time": times[order], "component": comps[order], "from_mode": old[order],
                "to_mode": new[order]}


class LocatedEvents(MemberEvents):
    """One ensemble run under the hybrid master: each member's phase, clock (its accepted tick) and event bracket,
    its indicators' armed sides, Zeno runs and counts, its modes, the samples and the logs of events and
    switches."""

    def __init__(self, run: _EnsembleRun, master: Hybrid, clock: Clock) -> None:
        if clock.end >= 2**62:
            raise ConfigError("run.tf", "too many communication steps for an ensemble under the hybrid master")
        super().__init__(run, master, COUNTS, master.event_interval, master.zeno_events)
        self.clock = clock
        members = run.members
        self.plan, _ = run.schedule.stepping_plan(run.order, True)
        self.tol_ticks = max(1, int(master.time_tolerance / clock.tick))
        self.pos = np.zeros(members, dtype=np.int64)
        """Each member's tick: the shared one, except a member whose event fell within ``clock.snap`` of the grid
        point it then skipped (as its scalar run does), or that stopped at the end of a dwell window."""
        self._marks = exact_marks(clock)

    # ------------------------------------------------------------------ ticks
    def times(self, ticks: np.ndarray) -> np.ndarray:
        """:meth:`Clock.time` of every tick in *ticks*."""
        return tick_times(self.clock, self._marks, ticks)

    def mtimes(self, ticks: np.ndarray) -> np.ndarray:
        """:meth:`times` of one tick per current member, a member's marked tick (the end of its dwell window,
        ``Clock.mark``) at its exact instant."""
        t = self.times(ticks)
        marked = ticks == self.mark_tick
        if marked.any():
            t[marked] = self.mark_time[marked]
        return t

    def ticks(self, t: np.ndarray) -> np.ndarray:
        """:meth:`Clock.ticks` of every time in *t*."""
        clock = self.clock
        offset = t - clock.t0
        k = np.floor(offset / clock.dt)
        return k.astype(np.int64) * clock.resolution + np.rint((offset - k * clock.dt) / clock.tick).astype(np.int64)

    def next_points(self, ticks: np.ndarray, event: np.ndarray | None = None) -> np.ndarray:
        """``MasterRun.next_point`` from each of *ticks*: grid and end, and a member's own time event *event* (its
        tick, -1 for none: the end of a dwell window)."""
        clock = self.clock
        res, snap, end = clock.resolution, clock.snap, clock.end
        grid = (ticks // res + 1) * res
        grid = np.where(grid - ticks <= snap, grid + res, grid)
        b = np.minimum(grid, end)
        if event is None:
            return np.where((b < end) & (end <= b + snap), end, b)
        timed = (event >= 0) & (ticks + snap < event) & (event < end)
        b = np.where(timed, np.minimum(b, event), b)
        late_end = (b < end) & (end <= b + snap)
        late_event = timed & (b < event) & (event <= b + snap)
        return np.where(late_end & late_event, np.maximum(end, event),
                        np.where(late_end, end, np.where(late_event, event, b)))

    # ------------------------------------------------------------------ indicators
    def trial(self, t: Any, t1: Any, hints: bool = False) -> np.ndarray:
        """Step the current members from *t* to *t1* (floats or one per member) as ``HybridRun._trial``; the
        indicators at *t1*. With *hints*, the sources' integrators track their indicators over the substeps (a
        step's trial: its hints start the localization); the other trials' hints are dropped unread, as the
        scalar master drops them."""
        run = self.run
        for st in self.sources:
            st.tracking = hints
        run.step_plan(self.plan, t, t1 - t)
        run.settle(t1)
        return self.indicator(t1)

    def switch_at(self, mask: np.ndarray, t: np.ndarray, arm: bool) -> np.ndarray:
        """``HybridRun._switch_modes`` at the accepted instants *t* of members *mask*: their mode switches; with
        *arm*, those that switched arm their indicators afresh. Their accepted state keeps the new modes."""
        switched = np.zeros(len(self.ids), dtype=bool)
        for st in self.multis:
            switched |= st.apply_switch(mask, t, self.switch_logger(st))
        if switched.any():
            if arm and self.columns:
                self.arm(switched, self.indicator(t))
            self.acc.save(switched)
        return switched

    # ------------------------------------------------------------------ the run
    def execute(self, t0: float, start: float) -> EnsembleResult:
        """Run every member from *t0* to the end, each through its own sequence of trial steps, one array step of
        all members per round, and return the ensemble's result."""
        from cosimrun.ensemble.run import COMPLETE, FAILED, EnsembleResult, EnsembleStats

        run, clock, members = self.run, self.clock, self.run.members
        for p in self.ports:
            p.value = np.array(np.broadcast_to(np.asarray(p.value, dtype=float), (members,)))
        points = [0]
        while points[-1] < clock.end:
            points.append(run.scalar.next_point(clock, points[-1]))  # type: ignore[union-attr]
        steps = len(points) - 1
        kept = [i for i in range(len(points)) if i % run.record_every == 0 or i == steps]
        self.points = np.array(points, dtype=np.int64)
        self.kept = np.array([points[i] for i in kept], dtype=np.int64)
        if self.columns or self.multis:  # every sample a member's run records, laid out at the end
            self.keep_samples(run.record_every)
        self.history = {} if self.samples is not None else {key: np.full((len(kept), members), np.nan)
                                                            for key in run.outputs}
        self.last = {key: np.full(members, np.nan) for key in run.outputs}
        self.last_tick = np.zeros(members, dtype=np.int64)
        for st in self.multis:
            st.start()
        self.acc = Saved(self.odes, self.ports)
        self.at_hi_state = Saved(self.odes, self.ports)
        self.port_index = {id(p): i for i, p in enumerate(self.ports)}
        coupling = own_clock_estimate(run.scalar, members, run.outputs)
        self.coupling = coupling if coupling is not None and coupling.links else None
        """The estimate that each member's points go to (``None`` without links to estimate)."""
        self.coupled = [] if self.coupling is None else [lk.src for lk in self.coupling.links]
        """The producers' ports of the links whose coupling error is estimated."""
        everyone = np.ones(members, dtype=bool)
        self.record(everyone)
        if self.samples is not None:
            self.log_point(everyone, np.full(members, t0), self.acc, False)
        if self.coupling is not None:
            self.coupling.begin(self.inputs(self.acc.values))
        loop_start = time.perf_counter()
        with np.errstate(all="ignore"):
            self.begin(t0)
            while True:
                active = self.phase < DONE
                busy = int(active.sum())
                if not busy:
                    break
                if busy <= len(active) // 2 and len(active) >= COMPACT:
                    self.compact(active)
                    active = self.phase < DONE
                self.round(active)
        loop_time = time.perf_counter() - loop_start
        alive = run.alive
        status = np.where(alive, COMPLETE, FAILED).astype(object)
        failed = int((~alive).sum())
        times, history, micro = self.times(self.kept), self.history, None
        if self.samples is not None:
            layout = self.samples.layout()
            times, history, micro = layout.time, layout.history, layout.micro
        stats = EnsembleStats(members, members - failed, failed, steps, len(times), time.perf_counter() - start,
                              loop_time)
        units = {key: port.spec.unit_name for key, port in run.outputs.items()}
        return EnsembleResult(run.system.name, self.master.name, clock.t0, clock.time(clock.end), clock.dt,
                              run.record_every, members, dict(run.checked.given), status,
                              dict(sorted(run.failures.items())), times, history, units,
                              {key: values.copy() for key, values in self.last.items()}, stats,
                              self.master.settings(), dict(run.member_stats),
                              None if coupling is None else coupling.result().only(alive),
                              events=self.table(), switches=self.switch_table(), micro=micro,
                              kinds=run.event_kinds())

    def begin(self, t0: float) -> None:
        """``HybridRun.begin``: each member's mode switch at *t0*, then its indicators armed; those on their
        surface probe first, the others step."""
        members = self.run.members
        k, n = members, len(self.columns)
        self.phase = np.full(members, STEP, dtype=np.int8)
        self.mark_tick = np.full(k, -1, dtype=np.int64)
        self.mark_time = np.zeros(k)
        self.lo, self.hi, self.target = (np.zeros(k, dtype=np.int64) for _ in range(3))
        self.f_lo, self.f_hi, self.shift = (np.zeros(k) for _ in range(3))
        self.g_a, self.g_lo, self.g_hi, self.g_now, self.probe, self.armed = (np.zeros((k, n)) for _ in range(6))
        self.cross, self.keys = np.zeros((k, n), dtype=bool), np.zeros((k, n), dtype=bool)
        self.next = np.zeros(k, dtype=np.int64)
        self.chase = np.zeros(k, dtype=np.int64)
        self.used, self.retained, self.steps, self.width0 = (np.zeros(k, dtype=np.int64) for _ in range(4))
        self.at_hi, self.flat = np.zeros(k, dtype=bool), np.zeros(k, dtype=bool)
        self.guess, self.valid = np.zeros((k, 4), dtype=np.int64), np.zeros((k, 4), dtype=bool)
        self.length = np.zeros(k)
        everyone = np.ones(k, dtype=bool)
        t = np.full(k, t0)
        self.switch_at(everyone, t, arm=True)
        if not self.columns:
            self.go_on(everyone)
            return
        self.start_probe(everyone, self.indicator(t), np.zeros((k, n), dtype=bool))

    def compact(self, keep: np.ndarray) -> None:
        """Go on with the members *keep* alone (the others are done or failed): every per-member array, the
        steppers, the parameters and the ports shrink to them, so that a round steps only members that step."""
        idx = np.flatnonzero(keep)
        for name in PER_MEMBER:
            setattr(self, name, getattr(self, name)[idx])
        for saved in (self.acc, self.at_hi_state):
            saved.x = [x[:, idx] for x in saved.x]
            saved.state = [[values[idx] for values in state] for state in saved.state]
            saved.values = [values[idx] for values in saved.values]
        for st in self.odes:
            st.narrow(idx)
        narrow_parameters(self.varying, idx)
        for p in self.ports:
            p.value = np.asarray(p.value)[idx] if np.ndim(p.value) else p.value
        if self.coupling is not None:
            self.coupling.compact(idx)
        self.ids = self.ids[idx]

    def start_probe(self, mask: np.ndarray, g_now: np.ndarray, fired: np.ndarray) -> None:
        """Members *mask* depart from their accepted instant (``StateEvents.depart``): armed with their signed
        values *g_now*; those with an indicator that fired there (*fired*) or sits on its surface probe forwards
        from ``time_tolerance`` on, the others take their next step."""
        self.arm(mask, g_now)
        keys = mask[:, None] & (fired | (np.abs(g_now) <= self.tol))
        probing = keys.any(axis=1)
        self.keys[mask] = keys[mask]
        self.phase[probing] = PROBE
        self.length[probing] = self.master.time_tolerance
        self.g_now[mask] = g_now[mask]
        self.go_on(mask & ~probing)

    def round(self, active: np.ndarray) -> None:
        """One trial step of every active member, each from its accepted state to its own target, and what each
        member's phase does with it."""
        phase = self.phase.copy()
        step, loc, retry, probe = (active & (phase == code) for code in (STEP, LOC, RETRY, PROBE))
        self.acc.load()
        pos_t = self.mtimes(self.pos)
        target = np.where(step, self.next, np.where(loc, self.target, np.where(retry, self.hi, self.pos)))
        t_to = np.where(probe, pos_t + self.length, self.mtimes(target))
        self.count("trial_steps", active)
        self.count("macro_steps", step)
        self.count("rollbacks", loc | retry | probe)
        if not self.columns:
            self.run.step_plan(self.plan, pos_t, t_to - pos_t)
            self.run.settle(t_to)
            self.accept(step)
            return
        g = self.trial(pos_t, t_to, hints=True)
        hints = self.hints()
        ref = reference_sides(self.armed, hints[0], self.tol)
        crossing = self.crossed(ref, g) & step[:, None]
        hit = crossing.any(axis=1)
        quiet = step & ~hit
        self.arm(quiet, g)
        if hit.any():
            self.start_locating(hit, ref, g, crossing, hints)
        if loc.any():
            self.narrow_bracket(loc, g)
        if retry.any():
            self.at_hi_state.save(retry)
        if probe.any():
            self.probed(probe, g)
        self.accept(quiet)
        located = self.phase == LOC
        closed = located & (self.hi - self.lo <= self.tol_ticks)
        handle = (closed & self.at_hi) | retry
        self.phase[closed & ~self.at_hi] = RETRY
        self.choose(located & ~closed)
        if handle.any():
            self.handle_at_hi(handle)

    def accept(self, mask: np.ndarray) -> None:
        """Members *mask* accept their step: their state at its end becomes their accepted state, their modes
        switch there (``HybridRun._switch_modes``)."""
        if not mask.any():
            return
        self.pos[mask] = self.next[mask]
        self.acc.save(mask)
        self.check_finite(mask)
        sound = mask & self.run.alive[self.ids]
        self.record(sound)
        t = self.mtimes(self.pos)
        if self.samples is not None:
            self.log_point(sound, t, self.acc, sound & (self.pos >= self.clock.end))
        if self.coupling is not None:
            self.coupling.point(sound, t, self.inputs(self.acc.values))
        if self.multis:
            self.switch_at(sound, t, arm=True)
        self.go_on(sound)

    def go_on(self, mask: np.ndarray) -> None:
        """Members *mask* take their next step (its end ``MasterRun.next_point``, a dwell window's end among the
        time events), or are done at the end."""
        done = mask & (self.pos >= self.clock.end)
        self.phase[done] = DONE
        on = mask & ~done
        if not on.any():
            return
        self.phase[on] = STEP
        self.next[on] = self.next_points(self.pos[on], self.dwell_ticks(on)[on] if self.multis else None)
        # a member whose event fell within clock.snap before a point steps past it, as its scalar run: its sample
        # there is its value at the event
        i = np.searchsorted(self.points, self.pos, side="right")
        skips = on & (i < len(self.points))
        skips &= self.next > self.points[np.minimum(i, len(self.points) - 1)]
        if skips.any():
            self.record(skips, self.points[i[skips]])

    def dwell_ticks(self, mask: np.ndarray) -> np.ndarray:
        """The tick of the time event of members *mask* at their accepted instants (-1: none): the earliest end
        of a dwell window that holds back a switch (``MultiComponent.next_time_event``), marked at its exact
        instant. Read from their accepted state, as the scalar master asks before its step."""
        t = self.mtimes(self.pos)
        te = np.full(len(self.ids), np.nan)
        for st in self.multis:
            o = self.odes.index(st)
            state = dict(zip(st.member_state, self.acc.state[o], strict=True))
            live = st.mode, st.region, st.last_switch
            st.mode, st.region, st.last_switch = state["mode"], state["region"].copy(), state["last_switch"]
            try:
                value = self.acc.values[self.port_index[id(st.port)]]
                raw = np.abs(value) if st.regions.use_abs else value
                ends = st.dwell_end(t, raw, mask)
                state["region"][mask] = st.region[mask]
            finally:
                st.mode, st.region, st.last_switch = live
            te = np.fmin(te, ends)
        timed = mask & ~np.isnan(te) & (te > t)
        out = np.full(len(self.ids), -1, dtype=np.int64)
        if timed.any():
            ticks = self.ticks(te[timed])
            out[timed] = ticks
            self.mark_tick[timed], self.mark_time[timed] = ticks, te[timed]
        return out

    def log_point(self, mask: np.ndarray, t: np.ndarray, saved: Saved, keep: np.ndarray | bool) -> None:
        """The samples of members *mask* at their accepted instants *t* (micro step 0): the port values *saved*
        holds; kept whatever ``record_every`` says where *keep*."""
        assert self.samples is not None
        local = np.flatnonzero(mask)
        index = self.port_index
        values = {key: saved.values[index[id(port)]][local] for key, port in self.run.outputs.items()}
        self.samples.point(self.ids[local], t[local], values, keep if np.ndim(keep) == 0 else keep[local])

    def record(self, mask: np.ndarray, ticks: np.ndarray | None = None) -> None:
        """The last values of members *mask* at the communication points they reached (their ticks, or *ticks*):
        their accepted values; without a sample log (:meth:`keep_samples`) also their samples there."""
        local = np.flatnonzero(mask)
        at = self.pos[local] if ticks is None else ticks
        point = np.searchsorted(self.points, at)
        on = (point < len(self.points)) & (self.points[np.minimum(point, len(self.points) - 1)] == at)
        if not on.any():
            return
        local, at = local[on], at[on]
        ids = self.ids[local]
        row = np.searchsorted(self.kept, at)
        keep = (row < len(self.kept)) & (self.kept[np.minimum(row, len(self.kept) - 1)] == at)
        self.last_tick[ids] = at
        kept_values = self.acc.values
        for key, port in self.run.outputs.items():
            values = kept_values[self.port_index[id(port)]][local]
            self.last[key][ids] = values
            if self.samples is None:
                self.history[key][row[keep], ids[keep]] = values[keep]

    def inputs(self, values: list[np.ndarray]) -> np.ndarray:
        """The estimated links' inputs ``(links, current members)`` from the port values *values* (a :class:`Saved`
        copy's, one array per port of :attr:`ports`)."""
        assert self.coupling is not None
        index = self.port_index
        return self.coupling.convert([values[index[id(p)]] for p in self.coupled])

    def check_finite(self, mask: np.ndarray) -> None:
        """Members *mask* whose state or outputs at their accepted point are not finite fail there."""
        run = self.run
        sound = run.finite(self.odes, len(self.ids))
        for i in np.flatnonzero(mask & ~sound).tolist():
            comp, variable = run._culprit(i, self.odes)
            self.fail_member(int(self.ids[i]), float(self.mtimes(self.pos)[i]), comp, variable, "non-finite value")
            self.phase[i] = DEAD

    def fail_member(self, m: int, t: float, comp: str, variable: str, cause: str) -> None:
        """Member *m* (of the ensemble) stops at *t* with *cause*; its values stay those of the last point it
        passed."""
        from cosimrun.ensemble.run import MemberFailure

        run = self.run
        run.alive[m] = False
        run.failures[m] = MemberFailure(m, t, comp, variable, cause, float(self.times(self.last_tick[m:m + 1])[0]))

    def fail(self, i: int, t_e: float, column: int, cause: str) -> None:
        """Current member *i* stops at its event instant *t_e* with *cause* (of indicator *column*), as its scalar
        run does."""
        col = self.columns[column]
        self.fail_member(int(self.ids[i]), t_e, col.st.comp.name, col.name, cause)

    # ------------------------------------------------------------------ localization
    def earliest(self, among: np.ndarray, t_lo: np.ndarray, t_hi: np.ndarray, g_lo: np.ndarray, g_hi: np.ndarray,
                 hinted: np.ndarray | None, hint_t: np.ndarray | None) -> np.ndarray:
        """``HybridRun._earliest`` per member: of the indicators *among* that crossed, the one whose estimated
        instant comes first (its hint's start, else the secant root of its bracket; the first of equals)."""
        best = np.zeros(len(among), dtype=np.int64)
        best_t = np.full(len(among), np.inf)
        for c in range(among.shape[1]):
            g0, g1 = g_lo[:, c], g_hi[:, c]
            est = np.where(g0 != g1, t_lo + (t_hi - t_lo) * (g0 / (g0 - g1)), t_lo)
            if hinted is not None and hint_t is not None:
                est = np.where(hinted[:, c] != 0.0, hint_t[:, c], est)
            better = among[:, c] & (est < best_t)
            best[better], best_t[better] = c, est[better]
        return best

    def start_locating(self, hit: np.ndarray, ref: np.ndarray, g: np.ndarray, crossing: np.ndarray,
                       hints: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Members *hit* crossed in their step: bracket the earliest crossing (``HybridRun._localize``'s start)."""
        self.phase[hit] = LOC
        self.lo[hit], self.hi[hit] = self.pos[hit], self.next[hit]
        self.g_a[hit], self.g_lo[hit], self.g_hi[hit] = ref[hit], ref[hit], g[hit]
        self.cross[hit] = crossing[hit]
        chase = self.earliest(crossing, self.mtimes(self.lo), self.mtimes(self.hi), ref, g, hints[0], hints[1])
        self.chase[hit] = chase[hit]
        rows = np.arange(len(hit))
        g_ref = ref[rows, chase]
        shift = np.copysign(np.full(len(hit), self.tol), g_ref)
        self.shift[hit] = shift[hit]
        self.f_lo[hit], self.f_hi[hit] = g_ref[hit] - shift[hit], g[rows, chase][hit] - shift[hit]
        self.width0[hit] = self.hi[hit] - self.lo[hit]
        self.used[hit], self.retained[hit], self.steps[hit] = 0, 0, 0
        self.at_hi[hit], self.flat[hit] = True, False
        if self.master.use_hints:
            own = tuple(h[rows, chase] for h in hints)
            guess, valid = self.guesses(own)  # type: ignore[arg-type]
            self.guess[hit], self.valid[hit] = guess[hit], valid[hit]
        else:
            self.valid[hit] = False
        self.at_hi_state.save(hit)

    def narrow_bracket(self, loc: np.ndarray, g: np.ndarray) -> None:
        """Members *loc* tried their bracket's point ``target``: the bracket's side it falls on moves there; a
        trial that finds crossings but not the one chased chases the earliest of those."""
        rows = np.arange(len(loc))
        crossing = self.crossed(self.g_a, g) & loc[:, None]
        found = crossing.any(axis=1)
        chase = self.chase
        value = g[rows, chase]
        self.flat |= loc & ((value == self.g_lo[rows, chase]) | (value == self.g_hi[rows, chase]))
        if found.any():
            self.hi[found], self.g_hi[found], self.at_hi[found] = self.target[found], g[found], True
            self.cross[found] = crossing[found]
            lost = found & ~crossing[rows, chase]
            if lost.any():
                again = self.earliest(crossing, self.mtimes(self.lo), self.mtimes(self.hi), self.g_lo, self.g_hi,
                                      None, None)
                chase[lost] = again[lost]
                g_ref = self.g_lo[rows, chase]
                self.shift[lost] = np.copysign(np.full(len(loc), self.tol), g_ref)[lost]
                self.f_lo[lost] = (g_ref - self.shift)[lost]
                self.retained[lost] = 0
            self.f_hi[found] = (g[rows, chase] - self.shift)[found]
            self.f_lo[found & (self.retained < 0)] *= 0.5
            self.retained[found] = -1
            self.at_hi_state.save(found)
        low = loc & ~found
        if low.any():
            self.lo[low], self.g_lo[low], self.at_hi[low] = self.target[low], g[low], False
            self.f_lo[low] = (g[rows, chase] - self.shift)[low]
            self.f_hi[low & (self.retained > 0)] *= 0.5
            self.retained[low] = 1

    def choose(self, open_: np.ndarray) -> None:
        """The next trial point of members *open_* inside their bracket: a hint's guess, an Illinois secant
        point (within bisection's pace, while nothing is flat), else the midpoint (``HybridRun._localize``)."""
        if not open_.any():
            return
        lo, hi = self.lo, self.hi
        width = hi - lo
        budget = open_ & ~self.flat & (width * np.exp2(np.maximum(0, self.steps + 1 - SLACK_STEPS)) <= self.width0)
        tau = np.zeros(len(lo), dtype=np.int64)
        chosen = np.zeros(len(lo), dtype=bool)
        guess, valid, used = self.guess, self.valid, self.used
        for j in range(guess.shape[1]):
            take = budget & ~chosen & valid[:, j] & (used <= j)
            inside = take & (lo < guess[:, j]) & (guess[:, j] < hi)
            tau[inside] = guess[inside, j]
            chosen |= inside
            used[take] = j + 1
        if self.master.root_finder != "bisection":
            f_lo, f_hi = self.f_lo, self.f_hi
            sec = budget & ~chosen & (f_lo != f_hi) & (f_lo * f_hi <= 0)
            if sec.any():
                tau[sec] = lo[sec] + np.rint(width[sec] * (f_lo[sec] / (f_lo[sec] - f_hi[sec]))).astype(np.int64)
                chosen |= sec
        bis = ~chosen
        tau[bis] = lo[bis] + width[bis] // 2
        tau = np.minimum(np.maximum(tau, lo + 1), hi - 1)
        self.target[open_] = tau[open_]
        self.steps[open_] += 1

    def guesses(self, hints: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``HybridRun._hint_guesses`` per member: up to four ticks (and which are given)."""
        before, t0, t1, after = hints
        k = len(before)
        has = before != 0.0
        out = np.zeros((k, 4), dtype=np.int64)
        valid = np.zeros((k, 4), dtype=bool)
        if not has.any():
            return out, valid
        with np.errstate(all="ignore"):
            ends = [self.ticks(t1), self.ticks(t0)]
            width = t1 - t0
            root = t0 + width * before / (before - after)
            margin = np.maximum(self.master.time_tolerance, 1e-3 * width)
            near = [self.ticks(np.where(has, root - margin, 0.0)), self.ticks(np.where(has, root + margin, 0.0))]
        interpolated = has & (before != after)
        out[:, 0] = np.where(interpolated, near[0], ends[0])
        out[:, 1] = np.where(interpolated, near[1], ends[1])
        out[:, 2], out[:, 3] = ends
        valid[:, :2] = has[:, None]
        valid[:, 2:] = interpolated[:, None]
        return out, valid

    # ------------------------------------------------------------------ handling
    def probed(self, probe: np.ndarray, g: np.ndarray) -> None:
        """Members *probe* took a departure probe: done once every indicator probed is signed at its end or the
        probe is ``dt`` long (armed then with the side each departs towards), else probing again, longer."""
        self.probe[probe] = g[probe]
        longest = self.clock.dt
        signed = ((np.abs(g) > self.tol) | ~self.keys).all(axis=1)
        done = probe & ((self.length >= longest) | signed)
        grow = probe & ~done
        self.length[grow] = np.minimum(longest, self.length[grow] * PROBE_GROWTH)
        if done.any():
            side = self.departure(self.g_now, self.probe, self.length[:, None], self.master.event_interval)
            keys = done[:, None] & self.keys
            self.armed[keys] = side[keys]
            self.go_on(done)

    def handle_at_hi(self, mask: np.ndarray) -> None:
        """Members *mask* located their event at ``hi``: handled there, accepted after it, their modes switched,
        then probing."""
        self.at_hi_state.load(mask)
        self.pos[mask] = self.hi[mask]
        self.check_finite(mask)  # the sample before the events, as the scalar run's recorder checks it
        mask = mask & (self.phase != DEAD)
        idx = np.flatnonzero(mask)
        t = self.mtimes(self.pos)
        if self.samples is not None:  # the sample before the events, kept as the recorder keeps it
            self.log_point(mask, t, self.at_hi_state, True)
        end = None if self.coupling is None else self.inputs(self.at_hi_state.values)
        with self.narrowed(idx):
            live, fired_idx = self.handle(t[idx], self.cross[idx])
        width = len(self.ids)
        ok = np.zeros(width, dtype=bool)
        fired = np.zeros((width, len(self.columns)), dtype=bool)
        ok[idx], fired[idx] = live, fired_idx
        self.phase[idx[~live]] = DEAD
        self.acc.save(mask)
        self.check_finite(ok)  # the samples after the micro steps
        ok &= self.phase != DEAD
        self.record(ok)
        if self.coupling is not None and end is not None:
            self.coupling.point(ok, t, end, self.inputs(self.acc.values))
        if self.multis:
            self.switch_at(ok, t, arm=False)
        self.start_probe(ok, self.indicator(t), fired)


__all__ = ["COUNTS", "SWITCH_COUNT", "LocatedEvents", "Saved", "exact_marks", "refuse_located", "tick_times"]
