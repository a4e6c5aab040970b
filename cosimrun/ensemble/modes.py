"""Mode switching per member: a ``multi`` component over an ensemble's members, each member in its own mode.

:class:`MultiMember` steps a :class:`~cosimrun.core.multi.MultiComponent` whose modes are ODE models sharing
their states (the ``pendulum_switch`` pendulum: a linear and a nonlinear model of ``q, omega``). Its members
share one state array ``(n_states, M)``; each member's mode is an entry of ``mode`` (M,), and every model
function (derivatives, outputs, state event indicators and updates) is that of the member's mode: each mode's
model is evaluated over all members and each member takes its own mode's values (``np.where``), so a member's
arithmetic is its scalar run's. The switch regions are kept per member as the scalar
:class:`~cosimrun.core.regions.RegionTracker` keeps them (``region``), with the boundary indicators, the
switches at accepted instants (:meth:`MultiMember.apply_switch`, ``MultiComponent.apply_mode_switch``), those at
boundary events (:meth:`MultiMember.boundary_switch`, ``MultiComponent._switch_on_boundary``), the dwell time
(``last_switch`` per member, :class:`~cosimrun.core.switching.Hysteresis`) and the time event at the end of a
dwell window that holds back a switch (:meth:`MultiMember.dwell_end`). A switch carries the state over unchanged
(the modes share their states: the scalar transfer's ``get_state``/``set_state`` in the same units).

:class:`TimedMember` steps a memoryless component (a source, a block) at each member's own instant, as the
hybrid master's members keep their own clocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cosimrun.components._base import StatelessComponent
from cosimrun.core.component import NO_EVENTS, CoSimComponent
from cosimrun.core.multi import MultiComponent
from cosimrun.core.ode import OdeComponent
from cosimrun.core.regions import IRRELEVANT
from cosimrun.core.switching import _TIME_EPS
from cosimrun.ensemble.members import Member, OdeMember, not_vectorized, output_values, refuse
from cosimrun.ensemble.rk4 import VectorRK4
from cosimrun.errors import ConfigError, CosimrunError


def parameter_owners(comp: CoSimComponent, name: str) -> list[tuple[CoSimComponent, str]]:
    """The components whose ``parameters`` hold *comp*'s parameter *name*, each with its name there: *comp*
    itself; for a multi component every mode that has it (its ``set_parameters`` forwards the value to each), or,
    named ``mode.parameter``, that mode's (a config's ``components.<name>.modes.<mode>.params.<parameter>``)."""
    if isinstance(comp, MultiComponent) and name not in comp.parameters:
        mode, dot, own = name.partition(".")
        if dot:
            model = comp.models.get(mode)
            return [(model, own)] if model is not None and own in model.parameters else []
        return [(m, name) for m in comp.models.values() if name in m.parameters]
    return [(comp, name)] if name in comp.parameters else []


def is_multi(comp: CoSimComponent) -> bool:
    return isinstance(comp, MultiComponent)


def refuse_multi(comp: MultiComponent) -> None:
    """Refuse, keyed by the component, a multi component an ensemble cannot step per member: every mode an
    ODE model that declares ``vectorizable``, with the same states (names and units), inputs, outputs, state
    events and solver settings, no unit conversions between the modes' ports, the base state transfer, switch
    regions (with their boundary indicators) as the selector."""
    key = f"components.{comp.name}"
    models = list(comp.models.items())
    first = models[0][1]
    for mode, model in models:
        where = f"{key}.modes.{mode}"
        if not isinstance(model, OdeComponent) or not getattr(type(model), "vectorizable", False):
            raise ConfigError(where, f"mode {mode!r} of component {comp.name!r} ({type(model).__name__}) is not a "
                                     "vectorizable ODE model, which ensembles switch between per member")
        refuse(model)
        same = (model.state_names == first.state_names
                and [s.unit for s in model._state_specs] == [s.unit for s in first._state_specs]
                and model.input_names == first.input_names and model.output_names == first.output_names
                and list(model.state_events) == list(first.state_events)
                and model.parameters["substeps"] == first.parameters["substeps"])
        if not same:
            raise ConfigError(where, f"the modes of component {comp.name!r} differ in their states, ports, state "
                                     "events or substeps; ensembles switch members between modes that share them")
    if any(comp._in_conv.get(m) or comp._out_conv.get(m) for m, _ in models):
        raise ConfigError(key, f"the modes of component {comp.name!r} take their ports in other units, which "
                               "ensembles do not convert per member")
    if comp.state_adapters or type(comp)._adapt_state is not MultiComponent._adapt_state:
        raise ConfigError(key, f"component {comp.name!r} adapts states between its modes, which ensembles do not "
                               "run (the modes must share their states)")
    if comp._regions is None or comp.mode_selector != comp._region_selector or not comp._boundary_events:
        raise ConfigError(f"{key}.selector", f"component {comp.name!r}: ensembles switch modes by switch regions "
                                             "(a threshold or regions selector) only")


class TimedMember(Member):
    """A memoryless component (a source or a block) stepped at one instant per member: its outputs at ``t + h``
    from its inputs, as its ``do_step`` gives them (it keeps no state to step)."""

    def do_step(self, t: Any, h: Any) -> None:
        if np.ndim(t) == 0 and np.ndim(h) == 0:
            super().do_step(t, h)
            return
        try:
            self.comp._update_output_states(t + h, NO_EVENTS)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, CosimrunError):
                raise
            raise not_vectorized(self.comp, "step", exc) from exc


def timed_ok(comp: CoSimComponent) -> bool:
    """Whether *comp* is stepped as a :class:`TimedMember` under the hybrid master (memoryless, no time
    events)."""
    return isinstance(comp, StatelessComponent)


class MultiMember(OdeMember):
    """A :class:`MultiComponent` over all members, each in its own mode (see the module's docstring)."""

    member_state = ("mode", "region", "last_switch")

    def __init__(self, comp: MultiComponent, members: int) -> None:
        Member.__init__(self, comp, members)
        self.multi = comp
        self.mode_names = list(comp.models)
        self.models: list[OdeComponent] = [comp.models[m] for m in self.mode_names]  # type: ignore[misc]
        first = comp.models[comp.initial_mode]
        assert isinstance(first, OdeComponent)
        self.ode = first
        self.holder = self
        self.states = first.state_names
        n = len(self.states)
        x0 = first.x
        self.x = np.empty((n, members))
        for i in range(n):
            self.x[i] = x0[i]
        self.in_ports = [comp.inputs[name] for name in first.input_names]
        self.u = np.empty((len(self.in_ports), members))
        self.state_ports = [(comp.outputs[name], i) for i, name in enumerate(self.states) if name in comp.outputs]
        self.alg_ports = [comp.outputs[name] for name in first.output_names]
        p = first.parameters
        self.rk4 = VectorRK4(comp.name, self.states, p["substeps"], p["max_substep"], self.x.shape)
        self.derivatives = self._derivatives
        self.compute_outputs = self._compute_outputs
        names = list(first.state_events)
        self.events = [(name, first.state_events[name].direction, self._event_function(name)) for name in names]
        self.updates = [self._event_update(name) for name in names]
        self.armed = [np.zeros(members) for _ in self.events]
        self.hinted = [np.zeros(members) for _ in self.events]
        self.hint_times = [(np.zeros(members), np.zeros(members)) for _ in self.events]
        self.hint_after = [np.zeros(members) for _ in self.events]
        self._tracked, self._tracked_t = [], []
        self.tracking = True
        tracker = comp._regions
        assert tracker is not None
        regions = tracker.regions
        self.regions = regions
        self.port = comp.outputs[regions.port]
        self.region_mode = np.array([self.mode_names.index(m) for m in regions.modes], dtype=np.int64)
        self.lower = np.tile([b[0] for b in regions.bounds], (members, 1))
        self.upper = np.tile([b[1] for b in regions.bounds], (members, 1))
        """Each member's bounds ``(M, boundaries)``: the selector's, or the member's own (:meth:`vary`)."""
        self.boundaries = list(regions.indicator_names().items())
        """``(name, (kind, boundary))`` of every boundary indicator, in the component's order."""
        self.dwell = None if comp.hysteresis is None else np.full(members, comp.hysteresis.dwell_time)
        """Each member's dwell time (``None``: no hysteresis)."""
        self.mode = np.full(members, self.mode_names.index(comp.initial_mode), dtype=np.int64)
        self.region = np.zeros(members, dtype=np.int64)
        self.last_switch = np.full(members, -np.inf)

    def vary(self, settings: dict[str, np.ndarray]) -> None:
        """Give the members their own switch settings (:data:`~cosimrun.ensemble.parameters.SWITCH_SETTINGS`, one
        value per member): a threshold selector's bounds, the dwell time."""
        if "selector.lower" in settings:
            self.lower[:, 0] = settings["selector.lower"]
        if "selector.upper" in settings:
            self.upper[:, 0] = settings["selector.upper"]
        if "hysteresis.dwell_time" in settings:
            self.dwell = np.array(settings["hysteresis.dwell_time"], dtype=float)

    def narrow(self, idx: np.ndarray) -> tuple[Any, ...]:
        """:meth:`OdeMember.narrow`, the members' switch settings too."""
        saved = super().narrow(idx)
        kept = self.lower, self.upper, self.dwell
        self.lower, self.upper = self.lower[idx], self.upper[idx]
        self.dwell = None if self.dwell is None else self.dwell[idx]
        return (saved, kept)

    def widen(self, saved: tuple[Any, ...], idx: np.ndarray) -> None:
        inner, (self.lower, self.upper, self.dwell) = saved
        super().widen(inner, idx)

    # ------------------------------------------------------------------ the modes' model functions
    def _masks(self) -> list[np.ndarray] | None:
        """Per mode, which members are in it; ``None`` when all are in one (``only``)."""
        mode = self.mode
        first = mode[0] if len(mode) else 0
        if not len(mode) or (mode == first).all():
            self.only = int(first)
            return None
        return [mode == k for k in range(len(self.models))]

    def _combine(self, call: Callable[[OdeComponent], Any]) -> Any:
        """Each member's value of *call* (a model function) from the model of its mode."""
        masks = self._masks()
        if masks is None:
            return call(self.models[self.only])
        out = None
        for model, mask in zip(self.models, masks, strict=True):
            if not mask.any():
                continue
            value = call(model)
            out = value if out is None else np.where(mask, value, out)
        return out

    def _derivatives(self, t: Any, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self._combine(lambda model: model.derivatives(t, x, u))

    def _compute_outputs(self, t: Any, x: np.ndarray, u: np.ndarray) -> Any:
        masks = self._masks()
        if masks is None:
            return self.models[self.only].compute_outputs(t, x, u)
        parts = [(mask, model.compute_outputs(t, x, u)) for model, mask in zip(self.models, masks, strict=True)
                 if mask.any()]
        out = [np.asarray(y, dtype=float) for y in output_values(parts[0][1])]
        for mask, ys in parts[1:]:
            out = [np.where(mask, y, o) for y, o in zip(output_values(ys), out, strict=True)]
        return tuple(out)

    def _event_function(self, name: str) -> Callable[..., Any]:
        functions = [model.state_events[name].function for model in self.models]

        def indicator(t: Any, x: np.ndarray, u: np.ndarray) -> Any:
            masks = self._masks()
            if masks is None:
                return functions[self.only](t, x, u)
            out = None
            for func, mask in zip(functions, masks, strict=True):
                if mask.any():
                    value = np.asarray(func(t, x, u), dtype=float)
                    out = value if out is None else np.where(mask, value, out)
            return out

        return indicator

    def _event_update(self, name: str) -> Callable[..., Any] | None:
        updates = [model.state_events[name].update for model in self.models]
        if all(update is None for update in updates):
            return None

        def update(t: Any, x: np.ndarray, u: np.ndarray) -> np.ndarray:
            def one(model: OdeComponent) -> Any:
                fn = updates[self.models.index(model)]
                return x.copy() if fn is None else np.asarray(fn(t, x, u), dtype=float)

            return self._combine(one)

        return update

    # ------------------------------------------------------------------ regions
    def value(self) -> np.ndarray:
        """The regions' value of every member (``SwitchRegions.value`` of the port)."""
        raw = np.broadcast_to(np.asarray(self.port.value, dtype=float), (self.members,))
        return np.abs(raw) if self.regions.use_abs else np.array(raw)

    def next_region(self, region: np.ndarray, value: np.ndarray, direction: int = 0) -> np.ndarray:
        """``SwitchRegions.next_region`` per member."""
        region = region.copy()
        last = len(self.region_mode) - 1
        rows = np.arange(len(region))
        if direction >= 0:
            for _ in range(last):
                up = (region < last) & (value > self.upper[rows, np.minimum(region, last - 1)])
                if not up.any():
                    break
                region[up] += 1
        if direction <= 0:
            for _ in range(last):
                down = (region > 0) & (value < self.lower[rows, np.maximum(region - 1, 0)])
                if not down.any():
                    break
                region[down] -= 1
        return region

    def start(self) -> None:
        """Place every member in its region at the start (``RegionTracker.classify`` with its initial mode)."""
        value = self.value()
        last = len(self.region_mode) - 1
        chosen = np.full(self.members, -1, dtype=np.int64)
        first_stable = np.full(self.members, -1, dtype=np.int64)
        for i in range(last + 1):
            stable = np.ones(self.members, dtype=bool)
            if i > 0:
                stable &= value >= self.lower[:, i - 1]
            if i < last:
                stable &= value <= self.upper[:, i]
            chosen[(chosen < 0) & stable & (self.region_mode[i] == self.mode)] = i
            first_stable[(first_stable < 0) & stable] = i
        fallback = np.where(first_stable >= 0, first_stable, _first_region(self.region_mode, self.mode))
        self.region = np.where(chosen >= 0, chosen, fallback)

    def boundary_values(self) -> list[np.ndarray]:
        """Every boundary indicator per member (``RegionTracker.indicator``)."""
        value = self.value()
        out = []
        for _, (kind, i) in self.boundaries:
            if kind == "up":
                out.append(np.where(self.region == i, value - self.upper[:, i], IRRELEVANT))
            else:
                out.append(np.where(self.region == i + 1, self.lower[:, i] - value, IRRELEVANT))
        return out

    def indicators(self, t: Any) -> list[tuple[str, np.ndarray]]:
        """The state events' indicators of every member's mode, then the boundary indicators."""
        own = super().indicators(t)
        return [*own, *zip((name for name, _ in self.boundaries), self.boundary_values(), strict=True)]

    def in_dwell(self, t: np.ndarray) -> np.ndarray:
        """``Hysteresis.in_dwell_window`` per member (never without a dwell time)."""
        if self.dwell is None:
            return np.zeros(self.members, dtype=bool)
        with np.errstate(invalid="ignore"):
            return t < (self.last_switch + self.dwell) - _TIME_EPS * np.maximum(1.0, np.abs(t))

    def switch(self, mask: np.ndarray, to: np.ndarray, t: np.ndarray, region: np.ndarray | None,
               log: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]) -> None:
        """Members *mask* switch to the modes *to* at their instants *t* (``MultiComponent._switch_mode``): the
        state carries over, the outputs come from the new mode, the region is *region* (else
        ``RegionTracker.after_switch``), the dwell window starts; *log* gets ``(members, t, from, to)``."""
        if not mask.any():
            return
        value = self.value()
        if region is None:
            target = self.next_region(self.region, value)
            match = self.region_mode[target] == to
            nearest = _nearest_region(self.region_mode, to, target)
            region = np.where(match, target, nearest)
        log(mask, t, self.mode.copy(), to)
        self.mode = np.where(mask, to, self.mode)
        self.region = np.where(mask, region, self.region)
        self.last_switch = np.where(mask, t, self.last_switch)
        self.refresh_members(t, mask)

    def refresh_members(self, t: Any, mask: np.ndarray) -> None:
        """The outputs of members *mask* afresh (the others keep theirs)."""
        ports = [p for p, _ in self.state_ports] + list(self.alg_ports)
        old = [np.array(np.broadcast_to(np.asarray(p.value, dtype=float), (self.members,))) for p in ports]
        self.refresh(t)
        for port, before in zip(ports, old, strict=True):
            port.value = np.where(mask, port.value, before)

    def apply_switch(self, mask: np.ndarray, t: np.ndarray,
                     log: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]) -> np.ndarray:
        """``MultiComponent.apply_mode_switch`` at the accepted instants *t* of members *mask*: those outside
        their dwell window whose value asks for another mode switch to it. Returns which switched."""
        on = mask & ~self.in_dwell(t)
        if not on.any():
            return on
        value = self.value()
        target = self.next_region(self.region, value)
        wanted = self.region_mode[target]
        stay = on & (wanted == self.mode)
        self.region = np.where(stay, target, self.region)
        go = on & (wanted != self.mode)
        self.switch(go, wanted, t, None, log)
        return go

    def boundary_switch(self, fired: np.ndarray, t: np.ndarray,
                        log: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]) -> None:
        """The boundary events *fired* ``(members, boundary columns)`` handled at *t*
        (``MultiComponent._switch_on_boundary``): the region they lead to, switching there outside the dwell
        window."""
        value = self.value()
        k = self.members
        target = np.full(k, -1, dtype=np.int64)
        for j, (_, (kind, i)) in enumerate(self.boundaries):
            todo = fired[:, j] & (target < 0)
            if kind == "up":
                hit = todo & (self.region == i)
                if hit.any():
                    target[hit] = self.next_region(np.full(k, i + 1), value, 1)[hit]
            else:
                hit = todo & (self.region == i + 1)
                if hit.any():
                    target[hit] = self.next_region(np.full(k, i), value, -1)[hit]
        some = target >= 0
        mode = np.where(some, self.region_mode[np.maximum(target, 0)], -1)
        same = some & (mode == self.mode)
        self.region = np.where(same, target, self.region)
        go = some & (mode != self.mode) & ~self.in_dwell(t)
        self.switch(go, mode, t, target, log)

    def dwell_end(self, t: np.ndarray, value: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``MultiComponent.next_time_event`` for members *mask* at their accepted instants *t* with the regions'
        value *value* there: the end of its dwell window while a switch waits for it (NaN for none). As the scalar
        selector does, a member whose value asks for its own mode takes the region it is in."""
        out = np.full(self.members, np.nan)
        if self.dwell is None:
            return out
        waiting = mask & self.in_dwell(t)
        if not waiting.any():
            return out
        target = self.next_region(self.region, value)
        wanted = self.region_mode[target]
        stay = waiting & (wanted == self.mode)
        self.region = np.where(stay, target, self.region)
        held = waiting & (wanted != self.mode)
        out[held] = (self.last_switch + self.dwell)[held]
        return out


def _first_region(region_mode: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """``regions.modes.index(mode)`` per member (0 when no region has it)."""
    out = np.zeros(len(mode), dtype=np.int64)
    done = np.zeros(len(mode), dtype=bool)
    for i, m in enumerate(region_mode.tolist()):
        hit = ~done & (mode == m)
        out[hit] = i
        done |= hit
    return out


def _nearest_region(region_mode: np.ndarray, mode: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The region of *mode* nearest to *target* per member (the first of equals; *target* when none has it)."""
    best = target.copy()
    dist = np.full(len(mode), np.iinfo(np.int64).max)
    for i, m in enumerate(region_mode.tolist()):
        d = np.abs(i - target)
        better = (mode == m) & (d < dist)
        best[better], dist[better] = i, d[better]
    return best


__all__ = ["MultiMember", "TimedMember", "is_multi", "parameter_owners", "refuse_multi", "timed_ok"]
