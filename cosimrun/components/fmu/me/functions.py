"""The FMI 2.0 model-exchange functions through ctypes: the continuous-time calls and event iteration.

:class:`ContinuousTimeCalls` wraps one instantiated model-exchange FMU for
the integrator: it sets time, continuous states and real inputs, reads
derivatives and event indicators into buffers allocated once, and runs the
event iteration (``fmi2EnterEventMode``, ``fmi2NewDiscreteStates`` until no
new discrete states are needed, ``fmi2EnterContinuousTimeMode``). The
functions every FMI 2.0 FMU has (instantiate, get/set, FMU states) are those
of :mod:`cosimrun.components.fmu.fmi2`.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cosimrun.components.fmu import fmi2
from cosimrun.components.fmu.errors import FMUError, status_name

FMI2_MODEL_EXCHANGE = 0
"""``fmi2ModelExchange`` (the ``fmi2Type`` passed to ``fmi2Instantiate``)."""

MAX_EVENT_ITERATIONS = 100
"""``fmi2NewDiscreteStates`` calls at one event instant before the iteration counts as not settling."""

_P = ctypes.POINTER
_REALS = _P(ctypes.c_double)
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "fmi2EnterEventMode": (ctypes.c_int, [ctypes.c_void_p]),
    "fmi2NewDiscreteStates": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "fmi2EnterContinuousTimeMode": (ctypes.c_int, [ctypes.c_void_p]),
    "fmi2CompletedIntegratorStep": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_int),
                                                   _P(ctypes.c_int)]),
    "fmi2SetTime": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_double]),
    "fmi2SetContinuousStates": (ctypes.c_int, [ctypes.c_void_p, _REALS, ctypes.c_size_t]),
    "fmi2GetContinuousStates": (ctypes.c_int, [ctypes.c_void_p, _REALS, ctypes.c_size_t]),
    "fmi2GetDerivatives": (ctypes.c_int, [ctypes.c_void_p, _REALS, ctypes.c_size_t]),
    "fmi2GetEventIndicators": (ctypes.c_int, [ctypes.c_void_p, _REALS, ctypes.c_size_t]),
}
"""The model-exchange functions cosimrun calls, with their C signatures."""

CO_SIMULATION_ONLY = ("fmi2DoStep", "fmi2GetRealStatus", "fmi2GetBooleanStatus")
"""Functions of :data:`cosimrun.components.fmu.fmi2` signatures that a model-exchange FMU need not export."""


def model_exchange_functions(dll: Any) -> dict[str, Any]:
    """Fresh ctypes function pointers of the functions every FMI 2.0 FMU has and of the model-exchange ones.

    ``FMUError`` names a missing one (the FMU-state functions are optional).
    """
    common = {n: s for n, s in fmi2._SIGNATURES.items() if n not in CO_SIMULATION_ONLY}
    table = {}
    for name, (restype, argtypes) in {**common, **_SIGNATURES}.items():
        try:
            fn = dll[name]
        except AttributeError:
            if name in fmi2._OPTIONAL:
                continue
            raise FMUError(f"the FMU's shared library does not export {name}") from None
        fn.restype, fn.argtypes = restype, argtypes
        table[name] = fn
    return table


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """What an event iteration ended with."""

    states_changed: bool
    """``valuesOfContinuousStatesChanged`` in any of its ``fmi2NewDiscreteStates`` calls."""
    next_event_time: float | None
    """The FMU's next time event (``None``: none announced)."""


class ContinuousTimeCalls:
    """The calls an integrator makes into one model-exchange FMU instance, on buffers allocated once.

    *functions* are those of :func:`model_exchange_functions`; the calls made
    at every evaluation of the model go through function pointers of *dll*
    without ctypes argument conversion, on pre-built arguments of the exact C
    types. *handle* is the ``fmi2Component``; *input_vrs* the value references
    of the real inputs in the order the integrator's input vectors have;
    *failed* builds the component's error from a message and the simulation time.
    """

    def __init__(self, functions: dict[str, Any], dll: Any, handle: ctypes.c_void_p, n_states: int,
                 n_indicators: int, input_vrs: list[int], failed: Callable[[str, float], FMUError]) -> None:
        self.f = functions
        self.c = handle
        self.failed = failed
        hot = {}
        for name in ("fmi2SetTime", "fmi2SetContinuousStates", "fmi2SetReal", "fmi2GetDerivatives",
                     "fmi2GetEventIndicators"):
            hot[name] = fn = dll[name]
            fn.restype = ctypes.c_int
        self._set_time, self._set_states = hot["fmi2SetTime"], hot["fmi2SetContinuousStates"]
        self._set_real, self._get_derivatives = hot["fmi2SetReal"], hot["fmi2GetDerivatives"]
        self._get_indicators = hot["fmi2GetEventIndicators"]
        self._t = ctypes.c_double()
        self.n_states = n_states
        self.nx = ctypes.c_size_t(n_states)
        self.nz = ctypes.c_size_t(n_indicators)
        self.x = np.zeros(n_states)
        self.dx = np.zeros(n_states)
        self.z = np.zeros(n_indicators)
        self._x_ptr = self.x.ctypes.data_as(_REALS)
        self._dx_ptr = self.dx.ctypes.data_as(_REALS)
        self._z_ptr = self.z.ctypes.data_as(_REALS)
        self.n_inputs = n_in = len(input_vrs)
        self._n_in = ctypes.c_size_t(n_in)
        self._vr_in = (ctypes.c_uint * max(1, n_in))(*input_vrs)
        self.u = np.zeros(n_in)
        self._u_ptr = self.u.ctypes.data_as(_REALS)
        self._z_key: tuple[float, bytes, bytes] | None = None

    def _check(self, name: str, status: int, t: float) -> None:
        if status > 1:
            raise self.failed(f"{name} returned {status_name(status)} at t={t:.12g}", t)

    def set_continuous(self, t: float, x: np.ndarray, u: np.ndarray) -> None:
        """Give the FMU time *t*, continuous states *x* and real inputs *u*."""
        c = self.c
        self._t.value = t
        status = self._set_time(c, self._t)
        if status > 1:
            self._check("fmi2SetTime", status, t)
        if self.n_states:
            self.x[:] = x
            status = self._set_states(c, self._x_ptr, self.nx)
            if status > 1:
                self._check("fmi2SetContinuousStates", status, t)
        if self.n_inputs:
            self.set_inputs(u, t)
        self._z_key = None

    def set_inputs(self, u: np.ndarray, t: float) -> None:
        """Give the FMU the real inputs *u* only."""
        if self.n_inputs:
            self.u[:] = u
            self._check("fmi2SetReal", self._set_real(self.c, self._vr_in, self._n_in, self._u_ptr), t)
        self._z_key = None

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``dx/dt`` at ``(t, x, u)`` (a new array)."""
        self.set_continuous(t, x, u)
        status = self._get_derivatives(self.c, self._dx_ptr, self.nx)
        if status > 1:
            self._check("fmi2GetDerivatives", status, t)
        return self.dx.copy()

    def indicators(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The event indicators at ``(t, x, u)``; read once per point (each indicator asks for the same point)."""
        key = (t, x.tobytes(), u.tobytes())
        if key != self._z_key:
            self.set_continuous(t, x, u)
            self._check("fmi2GetEventIndicators", self._get_indicators(self.c, self._z_ptr, self.nz), t)
            self._z_key = key
        return self.z

    def states(self, t: float) -> np.ndarray:
        """The FMU's continuous states (a new array)."""
        if self.n_states:
            self._check("fmi2GetContinuousStates", self.f["fmi2GetContinuousStates"](self.c, self._x_ptr, self.nx), t)
        return self.x.copy()

    def completed_step(self, t: float) -> bool:
        """``fmi2CompletedIntegratorStep`` at the point last set; whether the FMU asks for a step event.

        ``noSetFMUStatePriorToCurrentPoint`` is false: the master may roll back.
        An FMU that asks to terminate raises.
        """
        enter, terminate = ctypes.c_int(0), ctypes.c_int(0)
        status = self.f["fmi2CompletedIntegratorStep"](self.c, 0, ctypes.byref(enter), ctypes.byref(terminate))
        self._check("fmi2CompletedIntegratorStep", status, t)
        if terminate.value:
            raise self.failed(f"the FMU asks to terminate the simulation at t={t:.12g} "
                              "(fmi2CompletedIntegratorStep)", t)
        return bool(enter.value)

    def event_iteration(self, t: float, *, enter: bool = True) -> EventOutcome:
        """Handle an event at the point last set: event mode, new discrete states until settled, continuous mode.

        *enter* false is the iteration right after initialization, where the FMU
        already is in event mode. An FMU that asks to terminate, or whose
        iteration does not settle within :data:`MAX_EVENT_ITERATIONS`, raises.
        """
        from fmpy.fmi2 import fmi2EventInfo

        f, c = self.f, self.c
        if enter:
            self._check("fmi2EnterEventMode", f["fmi2EnterEventMode"](c), t)
        info = fmi2EventInfo()
        changed = False
        for _ in range(MAX_EVENT_ITERATIONS):
            info.newDiscreteStatesNeeded = 0
            self._check("fmi2NewDiscreteStates", f["fmi2NewDiscreteStates"](c, ctypes.byref(info)), t)
            if info.terminateSimulation:
                raise self.failed(f"the FMU asks to terminate the simulation at t={t:.12g} (fmi2NewDiscreteStates)", t)
            changed = changed or bool(info.valuesOfContinuousStatesChanged)
            if not info.newDiscreteStatesNeeded:
                break
        else:
            raise self.failed(f"the event iteration at t={t:.12g} did not settle: fmi2NewDiscreteStates still asked "
                              f"for new discrete states after {MAX_EVENT_ITERATIONS} calls", t)
        self._check("fmi2EnterContinuousTimeMode", f["fmi2EnterContinuousTimeMode"](c), t)
        self._z_key = None
        t_next = float(info.nextEventTime) if info.nextEventTimeDefined and math.isfinite(info.nextEventTime) else None
        return EventOutcome(changed, t_next)
