"""Classic fixed-step Runge-Kutta 4 with ``substeps`` sub-steps per macro step (``integrator: rk4``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from cosimrun.core.ode.base import Integrator


class RK4(Integrator):
    """RK4 with ``substeps`` equal sub-steps, more when ``max_substep`` asks for it.

    Event crossings are reported with the sub-step that contains them as the bracket.
    """

    substeps: int
    buffers: list[np.ndarray]

    def configure(self, parameters: Mapping[str, Any]) -> None:
        super().configure(parameters)
        self.substeps = parameters["substeps"]

    def start(self, n_states: int) -> None:
        super().start(n_states)
        # One buffer per stage input: a derivative that returns (a view of) its
        # argument stays valid until the step is combined.
        self.buffers = [np.empty(n_states) for _ in range(4)]

    def integrate(self, t: float, dt: float, x: np.ndarray, u: np.ndarray) -> None:
        n_sub = self.substeps
        if dt > n_sub * self.max_substep:
            n_sub = math.ceil(dt / self.max_substep)
        h = dt / n_sub
        h2, h6 = 0.5 * h, h / 6.0
        comp = self.component
        f = comp.derivatives
        s2, s3, s4, acc = self.buffers
        multiply, add = np.multiply, np.add
        trackers = self.start_trackers(t, x, u)
        u_at = comp.input_at
        u1 = u2 = u4 = u
        k1 = f(t, x, u)
        if np.shape(k1) != x.shape:
            raise ValueError(f"component {comp.name!r}: derivatives returned shape {np.shape(k1)}, "
                             f"expected {x.shape} (states {list(comp.state_names)})")
        last = n_sub - 1
        for i in range(n_sub):
            ti = t + i * h
            if u_at is not None:
                u1, u2, u4 = u4, u_at(ti + h2), u_at(ti + h)
            if i:
                k1 = f(ti, x, u1)
            multiply(k1, h2, out=s2)
            s2 += x
            k2 = f(ti + h2, s2, u2)
            multiply(k2, h2, out=s3)
            s3 += x
            k3 = f(ti + h2, s3, u2)
            multiply(k3, h, out=s4)
            s4 += x
            k4 = f(ti + h, s4, u4)
            add(k2, k3, out=acc)
            acc *= 2.0
            acc += k1
            acc += k4
            acc *= h6
            x += acc
            if trackers:
                t_next = t + dt if i == last else t + (i + 1) * h
                for tr in trackers:
                    if not tr.done:
                        self.track(tr, t_next, float(tr.event.function(t_next, x, u4)))
