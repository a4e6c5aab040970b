"""Classic RK4 over all members at once, in the scalar :class:`~cosimrun.core.ode.rk4.RK4`'s arithmetic order.

Each state row holds one state of every member (``x`` of shape ``(n_states, M)``); every operation is the
scalar integrator's, elementwise, in the same order, so each member's column is bitwise the scalar run's
(for models whose ``derivatives`` are elementwise IEEE arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from cosimrun.errors import ModelOutputError

Derivatives = Callable[[float, np.ndarray, np.ndarray], np.ndarray]
InputAt = Callable[[float], np.ndarray]
Track = Callable[[float, np.ndarray, np.ndarray], None]
"""Called after each substep with its end time, the state and the inputs there (state-event tracking)."""


class VectorRK4:
    """RK4 with ``substeps`` equal sub-steps per macro step (more when ``max_substep`` asks), for ``(n, M)`` states."""

    def __init__(self, name: str, state_names: tuple[str, ...], substeps: int, max_substep: float | None,
                 shape: tuple[int, int]) -> None:
        self.name = name
        self.state_names = state_names
        self.substeps = substeps
        self.max_substep = math.inf if max_substep is None else max_substep
        self.buffers = [np.empty(shape) for _ in range(5)]
        self._h = math.nan
        self._factors: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.array(0.0),) * 3
        self._two = np.array(2.0)

    def integrate(self, f: Derivatives, t: float, dt: float, x: np.ndarray, u: np.ndarray,
                  u_at: InputAt | None, track: Track | None = None) -> None:
        """Advance *x* in place from *t* to ``t + dt``; *u* held, or the inputs *u_at* gives at each stage time;
        *track* sees every substep's end (as the scalar integrator's event trackers)."""
        n_sub = self.substeps
        if dt > n_sub * self.max_substep:
            n_sub = math.ceil(dt / self.max_substep)
        h = dt / n_sub
        h2, h6 = 0.5 * h, h / 6.0
        if h != self._h:
            self._h, self._factors = h, (np.array(h), np.array(h2), np.array(h6))
        a_h, a_h2, a_h6 = self._factors
        two = self._two
        s2, s3, s4, w, v = self.buffers
        multiply, add = np.multiply, np.add
        u1 = u2 = u4 = u
        k1 = f(t, x, u)
        if np.shape(k1) != x.shape:
            raise ModelOutputError(f"component {self.name!r}: derivatives returned shape {np.shape(k1)} for an "
                                   f"ensemble, expected {x.shape} (states {list(self.state_names)} by members)",
                                   component=self.name, time=t, function="derivatives", expected=x.shape,
                                   got=np.shape(k1))
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
