"""The FMI 2.0 C API through ctypes: function signatures, instances, FMU states and log messages.

cosimrun calls the FMU's shared library directly (FMPy loads it and provides
the callback types): :func:`raw_functions` binds the functions with their C
signatures, :func:`fast_functions` those of the step path without argument
conversion. :class:`Instance` is one ``fmi2Component``, :class:`Snapshot` an
FMU state taken for rollback. Every instance logs through :func:`callbacks`,
which keeps the last messages of each component (:func:`register_log_sink`)
for error reports and passes them to the ``cosimrun.fmu`` logger.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import weakref
from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

from cosimrun.fmi.errors import STATUS_NAMES, FMUError

_log = logging.getLogger("cosimrun.fmu")

FMI2_TYPES = {"me": 0, "cs": 1}
"""``fmi2ModelExchange`` and ``fmi2CoSimulation`` (the ``fmi2Type`` passed to ``fmi2Instantiate``) by interface kind."""
FMI2_LAST_SUCCESSFUL_TIME = 2
"""``fmi2LastSuccessfulTime`` (an ``fmi2StatusKind``)."""
FMI2_TERMINATED = 3
"""``fmi2Terminated`` (an ``fmi2StatusKind``)."""


# ------------------------------------------------------------------ log messages
_SINKS: weakref.WeakValueDictionary[int, deque[str]] = weakref.WeakValueDictionary()
_ENVIRONMENTS = itertools.count(1)
_LOG_LEVELS = (logging.DEBUG, logging.WARNING, logging.WARNING, logging.ERROR, logging.CRITICAL, logging.INFO)


def on_fmu_log(env: int | None, instance: bytes | None, status: int, category: bytes | None,
                message: bytes | None) -> None:
    """Logger callback of every FMU instance: keep the message for error reports and log it."""
    try:
        text = (message or b"").decode("utf-8", "replace")
        name = (instance or b"").decode("utf-8", "replace")
        label = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
        sink = _SINKS.get(env or 0)
        if sink is not None:
            sink.append(f"[{label}] {text}")
        _log.log(_LOG_LEVELS[status] if 0 <= status < len(_LOG_LEVELS) else logging.ERROR,
                 "FMU %s [%s] %s: %s", name, label, (category or b"").decode("utf-8", "replace"), text)
    except Exception:  # a logger callback must never raise into C
        pass


def register_log_sink(messages: deque[str]) -> int:
    """A new logger environment id whose FMU messages are appended to *messages* (held weakly)."""
    env = next(_ENVIRONMENTS)
    _SINKS[env] = messages
    return env


_LOGGER_CALLBACK: Any = None


def callbacks(env: int) -> Any:
    """An ``fmi2CallbackFunctions`` struct whose logger reports to the component with id *env*."""
    global _LOGGER_CALLBACK
    from fmpy import calloc, free
    from fmpy.fmi2 import (
        fmi2CallbackAllocateMemoryTYPE,
        fmi2CallbackFreeMemoryTYPE,
        fmi2CallbackFunctions,
        fmi2CallbackLoggerTYPE,
    )

    if _LOGGER_CALLBACK is None:
        _LOGGER_CALLBACK = fmi2CallbackLoggerTYPE(on_fmu_log)
    cb = fmi2CallbackFunctions()
    cb.logger = _LOGGER_CALLBACK
    cb.allocateMemory = fmi2CallbackAllocateMemoryTYPE(calloc)
    cb.freeMemory = fmi2CallbackFreeMemoryTYPE(free)
    cb.componentEnvironment = env
    try:  # FMPy's native proxy formats printf-style messages before they reach Python
        from fmpy.logging import addLoggerProxy

        addLoggerProxy(ctypes.byref(cb))
    except Exception:
        pass
    return cb


# ------------------------------------------------------------------ functions of the shared library
C_TYPES = {"Real": ctypes.c_double, "Integer": ctypes.c_int, "Enumeration": ctypes.c_int,
           "Boolean": ctypes.c_int, "String": ctypes.c_char_p}
SETTERS = {"Real": "fmi2SetReal", "Integer": "fmi2SetInteger", "Enumeration": "fmi2SetInteger",
           "Boolean": "fmi2SetBoolean", "String": "fmi2SetString"}
GETTERS = {"Real": "fmi2GetReal", "Integer": "fmi2GetInteger", "Enumeration": "fmi2GetInteger",
           "Boolean": "fmi2GetBoolean", "String": "fmi2GetString"}


_P = ctypes.POINTER
_VR = _P(ctypes.c_uint)
SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "fmi2Instantiate": (ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
    "fmi2FreeInstance": (None, [ctypes.c_void_p]),
    "fmi2SetupExperiment": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_double,
                                           ctypes.c_int, ctypes.c_double]),
    "fmi2EnterInitializationMode": (ctypes.c_int, [ctypes.c_void_p]),
    "fmi2ExitInitializationMode": (ctypes.c_int, [ctypes.c_void_p]),
    "fmi2Terminate": (ctypes.c_int, [ctypes.c_void_p]),
    "fmi2GetReal": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_double)]),
    "fmi2GetInteger": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_int)]),
    "fmi2GetBoolean": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_int)]),
    "fmi2GetString": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_char_p)]),
    "fmi2SetReal": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_double)]),
    "fmi2SetInteger": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_int)]),
    "fmi2SetBoolean": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_int)]),
    "fmi2SetString": (ctypes.c_int, [ctypes.c_void_p, _VR, ctypes.c_size_t, _P(ctypes.c_char_p)]),
    "fmi2GetFMUstate": (ctypes.c_int, [ctypes.c_void_p, _P(ctypes.c_void_p)]),
    "fmi2SetFMUstate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]),
    "fmi2FreeFMUstate": (ctypes.c_int, [ctypes.c_void_p, _P(ctypes.c_void_p)]),
    "fmi2SerializedFMUstateSize": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, _P(ctypes.c_size_t)]),
    "fmi2SerializeFMUstate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
    "fmi2DeSerializeFMUstate": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                               _P(ctypes.c_void_p)]),
    "fmi2DoStep": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]),
    "fmi2GetRealStatus": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_double)]),
    "fmi2GetBooleanStatus": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_int)]),
}
"""The FMI 2.0 functions cosimrun calls, with their C signatures."""

OPTIONAL = ("fmi2GetFMUstate", "fmi2SetFMUstate", "fmi2FreeFMUstate", "fmi2GetRealStatus", "fmi2GetBooleanStatus",
            "fmi2SerializedFMUstateSize", "fmi2SerializeFMUstate", "fmi2DeSerializeFMUstate")
"""The functions of :data:`SIGNATURES` an FMU need not export (no FMU states, no serialization, no status
queries)."""


def bind(dll: Any, signatures: Mapping[str, tuple[Any, list[Any]]], optional: Collection[str]) -> dict[str, Any]:
    """Fresh ctypes function pointers of *dll* with their *signatures* (independent of FMPy's own wrappers).

    A function in *optional* that the library does not export is left out; any other missing one is an
    ``FMUError`` naming it.
    """
    table = {}
    for name, (restype, argtypes) in signatures.items():
        try:
            fn = dll[name]
        except AttributeError:
            if name in optional:
                continue
            raise FMUError(f"the FMU's shared library does not export {name}") from None
        fn.restype, fn.argtypes = restype, argtypes
        table[name] = fn
    return table


def raw_functions(dll: Any) -> dict[str, Any]:
    """Fresh ctypes function pointers of the FMI 2.0 functions cosimrun calls (see :func:`bind`)."""
    return bind(dll, SIGNATURES, OPTIONAL)


class Instance:
    """One instantiated FMU (``fmi2Component``) with its raw FMI functions.

    Snapshots keep a reference to the instance they belong to; once the
    instance is freed (``alive`` false) they no longer call into the library.
    """

    SPARE_STATES = 4
    """FMU states of dropped snapshots kept for the next ones (``fmi2GetFMUstate`` overwrites a state it
    returned before, so a checkpoint per step allocates and frees nothing)."""

    def __init__(self, functions: dict[str, Any], handle: int) -> None:
        self.c = ctypes.c_void_p(handle)
        self.f = functions
        self.alive = True
        self.spares: list[ctypes.c_void_p] = []

    def spare_state(self) -> ctypes.c_void_p:
        """A state handle for ``fmi2GetFMUstate``: one a dropped snapshot left, or a new (NULL) one."""
        return self.spares.pop() if self.spares else ctypes.c_void_p()

    def drop_state(self, state: ctypes.c_void_p) -> None:
        """Keep the state of a dropped snapshot for the next one, or free it when enough are kept."""
        if len(self.spares) < self.SPARE_STATES and self.alive and state:
            self.spares.append(state)
        else:
            self.free_state(state)

    def free_spares(self) -> None:
        """Free the kept states (before the instance is freed)."""
        spares, self.spares = self.spares, []
        for state in spares:
            self.free_state(state)

    def free_state(self, state: ctypes.c_void_p) -> None:
        if self.alive and state and "fmi2FreeFMUstate" in self.f:
            self.f["fmi2FreeFMUstate"](self.c, ctypes.byref(state))

    SERIALIZATION = ("fmi2SerializedFMUstateSize", "fmi2SerializeFMUstate", "fmi2DeSerializeFMUstate")
    """The names of the functions that turn an FMU state into bytes and back."""

    def serialize(self, state: ctypes.c_void_p) -> bytes:
        """The bytes of FMU state *state* (``fmi2SerializedFMUstateSize`` and ``fmi2SerializeFMUstate``);
        :class:`FMUError` naming the function that failed."""
        size_fn, serialize_fn, _ = self.SERIALIZATION
        size = ctypes.c_size_t()
        self._check(size_fn, self._function(size_fn)(self.c, state, ctypes.byref(size)))
        buffer = ctypes.create_string_buffer(size.value)
        self._check(serialize_fn, self._function(serialize_fn)(self.c, state, buffer, size.value))
        return buffer.raw

    def deserialize(self, data: bytes) -> ctypes.c_void_p:
        """A new FMU state made from *data* (``fmi2DeSerializeFMUstate``), to be freed by :meth:`free_state`."""
        name = self.SERIALIZATION[2]
        state = ctypes.c_void_p()
        status = self._function(name)(self.c, data, len(data), ctypes.byref(state))
        if status > 1:
            self.free_state(state)
        self._check(name, status)
        return state

    def _function(self, name: str) -> Any:
        fn = self.f.get(name)
        if fn is None:
            raise FMUError(f"the FMU's shared library does not export {name}")
        return fn

    @staticmethod
    def _check(name: str, status: int) -> None:
        if status > 1:
            what = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else f"status {status}"
            raise FMUError(f"{name} returned {what}")


class Snapshot:
    """Opaque rollback point: the FMU state plus time and port values (in the component's snapshot port order);
    its FMU state goes back to the instance when dropped."""

    __slots__ = ("instance", "state", "t", "values")

    def __init__(self, instance: Instance, state: ctypes.c_void_p, t: float, values: list[Any]) -> None:
        self.instance = instance
        self.state = state
        self.t = t
        self.values = values

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from a finalizer (e.g. at interpreter exit)
            self.instance.drop_state(self.state)


def fast_functions(dll: Any) -> dict[str, Any]:
    """Function pointers of the step path without argument conversion (callers pass exact C types)."""
    table = {}
    for name in ("fmi2DoStep", *SETTERS.values(), *GETTERS.values()):
        fn = dll[name]
        fn.restype = ctypes.c_int
        table[name] = fn
    return table


def from_c(type_name: str, value: Any) -> Any:
    """A value read through ``fmi2Get*`` or ``fmi3Get*`` as Python value (``bool``, ``str`` for Boolean and String)."""
    if type_name == "Boolean":
        return bool(value)
    if type_name == "String":
        return (value or b"").decode("utf-8", "replace")
    return value
