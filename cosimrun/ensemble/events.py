"""State events located per member under the hybrid master, each member on its own clock.

Every member runs its scalar :class:`~cosimrun.masters.hybrid.HybridRun`'s sequence of trial steps: its
communication step (the indicator compared with its armed side, ``OdeMember.reference``), when that crosses
zero the points of the event's bracket (internal hints, Illinois secant points
within bisection's pace, bisection, over integer ticks) and the bracket's end again if its last point fell below
the event, then its event handled in micro steps at its own instant (the component's ``update``, on those members
alone), its departure probes, and its next step from the event to the point its scalar run steps to. Members do
not wait for each other: each round takes one trial step of every member at once, each from its own accepted
state to its own instant (an array of starts and steps), so the ensemble takes as many rounds as its busiest
member takes trial steps, and a member's event rolls back no other member. The arithmetic of every trial is the
scalar run's: every member takes the trial steps, the event instants, the statistics and the samples of its
scalar run. Each member writes its samples at the communication points as it passes them.

What this does not run is refused before the run (:func:`refuse_located`): components other than ODE components,
more than one event indicator, time events and ``max_step``, ``max_substep``, event subscriptions.
"""

from __future__ import annotations

import time
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
    from cosimrun.ensemble.run import EnsembleResult, _EnsembleRun
    from cosimrun.masters.hybrid import Hybrid
    from cosimrun.masters.stepsize import Clock
    from cosimrun.system.system import System

COUNTS = ("macro_steps", "trial_steps", "rollbacks", "events")
"""The hybrid master's statistics kept per member (``member_stats``), counted as its scalar run counts them."""
PER_MEMBER = ("phase", "pos", "next", "lo", "hi", "target", "g_a", "g_lo", "g_hi", "f_lo", "f_hi", "shift", "used",
              "retained", "steps", "width0", "at_hi", "flat", "guess", "valid", "length", "g_now", "probe")
"""The run's arrays over the members it steps (shrunk by :meth:`LocatedEvents.compact`)."""
COMPACT = 256
"""Fewest members an ensemble shrinks to those still stepping (once at most half of them do)."""
STEP, LOC, RETRY, PROBE, DONE, DEAD = range(6)
"""What a member's next trial step is: its communication step, a point of its event's bracket, the bracket's end
again (its last point fell below the event), a departure probe; or none (done at the end, failed)."""


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


class Saved:
    """One copy per member of what a trial changes: the ODE states, their discrete state and the real port values
    (a member's accepted state, or its state at its event's bracket end), saved and loaded member by member."""

    def __init__(self, events: LocatedEvents) -> None:
        self.odes, self.ports = events.odes, events.ports
        self.x = [st.x.copy() for st in self.odes]
        self.state = [[np.array(getattr(st.comp, a)) for a in st.member_state] for st in self.odes]
        self.values = [np.array(p.value, dtype=float) for p in self.ports]

    def save(self, mask: np.ndarray) -> None:
        """Keep the live values of the members *mask*."""
        for st, x, state in zip(self.odes, self.x, self.state, strict=True):
            x[:, mask] = st.x[:, mask]
            for name, values in zip(st.member_state, state, strict=True):
                values[mask] = getattr(st.comp, name)[mask]
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
                    setattr(st.comp, name, values.copy())
                else:
                    getattr(st.comp, name)[mask] = values[mask]
        for p, values in zip(self.ports, self.values, strict=True):
            if mask is None:
                p.value = values.copy()
            else:
                live = np.array(np.broadcast_to(p.value, values.shape), dtype=float)
                live[mask] = values[mask]
                p.value = live


class LocatedEvents:
    """One ensemble run under the hybrid master: each member's phase, clock (its accepted tick) and event bracket,
    its armed side, Zeno run and counts, the samples and the events log."""

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

    def count(self, name: str, mask: np.ndarray) -> None:
        """Count one more *name* for the current members *mask*."""
        self.counts[name][self.ids[mask]] += 1

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
        self.history = {key: np.full((len(kept), members), np.nan) for key in run.outputs}
        self.last = {key: np.full(members, np.nan) for key in run.outputs}
        self.last_tick = np.zeros(members, dtype=np.int64)
        self.acc = Saved(self)
        self.at_hi_state = Saved(self)
        self.port_index = {id(p): i for i, p in enumerate(self.ports)}
        self.record(np.ones(members, dtype=bool))
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
        stats = EnsembleStats(members, members - failed, failed, steps, len(kept), time.perf_counter() - start,
                              loop_time)
        units = {key: port.spec.unit_name for key, port in run.outputs.items()}
        return EnsembleResult(run.system.name, self.master.name, clock.t0, clock.time(clock.end), clock.dt,
                              run.record_every, members, dict(run.checked.given), status,
                              dict(sorted(run.failures.items())), self.times(self.kept), self.history, units,
                              {key: values.copy() for key, values in self.last.items()}, stats,
                              self.master.settings(), dict(run.member_stats), events=self.table())

    def begin(self, t0: float) -> None:
        """Arm the indicators at *t0*; those on their surface probe first (``HybridRun.begin``), the others step."""
        members = self.run.members
        self.phase = np.full(members, STEP, dtype=np.int8)
        self.next = self.next_points(self.pos)
        k = members
        self.lo, self.hi, self.target = (np.zeros(k, dtype=np.int64) for _ in range(3))
        self.g_a, self.g_lo, self.g_hi, self.f_lo, self.f_hi, self.shift = (np.zeros(k) for _ in range(6))
        self.used, self.retained, self.steps, self.width0 = (np.zeros(k, dtype=np.int64) for _ in range(4))
        self.at_hi, self.flat = np.zeros(k, dtype=bool), np.zeros(k, dtype=bool)
        self.guess, self.valid = np.zeros((k, 4), dtype=np.int64), np.zeros((k, 4), dtype=bool)
        self.length, self.g_now, self.probe = np.zeros(k), np.zeros(k), np.zeros(k)
        if self.source is None:
            return
        g = self.indicator(t0)
        arm_members(self.source.armed[0], g, self.tol)
        on = np.abs(g) <= self.tol
        self.start_probe(on, g)

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
            comp = st.comp
            names = list(self.run.checked.varying[comp.name])
            for n in names:
                comp.parameters[n] = comp.parameters[n][idx]
            if names:
                refresh_parameters(comp)
        for p in self.ports:
            p.value = np.asarray(p.value)[idx] if np.ndim(p.value) else p.value
        self.ids = self.ids[idx]

    def start_probe(self, mask: np.ndarray, g_now: np.ndarray) -> None:
        """Members *mask* depart from their accepted instant (``StateEvents.depart``): armed with their signed
        values *g_now*, probing forwards from ``time_tolerance`` on."""
        arm_members(self.source.armed[0], np.where(mask, g_now, 0.0), self.tol)  # type: ignore[union-attr]
        self.phase[mask] = PROBE
        self.length[mask] = self.master.time_tolerance
        self.g_now[mask] = g_now[mask]

    def round(self, active: np.ndarray) -> None:
        """One trial step of every active member, each from its accepted state to its own target, and what each
        member's phase does with it."""
        phase = self.phase.copy()
        step, loc, retry, probe = (active & (phase == code) for code in (STEP, LOC, RETRY, PROBE))
        self.acc.load()
        pos_t = self.times(self.pos)
        target = np.where(step, self.next, np.where(loc, self.target, np.where(retry, self.hi, self.pos)))
        t_to = np.where(probe, pos_t + self.length, self.times(target))
        self.count("trial_steps", active)
        self.count("macro_steps", step)
        self.count("rollbacks", loc | retry | probe)
        if self.source is None:
            self.run.step_plan(self.plan, pos_t, t_to - pos_t)
            self.run.settle(t_to)
            self.accept(step)
            return
        g = self.trial(pos_t, t_to, hints=True)
        src = self.source
        ref = src.reference(self.tol)[0]
        hit = step & crossed_members(ref, g, src.events[0][1], self.tol)
        quiet = step & ~hit
        signed = quiet & (np.abs(g) > self.tol)
        src.armed[0][signed] = g[signed]
        if hit.any():
            self.start_locating(hit, ref, g, self.hints())
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
        """Members *mask* accept their step: their state at its end becomes their accepted state."""
        if not mask.any():
            return
        self.pos[mask] = self.next[mask]
        self.acc.save(mask)
        self.check_finite(mask)
        sound = mask & self.run.alive[self.ids]
        self.record(sound)
        self.go_on(sound)

    def go_on(self, mask: np.ndarray) -> None:
        """Members *mask* take their next step (its end ``MasterRun.next_point``), or are done at the end."""
        done = mask & (self.pos >= self.clock.end)
        self.phase[done] = DONE
        on = mask & ~done
        if not on.any():
            return
        self.phase[on] = STEP
        self.next[on] = self.next_points(self.pos[on])
        # a member whose event fell within clock.snap before a point steps past it, as its scalar run: its sample
        # there is its value at the event
        i = np.searchsorted(self.points, self.pos, side="right")
        skips = on & (i < len(self.points))
        skips &= self.next > self.points[np.minimum(i, len(self.points) - 1)]
        if skips.any():
            self.record(skips, self.points[i[skips]])

    def record(self, mask: np.ndarray, ticks: np.ndarray | None = None) -> None:
        """The samples of members *mask* at the communication points they reached (their ticks, or *ticks*): their
        accepted values."""
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
            self.history[key][row[keep], ids[keep]] = values[keep]

    def check_finite(self, mask: np.ndarray) -> None:
        """Members *mask* whose state or outputs at their accepted point are not finite fail there."""
        run = self.run
        sound = np.ones(len(self.ids), dtype=bool)
        for st in self.odes:
            sound &= np.isfinite(st.x).all(axis=0)
        for port in run.outputs.values():
            if isinstance(port.value, np.ndarray):
                sound &= np.isfinite(port.value)
        for i in np.flatnonzero(mask & ~sound).tolist():
            comp, variable = run._culprit(i, self.odes)
            self.fail_member(int(self.ids[i]), float(self.times(self.pos[i:i + 1])[0]), comp, variable,
                             "non-finite value")
            self.phase[i] = DEAD

    def fail_member(self, m: int, t: float, comp: str, variable: str, cause: str) -> None:
        """Member *m* (of the ensemble) stops at *t* with *cause*; its values stay those of the last point it
        passed."""
        from cosimrun.ensemble.run import MemberFailure

        run = self.run
        run.alive[m] = False
        run.failures[m] = MemberFailure(m, t, comp, variable, cause, float(self.times(self.last_tick[m:m + 1])[0]))

    def fail(self, i: int, t_e: float, name: str, cause: str) -> None:
        """Current member *i* stops at its event instant *t_e* with *cause*, as its scalar run does."""
        assert self.source is not None
        self.fail_member(int(self.ids[i]), t_e, self.source.comp.name, name, cause)

    # ------------------------------------------------------------------ localization
    def start_locating(self, hit: np.ndarray, ref: np.ndarray, g: np.ndarray,
                       hints: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Members *hit* crossed in their step: bracket the crossing (``HybridRun._localize``'s start)."""
        self.phase[hit] = LOC
        self.lo[hit], self.hi[hit] = self.pos[hit], self.next[hit]
        self.g_a[hit], self.g_lo[hit], self.g_hi[hit] = ref[hit], ref[hit], g[hit]
        shift = np.copysign(np.full(len(ref), self.tol), ref)
        self.shift[hit] = shift[hit]
        self.f_lo[hit], self.f_hi[hit] = ref[hit] - shift[hit], g[hit] - shift[hit]
        self.width0[hit] = self.hi[hit] - self.lo[hit]
        self.used[hit], self.retained[hit], self.steps[hit] = 0, 0, 0
        self.at_hi[hit], self.flat[hit] = True, False
        if self.master.use_hints:
            guess, valid = self.guesses(hints)
            self.guess[hit], self.valid[hit] = guess[hit], valid[hit]
        else:
            self.valid[hit] = False
        self.at_hi_state.save(hit)

    def narrow_bracket(self, loc: np.ndarray, g: np.ndarray) -> None:
        """Members *loc* tried their bracket's point ``target``: the bracket's side it falls on moves there."""
        direction = self.source.events[0][1]  # type: ignore[union-attr]
        found = loc & crossed_members(self.g_a, g, direction, self.tol)
        self.flat |= loc & ((g == self.g_lo) | (g == self.g_hi))
        if found.any():
            self.hi[found], self.g_hi[found], self.at_hi[found] = self.target[found], g[found], True
            self.f_hi[found] = g[found] - self.shift[found]
            self.f_lo[found & (self.retained < 0)] *= 0.5
            self.retained[found] = -1
            self.at_hi_state.save(found)
        low = loc & ~found
        if low.any():
            self.lo[low], self.g_lo[low], self.at_hi[low] = self.target[low], g[low], False
            self.f_lo[low] = g[low] - self.shift[low]
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

    def probed(self, probe: np.ndarray, g: np.ndarray) -> None:
        """Members *probe* took a departure probe: done once their indicator is signed at its end or the probe is
        ``dt`` long (armed then with the side they depart towards), else probing again, longer."""
        self.probe[probe] = g[probe]
        longest = self.clock.dt
        done = probe & ((self.length >= longest) | (np.abs(g) > self.tol))
        grow = probe & ~done
        self.length[grow] = np.minimum(longest, self.length[grow] * PROBE_GROWTH)
        if done.any():
            src = self.source
            assert src is not None
            side = self.departure(self.g_now, self.probe, self.length, self.master.event_interval, src.events[0][1])
            src.armed[0][done] = side[done]
            self.go_on(done)

    def handle_at_hi(self, mask: np.ndarray) -> None:
        """Members *mask* located their event at ``hi``: handled there, accepted after it, then probing."""
        self.at_hi_state.load(mask)
        self.pos[mask] = self.hi[mask]
        idx = np.flatnonzero(mask)
        t_e = self.times(self.hi[idx])
        with self.narrowed(idx):
            live = self.handle(t_e)
            g_now = self.indicator(t_e)
        width = len(self.ids)
        ok, g = np.zeros(width, dtype=bool), np.zeros(width)
        ok[idx], g[idx] = live, g_now
        self.phase[idx[~live]] = DEAD
        self.acc.save(mask)
        self.record(ok)
        self.start_probe(ok, g)

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
