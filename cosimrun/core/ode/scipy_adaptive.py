"""The adaptive ``scipy.integrate`` solvers (``integrator: rk45``, ``radau``, ...), scipy imported on first use.

Commands that never integrate with them (``cosimrun --list-components``, a
sweep's driver) must not pay for importing scipy.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from cosimrun.core.events import crossed
from cosimrun.core.ode.base import SIGN_TOLERANCE, Bracket, Integrator, Tracker
from cosimrun.errors import SimulationError

if TYPE_CHECKING:
    from scipy import integrate

ADAPTIVE_METHODS: dict[str, str] = {
    "rk45": "RK45",
    "rk23": "RK23",
    "dop853": "DOP853",
    "radau": "Radau",
    "bdf": "BDF",
    "lsoda": "LSODA",
}
"""The adaptive ``integrator`` values and their ``scipy.integrate.OdeSolver``."""

HINT_SAFETY = 100.0
"""Event hints: half-width of the bracket in units of the estimated crossing-time error."""

_EPS = np.finfo(float).eps


class ScipyAdaptive(Integrator):
    """A ``scipy.integrate.OdeSolver`` run over each macro step with ``rtol``/``atol``.

    ``memory`` is the last step size, the first step of the next macro step.
    Event crossings are bracketed tightly around the root of the dense output
    (:meth:`refine_bracket`).
    """

    def integrate(self, t: float, dt: float, x: np.ndarray, u: np.ndarray) -> None:
        t_end = t + dt
        span = t_end - t
        if span <= 0.0:
            return
        comp = self.component
        deriv = comp.derivatives
        u_at = comp.input_at

        if u_at is None:
            def fun(s: float, y: np.ndarray) -> np.ndarray:
                return deriv(s, y, u)
        else:
            def fun(s: float, y: np.ndarray) -> np.ndarray:
                return deriv(s, y, u_at(s))

        first = self.memory
        first = min(first, span) if first is not None and first > 0 else None
        from scipy import integrate

        solver = getattr(integrate, ADAPTIVE_METHODS[self.name])(
            fun, t, x.copy(), t_end, max_step=self.max_substep, rtol=self.rtol, atol=self.atol,
            first_step=first,
        )
        trackers = self.start_trackers(t, x, u)
        refine = None
        if trackers:
            scale0 = np.abs(x)

            def refine(tr: Tracker, t_new: float, g_new: float) -> Bracket:
                return self.refine_bracket(tr, solver, t_new, g_new, u, scale0)

        h_before = None
        while solver.status == "running":
            h_before = getattr(solver, "h_abs", None)
            message = solver.step()
            if solver.status == "failed":
                raise SimulationError(f"component {comp.name!r}: integrator {self.name!r} failed in "
                                      f"[{t!r}, {t_end!r}] at t={solver.t!r}: {message}", component=comp.name,
                                      time=float(solver.t))
            if trackers:
                ts, ys = solver.t, solver.y
                us = u if u_at is None else u_at(ts)
                for tr in trackers:
                    if not tr.done:
                        self.track(tr, ts, float(tr.event.function(ts, ys, us)), refine)
        np.copyto(x, solver.y)
        candidates = [h for h in (h_before, getattr(solver, "h_abs", None)) if h is not None and h > 0]
        self.memory = float(max(candidates)) if candidates else None

    def refine_bracket(
        self, tr: Tracker, solver: integrate.OdeSolver, tb: float, gb: float, u: np.ndarray, scale0: np.ndarray
    ) -> Bracket:
        """Narrow ``[tr.t, tb]`` around the root of the dense output.

        The half-width is ``HINT_SAFETY`` times the crossing-time uncertainty
        ``|dg| / |dg/dt|``, where ``dg`` is the indicator's change under a state
        perturbation of one error tolerance (``atol + rtol * |x|``).
        """
        ta, ga = tr.t, tr.g
        if ta < solver.t_old:
            return ta, tb, ga, gb
        sol = solver.dense_output()
        func = tr.event.function

        def g(s: float) -> float:
            return float(func(s, sol(s), u))

        from scipy.optimize import brentq

        try:
            if ga * gb < 0.0:
                tr_ = brentq(g, ta, tb, xtol=4 * _EPS * max(1.0, abs(tb)), rtol=4 * _EPS)
            else:
                tr_ = tb
            xr = sol(tr_)
            g0 = float(func(tr_, xr, u))
            scale = self.atol + self.rtol * np.maximum(scale0, np.abs(xr))
            scale = np.broadcast_to(scale, xr.shape)
            dg = 0.0
            for i in range(len(xr)):
                xp = xr.copy()
                xp[i] += scale[i]
                dg += abs(float(func(tr_, xp, u)) - g0)
            delta = 1e-3 * (tb - ta)
            lo, hi = max(ta, tr_ - delta), min(tb, tr_ + delta)
            gdot = (g(hi) - g(lo)) / (hi - lo)
            width = HINT_SAFETY * dg / abs(gdot)
        except (ValueError, ZeroDivisionError, FloatingPointError):
            return ta, tb, ga, gb
        if not math.isfinite(width):
            return ta, tb, ga, gb
        width = max(width, 8 * _EPS * max(1.0, abs(tr_)))
        lo, hi = max(ta, tr_ - width), min(tb, tr_ + width)
        g_lo = ga if lo == ta else g(lo)
        g_hi = gb if hi == tb else g(hi)
        if not crossed(g_lo, g_hi, tr.event.direction, SIGN_TOLERANCE):
            return ta, tb, ga, gb
        return float(lo), float(hi), g_lo, g_hi
