"""State events located per member under the hybrid master.

The members step the communication grid together. After each step, the members whose indicator crossed zero
against its armed side (:meth:`~cosimrun.ensemble.members.OdeMember.reference`) are narrowed to a sub-ensemble
(their states, discrete state, parameters and port values taken out as arrays of their own), rolled back to the
step's start and localized there, each member with its own bracket and its own trial instants: the scalar
:class:`~cosimrun.masters.hybrid.HybridRun`'s root finder (internal hints, Illinois secant points within
bisection's pace, bisection), repeated elementwise over integer ticks. Each member's event is then handled at its
own instant in micro steps (the component's ``update`` on the sub-ensemble), its indicator re-armed by departure
probes, its Zeno run counted, and the member steps on from its event instant to the next point its scalar run
steps to; a member that crosses again in that step is localized again, alone with the others that do. A member's
event rolls back and re-steps only its own sub-ensemble. The arithmetic of every trial is the scalar run's, so
every member takes the trial steps, the event instants, the statistics and the samples of its scalar run.

What this does not run is refused before the run (:func:`refuse_located`): components other than ODE components,
more than one event indicator, time events and ``max_step``, ``max_substep``, event subscriptions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.core.ode import OdeComponent
from cosimrun.core.ports import PortType
from cosimrun.ensemble.members import OdeMember, arm_members, crossed_members, refresh_parameters
from cosimrun.errors import ConfigError, EventLocalizationError, ZenoError
from cosimrun.masters.events import PROBE_GROWTH
from cosimrun.masters.hybrid import SLACK_STEPS

if TYPE_CHECKING:
    from cosimrun.ensemble.run import _EnsembleRun
    from cosimrun.masters.hybrid import Hybrid
    from cosimrun.masters.stepsize import Clock
    from cosimrun.system.system import System

COUNTS = ("macro_steps", "trial_steps", "rollbacks", "events")
"""The hybrid master's statistics kept per member (``member_stats``), counted as its scalar run counts them."""


def refuse_located(system: System) -> None:
    """Refuse, keyed by what is at fault, a system whose events an ensemble cannot locate per member under the
    hybrid master (the components are vectorizable, see :func:`~cosimrun.ensemble.members.refuse`)."""
    indicators = []
    for name, comp in system.components.items():
        key = f"components.{name}"
        if not isinstance(comp, OdeComponent):
            raise ConfigError(key, f"component {name!r} ({type(comp).__name__}) is not an ODE component; under "
                                   "the hybrid master ensembles step ODE components only")
        if comp.parameters["max_substep"] is not None:
            raise ConfigError(f"{key}.params.max_substep", "ensembles under the hybrid master take the configured "
                                                           "substeps (max_substep is not supported)")
        if comp.max_step is not None or comp.has_time_events:
            raise ConfigError(key, f"component {name!r} limits steps or has time events, which ensembles under "
                                   "the hybrid master do not run")
        indicators += [f"{name}.{event}" for event in comp.state_events]
    if len(indicators) > 1:
        raise ConfigError("components", "ensembles under the hybrid master locate one state event indicator per "
                                        f"system (this one has {', '.join(indicators)})")
    if system.event_connections:
        raise ConfigError("events", "ensembles under the hybrid master do not run event subscriptions")


class LocatedEvents:
    """One ensemble run's state events under the hybrid master: armed sides, Zeno runs, counts, the events log."""

    def __init__(self, run: _EnsembleRun, master: Hybrid, clock: Clock) -> None:
        refuse_located(run.system)
        self.run, self.master, self.clock = run, master, clock
        if clock.end >= 2**62:
            raise ConfigError("run.tf", "too many communication steps for an ensemble under the hybrid master")
        members = run.members
        self.odes = [st for st in run.steppers.values() if isinstance(st, OdeMember)]
        sources = [st for st in self.odes if st.events]
        self.source: OdeMember | None = sources[0] if sources else None
        self.plan, _ = run.schedule.stepping_plan(run.order, True)
        self.ports = [p for p in run.schedule.ports if p.spec.type is PortType.REAL]
        self.tol = master.sign_tolerance
        self.tol_ticks = max(1, int(master.time_tolerance / clock.tick))
        self.ids = np.arange(members)
        """The members (of the whole ensemble) at the current narrowing."""
        self.pos = np.zeros(members, dtype=np.int64)
        """Each member's tick: the shared one, except a member whose event fell within ``clock.snap`` of the grid
        point it then skipped (as its scalar run does)."""
        self.zeno_t = np.full(members, np.nan)
        self.zeno_n = np.zeros(members, dtype=np.int64)
        for name in COUNTS:
            run.member_stats[name] = np.zeros(members, dtype=np.int64)
        self.counts = run.member_stats
        self.log: list[tuple[np.ndarray, np.ndarray, int]] = []
        marks = clock.marks()
        self._marks = [(int(k) * clock.resolution + int(r), float(t))
                       for k, r, t in zip(marks["grid"], marks["rest"], marks["time"], strict=True)]
        self._step: tuple[float, float, Any, Any, Any] | None = None

    # ------------------------------------------------------------------ ticks
    def times(self, ticks: np.ndarray) -> np.ndarray:
        """:meth:`Clock.time` of every tick in *ticks*."""
        clock = self.clock
        k, r = np.divmod(ticks, clock.resolution)
        base = clock.t0 + k * clock.dt
        t = np.where(r == 0, base, base + r * clock.tick)
        for tick, exact in self._marks:
            t[ticks == tick] = exact
        return t

    def ticks(self, t: np.ndarray) -> np.ndarray:
        """:meth:`Clock.ticks` of every time in *t*."""
        clock = self.clock
        offset = t - clock.t0
        k = np.floor(offset / clock.dt)
        return k.astype(np.int64) * clock.resolution + np.rint((offset - k * clock.dt) / clock.tick).astype(np.int64)

    def next_points(self, ticks: np.ndarray) -> np.ndarray:
        """``MasterRun.next_point`` from each of *ticks* (grid and end; no time events here)."""
        clock = self.clock
        res, snap, end = clock.resolution, clock.snap, clock.end
        grid = (ticks // res + 1) * res
        grid = np.where(grid - ticks <= snap, grid + res, grid)
        b = np.minimum(grid, end)
        return np.where((b < end) & (end <= b + snap), end, b)

    # ------------------------------------------------------------------ sub-ensembles
    @contextmanager
    def narrowed(self, idx: np.ndarray) -> Iterator[None]:
        """Step the members *idx* (of the current narrowing) alone until the block ends, then write them back."""
        run = self.run
        k = len(self.ids)
        states = [(st, st.narrow(idx)) for st in self.odes]
        params = []
        for st in self.odes:
            comp = st.comp
            names = list(run.checked.varying[comp.name])
            if names:
                params.append((comp, {n: comp.parameters[n] for n in names}))
                for n in names:
                    comp.parameters[n] = comp.parameters[n][idx]
                refresh_parameters(comp)
        ports = [(p, p.value) for p in self.ports]
        for p, value in ports:
            if isinstance(value, np.ndarray) and value.shape == (k,):
                p.value = value[idx]
        ids, self.ids = self.ids, self.ids[idx]
        try:
            yield
        finally:
            self.ids = ids
            for p, whole in ports:
                part = p.value
                if isinstance(whole, np.ndarray) and whole.shape == (k,):
                    whole[idx] = part
                elif not (np.ndim(part) == 0 and part == whole):
                    whole = np.array(np.broadcast_to(np.asarray(whole, dtype=float), (k,)))
                    whole[idx] = part
                p.value = whole
            for comp, values in params:
                comp.parameters.update(values)
                refresh_parameters(comp)
            for st, saved in reversed(states):
                st.widen(saved, idx)

    def snapshot(self) -> tuple[list[Any], list[Any]]:
        """The current members' states, discrete state and port values (a rollback point)."""
        return ([st.state_copy() for st in self.odes],
                [v.copy() if isinstance(v, np.ndarray) else v for v in (p.value for p in self.ports)])

    def restore(self, snap: tuple[list[Any], list[Any]]) -> None:
        states, values = snap
        for st, saved in zip(self.odes, states, strict=True):
            st.restore(saved)
        for p, v in zip(self.ports, values, strict=True):
            p.value = v.copy() if isinstance(v, np.ndarray) else v

    # ------------------------------------------------------------------ trials
    def trial(self, t: Any, t1: Any, hints: bool = False) -> np.ndarray:
        """Step the current members from *t* to *t1* (floats or one per member) as ``HybridRun._trial``; the
        indicator at *t1*. With *hints*, the source's integrator tracks its indicator over the substeps (a step's
        trial: its hints start the localization); the other trials' hints are dropped unread, as the scalar
        master drops them."""
        run = self.run
        source = self.source
        if source is not None:
            source.tracking = hints
        run.step_plan(self.plan, t, t1 - t)
        run.settle(t1)
        return self.indicator(t1)

    def indicator(self, t: Any) -> np.ndarray:
        assert self.source is not None
        return np.array(self.source.indicators(t)[0][1])

    def hints(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The source's internal hints of the last trial: before value (0: none), bracket times, after value."""
        src = self.source
        assert src is not None
        return src.hinted[0].copy(), src.hint_times[0][0].copy(), src.hint_times[0][1].copy(), src.hint_after[0].copy()

    def count(self, name: str, mask: np.ndarray | None = None, by: int = 1) -> None:
        ids = self.ids if mask is None else self.ids[mask]
        self.counts[name][ids] += by

    # ------------------------------------------------------------------ the run
    def begin(self, t0: float) -> None:
        """Arm the indicators at *t0*, probing those on their surface (``HybridRun.begin``)."""
        if self.source is None:
            return
        g = self.indicator(t0)
        arm_members(self.source.armed[0], g, self.tol)
        on = np.abs(g) <= self.tol
        if on.any():
            idx = np.flatnonzero(on)
            with self.narrowed(idx):
                self.depart(np.full(len(idx), t0), g[idx], np.zeros(len(idx), dtype=bool))

    def advance(self, a: int, b: int, step: tuple[float, float, Any, Any, Any]) -> None:
        """Take the communication step from tick *a* to *b* for every member: a trial, then each member's events
        located and handled in the step, each member ending at *b* (or where its scalar run's step ends).
        *step* is the step's times and the run's step-start states and sound values (for a failing member)."""
        self._step = step
        t, t1 = step[0], step[1]
        run = self.run
        alive = run.alive
        self.count("macro_steps", alive)
        self.count("trial_steps", alive)
        late = alive & (self.pos != a)
        a_all = np.where(late, self.pos, a) if late.any() else None
        start_t: Any = t if a_all is None else self.times(a_all)
        self.pos[alive] = b
        if self.source is None:
            run.step_plan(self.plan, start_t, t1 - start_t)
            run.settle(t1)
            return
        start = self.snapshot()
        g_b = self.trial(start_t, t1, hints=True)
        hints = self.hints()
        src = self.source
        ref = src.reference(self.tol)[0]
        hit = alive & crossed_members(ref, g_b, src.events[0][1], self.tol)
        quiet = alive & ~hit
        armed = src.armed[0]
        signed = quiet & (np.abs(g_b) > self.tol)
        armed[signed] = g_b[signed]
        if not hit.any():
            return
        idx = np.flatnonzero(hit)
        with self.narrowed(idx):
            self.restore((
                [(x[:, idx], [s[idx] for s in state]) for x, state in start[0]],
                [v[idx] if isinstance(v, np.ndarray) and v.shape == (run.members,) else v for v in start[1]]))
            a_m = np.full(len(idx), a, dtype=np.int64) if a_all is None else a_all[idx]
            self.events(a_m, b, ref[idx], g_b[idx], tuple(h[idx] for h in hints))  # type: ignore[arg-type]

    def events(self, a_m: np.ndarray, b: int, g_a: np.ndarray, g_b: np.ndarray,
               hints: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """The current members crossed in their step from *a_m* to *b*: locate, handle, depart, step on (again
        while they cross)."""
        start = self.snapshot()
        hi = self.localize(a_m, b, g_a, g_b, hints, start)
        t_e = self.times(hi)
        live = self.handle(t_e)
        g_now = self.indicator(t_e)
        self.depart(t_e, g_now, ~live)
        on = live & (self.next_points(hi) == b)
        wait = live & ~on  # at b already, or skipping it (an event within clock.snap before it): steps on from hi
        self.pos[self.ids[wait]] = hi[wait]
        if not on.any():
            return
        idx = np.flatnonzero(on)
        with self.narrowed(idx):
            self.step_on(hi[idx], b)

    def step_on(self, a_m: np.ndarray, b: int) -> None:
        """The current members step from their event ticks *a_m* to *b* (a new macro step each); those that cross
        again are located again."""
        self.pos[self.ids] = b
        self.count("macro_steps")
        self.count("trial_steps")
        start = self.snapshot()
        t_a = self.times(a_m)
        g_b = self.trial(t_a, self.clock.time(b), hints=True)
        hints = self.hints()
        src = self.source
        assert src is not None
        ref = src.reference(self.tol)[0]
        hit = crossed_members(ref, g_b, src.events[0][1], self.tol)
        signed = ~hit & (np.abs(g_b) > self.tol)
        src.armed[0][signed] = g_b[signed]
        if not hit.any():
            return
        idx = np.flatnonzero(hit)
        with self.narrowed(idx):
            self.restore(([(x[:, idx], [s[idx] for s in state]) for x, state in start[0]],
                          [v[idx] if isinstance(v, np.ndarray) and v.shape == (len(hit),) else v
                           for v in start[1]]))
            self.events(a_m[idx], b, ref[idx], g_b[idx], tuple(h[idx] for h in hints))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ localization
    def localize(self, a_m: np.ndarray, b: int, g_a: np.ndarray, g_b: np.ndarray,
                 hints: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], start: Any) -> np.ndarray:
        """``HybridRun._localize`` for every current member at once: the tick of each member's event; the members
        are left at it (their last trial's end, or a trial taken again up to it)."""
        master, k = self.master, len(a_m)
        t_a = self.times(a_m)
        lo, hi = a_m.copy(), np.full(k, b, dtype=np.int64)
        g_lo, g_hi = g_a.copy(), g_b.copy()
        shift = np.copysign(np.full(k, self.tol), g_lo)
        f_lo, f_hi = g_lo - shift, g_hi - shift
        guesses, valid = self.guesses(hints) if master.use_hints else (np.zeros((k, 0), np.int64),
                                                                        np.zeros((k, 0), bool))
        used = np.zeros(k, dtype=np.int64)
        retained = np.zeros(k, dtype=np.int64)
        at_hi = np.ones(k, dtype=bool)
        width0, steps, flat = hi - lo, np.zeros(k, dtype=np.int64), np.zeros(k, dtype=bool)
        direction = self.source.events[0][1]  # type: ignore[union-attr]
        tol_ticks = self.tol_ticks
        secant = master.root_finder != "bisection"
        open_ = hi - lo > tol_ticks
        while open_.any():
            width = hi - lo
            budget = open_ & ~flat & (width * np.exp2(np.maximum(0, steps + 1 - SLACK_STEPS)) <= width0)
            tau = np.zeros(k, dtype=np.int64)
            chosen = np.zeros(k, dtype=bool)
            for j in range(guesses.shape[1]):
                take = budget & ~chosen & valid[:, j] & (used <= j)
                inside = take & (lo < guesses[:, j]) & (guesses[:, j] < hi)
                tau[inside] = guesses[inside, j]
                chosen |= inside
                used[take] = j + 1
            if secant:
                sec = budget & ~chosen & (f_lo != f_hi) & (f_lo * f_hi <= 0)
                if sec.any():
                    tau[sec] = lo[sec] + np.rint(width[sec] * (f_lo[sec] / (f_lo[sec] - f_hi[sec]))).astype(np.int64)
                    chosen |= sec
            bis = ~chosen
            tau[bis] = lo[bis] + width[bis] // 2
            tau = np.minimum(np.maximum(tau, lo + 1), hi - 1)
            steps[open_] += 1
            closing = ~open_ & ~at_hi  # the scalar run's trial again up to hi, once its bracket closed below it
            counted = open_ | closing
            self.count("rollbacks", counted)
            self.count("trial_steps", counted)
            at_hi |= closing
            self.restore(start)
            g_tau = self.trial(t_a, self.times(np.where(open_, tau, hi)))
            found = open_ & crossed_members(g_a, g_tau, direction, self.tol)
            flat |= open_ & ((g_tau == g_lo) | (g_tau == g_hi))
            if found.any():
                hi[found], g_hi[found], at_hi[found] = tau[found], g_tau[found], True
                f_hi[found] = g_tau[found] - shift[found]
                halve = found & (retained < 0)
                f_lo[halve] *= 0.5
                retained[found] = -1
            low = open_ & ~found
            if low.any():
                lo[low], g_lo[low], at_hi[low] = tau[low], g_tau[low], False
                f_lo[low] = g_tau[low] - shift[low]
                halve = low & (retained > 0)
                f_hi[halve] *= 0.5
                retained[low] = 1
            open_ = hi - lo > tol_ticks
        if not at_hi.all():
            self.count("rollbacks", ~at_hi)
            self.count("trial_steps", ~at_hi)
            self.restore(start)
            self.trial(t_a, self.times(hi))
        return hi

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
    def handle(self, t_e: np.ndarray) -> np.ndarray:
        """``StateEvents.handle`` at each member's instant *t_e*: the Zeno guard, then micro steps while the
        indicator crosses again. Returns which members are still alive (a Zeno run or a cascade fails its member)."""
        src, master = self.source, self.master
        assert src is not None
        name, direction, _ = src.events[0]
        update = src.updates[0]
        ids = self.ids
        last, run_n = self.zeno_t[ids], self.zeno_n[ids]
        interval = master.event_interval
        n = np.where(~np.isnan(last) & (t_e - last < interval), run_n + 1, 1)
        self.zeno_t[ids], self.zeno_n[ids] = t_e, n
        live = np.ones(len(ids), dtype=bool)
        if master.zeno_events:
            for i in np.flatnonzero(n >= master.zeno_events).tolist():
                exc = ZenoError(
                    f"component {src.comp.name!r}: event indicator {name!r} fired {n[i]} times in a row less than "
                    f"{interval:.3g} s apart, up to t={t_e[i]:.12g} (a Zeno accumulation: give the component "
                    "a rest state, or change master.min_event_interval or master.zeno_events)",
                    component=src.comp.name, time=float(t_e[i]), indicator=name)
                self.fail(i, float(t_e[i]), name, str(exc))
                live[i] = False
        crossing = live.copy()
        micro = 1
        while crossing.any():
            if micro > master.max_micro_steps:
                for i in np.flatnonzero(crossing).tolist():
                    exc = EventLocalizationError(
                        f"more than {master.max_micro_steps} event iterations at t={t_e[i]:.12g} "
                        f"({src.comp.name}.{name}): an event cascade that does not settle", time=float(t_e[i]))
                    self.fail(i, float(t_e[i]), name, str(exc))
                    live[i] = False
                break
            self.log.append((ids[crossing], t_e[crossing], micro - 1))
            self.count("events", crossing)
            before = self.indicator(t_e)
            if update is not None:
                if crossing.all():
                    self.apply(update, t_e)
                else:
                    idx = np.flatnonzero(crossing)
                    with self.narrowed(idx):
                        self.apply(update, t_e[idx])
            self.run.settle(t_e)
            crossing &= crossed_members(before, self.indicator(t_e), direction, self.tol)
            micro += 1
        return live

    def apply(self, update: Any, t_e: np.ndarray) -> None:
        """The event's state update on the current members (``ContinuousComponent._handle_events_internal``)."""
        src = self.source
        assert src is not None
        new = update(t_e, src.x, src.gather())
        if new is not None:
            np.copyto(src.x, np.asarray(new, dtype=float))
        src.refresh(t_e)

    def fail(self, i: int, t_e: float, name: str, cause: str) -> None:
        """Current member *i* stops with *cause* at *t_e*, as its scalar run does."""
        assert self._step is not None and self.source is not None
        t, _, x_prev, frozen, previous = self._step
        self.run._fail(np.array([self.ids[i]]), t, t_e, self.source.comp.name, name, cause, x_prev, frozen,
                       previous)

    def depart(self, t: np.ndarray, g_now: np.ndarray, skip: np.ndarray) -> None:
        """``StateEvents.depart`` for the current members at their instants *t* (those in *skip* failed): arm
        the indicator, probing forwards from *t* (``time_tolerance``, growing) and rolling back."""
        src, master = self.source, self.master
        assert src is not None
        direction = src.events[0][1]
        armed = src.armed[0]
        arm_members(armed, g_now, self.tol)
        k = len(t)
        snap = self.snapshot()
        length = np.full(k, master.time_tolerance)
        longest = self.clock.dt
        probing = ~skip
        probe = np.zeros(k)
        while probing.any():
            self.count("trial_steps", probing)
            self.count("rollbacks", probing)
            g = self.trial(t, t + length)
            self.restore(snap)
            probe[probing] = g[probing]
            done = probing & ((length >= longest) | (np.abs(g) > self.tol))
            probing &= ~done
            length[probing] = np.minimum(longest, length[probing] * PROBE_GROWTH)
        keys = ~skip
        armed[keys] = self.departure(g_now, probe, length, master.event_interval, direction)[keys]

    def departure(self, now: np.ndarray, probe: np.ndarray, length: np.ndarray, window: float,
                  direction: int) -> np.ndarray:
        """``StateEvents._departure`` per member."""
        tol = self.tol
        s_now, s_probe = np.abs(now) > tol, np.abs(probe) > tol
        with np.errstate(all="ignore"):
            heading = (np.abs(probe) < np.abs(now)) & (length * now / (now - probe) <= window)
        opposite = (now > 0) != (probe > 0)
        across = np.where(opposite, probe, -now)
        crossing_back = s_probe & (opposite | heading)
        kept = crossed_members(now, across, direction, tol)
        side = np.where(crossing_back & ~kept, across, now)
        return np.where(~s_now, np.where(s_probe, probe, 0.0), np.where(s_probe, side, now))

    def table(self) -> dict[str, np.ndarray]:
        """Every event handled, ordered by member, time and micro step: ``member, time, micro, component,
        event``."""
        if self.source is None or not self.log:
            members, times, micro = np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int32)
        else:
            members = np.concatenate([m for m, _, _ in self.log])
            times = np.concatenate([t for _, t, _ in self.log])
            micro = np.concatenate([np.full(len(m), k, dtype=np.int32) for m, _, k in self.log])
            order = np.lexsort((micro, times, members))
            members, times, micro = members[order], times[order], micro[order]
        comp = "" if self.source is None else self.source.comp.name
        event = "" if self.source is None else self.source.events[0][0]
        n = len(members)
        return {"member": members, "time": times, "micro": micro,
                "component": np.full(n, comp, dtype=object), "event": np.full(n, event, dtype=object)}


__all__ = ["COUNTS", "LocatedEvents", "refuse_located"]
