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
        self._spare: dict[tuple[int, ...], list[np.ndarray]] = {}
        """Buffers of other shapes used lately (the whole ensemble's, while a sub-ensemble steps)."""
        self._h = math.nan
        self._factors: tuple[np.ndarray, np.ndarray, np.ndarray] = (np.array(0.0),) * 3

    def integrate(self, f: Derivatives, t: float | np.ndarray, dt: float | np.ndarray, x: np.ndarray, u: np.ndarray,
                  u_at: InputAt | None, track: Track | None = None) -> None:
        """Advance *x* in place from *t* to ``t + dt``; *u* held, or the inputs *u_at* gives at each stage time;
        *track* sees every substep's end (as the scalar integrator's event trackers).

        *t* and *dt* may be arrays ``(M,)``, one start and one step per member (the hybrid master's trial steps
        to each member's own instants): each member then takes ``substeps`` substeps of its own ``dt / substeps``
        (``max_substep`` is refused for such ensembles, so the count is the same for all)."""
        if self.buffers[0].shape != x.shape:  # a sub-ensemble (see cosimrun.ensemble.events)
            self._spare[self.buffers[0].shape] = self.buffers
            self.buffers = self._spare.pop(x.shape, None) or [np.empty(x.shape) for _ in range(5)]
            if len(self._spare) > 8:
                self._spare.clear()
        if np.ndim(dt):
            h = dt / self.substeps
            k1 = self._first(f, t, x, u)
            rk4_substeps(f, t, dt, self.substeps, h, (h, 0.5 * h, h / 6.0), x, u, u_at, k1, self.buffers, track)
            return
        n_sub = self.substeps
        if dt > n_sub * self.max_substep:
            n_sub = math.ceil(dt / self.max_substep)
        h = dt / n_sub
        h2, h6 = 0.5 * h, h / 6.0
        if h != self._h:
            self._h, self._factors = h, (np.array(h), np.array(h2), np.array(h6))
        k1 = self._first(f, t, x, u)
        rk4_substeps(f, t, dt, n_sub, h, self._factors, x, u, u_at, k1, self.buffers, track)

    def _first(self, f: Derivatives, t: float | np.ndarray, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The derivatives at the step's start, checked for their shape."""
        return check_derivatives(self.name, self.state_names, f(t, x, u), x.shape, t)


def check_derivatives(name: str, state_names: tuple[str, ...], k1: np.ndarray, shape: tuple[int, ...],
                      t: float | np.ndarray) -> np.ndarray:
    """*k1*, what the derivatives of component *name* returned at *t* for states of *shape*, checked for its shape."""
    if np.shape(k1) != shape:
        raise ModelOutputError(f"component {name!r}: derivatives returned shape {np.shape(k1)} for an "
                               f"ensemble, expected {shape} (states {list(state_names)} by members)",
                               component=name, time=float(np.min(t)), function="derivatives",
                               expected=shape, got=np.shape(k1))
    return k1
