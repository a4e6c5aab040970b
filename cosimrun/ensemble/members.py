"""How the ensemble steps each component over all members at once.

A continuous component (:class:`~cosimrun.core.ode.OdeComponent`) is integrated here: its states for all
members are one ``(n_states, M)`` array, its model methods (``derivatives``, ``compute_outputs``, event
indicators) are called with them, and :class:`~cosimrun.ensemble.rk4.VectorRK4` (``rk4``) or
:class:`~cosimrun.ensemble.adaptive.VectorAdaptive` (``rk45``, ``rk23``, ``dop853``, a step size per member) repeats
the scalar integrator's arithmetic. Any other vectorizable component is stepped by its own ``do_step`` and
``refresh_outputs`` with ``(M,)`` arrays in its ports and parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from cosimrun.core.component import CoSimComponent
from cosimrun.core.equations import EquationComponent
from cosimrun.core.multi import MultiComponent
from cosimrun.core.ode import ContinuousComponent, OdeComponent
from cosimrun.core.ports import PortState, PortType
from cosimrun.ensemble.adaptive import EXPLICIT, VectorAdaptive
from cosimrun.ensemble.rk4 import VectorRK4
from cosimrun.errors import ComponentContractError, ConfigError, CosimrunError, ModelOutputError


def refuse(comp: CoSimComponent) -> None:
    """Raise a :class:`ConfigError` keyed by the component when the ensemble cannot step *comp*."""
    cls = type(comp)
    key = f"components.{comp.name}"
    if isinstance(comp, MultiComponent):
        from cosimrun.ensemble.modes import refuse_multi  # it steps the modes as this module steps models

        refuse_multi(comp)
        return
    if not getattr(comp, "vectorizable", False):
        raise ConfigError(key, f"component {comp.name!r} ({cls.__name__}) is not vectorizable: an ensemble cannot "
                               "step its members at once (a sweep runs them one after the other)")
    if comp.needs_set_inputs:
        raise ConfigError(key, f"component {comp.name!r} ({cls.__name__}) takes inputs through set_inputs "
                               "(mode switching), which ensembles do not run yet")
    if isinstance(comp, ContinuousComponent):
        if not isinstance(comp, OdeComponent):
            raise ConfigError(key, f"component {comp.name!r} ({cls.__name__}) is not an ODE component; ensembles "
                                   "integrate OdeComponent models only")
        if isinstance(comp, EquationComponent) and comp.dt > 0.0:
            raise ConfigError(key, f"component {comp.name!r} is a sampled equation component (dt={comp.dt:g}); "
                                   "ensembles integrate continuous equation components only")
        method = comp.parameters["integrator"]
        if method != "rk4" and method not in EXPLICIT:
            supported = ", ".join(repr(m) for m in ("rk4", *EXPLICIT))
            raise ConfigError(f"{key}.params.integrator", f"{method!r}: ensembles integrate with {supported} only "
                                                          "(the implicit methods are not vectorized)")
        for hook in ("pre_integrate", "post_integrate", "_initial_state"):
            if getattr(cls, hook) is not getattr(ContinuousComponent, hook):
                raise ConfigError(key, f"component {comp.name!r} ({cls.__name__}) overrides {hook}, which ensembles "
                                       "do not call")


def refuse_iterated_adaptive(master: Any, components: Iterable[CoSimComponent]) -> None:
    """Refuse adaptive integrators of *components* under ``ijcsa`` with ``iterate_steps`` (*master*): the
    finite-difference Jacobian of a member's interface magnifies the last-bit differences of its adaptive steps
    from its scalar run's (see :mod:`cosimrun.ensemble.adaptive`) up to its Newton tolerance, enough to change its
    iteration counts."""
    if not getattr(master, "iterate_steps", False):
        return
    names = [c.name for c in components if isinstance(c, OdeComponent) and c.parameters["integrator"] in EXPLICIT]
    if names:
        raise ConfigError("master.iterate_steps", f"ensembles iterate implicit steps of components integrated with "
                                                  f"'rk4' only; {', '.join(names)} integrate adaptively (an adaptive "
                                                  "member may take other Newton iterations than its scalar run)")


def refresh_parameters(comp: CoSimComponent) -> None:
    """Let *comp* recompute what it caches from its parameters (the builtin components' ``_refresh`` of ODE
    blocks and ``_setup`` of memoryless ones), after the ensemble wrote member arrays into them."""
    for hook in ("_refresh", "_setup"):
        method = getattr(comp, hook, None)
        if callable(method):
            method()


def narrow_parameters(owners: Sequence[tuple[Any, Sequence[str]]], idx: np.ndarray) -> list[tuple[Any, dict[str, Any]]]:
    """Narrow the varying parameters to the members *idx*: each of *owners* (a component with the names of its
    parameters that hold one value per member) keeps theirs alone. Returns the whole arrays, for
    :func:`restore_parameters`."""
    saved = []
    for owner, names in owners:
        saved.append((owner, {n: owner.parameters[n] for n in names}))
        for n in names:
            owner.parameters[n] = owner.parameters[n][idx]
        refresh_parameters(owner)
    return saved


def restore_parameters(saved: list[tuple[Any, dict[str, Any]]]) -> None:
    """Put back the whole arrays :func:`narrow_parameters` returned."""
    for owner, values in saved:
        owner.parameters.update(values)
        refresh_parameters(owner)


class Member:
    """A component stepped over all members: ``do_step``, ``refresh``, its states (none here)."""

    states: tuple[str, ...] = ()
    x: np.ndarray | None = None

    def __init__(self, comp: CoSimComponent, members: int) -> None:
        self.comp = comp
        self.members = members

    def do_step(self, t: float, h: float) -> None:
        try:
            self.comp.do_step(t, h)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, CosimrunError):
                raise
            raise not_vectorized(self.comp, "step", exc) from exc

    def refresh(self, t: float) -> None:
        try:
            self.comp.refresh_outputs(t)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, CosimrunError):
                raise
            raise not_vectorized(self.comp, "output update", exc) from exc


def not_vectorized(comp: CoSimComponent, what: str, exc: Exception) -> ComponentContractError:
    """The error of a component that declares ``vectorizable`` but whose *what* failed on the members' arrays."""
    return ComponentContractError(f"component {comp.name!r} ({type(comp).__name__}) declares vectorizable, but its "
                                  f"{what} failed on the members' arrays: {type(exc).__name__}: {exc}",
                                  component=comp.name)


class OdeMember(Member):
    """An :class:`OdeComponent` over all members: states ``(n, M)``, inputs gathered to ``(n_in, M)``."""

    adaptive: VectorAdaptive | None = None
    """The integrator of an adaptive ``integrator`` (``None``: ``rk4``)."""

    def __init__(self, comp: OdeComponent, members: int) -> None:
        super().__init__(comp, members)
        self.ode = comp
        self.holder: Any = comp
        """What holds the discrete state per member (``member_state``): the component."""
        self.derivatives = comp.derivatives
        self.compute_outputs = comp.compute_outputs
        self.states = comp.state_names
        n = len(self.states)
        x0 = comp.x  # member 0's state after initialize; varying initial states are set by the caller
        self.x = np.empty((n, members))
        for i in range(n):
            self.x[i] = x0[i]
        self.in_ports: list[PortState] = [comp.inputs[name] for name in comp.input_names]
        self.u = np.empty((len(self.in_ports), members))
        self.state_ports = [(comp.outputs[name], i) for i, name in enumerate(self.states) if name in comp.outputs]
        self.alg_ports = [comp.outputs[name] for name in comp.output_names]
        p = comp.parameters
        self.rk4 = VectorRK4(comp.name, self.states, p["substeps"], p["max_substep"], self.x.shape)
        if p["integrator"] in EXPLICIT:
            self.adaptive = VectorAdaptive(comp.name, p["integrator"], self.states, p["rtol"], p["atol"],
                                           p["max_substep"], members)
        self.events = [(name, ev.direction, ev.function) for name, ev in comp.state_events.items()]
        self.updates = [ev.update for ev in comp.state_events.values()]
        self.armed = [np.zeros(members) for _ in self.events]
        """Each indicator's armed side per member: its last signed value at an accepted instant (0: no side)."""
        self.hinted = [np.zeros(members) for _ in self.events]
        """Per member, the signed value before a crossing the integrator saw inside the last step (0: none)."""
        self.hint_times = [(np.zeros(members), np.zeros(members)) for _ in self.events]
        """Per member, the substep's ends around that crossing (the scalar integrator's hint bracket)."""
        self.hint_after = [np.zeros(members) for _ in self.events]
        """Per member, the indicator's value at the substep's end past that crossing."""
        self._tracked: list[np.ndarray] = []
        self._tracked_t: list[np.ndarray] = []
        self.tracking = True
        """Whether steps track the indicators over their substeps (the internal hints); a trial whose hints nobody
        reads (locating an event, probing its departure) need not."""
        self.member_state: tuple[str, ...] = tuple(getattr(type(comp), "member_state", ()))
        """The component's discrete state per member (attributes holding ``(M,)`` arrays), see
        :func:`start_member_state`."""

    def set_initial(self, index: int, values: np.ndarray) -> None:
        self.x[index] = values

    def narrow(self, idx: np.ndarray) -> tuple[Any, ...]:
        """Become the stepper of the members *idx* alone (a sub-ensemble): their states, armed sides and discrete
        state; the component's parameters are narrowed by the caller. Returns what :meth:`widen` puts back."""
        holder = self.holder
        saved = (self.x, self.u, self.members, self.armed, [getattr(holder, a) for a in self.member_state])
        k = len(idx)
        self.x = self.x[:, idx]
        self.u = np.empty((len(self.in_ports), k))
        self.members = k
        self.armed = [armed[idx] for armed in self.armed]
        for name, values in zip(self.member_state, saved[4], strict=True):
            setattr(holder, name, values[idx])
        self._transient(k)
        return saved

    def widen(self, saved: tuple[Any, ...], idx: np.ndarray) -> None:
        """Write the sub-ensemble's members back into the ensemble :meth:`narrow` saved, and become its stepper."""
        x, u, members, armed, state = saved
        x[:, idx] = self.x
        for whole, part in zip(armed, self.armed, strict=True):
            whole[idx] = part
        holder = self.holder
        for name, whole in zip(self.member_state, state, strict=True):
            whole[idx] = getattr(holder, name)
            setattr(holder, name, whole)
        self.x, self.u, self.members, self.armed = x, u, members, armed
        self._transient(members)

    def _transient(self, k: int) -> None:
        """Fresh per-step tracking arrays for *k* members."""
        self.hinted = [np.zeros(k) for _ in self.events]
        self.hint_times = [(np.zeros(k), np.zeros(k)) for _ in self.events]
        self.hint_after = [np.zeros(k) for _ in self.events]

    def gather(self) -> np.ndarray:
        u = self.u
        for i, port in enumerate(self.in_ports):
            u[i] = port.value
        return u

    def _input_polynomial(self, t: float, u: np.ndarray) -> Callable[[float], np.ndarray] | None:
        """The inputs over a step from *t*, as :meth:`ContinuousComponent._input_polynomial` gives them."""
        orders = [p.derivatives for p in self.in_ports]
        if not any(len(d) for d in orders):
            return None
        n = max(len(d) for d in orders)
        d = np.zeros((n, *u.shape))
        for i, derivs in enumerate(orders):
            for k, value in enumerate(derivs):
                d[k, i] = value
        u0 = u.copy()
        d1, d2 = d[0], (0.5 * d[1] if n > 1 else None)

        def input_at(s: float) -> np.ndarray:
            tau = s - t
            return u0 + tau * d1 if d2 is None else u0 + tau * (d1 + tau * d2)

        return input_at

    def do_step(self, t: float, h: float) -> None:
        u = self.gather()
        u_at = self._input_polynomial(t, u)
        track = None
        if self.events and self.tracking:
            shape = (self.members,)
            self._tracked = [np.array(np.broadcast_to(np.asarray(f(t, self.x, u), dtype=float), shape))
                             for _, _, f in self.events]
            self._tracked_t = [np.array(np.broadcast_to(t, shape), dtype=float) for _ in self.events]
            for hinted in self.hinted:
                hinted[:] = 0.0
            track = self._track
        if len(self.x):
            try:
                if self.adaptive is None:
                    self.rk4.integrate(self.derivatives, t, h, self.x, u, u_at, track)
                else:
                    self.adaptive.integrate(self.derivatives, t, h, self.x, u, u_at, track)
            except (TypeError, ValueError) as exc:
                if isinstance(exc, CosimrunError):
                    raise
                raise not_vectorized(self.comp, "derivatives (or an event indicator)", exc) from exc
        self.refresh(t + h)

    def _track(self, t: float | np.ndarray, x: np.ndarray, u: np.ndarray, where: np.ndarray | None = None) -> None:
        """The scalar integrator's tracking of each state event over one substep, per member
        (:meth:`~cosimrun.core.ode.base.Integrator.track`): a crossing leaves its signed value before it as a hint.
        With *where*, of those members alone (the others took no step)."""
        shape = (self.members,)
        t_new = t if np.ndim(t) else np.full(shape, t)
        for (_, direction, func), g, t_g, hinted, (t_before, t_after), after in zip(
                self.events, self._tracked, self._tracked_t, self.hinted, self.hint_times, self.hint_after,
                strict=True):
            g_new = func(t, x, u)
            if not (isinstance(g_new, np.ndarray) and g_new.shape == shape and g_new.dtype == float):
                g_new = np.broadcast_to(np.asarray(g_new, dtype=float), shape)
            open_ = hinted == 0.0
            if where is not None:
                open_ &= where
            hit = crossed_members(g, g_new, direction, 0.0)
            hit &= open_
            if hit.any():
                hinted[hit] = g[hit]
                t_before[hit], t_after[hit], after[hit] = t_g[hit], t_new[hit], g_new[hit]
                open_ &= ~hit
            move = (np.abs(g_new) > 0.0) | (np.abs(g) <= 0.0)
            move &= open_
            np.copyto(g, g_new, where=move)
            np.copyto(t_g, t_new, where=move)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The states and the adaptive integrator's step sizes (what a rollback restores, as a scalar run's
        snapshot holds the integrator's memory)."""
        return self.x.copy(), None if self.adaptive is None else self.adaptive.memory.copy()

    def restore(self, snapshot: tuple[np.ndarray, np.ndarray | None]) -> None:
        """Go back to a :meth:`snapshot`."""
        x, memory = snapshot
        np.copyto(self.x, x)
        if self.adaptive is not None and memory is not None:
            self.adaptive.memory = memory.copy()

    def failures(self) -> list[tuple[int, str, str]]:
        """``(member, state, cause)`` of each member whose integrator failed over the last step (as its scalar run
        stops with the integrator's error)."""
        return [] if self.adaptive is None else self.adaptive.failures()

    def arm(self, t: float, tol: float) -> None:
        """Arm every indicator with its side at the accepted instant *t* (a value on the surface keeps the side)."""
        for (_, g), armed in zip(self.indicators(t), self.armed, strict=True):
            arm_members(armed, g, tol)

    def crossings(self, t: float, tol: float) -> list[tuple[str, np.ndarray]]:
        """Per state event, which members' indicators crossed zero over the step ending at *t*, as the masters
        without localization see it (``StateEvents.reference`` and ``crossings``): strictly past zero from the
        armed side, or for an indicator without a side from the side the integrator saw it leave; then re-armed."""
        out = []
        for (name, g), armed, side, (_, direction, _) in zip(self.indicators(t), self.armed, self.reference(tol),
                                                             self.events, strict=True):
            out.append((name, crossed_members(side, g, direction, tol)))
            arm_members(armed, g, tol)
        return out

    def reference(self, tol: float) -> list[np.ndarray]:
        """Per state event, the side each member's indicator is compared against after a step
        (:func:`reference_sides`)."""
        return [reference_sides(armed, hinted, tol) for armed, hinted in zip(self.armed, self.hinted, strict=True)]

    def refresh(self, t: float) -> None:
        x = self.x
        for port, i in self.state_ports:
            port.value = x[i].copy()
        ports = self.alg_ports
        if ports:
            ys = output_values(self.compute_outputs(t, x, self.gather()))
            if len(ys) != len(ports):
                raise ModelOutputError(f"component {self.comp.name!r}: compute_outputs returned {len(ys)} values for "
                                       f"{len(ports)} outputs", component=self.comp.name, time=t,
                                       function="compute_outputs", expected=(len(ports),), got=(len(ys),))
            shape = (self.members,)
            for port, y in zip(ports, ys, strict=True):
                port.value = np.array(np.broadcast_to(np.asarray(y, dtype=float), shape))

    def indicators(self, t: float) -> list[tuple[str, np.ndarray]]:
        """Each state event's indicator for every member: ``(name, g)``."""
        u = self.gather()
        shape = (self.members,)
        return [(name, np.broadcast_to(np.asarray(func(t, self.x, u), dtype=float), shape))
                for name, _, func in self.events]


def arm_members(armed: np.ndarray, g: np.ndarray, tol: float, mask: np.ndarray | None = None) -> None:
    """Arm each member's indicator with its value *g* where it is signed (``StateEvents.arm``); with *mask*, of
    those members alone (*mask* ``(M,)`` for *g* ``(M, indicators)``)."""
    signed = np.abs(g) > tol
    if mask is not None:
        signed &= mask if signed.ndim == 1 else mask[:, None]
    armed[signed] = g[signed]


def crossed_members(before: np.ndarray, after: np.ndarray, direction: int | np.ndarray, tol: float) -> np.ndarray:
    """Which members' indicators crossed zero from *before* to *after*: :func:`cosimrun.core.events.crossed`
    for each member (a strictly signed value to one strictly past zero, values within *tol* counting as zero).
    *direction* is one indicator's, or an array of each column's for ``(members, indicators)`` values."""
    rising = (before < -tol) & (after > tol)
    if np.ndim(direction):
        falling = (before > tol) & (after < -tol)
        return np.where(direction > 0, rising, np.where(direction < 0, falling, rising | falling))
    if direction > 0:
        return rising
    falling = (before > tol) & (after < -tol)
    return falling if direction < 0 else rising | falling


def reference_sides(armed: np.ndarray, hinted: np.ndarray, tol: float) -> np.ndarray:
    """The side each indicator is compared against after a step (``StateEvents.reference``): its armed side, or,
    for one without a side, the signed value before a crossing the integrator saw inside the step (*hinted*)."""
    return np.where((armed == 0.0) & (np.abs(hinted) > tol), hinted, armed)


def output_values(ys: Any) -> tuple[Any, ...]:
    """What ``compute_outputs`` returned as one value per output: a number or one array over the members is one
    output's."""
    if (isinstance(ys, np.ndarray) and ys.ndim <= 1) or np.ndim(ys) == 0:
        return (ys,)
    return tuple(ys)


def start_member_state(st: OdeMember) -> None:
    """Give the component's discrete state its value per member at the start (its ``start_members(x)`` hook, from
    the members' initial states), each attribute named in ``member_state`` as an ``(M,)`` array."""
    holder = st.holder
    start = getattr(holder, "start_members", None)
    if callable(start):
        start(st.x)
    for name in st.member_state:
        setattr(holder, name, np.array(np.broadcast_to(getattr(holder, name), (st.members,))))


def real_outputs(comp: CoSimComponent) -> list[str]:
    """The real outputs of *comp* an ensemble records."""
    return [name for name, port in comp.outputs.items() if port.spec.type is PortType.REAL]


def stepper(comp: CoSimComponent, members: int) -> Member:
    """The ensemble's stepper of *comp* (checked by :func:`refuse`)."""
    from cosimrun.ensemble.modes import MultiMember, TimedMember, timed_ok

    if isinstance(comp, MultiComponent):
        return MultiMember(comp, members)
    if isinstance(comp, OdeComponent):
        return OdeMember(comp, members)
    return TimedMember(comp, members) if timed_ok(comp) else Member(comp, members)


__all__ = ["Member", "OdeMember", "arm_members", "crossed_members", "output_values", "real_outputs",
           "narrow_parameters", "reference_sides", "refresh_parameters", "refuse",
           "restore_parameters", "refuse_iterated_adaptive", "start_member_state",
           "stepper"]
