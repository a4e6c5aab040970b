"""The integrators by ``integrator`` parameter value: a new method is its module plus one line here."""

from __future__ import annotations

from cosimrun.core.ode.base import Integrator
from cosimrun.core.ode.cvode import Cvode
from cosimrun.core.ode.rk4 import RK4
from cosimrun.core.ode.scipy_adaptive import ADAPTIVE_METHODS, ScipyAdaptive

INTEGRATORS: dict[str, type[Integrator]] = {
    "rk4": RK4,
    **dict.fromkeys(ADAPTIVE_METHODS, ScipyAdaptive),
    "cvode": Cvode,
}
"""Valid values of the ``integrator`` parameter (lower case) and the class that integrates for each."""
