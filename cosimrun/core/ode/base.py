"""The integrator interface of ODE and DAE components and the state-event tracking the integrators share.

An integrator advances the component's state over one macro step with the
inputs held. It is one subclass of :class:`Integrator` in its own module,
registered by ``integrator`` parameter value in :mod:`~cosimrun.core.ode.registry`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.core.events import crossed

if TYPE_CHECKING:
    from cosimrun.core.ode.component import ContinuousComponent

StateFunction = Callable[[float, np.ndarray, np.ndarray], float]
"""``g(t, x, u) -> float``: a state event indicator."""

StateUpdate = Callable[[float, np.ndarray, np.ndarray], "np.ndarray | Sequence[float] | None"]
"""``update(t, x, u) -> x_new``: the state right after an event (``None``: unchanged)."""

SIGN_TOLERANCE = 0.0
"""Indicator values within this of zero count as zero (as in :func:`crossed`): exact zero only."""

INTEGRATOR_DEFAULTS: dict[str, Any] = {
    "integrator": "rk4",
    "substeps": 10,
    "rtol": 1e-6,
    "atol": 1e-9,
    "max_substep": None,
}
"""Parameters every :class:`OdeComponent` has, with their defaults."""

Bracket = tuple[float, float, float, float]
"""``(t_before, t_after, g_before, g_after)`` around a crossing."""


@dataclass(slots=True)
class StateEvent:
    """A zero-crossing function of the state, with an optional state update."""

    name: str
    function: StateFunction
    direction: int = 0
    update: StateUpdate | None = None


class Tracker:
    """Per-macro-step bookkeeping of one state event: last signed value and whether it fired."""

    __slots__ = ("event", "t", "g", "done")

    def __init__(self, event: StateEvent, t: float, g: float) -> None:
        self.event, self.t, self.g, self.done = event, t, g, False


class Integrator(ABC):
    """One integration method of a :class:`ContinuousComponent` (an ODE's from ``INTEGRATORS``, or a DAE's IDA).

    A subclass reads its settings in :meth:`configure`, allocates work arrays
    in :meth:`start` and implements :meth:`integrate`, which reports crossings
    of the component's state events through :meth:`track`. ``memory`` is what
    the method carries from one macro step to the next (an adaptive step size);
    it is kept in rollback snapshots, so it must be an immutable value.
    """

    def __init__(self, component: ContinuousComponent, name: str) -> None:
        self.component = component
        self.name = name
        """The ``integrator`` parameter value that chose this method."""
        self.memory: Any = None
        self.max_substep = math.inf

    def configure(self, parameters: Mapping[str, Any]) -> None:
        """Take the settings from the solver parameters (``rtol``, ``atol``, ``max_substep`` and the method's own)."""
        max_substep = parameters["max_substep"]
        self.max_substep = math.inf if max_substep is None else max_substep
        self.rtol: float = parameters["rtol"]
        self.atol: float | np.ndarray = parameters["atol"]

    def start(self, n_states: int) -> None:
        """Prepare a run of *n_states* states; the memory starts empty."""
        self.memory = None

    def forget(self) -> None:
        """Drop the memory: the state jumped (event update, ``set_state``)."""
        self.memory = None

    @abstractmethod
    def integrate(self, t: float, dt: float, x: np.ndarray, u: np.ndarray) -> None:
        """Advance *x* in place from *t* to ``t + dt`` with the inputs *u* held; report event crossings."""

    def start_trackers(self, t: float, x: np.ndarray, u: np.ndarray) -> list[Tracker] | None:
        """Trackers of the component's state events at the step start, or ``None`` when it has none."""
        events = self.component.state_events
        if not events:
            return None
        return [Tracker(ev, t, float(ev.function(t, x, u))) for ev in events.values()]

    def track(
        self, tr: Tracker, t_new: float, g_new: float, refine: Callable[[Tracker, float, float], Bracket] | None = None
    ) -> None:
        """Report a crossing of *tr* between its last signed point and ``(t_new, g_new)``.

        *refine* narrows the bracket ``(tr.t, t_new)`` when the method can.
        """
        if crossed(tr.g, g_new, tr.event.direction, SIGN_TOLERANCE):
            bracket = (tr.t, t_new, tr.g, g_new) if refine is None else refine(tr, t_new, g_new)
            self.component.report_internal_event(tr.event.name, *bracket)
            tr.done = True
        elif abs(g_new) > SIGN_TOLERANCE or abs(tr.g) <= SIGN_TOLERANCE:
            tr.t, tr.g = t_new, g_new
