"""Classic RK4 over all members at once, through the scalar :class:`~cosimrun.core.ode.rk4.RK4`'s substeps.

Each state row holds one state of every member (``x`` of shape ``(n_states, M)``); the substeps are the
scalar integrator's (:func:`~cosimrun.core.ode.rk4.rk4_substeps`), elementwise, so each member's column is
bitwise the scalar run's (for models whose ``derivatives`` are elementwise IEEE arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from cosimrun.core.ode.rk4 import rk4_substeps
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
        k1 = f(t, x, u)
        if np.shape(k1) != x.shape:
            raise ModelOutputError(f"component {self.name!r}: derivatives returned shape {np.shape(k1)} for an "
                                   f"ensemble, expected {x.shape} (states {list(self.state_names)} by members)",
                                   component=self.name, time=t, function="derivatives", expected=x.shape,
                                   got=np.shape(k1))
        rk4_substeps(f, t, dt, n_sub, h, self._factors, x, u, u_at, k1, self.buffers, track)
