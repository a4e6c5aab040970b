"""DAE components: declare states (some algebraic), inputs and outputs, then write ``residuals``.

A subclass of :class:`DaeComponent` is declared like an
:class:`~cosimrun.core.ode.OdeComponent` and writes ``0 = F(t, y, y', u)``
(the reference's "Algebraic (DAE)" solver type) instead of derivatives::

    class Robertson(DaeComponent):
        def __init__(self, name):
            super().__init__(name)
            self.add_state("y1", initial=1.0)
            self.add_state("y2")
            self.add_state("y3", algebraic=True)            # its derivative appears nowhere

        def residuals(self, t, y, yp, u, res):
            res[0] = yp[0] + 0.04 * y[0] - 1e4 * y[1] * y[2]
            res[1] = yp[1] - 0.04 * y[0] + 1e4 * y[1] * y[2] + 3e7 * y[1] ** 2
            res[2] = y[0] + y[1] + y[2] - 1.0

SUNDIALS IDA (scikit-sundae) integrates it with ``rtol``/``atol`` (one value or
one per state) and ``max_substep``. At ``initialize`` IDA's calc-IC makes the
initial values consistent: the algebraic states and the derivatives of the
differential states are solved for, the differential states stay as given; when
that fails the component raises a :class:`~cosimrun.errors.SimulationError`
naming itself. Rollback, physical state, state events (located by IDA's root
finding and reported as internal event hints) and the pre/post-integrate hooks
are those of every :class:`~cosimrun.core.ode.component.ContinuousComponent`.
After a jump of the state or the inputs IDA is re-initialized, which computes
consistent values again.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from cosimrun.core.ode.base import INTEGRATOR_DEFAULTS, Integrator
from cosimrun.core.ode.component import ContinuousComponent
from cosimrun.core.ode.sundials import SundialsIntegrator
from cosimrun.core.parameters import Parameter, declared_parameters

__all__ = ["DaeComponent", "Ida"]

CONSISTENCY_FAILURE = "no consistent initial conditions"
"""How the error of a failed calc-IC begins (after the component's name)."""

SOLVER_PARAMETERS: tuple[str, ...] = ("rtol", "atol", "max_substep")
"""The solver parameters of a DAE component (declared in :attr:`DaeComponent.PARAMETERS`)."""


class Ida(SundialsIntegrator):
    """SUNDIALS IDA (variable-order BDF) on the component's residuals, with calc-IC at every (re)start.

    ``memory`` is ``y'`` where the last step ended (read-only): the first guess
    of the consistent derivatives when IDA is re-initialized, also after a rollback.
    """

    solver_name = "IDA"
    events_see_yp = True

    def build(self) -> Any:
        from sksundae.ida import IDA

        comp: DaeComponent = self.component  # type: ignore[assignment]
        residuals = comp.residuals

        def resfn(t: float, y: np.ndarray, yp: np.ndarray, res: np.ndarray) -> None:
            residuals(t, y, yp, self.inputs(t), res)

        algebraic = comp.algebraic_indices
        return IDA(self.guard(resfn), algebraic_idx=list(algebraic) or None, calc_initcond="yp0", **self.options())

    def restart(self, t: float, x: np.ndarray) -> None:
        yp = np.zeros_like(x) if self.memory is None else self.memory
        result = self.call(f"{CONSISTENCY_FAILURE} at t={t!r}", t, self.solver.init_step, t, x, yp)
        np.copyto(x, result.y)
        self.finish_step(result)

    def finish_step(self, result: Any) -> None:
        yp = result.yp  # the result's own copy
        yp.flags.writeable = False
        self.memory = yp

    def forget(self) -> None:
        """Restart at the next step, keeping ``memory`` as the first guess of ``y'``."""
        self.t_last = float("nan")

    def rate(self, t: float, y: np.ndarray, result: Any) -> np.ndarray:
        return result.yp

    def failure_message(self, what: str, reason: str, printed: str) -> str:
        message = super().failure_message(what, reason, printed)
        if what.startswith(CONSISTENCY_FAILURE):
            comp: DaeComponent = self.component  # type: ignore[assignment]
            message += comp.consistency_advice()
        return message


class DaeComponent(ContinuousComponent):
    """Base class for models given as residuals ``0 = F(t, y, y', u)`` (index 1), solved by SUNDIALS IDA.

    Declare states with :meth:`add_state` (``algebraic=True`` for a state whose
    derivative appears in no residual), inputs, outputs and state events as for
    an ``OdeComponent``; implement :meth:`residuals`. Inputs are held over a
    macro step. Parameters ``rtol``, ``atol`` and ``max_substep`` set IDA's
    tolerances and largest step.
    """

    PARAMETERS = {
        "rtol": Parameter(float, default=INTEGRATOR_DEFAULTS["rtol"], gt=0, doc="relative tolerance of IDA"),
        "atol": Parameter(float, default=INTEGRATOR_DEFAULTS["atol"], gt=0,
                          doc="absolute tolerance of IDA (or one per state)"),
        "max_substep": Parameter(float, unit="s", gt=0, doc="largest IDA step (null: no limit)"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._algebraic: list[int] = []

    def add_state(self, name: str, *args: Any, algebraic: bool = False, **kwargs: Any) -> int:
        """Declare a state as :meth:`ContinuousComponent.add_state` does; returns its index in ``y``.

        ``algebraic=True``: the state's derivative appears in no residual; its
        initial value is only the first guess of calc-IC.
        """
        index = super().add_state(name, *args, **kwargs)
        if algebraic:
            self._algebraic.append(index)
        return index

    @property
    def algebraic_indices(self) -> tuple[int, ...]:
        """Indices in ``y`` of the algebraic states."""
        return tuple(self._algebraic)

    @property
    def yp(self) -> np.ndarray:
        """``y'`` at the current time (zeros before the first consistent initialization)."""
        memory = self._integrator.memory
        return np.zeros(len(self.state_names)) if memory is None else memory.copy()

    @abstractmethod
    def residuals(self, t: float, y: np.ndarray, yp: np.ndarray, u: np.ndarray, res: np.ndarray) -> None:
        """Fill *res* in place with ``F(t, y, y', u)``; *y*, *yp* (read-only views) and *u* must not be modified."""

    # ------------------------------------------------------------------ solver
    def _solver_defaults(self) -> Mapping[str, Any]:
        declared = declared_parameters(type(self))
        return {name: declared[name].default for name in SOLVER_PARAMETERS}

    def _integrator_for(self, settings: Mapping[str, Any], current: Integrator | None) -> Integrator:
        return current if current is not None else Ida(self, "ida")

    def _initialize_component(self, t0: float) -> None:
        """Set up IDA and make the initial values consistent (calc-IC)."""
        super()._initialize_component(t0)
        ida = self._integrator
        assert isinstance(ida, Ida)
        if len(self._x):
            ida.begin(t0, self._x, self._gather_inputs())

    def consistency_advice(self) -> str:
        """What to check when calc-IC fails, naming the states (appended to the error line)."""
        names = self.state_names
        alg = [names[i] for i in self._algebraic]
        diff = [n for i, n in enumerate(names) if i not in self._algebraic]
        return (f"; the algebraic states ({', '.join(alg) or 'none'}) and the derivatives of the differential "
                f"states ({', '.join(diff) or 'none'}) must solve the residuals with the differential states as given")
