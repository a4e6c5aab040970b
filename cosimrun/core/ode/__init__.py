"""ODE components: declare states, inputs and outputs, then write ``derivatives``.

A subclass of :class:`OdeComponent` declares its ports in ``__init__``::

    class Pendulum(OdeComponent):
        def __init__(self, name):
            super().__init__(name)
            self.parameters.update(length=1.0, g=9.81)
            self.add_state("q", "rad", initial=0.1)        # output port q, parameter q0
            self.add_state("omega", "rad/s")                # output port omega, parameter omega0
            self.add_input("torque", "N*m")

        def derivatives(self, t, x, u):
            q, omega = x
            return np.array([omega, -self.parameters["g"] / self.parameters["length"] * np.sin(q) + u[0]])

Values reach the model as plain floats in the ports' own units: ``x`` in state
declaration order, ``u`` in input declaration order. Inputs are held constant
over a macro step (zero-order hold). The integrator is chosen by parameter:
``integrator="rk4"`` (fixed step, ``substeps`` sub-steps per macro step), an
adaptive scipy method (``"rk45"``, ``"rk23"``, ``"dop853"``, ``"radau"``,
``"bdf"``, ``"lsoda"``) or SUNDIALS CVODE's BDF for stiff models (``"cvode"``,
scikit-sundae) with ``rtol``/``atol``; ``max_substep`` bounds the
integrator's own step for every method. Rollback, physical state transfer with
unit conversion and internal event hints for state events come for free.

The package, one job per module (a new integrator is a new module and one
line in the registry):

* :mod:`~cosimrun.core.ode.component`: :class:`OdeComponent` and its base
  :class:`ContinuousComponent`, which :class:`~cosimrun.core.dae.DaeComponent` shares;
* :mod:`~cosimrun.core.ode.base`: the :class:`Integrator` interface, the
  integrator parameters and the state-event tracking integrators share;
* :mod:`~cosimrun.core.ode.registry`: :data:`INTEGRATORS`;
* :mod:`~cosimrun.core.ode.rk4`: fixed-step RK4 with sub-steps;
* :mod:`~cosimrun.core.ode.scipy_adaptive`: the adaptive scipy solvers;
* :mod:`~cosimrun.core.ode.sundials`: what the SUNDIALS solvers share (CVODE here, IDA for DAEs);
* :mod:`~cosimrun.core.ode.cvode`: CVODE's BDF.
"""

from cosimrun.core.ode.base import (
    INTEGRATOR_DEFAULTS,
    SIGN_TOLERANCE,
    Integrator,
    StateEvent,
    StateFunction,
    StateUpdate,
)
from cosimrun.core.ode.component import ContinuousComponent, OdeComponent
from cosimrun.core.ode.registry import INTEGRATORS
from cosimrun.core.ode.scipy_adaptive import ADAPTIVE_METHODS, HINT_SAFETY

__all__ = [
    "ADAPTIVE_METHODS",
    "ContinuousComponent",
    "HINT_SAFETY",
    "INTEGRATORS",
    "INTEGRATOR_DEFAULTS",
    "SIGN_TOLERANCE",
    "Integrator",
    "OdeComponent",
    "StateEvent",
    "StateFunction",
    "StateUpdate",
]
