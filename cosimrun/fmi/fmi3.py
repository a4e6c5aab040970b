"""The FMI 3.0 co-simulation C API through ctypes: signatures, instances, values, event mode and log messages.

The FMI 3 counterpart of :mod:`~cosimrun.fmi.fmi2`: FMPy's
``FMU3Slave`` loads the library, :func:`raw_functions` binds the functions
cosimrun calls with their C signatures (fresh pointers, independent of FMPy's
wrappers), :class:`Instance` is one ``fmi3Instance`` whose FMU states
:class:`~cosimrun.fmi.fmi2.Snapshot` frees, and log messages reach
the same per-component sinks as FMI 2's (:func:`~cosimrun.fmi.fmi2.register_log_sink`).

Values are read and written per FMI type (``Float32`` ... ``UInt64``,
``Boolean``, ``String``; enumerations as ``Int64``); an array variable is
always set and read whole (:func:`value_groups`).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from cosimrun.fmi import fmi2
from cosimrun.fmi.errors import FMUError, status_name3
from cosimrun.fmi.model import FMUVariable

C_TYPES: dict[str, Any] = {
    "Float32": ctypes.c_float, "Float64": ctypes.c_double,
    "Int8": ctypes.c_int8, "UInt8": ctypes.c_uint8, "Int16": ctypes.c_int16, "UInt16": ctypes.c_uint16,
    "Int32": ctypes.c_int32, "UInt32": ctypes.c_uint32, "Int64": ctypes.c_int64, "UInt64": ctypes.c_uint64,
    "Enumeration": ctypes.c_int64, "Boolean": ctypes.c_bool, "String": ctypes.c_char_p,
}
"""The C type of each FMI 3.0 variable type (``fmi3Boolean`` is C's ``bool``)."""

FUNCTION_TYPES: dict[str, str] = {name: ("Int64" if name == "Enumeration" else name) for name in C_TYPES}
"""The ``fmi3Get``/``fmi3Set`` suffix of each variable type (enumerations are read and written as Int64)."""

SETTERS = {name: f"fmi3Set{suffix}" for name, suffix in FUNCTION_TYPES.items()}
GETTERS = {name: f"fmi3Get{suffix}" for name, suffix in FUNCTION_TYPES.items()}

_P = ctypes.POINTER
_VR = _P(ctypes.c_uint)
_I = ctypes.c_void_p
_B = ctypes.c_bool
_D = ctypes.c_double
_LOGGER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)

SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "fmi3InstantiateCoSimulation": (_I, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _B, _B, _B, _B, _VR,
                                         ctypes.c_size_t, ctypes.c_void_p, _LOGGER_TYPE, ctypes.c_void_p]),
    "fmi3FreeInstance": (None, [_I]),
    "fmi3EnterInitializationMode": (ctypes.c_int, [_I, _B, _D, _D, _B, _D]),
    "fmi3ExitInitializationMode": (ctypes.c_int, [_I]),
    "fmi3EnterEventMode": (ctypes.c_int, [_I]),
    "fmi3UpdateDiscreteStates": (ctypes.c_int, [_I, _P(_B), _P(_B), _P(_B), _P(_B), _P(_B), _P(_D)]),
    "fmi3EnterStepMode": (ctypes.c_int, [_I]),
    "fmi3Terminate": (ctypes.c_int, [_I]),
    "fmi3DoStep": (ctypes.c_int, [_I, _D, _D, _B, _P(_B), _P(_B), _P(_B), _P(_D)]),
    "fmi3GetFMUState": (ctypes.c_int, [_I, _P(ctypes.c_void_p)]),
    "fmi3SetFMUState": (ctypes.c_int, [_I, ctypes.c_void_p]),
    "fmi3FreeFMUState": (ctypes.c_int, [_I, _P(ctypes.c_void_p)]),
    "fmi3SerializedFMUStateSize": (ctypes.c_int, [_I, ctypes.c_void_p, _P(ctypes.c_size_t)]),
    "fmi3SerializeFMUState": (ctypes.c_int, [_I, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
    "fmi3DeserializeFMUState": (ctypes.c_int, [_I, ctypes.c_char_p, ctypes.c_size_t, _P(ctypes.c_void_p)]),
    **{name: (ctypes.c_int, [_I, _VR, ctypes.c_size_t, _P(C_TYPES[t]), ctypes.c_size_t])
       for t, name in (*SETTERS.items(), *GETTERS.items())},
}
"""The FMI 3.0 functions cosimrun calls, with their C signatures."""

OPTIONAL = ("fmi3GetFMUState", "fmi3SetFMUState", "fmi3FreeFMUState", "fmi3EnterEventMode",
            "fmi3UpdateDiscreteStates", "fmi3EnterStepMode", "fmi3SerializedFMUStateSize", "fmi3SerializeFMUState",
            "fmi3DeserializeFMUState")
"""The functions of :data:`SIGNATURES` an FMU need not export (no FMU states, no serialization, no event mode)."""


status_name = status_name3
"""``fmi3Discard`` etc. for an FMI 3.0 status code (``status N`` for an unknown one)."""


def raw_functions(dll: Any) -> dict[str, Any]:
    """Fresh ctypes function pointers of the FMI 3.0 functions cosimrun calls (see :func:`~.fmi2.bind`)."""
    return fmi2.bind(dll, SIGNATURES, OPTIONAL)


def _on_fmu_log(env: int | None, status: int, category: bytes | None, message: bytes | None) -> None:
    """Logger callback of every FMI 3 instance (it has no instance name argument): as FMI 2's."""
    fmi2.on_fmu_log(env, None, status, category, message)


LOGGER = _LOGGER_TYPE(_on_fmu_log)
"""The one ``fmi3LogMessageCallback`` of all instances; the instance environment selects the sink."""


class Instance(fmi2.Instance):
    """One instantiated FMI 3.0 FMU (``fmi3Instance``); snapshots free their states through it."""

    SERIALIZATION = ("fmi3SerializedFMUStateSize", "fmi3SerializeFMUState", "fmi3DeserializeFMUState")

    def free_state(self, state: ctypes.c_void_p) -> None:
        if self.alive and state and "fmi3FreeFMUState" in self.f:
            self.f["fmi3FreeFMUState"](self.c, ctypes.byref(state))


def instantiate(functions: dict[str, Any], name: str, token: str, resources: str, env: int, logging: bool,
                event_mode: bool) -> Instance | None:
    """``fmi3InstantiateCoSimulation`` without intermediate update; early return allowed with *event_mode*."""
    handle = functions["fmi3InstantiateCoSimulation"](
        name.encode(), token.encode(), resources.encode(), False, logging, event_mode, event_mode,
        (ctypes.c_uint * 0)(), 0, ctypes.c_void_p(env), LOGGER, None,
    )
    return Instance(functions, handle) if handle else None


def value_groups(items: Sequence[tuple[FMUVariable, Any]]) -> list[tuple[str, Any, Any, list[str]]]:
    """``(function, value references, values, names)`` per FMI type for setting *items* in one call each.

    Every element of an array variable must be among *items*, in any order.
    """
    by_type: dict[str, dict[int, list[Any]]] = {}
    names: dict[str, list[str]] = {}
    for var, value in items:
        arrays = by_type.setdefault(var.fmi_type, {})
        values = arrays.setdefault(var.vr, [None] * var.size)
        values[var.index or 0] = value.encode() if var.fmi_type == "String" else value
        names.setdefault(var.fmi_type, []).append(var.name)
    groups = []
    for fmi_type, arrays in by_type.items():
        flat = [x for values in arrays.values() for x in values]
        vrs = (ctypes.c_uint * len(arrays))(*arrays)
        groups.append((SETTERS[fmi_type], vrs, (C_TYPES[fmi_type] * len(flat))(*flat), names[fmi_type]))
    return groups


def read_value(inst: Instance, var: FMUVariable) -> tuple[int, Any]:
    """``(status, value)`` of *var* (an array element is read with its whole array)."""
    vr = (ctypes.c_uint * 1)(var.vr)
    buf = (C_TYPES[var.fmi_type] * var.size)()
    status = inst.f[GETTERS[var.fmi_type]](inst.c, vr, 1, buf, var.size)
    return status, from_c(var.fmi_type, buf[var.index or 0])


from_c = fmi2.from_c
"""A value read through ``fmi3Get*`` as Python value, as in FMI 2 (``bool`` and ``str`` for Boolean and String)."""


class StepResult:
    """The out-arguments of ``fmi3DoStep``, allocated once per instance."""

    __slots__ = ("event", "terminate", "early", "last", "refs")

    def __init__(self) -> None:
        self.event, self.terminate, self.early = ctypes.c_bool(), ctypes.c_bool(), ctypes.c_bool()
        self.last = ctypes.c_double()
        self.refs = (ctypes.byref(self.event), ctypes.byref(self.terminate), ctypes.byref(self.early),
                     ctypes.byref(self.last))


def update_discrete_states(inst: Instance, t: float, fail: Callable[[str], FMUError], limit: int = 1000) -> bool:
    """Iterate ``fmi3UpdateDiscreteStates`` at *t* until the FMU needs no further update (at most *limit* times);
    ``True`` when it asks to terminate (the iteration stops there).

    *fail* makes the error of a message.
    """
    flags = [ctypes.c_bool() for _ in range(5)]
    next_time = ctypes.c_double()
    update = inst.f["fmi3UpdateDiscreteStates"]
    for _ in range(limit):
        status = update(inst.c, *(ctypes.byref(f) for f in flags), ctypes.byref(next_time))
        if status > 1:
            raise fail(f"fmi3UpdateDiscreteStates returned {status_name(status)} at t={t:.12g}")
        if flags[1].value:
            return True
        if not flags[0].value:
            return False
    raise fail(f"fmi3UpdateDiscreteStates still reports discreteStatesNeedUpdate after {limit} iterations at "
               f"t={t:.12g} (an event iteration that does not settle)")


def free(inst: Instance) -> None:
    """Terminate and free *inst*, ignoring failures (it is being let go of)."""
    inst.alive = False
    with contextlib.suppress(Exception):
        inst.f["fmi3Terminate"](inst.c)
    with contextlib.suppress(Exception):
        inst.f["fmi3FreeInstance"](inst.c)
