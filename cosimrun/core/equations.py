"""Components defined by equation callables, in the style of a block-diagram simulator.

:class:`EquationComponent` wraps four functions (x: state, u: inputs, t: time)::

    state_equation(t, x, u)   -> dx/dt            continuous (dt == 0)
                              -> x[k+1]           sampled (dt > 0)
    output_equation(t, x)     -> y                dim_state > 0
    output_equation(t, x, u)  -> y                dim_state > 0 and feedthrough=True
    output_equation(t, u)     -> y                dim_state == 0 (memoryless, direct feedthrough)
    event_equation(...)       -> float            same arguments as output_equation
    update_equation(...)      -> x after event    same arguments as output_equation
                                                  (dim_state == 0: called for side effects)

Continuous systems are integrated by :class:`~cosimrun.core.ode.OdeComponent`
(same ``integrator`` parameters). Sampled systems follow discrete-time
convention: at each sample ``t_k = t0 + k * dt`` the update
``x[k+1] = state_equation(t_k, x[k], u(t_k))`` is computed from the inputs at
``t_k`` and becomes the state at ``t_{k+1}``; outputs are computed at sample
instants and held in between (``y = output_equation(t_k, x[k])``). A sampled
component announces its samples through :meth:`next_time_event` and sets
``max_step = dt``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cosimrun.core.ode import OdeComponent
from cosimrun.core.units import UnitLike
from cosimrun.errors import ComponentContractError, ConfigError, ModelOutputError

PortDecl = str | tuple[str] | tuple[str, UnitLike]
"""A port or state: ``"name"`` or ``("name", unit)``."""

PortDecls = int | Sequence[PortDecl]
"""A count (names generated) or a sequence of declarations."""

_SAMPLE_RTOL = 1e-9


def _declarations(decls: PortDecls | None, prefix: str, what: str) -> list[tuple[str, UnitLike]]:
    """Normalize declarations to ``[(name, unit)]``; a count *n* gives ``prefix`` or ``prefix0..``."""
    if decls is None:
        return []
    if isinstance(decls, bool) or not isinstance(decls, (int, Sequence)) or isinstance(decls, str):
        raise ComponentContractError(f"{what} must be a count or a sequence of names or (name, unit) pairs, "
                                     f"got {decls!r}")
    if isinstance(decls, int):
        if decls < 0:
            raise ConfigError(None, f"{what}: count must be >= 0, got {decls}")
        return [(prefix, None)] if decls == 1 else [(f"{prefix}{i}", None) for i in range(decls)]
    result = []
    for item in decls:
        if isinstance(item, str):
            result.append((item, None))
        elif isinstance(item, (tuple, list)) and 1 <= len(item) <= 2 and isinstance(item[0], str):
            result.append((item[0], item[1] if len(item) == 2 else None))
        else:
            raise ComponentContractError(f"{what}: expected a name or a (name, unit) pair, got {item!r}")
    return result


class EquationComponent(OdeComponent):
    """A component given by state, output, event and update equations.

    *states* (or *dim_state*) declares the state; ``states=None`` with
    ``dim_state=n`` names them ``x`` (n = 1) or ``x0, x1, ...``; likewise
    inputs ``u``/``u0..`` and outputs ``y``/``y0..`` when given as counts.
    Without *output_equation* the states are the outputs. Initial states come
    from *initial_state* and are parameters ``f"{state}0"`` as in every
    :class:`OdeComponent`. The event indicator is named *event_name* and fires
    on crossings in *event_direction* (-1, 0, +1).

    With *vectorizable* the equations take and return arrays over an ensemble's members (states ``(n, M)``,
    inputs ``(n_in, M)``, an output or indicator per member), so ensembles run a continuous component
    (:attr:`~cosimrun.core.component.CoSimComponent.vectorizable`; a sampled one is refused there).

    Sampled systems (``dt > 0``) ignore the integrator parameters and the
    ``pre_integrate``/``post_integrate`` hooks. An event update between two
    samples replaces the current state; a next-sample state already computed
    at ``t_k`` is recomputed from the updated state with the inputs of ``t_k``.
    """

    def __init__(
        self,
        name: str,
        *,
        output_equation: Callable[..., Any] | None = None,
        state_equation: Callable[[float, np.ndarray, np.ndarray], Any] | None = None,
        event_equation: Callable[..., float] | None = None,
        update_equation: Callable[..., Any] | None = None,
        dim_state: int = 0,
        states: PortDecls | None = None,
        inputs: PortDecls = (),
        outputs: PortDecls | None = None,
        dt: float = 0.0,
        initial_state: Sequence[float] | None = None,
        feedthrough: bool = False,
        event_name: str = "event",
        event_direction: int = 0,
        vectorizable: bool = False,
        label: str | None = None,
        group: str | None = None,
    ) -> None:
        super().__init__(name, label, group)
        self.vectorizable = bool(vectorizable)  # type: ignore[misc]  # this instance's equations, not the class
        where = f"equation component {name!r}"
        if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt < 0:
            raise ConfigError("dt", f"{where}: dt must be a finite number >= 0, got {dt!r}")
        if isinstance(dim_state, bool) or not isinstance(dim_state, int) or dim_state < 0:
            raise ConfigError("dim_state", f"{where}: dim_state must be an integer >= 0, got {dim_state!r}")
        state_decls = _declarations(dim_state if states is None else states, "x", f"{where}: states")
        if states is not None and dim_state and len(state_decls) != dim_state:
            raise ConfigError("dim_state", f"{where}: dim_state={dim_state} but {len(state_decls)} states declared")
        n = len(state_decls)
        if n and state_equation is None:
            raise ConfigError("state_equation", f"{where}: a state of dimension {n} needs a state_equation")
        if not n and state_equation is not None:
            raise ConfigError("state_equation", f"{where}: state_equation given but dim_state is 0")
        if output_equation is None and not n:
            raise ConfigError("output_equation", f"{where}: a memoryless component (dim_state=0) needs an "
                                                 "output_equation")
        if output_equation is None and outputs is not None:
            raise ConfigError("outputs", f"{where}: outputs declared without an output_equation (the states are "
                                         "the outputs)")
        if output_equation is not None and outputs is None:
            raise ConfigError("outputs", f"{where}: declare the outputs of output_equation (a count or names)")
        if update_equation is not None and event_equation is None:
            raise ConfigError("event_equation", f"{where}: update_equation needs an event_equation")
        if initial_state is None:
            initial_state = [0.0] * n
        initial = np.asarray(initial_state, dtype=float).reshape(-1)
        if initial.shape != (n,):
            raise ConfigError("initial_state", f"{where}: initial_state has {initial.size} values for {n} states")

        self.dt = float(dt)
        self.max_step = self.dt if self.dt > 0 else None
        self._state_equation = state_equation
        self._feedthrough = bool(feedthrough) or not n
        self._adapt = self._adapter(n, self._feedthrough)

        for (sname, unit), x0 in zip(state_decls, initial.tolist(), strict=True):
            self.add_state(sname, unit, initial=x0, output=output_equation is None)
        for iname, unit in _declarations(inputs, "u", f"{where}: inputs"):
            self.add_input(iname, unit)
        self._output_fn = None
        if output_equation is not None:
            for oname, unit in _declarations(outputs, "y", f"{where}: outputs"):
                self.add_output(oname, unit, feedthrough=self._feedthrough)
            self._output_fn = self._adapt(output_equation)
        if event_equation is not None:
            update = None
            if update_equation is not None:
                adapted = self._adapt(update_equation)
                if n:
                    update = adapted
                else:
                    def update(t: float, x: np.ndarray, u: np.ndarray) -> None:
                        adapted(t, x, u)
            self.add_state_event(event_name, self._adapt(event_equation), event_direction, update)

        self._t0 = 0.0
        self._k_sample = 0
        self._pending: np.ndarray | None = None
        self._t_commit = math.inf
        self._u_sample = np.zeros(len(self.input_names))

    @staticmethod
    def _adapter(n: int, feedthrough: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Turn a user equation into ``f(t, x, u)`` following the argument rules."""
        if not n:
            return lambda fn: (lambda t, x, u: fn(t, u))
        if feedthrough:
            return lambda fn: fn
        return lambda fn: (lambda t, x, u: fn(t, x))

    @property
    def dim_state(self) -> int:
        return len(self.state_names)

    @property
    def dim_input(self) -> int:
        return len(self.input_names)

    @property
    def dim_output(self) -> int:
        return len(self.output_names) if self._output_fn is not None else len(self.state_names)

    # ------------------------------------------------------------------ equations
    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return self._state_equation(t, x, u)

    def compute_outputs(self, t: float, x: np.ndarray, u: np.ndarray) -> Sequence[float]:
        if self.dt > 0.0:
            t_s, at_sample = self._last_sample(t)
            if not at_sample:
                u = self._u_sample
            t = t_s
        return self._output_fn(t, x, u)

    # ------------------------------------------------------------------ sampling
    def _tolerance(self, t: float) -> float:
        return max(_SAMPLE_RTOL * self.dt, 8 * np.finfo(float).eps * abs(t))

    def _last_sample(self, t: float) -> tuple[float, bool]:
        """The latest sample time at or before *t* and whether *t* is (within tolerance) that sample."""
        k = math.floor((t - self._t0) / self.dt + _SAMPLE_RTOL)
        t_s = self._t0 + k * self.dt
        return t_s, abs(t - t_s) <= self._tolerance(t)

    @property
    def has_time_events(self) -> bool:
        """Sampled systems only (a sample is a time event); a continuous one has none."""
        return self.dt > 0.0

    def next_time_event(self, t: float) -> float | None:
        """Sampled systems: the next sample time strictly after *t*; continuous: ``None``."""
        if self.dt <= 0.0:
            return None
        k = math.floor((t - self._t0) / self.dt + _SAMPLE_RTOL) + 1
        return self._t0 + k * self.dt

    def _initialize_component(self, t0: float) -> None:
        super()._initialize_component(t0)
        self._t0 = t0
        self._k_sample = 0
        self._pending = None
        self._t_commit = math.inf
        self._u_sample = self._u.copy()

    def _discrete_update(self, t_k: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        new = np.array(self._state_equation(t_k, x, u), dtype=float)
        if new.shape != x.shape:
            raise ModelOutputError(f"component {self.name!r}: state_equation returned shape {new.shape}, "
                                   f"expected {x.shape} (states {list(self.state_names)})", component=self.name,
                                   time=t_k, function="state_equation", expected=x.shape, got=new.shape)
        return new

    def _do_step_internal(self, t: float, dt: float) -> None:
        if self.dt <= 0.0:
            super()._do_step_internal(t, dt)
            return
        u_step = self._gather_inputs()
        u_at = self._input_polynomial(t, u_step)
        x = self._x
        t_end = t + dt
        tol = self._tolerance(t_end)
        while True:
            if self._pending is not None and self._t_commit <= t_end + tol:
                np.copyto(x, self._pending)
                self._pending = None
            if self._pending is None:
                t_k = self._t0 + self._k_sample * self.dt
                if t_k < t_end - tol:
                    u = u_step if u_at is None else u_at(t_k)
                    if len(x):
                        self._pending = self._discrete_update(t_k, x, u)
                        self._t_commit = self._t0 + (self._k_sample + 1) * self.dt
                    np.copyto(self._u_sample, u)
                    self._k_sample += 1
                    continue
            break

    def _handle_events_internal(self, event_names: list[str], t: float) -> None:
        super()._handle_events_internal(event_names, t)
        if self.dt > 0.0 and self._pending is not None:
            t_k = self._t0 + (self._k_sample - 1) * self.dt
            self._pending = self._discrete_update(t_k, self._x, self._u_sample)

    def _after_set_state(self, t: float) -> None:
        if self.dt > 0.0:
            self._pending = None
            self._t_commit = math.inf
            self._k_sample = max(0, math.ceil((t - self._t0) / self.dt - _SAMPLE_RTOL))
            np.copyto(self._u_sample, self._gather_inputs())

    def _snapshot_extra(self) -> Any:
        pending = None if self._pending is None else self._pending.copy()
        return self._k_sample, pending, self._t_commit, self._u_sample.copy()

    def _restore_extra(self, extra: Any) -> None:
        k, pending, t_commit, u_sample = extra
        self._k_sample = k
        self._pending = None if pending is None else pending.copy()
        self._t_commit = t_commit
        np.copyto(self._u_sample, u_sample)
