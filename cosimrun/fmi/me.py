"""The FMI 2.0 and 3.0 model-exchange functions through ctypes: the continuous-time calls and event iteration.

:class:`ContinuousTimeCalls` wraps one instantiated model-exchange FMU for
the integrator: it sets time, continuous states and real inputs, reads
derivatives and event indicators into buffers allocated once, and runs the
event iteration (enter event mode, new discrete states until none are needed,
enter continuous-time mode). The functions every FMU of a version has
(get/set, FMU states, log messages) are those of
:mod:`cosimrun.fmi.fmi2` and :mod:`cosimrun.fmi.fmi3`;
the calls that differ between the versions are named by an :class:`Api`.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cosimrun.fmi import errors, fmi2, fmi3
from cosimrun.fmi.errors import FMUError

MAX_EVENT_ITERATIONS = 100
"""New-discrete-states calls at one event instant before the iteration counts as not settling."""

_P = ctypes.POINTER
_REALS = _P(ctypes.c_double)
_C = ctypes.c_void_p
_SIGNATURES2: dict[str, tuple[Any, list[Any]]] = {
    "fmi2EnterEventMode": (ctypes.c_int, [_C]),
    "fmi2NewDiscreteStates": (ctypes.c_int, [_C, _C]),
    "fmi2EnterContinuousTimeMode": (ctypes.c_int, [_C]),
    "fmi2CompletedIntegratorStep": (ctypes.c_int, [_C, ctypes.c_int, _P(ctypes.c_int), _P(ctypes.c_int)]),
    "fmi2SetTime": (ctypes.c_int, [_C, ctypes.c_double]),
    "fmi2SetContinuousStates": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
    "fmi2GetContinuousStates": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
    "fmi2GetDerivatives": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
    "fmi2GetEventIndicators": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
}
_SIGNATURES3: dict[str, tuple[Any, list[Any]]] = {
    "fmi3InstantiateModelExchange": (_C, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool,
                                          ctypes.c_bool, _C, type(fmi3.LOGGER)]),
    "fmi3EnterContinuousTimeMode": (ctypes.c_int, [_C]),
    "fmi3CompletedIntegratorStep": (ctypes.c_int, [_C, ctypes.c_bool, _P(ctypes.c_bool), _P(ctypes.c_bool)]),
    "fmi3SetTime": (ctypes.c_int, [_C, ctypes.c_double]),
    "fmi3SetContinuousStates": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
    "fmi3GetContinuousStates": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
    "fmi3GetContinuousStateDerivatives": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
    "fmi3GetEventIndicators": (ctypes.c_int, [_C, _REALS, ctypes.c_size_t]),
}
"""The model-exchange functions cosimrun calls, with their C signatures, by FMI version."""

CO_SIMULATION_ONLY = ("fmi2DoStep", "fmi2GetRealStatus", "fmi2GetBooleanStatus", "fmi3InstantiateCoSimulation",
                      "fmi3DoStep", "fmi3EnterStepMode")
"""Functions of the co-simulation signature tables that a model-exchange FMU need not export."""


@dataclass(frozen=True)
class Api:
    """The names of the calls that differ between FMI 2.0 and 3.0 model exchange, and the version's status names."""

    fmi3: bool
    set_time: str
    set_states: str
    get_states: str
    get_derivatives: str
    get_indicators: str
    set_real: str
    completed_step: str
    enter_event_mode: str
    new_discrete_states: str
    enter_continuous_time_mode: str
    status_name: Callable[[int], str]


FMI2_API = Api(False, "fmi2SetTime", "fmi2SetContinuousStates", "fmi2GetContinuousStates", "fmi2GetDerivatives",
               "fmi2GetEventIndicators", "fmi2SetReal", "fmi2CompletedIntegratorStep", "fmi2EnterEventMode",
               "fmi2NewDiscreteStates", "fmi2EnterContinuousTimeMode", errors.status_name)
FMI3_API = Api(True, "fmi3SetTime", "fmi3SetContinuousStates", "fmi3GetContinuousStates",
               "fmi3GetContinuousStateDerivatives", "fmi3GetEventIndicators", "fmi3SetFloat64",
               "fmi3CompletedIntegratorStep", "fmi3EnterEventMode", "fmi3UpdateDiscreteStates",
               "fmi3EnterContinuousTimeMode", fmi3.status_name)


def model_exchange_functions(dll: Any, api: Api) -> dict[str, Any]:
    """Fresh ctypes function pointers of the functions every FMU of *api*'s version has and of the model-exchange
    ones; ``FMUError`` names a missing one (the FMU-state functions are optional)."""
    version = fmi3 if api.fmi3 else fmi2
    common = {n: s for n, s in version.SIGNATURES.items() if n not in CO_SIMULATION_ONLY}
    optional = set(version.OPTIONAL) - {api.enter_event_mode, api.new_discrete_states}
    return fmi2.bind(dll, {**common, **(_SIGNATURES3 if api.fmi3 else _SIGNATURES2)}, optional)


def instantiate3(functions: dict[str, Any], name: str, token: str, resources: str, env: int,
                 logging: bool) -> fmi3.Instance | None:
    """``fmi3InstantiateModelExchange``, logging through the sinks of :mod:`~cosimrun.fmi.fmi3`."""
    handle = functions["fmi3InstantiateModelExchange"](name.encode(), token.encode(), resources.encode(), False,
                                                       logging, ctypes.c_void_p(env), fmi3.LOGGER)
    return fmi3.Instance(functions, handle) if handle else None


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """What an event iteration ended with."""

    states_changed: bool
    """``valuesOfContinuousStatesChanged`` in any of its new-discrete-states calls."""
    next_event_time: float | None
    """The FMU's next time event (``None``: none announced)."""


class ContinuousTimeCalls:
    """The calls an integrator makes into one model-exchange FMU instance, on buffers allocated once.

    *functions* are those of :func:`model_exchange_functions`; the calls made
    at every evaluation of the model go through function pointers of *dll*
    without ctypes argument conversion, on pre-built arguments of the exact C
    types. *handle* is the instance; *input_vrs* the value references of the
    real (FMI 3: scalar ``Float64``) inputs in the order the integrator's input
    vectors have; *failed* builds the component's error from a message and the
    simulation time; *request_stop*, when given, takes an FMU's request to
    terminate (naming the call that made it) instead of an error.
    """

    def __init__(self, api: Api, functions: dict[str, Any], dll: Any, handle: ctypes.c_void_p, n_states: int,
                 n_indicators: int, input_vrs: list[int], failed: Callable[[str, float], FMUError],
                 request_stop: Callable[[str], None] | None = None) -> None:
        self.api = api
        self.f = functions
        self.c = handle
        self.failed = failed
        self.request_stop = request_stop
        hot = {}
        for name in (api.set_time, api.set_states, api.set_real, api.get_derivatives, api.get_indicators):
            hot[name] = fn = dll[name]
            fn.restype = ctypes.c_int
        self._set_time, self._set_states = hot[api.set_time], hot[api.set_states]
        self._set_real, self._get_derivatives = hot[api.set_real], hot[api.get_derivatives]
        self._get_indicators = hot[api.get_indicators]
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
        self.u = np.zeros(n_in)
        count = ctypes.c_size_t(n_in)
        self._real_args = ((ctypes.c_uint * max(1, n_in))(*input_vrs), count, self.u.ctypes.data_as(_REALS),
                           *((count,) if api.fmi3 else ()))  # FMI 3 passes the number of values too
        self._flag = ctypes.c_bool if api.fmi3 else ctypes.c_int
        self._z_key: tuple[float, bytes, bytes] | None = None

    def _check(self, name: str, status: int, t: float) -> None:
        if status > 1:
            raise self.failed(f"{name} returned {self.api.status_name(status)} at t={t:.12g}", t)

    def set_continuous(self, t: float, x: np.ndarray, u: np.ndarray) -> None:
        """Give the FMU time *t*, continuous states *x* and real inputs *u*."""
        c = self.c
        self._t.value = t
        status = self._set_time(c, self._t)
        if status > 1:
            self._check(self.api.set_time, status, t)
        if self.n_states:
            self.x[:] = x
            status = self._set_states(c, self._x_ptr, self.nx)
            if status > 1:
                self._check(self.api.set_states, status, t)
        if self.n_inputs:
            self.set_inputs(u, t)
        self._z_key = None

    def set_inputs(self, u: np.ndarray, t: float) -> None:
        """Give the FMU the real inputs *u* only."""
        if self.n_inputs:
            self.u[:] = u
            self._check(self.api.set_real, self._set_real(self.c, *self._real_args), t)
        self._z_key = None

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``dx/dt`` at ``(t, x, u)`` (a new array)."""
        self.set_continuous(t, x, u)
        status = self._get_derivatives(self.c, self._dx_ptr, self.nx)
        if status > 1:
            self._check(self.api.get_derivatives, status, t)
        return self.dx.copy()

    def indicators(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The event indicators at ``(t, x, u)``; read once per point (each indicator asks for the same point)."""
        key = (t, x.tobytes(), u.tobytes())
        if key != self._z_key:
            self.set_continuous(t, x, u)
            self._check(self.api.get_indicators, self._get_indicators(self.c, self._z_ptr, self.nz), t)
            self._z_key = key
        return self.z

    def states(self, t: float) -> np.ndarray:
        """The FMU's continuous states (a new array)."""
        if self.n_states:
            self._check(self.api.get_states, self.f[self.api.get_states](self.c, self._x_ptr, self.nx), t)
        return self.x.copy()

    def completed_step(self, t: float) -> bool:
        """Completed integrator step at the point last set; whether the FMU asks for a step event.

        ``noSetFMUStatePriorToCurrentPoint`` is false: the master may roll back.
        An FMU that asks to terminate requests a stop (or raises, see :meth:`_terminate`).
        """
        name = self.api.completed_step
        enter, terminate = self._flag(0), self._flag(0)
        self._check(name, self.f[name](self.c, 0, ctypes.byref(enter), ctypes.byref(terminate)), t)
        if terminate.value:
            self._terminate(t, name)
            return False
        return bool(enter.value)

    def event_iteration(self, t: float, *, enter: bool = True,
                        in_event_mode: Callable[[], None] | None = None) -> EventOutcome:
        """Handle an event at the point last set: event mode, new discrete states until settled, continuous mode.

        *enter* false is the iteration right after initialization, where the FMU
        already is in event mode. *in_event_mode* runs once in event mode before
        the discrete states are updated (it sets the discrete inputs, which FMI
        allows in event mode only). An FMU that asks to terminate ends the
        iteration there (see :meth:`_terminate`); one whose iteration does not
        settle within :data:`MAX_EVENT_ITERATIONS` raises.
        """
        api, f, c = self.api, self.f, self.c
        if enter:
            self._check(api.enter_event_mode, f[api.enter_event_mode](c), t)
        if in_event_mode is not None:
            in_event_mode()
        update = self._update3 if api.fmi3 else self._update2
        changed = False
        for _ in range(MAX_EVENT_ITERATIONS):
            outcome = update(t)
            if outcome is None:  # asked to terminate: the FMU stays in event mode, its states read back
                return EventOutcome(True, None)
            needed, values_changed, t_next = outcome
            changed = changed or values_changed
            if not needed:
                break
        else:
            raise self.failed(f"the event iteration at t={t:.12g} did not settle: {api.new_discrete_states} still "
                              f"asked for new discrete states after {MAX_EVENT_ITERATIONS} calls", t)
        self._check(api.enter_continuous_time_mode, f[api.enter_continuous_time_mode](c), t)
        self._z_key = None
        return EventOutcome(changed, t_next)

    def _terminate(self, t: float, call: str) -> None:
        """The FMU asked to terminate at *t* in *call*: a stop request (``request_stop``), else an error."""
        if self.request_stop is None:
            raise self.failed(f"the FMU asks to terminate the simulation at t={t:.12g} ({call})", t)
        self.request_stop(f"{call} returned terminateSimulation")

    def _update2(self, t: float) -> tuple[bool, bool, float | None] | None:
        """One ``fmi2NewDiscreteStates``: (new discrete states needed, states changed, next time event); ``None``
        when the FMU asks to terminate."""
        from fmpy.fmi2 import fmi2EventInfo

        info = fmi2EventInfo()
        self._check("fmi2NewDiscreteStates", self.f["fmi2NewDiscreteStates"](self.c, ctypes.byref(info)), t)
        if info.terminateSimulation:
            self._terminate(t, "fmi2NewDiscreteStates")
            return None
        defined = info.nextEventTimeDefined and math.isfinite(info.nextEventTime)
        return (bool(info.newDiscreteStatesNeeded), bool(info.valuesOfContinuousStatesChanged),
                float(info.nextEventTime) if defined else None)

    def _update3(self, t: float) -> tuple[bool, bool, float | None] | None:
        """One ``fmi3UpdateDiscreteStates``: (discrete states need update, states changed, next time event);
        ``None`` when the FMU asks to terminate."""
        needed, terminate, nominals, values, defined = (ctypes.c_bool() for _ in range(5))
        t_next = ctypes.c_double()
        status = self.f["fmi3UpdateDiscreteStates"](self.c, *(ctypes.byref(v) for v in (
            needed, terminate, nominals, values, defined, t_next)))
        self._check("fmi3UpdateDiscreteStates", status, t)
        if terminate.value:
            self._terminate(t, "fmi3UpdateDiscreteStates")
            return None
        return (needed.value, values.value,
                t_next.value if defined.value and math.isfinite(t_next.value) else None)
