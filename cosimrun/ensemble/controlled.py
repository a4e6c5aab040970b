"""Error-controlled communication steps per member (``step_control: error``) under the jacobi and gauss_seidel
masters, each member on its own clock.

Every member runs its scalar :class:`~cosimrun.masters.explicit.ExplicitRun`'s sequence of trial steps
(``_advance_controlled``): from its accepted instant to the tick its own controller proposes (``next_point``:
``max(snap + 1, round(next_step / tick))`` ticks, clipped at the end), its lagging inputs extrapolated from its
own accepted samples (the first step under ``extrapolation: 2`` taken twice, ``_start_up_to``), the coupling
error of the step estimated per input as :class:`~cosimrun.masters.step_control.ErrorControl` does with that
member's samples and magnitudes, the step accepted or rolled back and tried again shorter (that member alone),
and the next step proposed by that member's PI controller. Members do not wait for each other: each round takes
one trial step of every member at once, each from its own accepted state to its own trial end (arrays of
instants and steps), so the ensemble takes as many rounds as its busiest member takes trials. An ODE component's
``rk4`` keeps its substep length as at ``run.dt`` (``bound_internal_steps``): a member whose step is longer takes
more substeps, as its run does (members with different counts are integrated one group per count).

Each member records a sample at its start and at every accepted step it keeps (``record_every``), at its own
instants: the result's ``time`` is ``(samples, members)``, NaN after a member's last sample, as are its
histories. A member whose state or outputs are not finite at the end of a step it accepts fails there (its
values stay those of its last accepted instant). Per member, ``member_stats`` holds its run's step statistics,
and the result's coupling-error estimates its run's, of every kind of link (held, extrapolated or interpolated:
:class:`~cosimrun.ensemble.coupling.ExtrapolatedOwnClockEstimate`), from the points that member accepts.

What this does not run is refused before the run (:func:`refuse_controlled`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.console import notice
from cosimrun.core.ode import OdeComponent
from cosimrun.core.ports import PortType
from cosimrun.ensemble.coupling import ExtrapolatedOwnClockEstimate, OwnClockEstimate
from cosimrun.ensemble.events import Saved, exact_marks, tick_times
from cosimrun.ensemble.members import OdeMember, narrow_parameters, restore_parameters
from cosimrun.ensemble.modes import timed_ok
from cosimrun.errors import ConfigError
from cosimrun.masters.coupling_error import line_error
from cosimrun.masters.extrapolation import mean_extrapolation, polynomial_at, taylor_extrapolation
from cosimrun.masters.step_control import ErrorControl, local_order

if TYPE_CHECKING:
    from cosimrun.ensemble.run import EnsembleResult, _EnsembleRun
    from cosimrun.masters.explicit import ExplicitMaster
    from cosimrun.masters.stepsize import Clock
    from cosimrun.system.connection import Link
    from cosimrun.system.system import System

COUNTS = ("macro_steps", "rejected_steps", "steps_over_tolerance", "steps_at_min_step", "steps_without_estimate")
"""The step statistics counted per member (``member_stats``), as each member's run counts them."""
EXTREMES = ("smallest_step", "largest_step")
"""The accepted steps' extremes per member (``member_stats``, seconds; NaN before any step)."""


def refuse_controlled(system: System, master: ExplicitMaster) -> None:
    """Refuse, keyed by what is at fault, what ensembles do not run under step control: step doubling, the
    global-error estimate, integrators other than ``rk4``, components other than ODE and memoryless ones, time
    events, ``max_step``, event indicators and event subscriptions."""
    if master.step_control != "error":
        raise ConfigError("master.step_control", f"{master.step_control!r}: ensembles take error-controlled steps "
                                                 "per member under step_control=error only (step doubling is not "
                                                 "supported)")
    if master.global_error != "none":
        raise ConfigError("master.global_error", f"{master.global_error!r}: ensembles under step control do not "
                                                 "estimate the global error (run the members alone for it)")
    for name, comp in system.components.items():
        key = f"components.{name}"
        if isinstance(comp, OdeComponent) and comp.parameters["integrator"] != "rk4":
            raise ConfigError(f"{key}.params.integrator", f"{comp.parameters['integrator']!r}: ensembles under step "
                                                          "control integrate with 'rk4' only")
        if not isinstance(comp, OdeComponent) and not timed_ok(comp):
            raise ConfigError(key, f"component {name!r} ({type(comp).__name__}) is neither an ODE component nor "
                                   "memoryless; ensembles under step control roll back ODE states per member only")
        if comp.max_step is not None or comp.has_time_events:
            raise ConfigError(key, f"component {name!r} limits steps or has time events, which ensembles under "
                                   "step control do not run")
        if comp.has_state_events:
            raise ConfigError(key, f"component {name!r} has event indicators, which ensembles under step control "
                                   "do not handle (run its members under the hybrid master, or alone)")
    if system.event_connections:
        raise ConfigError("events", "ensembles under step control do not run event subscriptions")


class Samples:
    """Each member's latest accepted samples, newest last: ``times`` ``(keep, members)``, ``values``
    ``(keep, n, members)`` and how many of them each member has (``count``, at most *keep*)."""

    def __init__(self, keep: int, n: int, members: int) -> None:
        self.keep = keep
        self.times = np.zeros((keep, members))
        self.values = np.zeros((keep, n, members))
        self.count = np.zeros(members, dtype=np.int64)

    def push(self, mask: np.ndarray, t: np.ndarray, values: np.ndarray) -> None:
        """Members *mask* accepted the instants *t* with *values* ``(n, members)``."""
        self.times[:-1, mask] = self.times[1:, mask]
        self.values[:-1, :, mask] = self.values[1:, :, mask]
        self.times[-1, mask] = t[mask]
        self.values[-1, :, mask] = values[:, mask].T
        self.count[mask] = np.minimum(self.count[mask] + 1, self.keep)

    def groups(self, most: int) -> list[tuple[int, Any]]:
        """The members by how many of their latest samples (at most *most*) a polynomial goes through:
        ``(n, members)``, the members as a slice when all have *n*."""
        n = np.minimum(self.count, most)
        first = int(n[0])
        if (n == first).all():
            return [(first, slice(None))]
        return [(int(k), np.flatnonzero(n == k)) for k in np.unique(n).tolist()]

    def latest(self, n: int, sel: Any, row: int | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The latest *n* samples of the members *sel* (of value row *row*, else all rows): times, values."""
        times = [self.times[i, sel] for i in range(self.keep - n, self.keep)]
        values = [self.values[i, :, sel] if row is None else self.values[i, row, sel]
                  for i in range(self.keep - n, self.keep)]
        if row is None and not isinstance(sel, slice):
            values = [v.T for v in values]
        return times, values


class MemberControl(ErrorControl):
    """:class:`ErrorControl` of M members at once: each member's accepted samples of the inputs, magnitudes, last
    norm (``_previous``) and extrapolation order are its own (arrays over members); the norm and the next step are
    :class:`ErrorControl`'s, on those arrays."""

    def __init__(self, links: list[Link], kinds: list[str], order: int, members: int, **limits: Any) -> None:
        self.members = members
        self._orders = np.array([min((local_order(kind, o) for kind in kinds), default=1) for o in range(order + 1)])
        """The lowest local order among the inputs, for each extrapolation degree a member's samples allow."""
        super().__init__(links, kinds, order, **limits)
        self.samples = Samples(max(order + 1, 3), len(links), members)
        self._previous = np.ones(members)

    def _set_order(self, order: Any) -> None:
        self.p = self._orders[order]
        self.k = self.p + 1 if self.richardson else self.p
        self._alpha, self._beta = 0.7 / self.k, 0.4 / self.k

    def values(self) -> np.ndarray:
        """The inputs' values as their producers give them now, ``(links, members)``."""
        shape = (self.members,)
        return np.array([np.broadcast_to(scale * src.value + offset, shape) for src, scale, offset in self._sources],
                        dtype=np.float64).reshape(len(self._sources), self.members)

    def start(self, t0: float) -> None:
        y = self.values()
        self._magnitude = np.abs(y)
        self._pending = y
        self._push(np.ones(self.members, dtype=bool), np.full(self.members, t0), y)

    def _push(self, mask: np.ndarray, t: np.ndarray, y: np.ndarray) -> None:  # type: ignore[override]
        self.samples.push(mask, t, y)
        self._set_order(np.minimum(self.order, self.samples.count - 1))

    def estimate(self, t1: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """Each member's error norm of its step ending at *t1*, from its last accepted point (NaN for its first
        step, 0 without inputs)."""
        y1 = self._pending = self.values()
        samples = self.samples
        if not len(y1):
            return np.where(samples.count == 1, np.nan, 0.0)
        t0, y0 = samples.times[-1], samples.values[-1]
        est = np.zeros_like(y1)
        held, poly, line = self._held[:, None], self._poly[:, None], self._line[:, None]
        if self._held.any():
            est = np.where(held, np.abs(y1 - y0), est)
        if self._poly.any():
            guess = np.empty_like(y1)
            for n, sel in samples.groups(self.order + 1):
                times, values = samples.latest(n, sel)
                guess[:, sel] = polynomial_at(times, values, t1[sel])
            est = np.where(poly, np.abs(guess - y1), est)
        if self._line.any():
            h_prev = t0 - samples.times[-2]
            y_prev = samples.values[-2]
            est = np.where(line & (samples.count >= 2), line_error(t1 - t0, h_prev, (y0 - y_prev) / h_prev, y0, y1),
                           est)
        norm = self._norm(est, y1)
        return np.where(samples.count == 1, np.nan, norm)

    def accept_members(self, mask: np.ndarray, t1: np.ndarray) -> None:
        """Members *mask* accepted their steps ending at *t1*: their end values become their newest points."""
        y = self.values()
        grown = np.maximum(np.maximum(self._magnitude, np.abs(self._pending)), np.abs(y))
        self._magnitude = np.where(mask, grown, self._magnitude)
        self._push(mask, t1, y)

    def proposals(self, h: np.ndarray, norm: np.ndarray, accepted: np.ndarray) -> np.ndarray:
        """Each member's next trial step after its step of *h* with error *norm*: the PI controller's after an
        accepted step (its memory updated), the shorter one after a rejected step."""
        previous = self._previous
        grow = self.next_step(h, norm, accepted=True)
        self._previous = np.where(accepted, self._previous, previous)
        return np.where(accepted, grow, self.next_step(h, norm, accepted=False))


class MemberExtrapolation:
    """The lagging real inputs and each member's latest accepted samples of them: each is given the polynomial
    through that member's samples over its step (``Extrapolation``'s, per member)."""

    def __init__(self, links: list[Link], taylor: list[bool], order: int, members: int) -> None:
        self.links, self.taylor, self.order, self.members = links, taylor, order, members
        self.samples = Samples(order + 1, len(links), members)

    def sample(self, mask: np.ndarray, t: np.ndarray) -> None:
        """Members *mask* accepted the instants *t*: the inputs' values now are their newest samples."""
        shape = (self.members,)
        values = np.array([np.broadcast_to(np.asarray(lk.dst.value, dtype=float), shape) for lk in self.links])
        self.samples.push(mask, t, values.reshape(len(self.links), self.members))

    def extrapolate(self, t: np.ndarray, h: np.ndarray) -> None:
        """Give each lagging input its extrapolation over each member's step from *t* of length *h*."""
        samples, members = self.samples, self.members
        groups = samples.groups(self.order + 1)
        depth = max(n for n, _ in groups) - 1
        for j, (lk, taylor) in enumerate(zip(self.links, self.taylor, strict=True)):
            value = np.empty(members)
            slopes = np.zeros((depth, members))
            for n, sel in groups:
                times, values = samples.latest(n, sel, j)
                if taylor:
                    value[sel], derivatives = taylor_extrapolation(times, values)
                    for i, d in enumerate(derivatives):
                        slopes[i, sel] = d
                else:
                    value[sel] = mean_extrapolation(times, values, t[sel], h[sel])  # type: ignore[arg-type]
            lk.dst.value = value
            if taylor:
                lk.dst.derivatives = tuple(slopes)

    def start_up(self, mask: np.ndarray, ends: list[np.ndarray], h: np.ndarray) -> None:
        """Members *mask* take their first step again along the line from each input's value at its start to
        *ends* (its mean over the step to a component that holds inputs), as ``ExplicitRun._start_up_to``."""
        for j, (lk, taylor, end) in enumerate(zip(self.links, self.taylor, ends, strict=True)):
            start = self.samples.values[-1, j]
            value = np.array(lk.dst.value, dtype=float)
            if taylor:
                slopes = [np.array(d, dtype=float) for d in lk.dst.derivatives] or [np.zeros(self.members)]
                value[mask] = start[mask]
                slopes[0][mask] = ((end - start) / h)[mask]
                for d in slopes[1:]:
                    d[mask] = 0.0
                lk.dst.derivatives = tuple(slopes)
            else:
                value[mask] = (0.5 * (start + end))[mask]
            lk.dst.value = value


class Substepped:
    """An ODE member stepped as its run steps it under step control: ``rk4`` substeps no longer than at ``run.dt``
    (*most*), so a member whose step is longer takes more. Members with different counts are integrated one group
    per count, each group alone (its states, inputs and the varying parameters of *owners* narrowed to it)."""

    def __init__(self, st: OdeMember, most: float, owners: list[tuple[Any, list[str]]]) -> None:
        self.st, self.most, self.owners = st, most, owners
        self.substeps = st.rk4.substeps

    def do_step(self, t: np.ndarray, h: np.ndarray) -> None:
        st, rk4 = self.st, self.st.rk4
        counts = np.where(h > self.substeps * self.most, np.ceil(h / self.most), self.substeps).astype(np.int64)
        first = int(counts[0])
        try:
            if (counts == first).all():
                rk4.substeps = first
                st.do_step(t, h)
                return
            for n in np.unique(counts).tolist():
                rk4.substeps = n
                self._step_group(np.flatnonzero(counts == n), t, h)
            st.refresh(t + h)
        finally:
            rk4.substeps = self.substeps

    def _step_group(self, idx: np.ndarray, t: np.ndarray, h: np.ndarray) -> None:
        """Step the members *idx* alone from *t* by *h* (theirs); their states are written back."""
        st = self.st
        members = st.members
        inputs = [(p, p.value, p.derivatives) for p in st.in_ports]

        def part(value: Any) -> Any:
            return value[idx] if isinstance(value, np.ndarray) and value.shape == (members,) else value

        saved = st.narrow(idx)
        params = narrow_parameters(self.owners, idx)
        try:
            for p, value, derivatives in inputs:
                p.value, p.derivatives = part(value), tuple(part(d) for d in derivatives)
            st.do_step(t[idx], h[idx])
        finally:
            st.widen(saved, idx)
            for p, value, derivatives in inputs:
                p.value, p.derivatives = value, derivatives
            restore_parameters(params)


class ControlledSteps:
    """One ensemble run under ``step_control: error``: each member's clock (accepted tick ``pos``, trial end
    ``nxt``), controller, extrapolation samples, statistics and recorded samples."""

    def __init__(self, run: _EnsembleRun, master: ExplicitMaster, clock: Clock) -> None:
        self.run, self.master, self.clock = run, master, clock
        members = run.members
        order = master.extrapolation
        schedule = run.schedule
        self.plan, lagging = schedule.stepping_plan(run.order, master.fresh_outputs, interpolate=order >= 1)
        lagging = [lk for lk in lagging if lk.dst.spec.type is PortType.REAL] if order > 0 else []
        comps = run.system.components
        self.extrapolation = MemberExtrapolation(
            lagging, [comps[lk.connection.dst_component].interpolates_inputs for lk in lagging], order, members)
        self.start_up = order == 2 and bool(lagging) and all(c.supports_rollback for c in run.order)
        t0 = clock.t0
        span = clock.time(clock.end) - t0
        min_step = master.min_step if master.min_step is not None else 1e-6 * clock.dt
        max_step = master.max_step if master.max_step is not None else max(span, clock.dt)
        blind = min(max_step, max(min_step, clock.dt))
        real = schedule.real_links
        if not real:
            notice(f"step control has no coupled real input to estimate an error from; steps are limited to "
                   f"{blind:.3g} s", stacklevel=4)
        scalar = run.scalar
        scalar.plan, scalar.lagging, scalar.extrapolation = self.plan, lagging, self.extrapolation  # type: ignore
        kinds = scalar.coupling_kinds(real)
        self.control = MemberControl(real, kinds, order, members, rtol=master.rtol, atol=master.atol,
                                     min_step=min_step, max_step=max_step, blind_step=blind)
        self.kinds = kinds
        self.min_ticks = max(clock.snap + 1, round(min_step / clock.tick))
        self.first_step = min(max_step, max(min_step, master.rtol * clock.dt if master.rtol > 0 else clock.dt))
        self.rejects = all(c.can_always_roll_back for c in run.order)
        self.odes = [st for st in run.steppers.values() if isinstance(st, OdeMember)]
        self.ports = [p for p in schedule.ports if p.spec.type is PortType.REAL]
        self.marks = exact_marks(clock)
        self.counts = run.member_stats
        for name in COUNTS:
            self.counts[name] = np.zeros(members, dtype=np.int64)
        for name in EXTREMES:
            self.counts[name] = np.full(members, np.nan)

    # ------------------------------------------------------------------ the run
    def execute(self, t0: float, start: float) -> EnsembleResult:
        """Run every member from *t0* to the end, each through its own trial steps, one array step of all members
        per round, and return the ensemble's result."""
        from cosimrun.ensemble.run import COMPLETE, FAILED, EnsembleResult, EnsembleStats, _owners

        run, clock, members = self.run, self.clock, self.run.members
        for p in self.ports:
            p.value = np.array(np.broadcast_to(np.asarray(p.value, dtype=float), (members,)))
        self.acc = Saved(self.odes, self.ports)
        self.port_index = {id(p): i for i, p in enumerate(self.ports)}
        self.pos = np.zeros(members, dtype=np.int64)
        self.active = np.ones(members, dtype=bool)
        self.starting = np.full(members, self.start_up)
        self.rows = np.zeros(members, dtype=np.int64)
        self.time = np.full((16, members), np.nan)
        self.history = {key: np.full((16, members), np.nan) for key in run.outputs}
        self.last = {key: np.full(members, np.nan) for key in run.outputs}
        everyone = np.ones(members, dtype=bool)
        t = np.full(members, t0)
        self.control.start(t0)
        self.extrapolation.sample(everyone, t)
        self.coupling = self._coupling()
        if self.coupling is not None:
            self.coupling.begin(self.inputs(), t0)
        self.record(everyone, t)
        self.nxt = self.next_points(self.pos, np.full(members, self.first_step))
        loop_start = time.perf_counter()
        originals = dict(run.steppers)
        try:
            for comp in run.order:
                st = run.steppers[comp.name]
                if isinstance(st, OdeMember):
                    comp.bound_internal_steps(clock.dt)
                    owners = [(owner, [own for _, own in names])
                              for owner, names in _owners(comp, run.checked.varying[comp.name])]
                    run.steppers[comp.name] = Substepped(st, comp._integrator.max_substep, owners)  # type: ignore
            with np.errstate(all="ignore"):
                while self.active.any():
                    self.round()
        finally:
            run.steppers.update(originals)
            for comp in run.order:
                comp.bound_internal_steps(None)
        loop_time = time.perf_counter() - loop_start
        alive = run.alive
        status = np.where(alive, COMPLETE, FAILED).astype(object)
        failed = int((~alive).sum())
        samples = int(self.rows.max())
        stats = EnsembleStats(members, members - failed, failed, int(self.counts["macro_steps"].max()), samples,
                              time.perf_counter() - start, loop_time)
        units = {key: port.spec.unit_name for key, port in run.outputs.items()}
        return EnsembleResult(run.system.name, self.master.name, clock.t0, clock.time(clock.end), clock.dt,
                              run.record_every, members, dict(run.checked.given), status,
                              dict(sorted(run.failures.items())), self.time[:samples].copy(),
                              {key: values[:samples].copy() for key, values in self.history.items()}, units,
                              {key: values.copy() for key, values in self.last.items()}, stats,
                              self.master.settings(), dict(run.member_stats),
                              None if self.coupling is None else self.coupling.result().only(alive))

    def round(self) -> None:
        """One trial step of every active member from its accepted state to its own trial end; each member then
        accepts its step or rejects it (``_advance_controlled``)."""
        run, clock, control, active = self.run, self.clock, self.control, self.active
        self.acc.load()
        a, b = self.pos, np.where(active, self.nxt, self.pos)
        t, t1 = self.times(a), self.times(b)
        h = t1 - t
        self.trial(t, t1, h)
        norm = control.estimate(t1)
        shortest = b - a <= self.min_ticks
        accepted = active & (~(norm > 1.0) | (not self.rejects) | shortest)
        rejected = active & ~accepted
        proposed = control.proposals(h, norm, accepted)
        counts = self.counts
        if rejected.any():
            counts["rejected_steps"][rejected] += 1
            shorter = np.maximum(clock.snap + 1, np.minimum(b - a - 1, np.rint(proposed / clock.tick).astype(np.int64)))
            self.nxt = np.where(rejected, a + shorter, self.nxt)
        if not accepted.any():
            return
        self.starting &= ~accepted
        over = accepted & (norm > 1.0)
        counts["steps_over_tolerance"][over] += 1
        at_min = over & shortest
        if at_min.any():
            self._unreachable(at_min, t, h, norm)
        counts["smallest_step"] = np.where(accepted, np.fmin(counts["smallest_step"], h), counts["smallest_step"])
        counts["largest_step"] = np.where(accepted, np.fmax(counts["largest_step"], h), counts["largest_step"])
        counts["steps_without_estimate"][accepted & ~(norm > 0.0)] += 1
        counts["macro_steps"][accepted] += 1
        sound = self.check_finite(accepted, t, t1)
        self.acc.save(sound)
        control.accept_members(sound, t1)
        if self.extrapolation.links:
            self.extrapolation.sample(sound, t1)
        self.pos = np.where(sound, b, self.pos)
        done = self.pos >= clock.end
        kept = sound & ((counts["macro_steps"] % run.record_every == 0) | done)
        self.record(kept, t1, sound)
        if self.coupling is not None:
            self.coupling.point(sound, t1, self.inputs())
        self.active &= run.alive & ~done
        self.nxt = np.where(sound, self.next_points(self.pos, proposed), self.nxt)

    def trial(self, t: np.ndarray, t1: np.ndarray, h: np.ndarray) -> None:
        """Step every member from *t* to *t1*, its lagging inputs extrapolated; members still to take their first
        step under ``extrapolation: 2`` take it twice (``ExplicitRun._start_up_to``)."""
        run, extrapolation = self.run, self.extrapolation
        if extrapolation.links:
            extrapolation.extrapolate(t, h)
        run.step_plan(self.plan, t, h)
        run.settle(t1)
        again = self.starting & self.active
        if not again.any():
            return
        ends = [np.array(np.broadcast_to(lk.dst.value, (run.members,)), dtype=float) for lk in extrapolation.links]
        self.acc.load()
        extrapolation.extrapolate(t, h)
        extrapolation.start_up(again, ends, h)
        run.step_plan(self.plan, t, h)
        run.settle(t1)

    # ------------------------------------------------------------------ clocks
    def times(self, ticks: np.ndarray) -> np.ndarray:
        """``Clock.time`` of each member's tick."""
        return tick_times(self.clock, self.marks, ticks)

    def next_points(self, ticks: np.ndarray, step: np.ndarray) -> np.ndarray:
        """``MasterRun.next_point`` under step control from each member's tick with its proposed *step*: that many
        ticks (at least ``snap + 1``), the end if it comes first or within ``snap`` after."""
        clock = self.clock
        snap, end = clock.snap, clock.end
        b = np.minimum(ticks + np.maximum(snap + 1, np.rint(step / clock.tick).astype(np.int64)), end)
        return np.where((b < end) & (end <= b + snap), end, b)

    # ------------------------------------------------------------------ samples and failures
    def record(self, mask: np.ndarray, t: np.ndarray, sound: np.ndarray | None = None) -> None:
        """Members *mask* keep a sample at their instants *t* (their accepted values); the final values of the
        members *sound* (*mask* by default) are their values now."""
        values = self.acc.values
        index = self.port_index
        final = mask if sound is None else sound
        for key, port in self.run.outputs.items():
            live = values[index[id(port)]]
            self.last[key] = np.where(final, live, self.last[key])
        ids = np.flatnonzero(mask)
        if not len(ids):
            return
        rows = self.rows[ids]
        if rows.max() >= len(self.time):
            self.time = padded(self.time, 2 * len(self.time))
            self.history = {key: padded(values, 2 * len(values)) for key, values in self.history.items()}
        self.time[rows, ids] = t[ids]
        for key, port in self.run.outputs.items():
            self.history[key][rows, ids] = values[index[id(port)]][ids]
        self.rows[ids] += 1

    def check_finite(self, mask: np.ndarray, t: np.ndarray, t1: np.ndarray) -> np.ndarray:
        """The members *mask* whose state and outputs are finite at the end of their accepted step; the others
        fail there (their values stay those of their last accepted instant)."""
        from cosimrun.ensemble.run import MemberFailure

        run = self.run
        sound = mask & run.finite(self.odes, run.members)
        for m in np.flatnonzero(mask & ~sound).tolist():
            comp, variable = run._culprit(m, self.odes)
            run.alive[m] = False
            run.failures[m] = MemberFailure(m, float(t1[m]), comp, variable, "non-finite value", float(t[m]))
        self.active &= ~(mask & ~sound)
        return sound

    def _unreachable(self, mask: np.ndarray, t: np.ndarray, h: np.ndarray, norm: np.ndarray) -> None:
        """Members *mask* accepted a step at ``min_step`` over the tolerance: counted; the ensemble's first such
        step says so once (``ExplicitRun._unreachable``)."""
        counts = self.counts["steps_at_min_step"]
        first = not counts.any()
        counts[mask] += 1
        if first:
            m = int(np.flatnonzero(mask)[0])
            notice(f"step control: the tolerance (rtol={self.master.rtol:g}, atol={self.master.atol:g}) is "
                   f"unreachable at min_step={h[m]:.3g} s for member {m} at t={t[m]:.9g} (error norm {norm[m]:.3g}); "
                   "such steps are taken once, over the tolerance, and counted per member in "
                   "member_stats['steps_at_min_step']", stacklevel=4)

    # ------------------------------------------------------------------ coupling error
    def _coupling(self) -> OwnClockEstimate | None:
        """Each member's coupling-error estimate on its own clock (``None`` without a recorded producer of a real
        input): of held links alone, or of links of every kind from each member's last accepted points."""
        real = self.run.schedule.real_links
        if not real:
            return None
        members, recorded = self.run.members, self.run.outputs
        if all(kind == "held" for kind in self.kinds):
            estimate = OwnClockEstimate(real, self.kinds, members, recorded)
        else:
            estimate = ExtrapolatedOwnClockEstimate(real, self.kinds, self.master.extrapolation, members, recorded)
        return estimate if estimate.links else None

    def inputs(self) -> np.ndarray:
        """The estimated links' inputs ``(links, members)`` from the accepted port values."""
        assert self.coupling is not None
        index = self.port_index
        return self.coupling.convert([self.acc.values[index[id(lk.src)]] for lk in self.coupling.links])


def padded(values: np.ndarray, rows: int) -> np.ndarray:
    """*values* ``(samples, members)`` with NaN rows up to *rows*."""
    out = np.full((rows, values.shape[1]), np.nan)
    out[:len(values)] = values
    return out


__all__ = ["ControlledSteps", "MemberControl", "MemberExtrapolation", "padded", "refuse_controlled"]
