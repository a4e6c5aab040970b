"""Classic fixed-step Runge-Kutta 4 with ``substeps`` sub-steps per macro step (``integrator: rk4``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cosimrun.core.ode.base import Integrator
from cosimrun.errors import ModelOutputError

_TWO = np.array(2.0)
"""RK4's factors are 0-d arrays: numpy combines those with arrays faster than Python floats, with the same
result (the times stay floats)."""


class RK4(Integrator):
    """RK4 with ``substeps`` equal sub-steps, more when ``max_substep`` asks for it.

    Event crossings are reported with the sub-step that contains them as the bracket.
    """

    substeps: int
    buffers: list[np.ndarray]
    _h: float = math.nan
    """The substep of the factors in ``_factors``."""
    _factors: tuple[np.ndarray, np.ndarray, np.ndarray]

    def configure(self, parameters: Mapping[str, Any]) -> None:
        super().configure(parameters)
        self.substeps = parameters["substeps"]

    def start(self, n_states: int) -> None:
        super().start(n_states)
        # One buffer per stage input: a derivative that returns (a view of) its
        # argument stays valid until the step is combined; two for the products
        # and sums, so no operation but the state's update writes over one of its
        # operands (numpy checks such an overlap on every call).
        self.buffers = [np.empty(n_states) for _ in range(5)]

    def integrate(self, t: float, dt: float, x: np.ndarray, u: np.ndarray) -> None:
        n_sub = self.substeps
        if dt > n_sub * self.max_substep:
            n_sub = math.ceil(dt / self.max_substep)
        h = dt / n_sub
        h2, h6 = 0.5 * h, h / 6.0
        if h != self._h:  # the factors as 0-d arrays (see _TWO), made again only when the substep changes
            self._h, self._factors = h, (np.array(h), np.array(h2), np.array(h6))
        comp = self.component
        f = comp.derivatives
        trackers = self.start_trackers(t, x, u)
        u_at = comp.input_at
        k1 = f(t, x, u)
        if np.shape(k1) != x.shape:
            raise ModelOutputError(f"component {comp.name!r}: derivatives returned shape {np.shape(k1)}, "
                                   f"expected {x.shape} (states {list(comp.state_names)})", component=comp.name,
                                   time=t, function="derivatives", expected=x.shape, got=np.shape(k1))
        track = None
        if trackers:
            def track(t_next: float, x: np.ndarray, u4: np.ndarray) -> None:
                for tr in trackers:
                    if not tr.done:
                        self.track(tr, t_next, float(tr.event.function(t_next, x, u4)))
        rk4_substeps(f, t, dt, n_sub, h, self._factors, x, u, u_at, k1, self.buffers, track)


def rk4_substeps(f: Callable[[float, np.ndarray, np.ndarray], np.ndarray], t: float, dt: float, n_sub: int, h: float,
                 factors: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray, u: np.ndarray,
                 u_at: Callable[[float], np.ndarray] | None, k1: np.ndarray, buffers: list[np.ndarray],
                 track: Callable[[float, np.ndarray, np.ndarray], None] | None) -> None:
    """Advance *x* in place by *n_sub* RK4 substeps of *h* from *t* to ``t + dt``: the one arithmetic of the scalar
    integrator and the ensemble's (``cosimrun.ensemble.rk4``; *x* may be ``(n, M)``), so that each member equals its
    scalar run bit for bit.

    *k1* is ``f(t, x, u)``, already checked; *factors* are ``h``, ``h / 2`` and ``h / 6`` as 0-d arrays (see
    :data:`_TWO`); *u* is held, or *u_at* gives the inputs at each stage time; *buffers* are five arrays shaped as
    *x*; *track* (when given) sees every substep's end time, the state and the inputs there.
    """
    a_h, a_h2, a_h6 = factors
    h2 = 0.5 * h
    two = _TWO
    s2, s3, s4, w, v = buffers
    multiply, add = np.multiply, np.add
    u1 = u2 = u4 = u
    last = n_sub - 1
    for i in range(n_sub):
        ti = t + i * h
        if u_at is not None:
            u1, u2, u4 = u4, u_at(ti + h2), u_at(ti + h)
        if i:
            k1 = f(ti, x, u1)
        multiply(k1, a_h2, out=w)
        add(w, x, out=s2)
        k2 = f(ti + h2, s2, u2)
        multiply(k2, a_h2, out=w)
        add(w, x, out=s3)
        k3 = f(ti + h2, s3, u2)
        multiply(k3, a_h, out=w)
        add(w, x, out=s4)
        k4 = f(ti + h, s4, u4)
        add(k2, k3, out=w)
        multiply(w, two, out=v)
        add(v, k1, out=w)
        add(w, k4, out=v)
        multiply(v, a_h6, out=w)
        x += w
        if track is not None:
            track(t + dt if i == last else t + (i + 1) * h, x, u4)
