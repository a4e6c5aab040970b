"""SUNDIALS CVODE with BDF, for stiff ODE components (``integrator: cvode``), from scikit-sundae."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosimrun.core.ode.sundials import SundialsIntegrator


class Cvode(SundialsIntegrator):
    """CVODE's variable-order BDF with a dense Newton solver, ``rtol``/``atol`` and ``max_substep``.

    Its history is kept across macro steps (see :class:`SundialsIntegrator`);
    state events are located by CVODE's root finding.
    """

    solver_name = "CVODE"

    def build(self) -> Any:
        from sksundae.cvode import CVODE

        derivatives = self.component.derivatives

        def rhsfn(t: float, y: np.ndarray, yp: np.ndarray) -> None:
            yp[:] = derivatives(t, y, self.inputs(t))

        return CVODE(self.guard(rhsfn), method="BDF", **self.options())

    def restart(self, t: float, x: np.ndarray) -> None:
        self.call(f"cannot start CVODE at t={t!r}", t, self.solver.init_step, t, x)

    def rate(self, t: float, y: np.ndarray, result: Any) -> np.ndarray:
        return np.asarray(self.component.derivatives(t, y, self.inputs(t)), dtype=float)
