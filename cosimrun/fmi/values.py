"""Values in and out of an FMU instance: the compiled pushers and pullers of the step path, and setting or reading
variables by name (parameters, start values, states).

A pusher copies port values into a buffer allocated once and sets them in one
FMI call (``fmi2SetReal`` for all real inputs, ``fmi3SetFloat64`` for all
Float64 ones, arrays whole); a puller reads outputs the same way. They call
the FMU through function pointers without ctypes argument conversion, on
pre-built arguments of the exact C types. *failed* builds the error of a call
that returned Error or worse (``failed(function, status)``).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

from cosimrun.core.ports import PortState
from cosimrun.fmi import fmi3
from cosimrun.fmi.errors import FMUError, FMULog
from cosimrun.fmi.fmi2 import C_TYPES, GETTERS, SETTERS, Instance, from_c
from cosimrun.fmi.model import FMUVariable


def port_group(ports: list[tuple[PortState, FMUVariable]], type_names: tuple[str, ...]) -> Any:
    """``(value references, buffer, ports, count)`` for the ports of the given FMI types, or ``None``."""
    chosen = [(p, v) for p, v in ports if v.type in type_names]
    if not chosen:
        return None
    n = len(chosen)
    vr = (ctypes.c_uint * n)(*(v.vr for _, v in chosen))
    buf = (C_TYPES[type_names[0]] * n)()
    return vr, buf, [p for p, _ in chosen], n


def nothing() -> None:
    """Does nothing: what a chain of no pushers or pullers calls."""


def chain(functions: list[Callable[[], None]]) -> Callable[[], None]:
    """One function calling *functions* in order, leaving out :func:`nothing` (the function itself when one is
    left)."""
    functions = [fn for fn in functions if fn is not nothing]
    if not functions:
        return nothing
    if len(functions) == 1:
        return functions[0]

    def chained() -> None:
        for fn in functions:
            fn()

    return chained


def make_pusher(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that copies the port values into *buf* and sets them in one FMI call."""
    size = ctypes.c_size_t(n)
    fname = SETTERS[type_name]
    if type_name == "String":
        def push() -> None:
            buf[:] = [str(p.value).encode() for p in ports]
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    elif n == 1:
        port = ports[0]

        def push() -> None:
            buf[0] = port.value
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    else:
        def push() -> None:
            buf[:] = [p.value for p in ports]
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    return push


def make_derivative_pusher(dll: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int,
                            failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that gives the FMU the first and second derivatives of its real inputs (zero where a port
    has none) in one ``fmi2SetRealInputDerivatives`` call."""
    fn = dll["fmi2SetRealInputDerivatives"]
    fn.restype = ctypes.c_int
    size = ctypes.c_size_t(2 * n)
    vrs = (ctypes.c_uint * (2 * n))(*vr, *vr)
    orders = (ctypes.c_int * (2 * n))(*([1] * n + [2] * n))
    values = (ctypes.c_double * (2 * n))()
    fname = "fmi2SetRealInputDerivatives"

    def push() -> None:
        for i, port in enumerate(ports):
            d = port.derivatives
            values[i] = d[0] if d else 0.0
            values[n + i] = d[1] if len(d) > 1 else 0.0
        status = fn(c, vrs, size, orders, values)
        if status > 1:
            raise failed(fname, status)

    return push


def make_puller(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that reads the outputs in one FMI call and stores them in the ports."""
    size = ctypes.c_size_t(n)
    fname = GETTERS[type_name]
    if type_name in ("Boolean", "String"):
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = from_c(type_name, value)
    elif n == 1:
        port = ports[0]

        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            port.value = buf[0]
    else:
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = value
    return pull


def groups3(ports: list[tuple[PortState, FMUVariable]]) -> list[tuple[str, list[tuple[PortState, FMUVariable]]]]:
    """The ports of an FMI 3 FMU by FMI type, each group ordered by value reference and element (arrays whole)."""
    groups: dict[str, list[tuple[PortState, FMUVariable]]] = {}
    for port, var in ports:
        groups.setdefault(var.fmi_type, []).append((port, var))
    return [(t, sorted(g, key=lambda pv: (pv[1].vr, pv[1].index or 0))) for t, g in groups.items()]


def _buffers3(group: list[tuple[PortState, FMUVariable]], fmi_type: str) -> tuple[Any, Any, Any, Any]:
    """``(value references, their count, buffer, its size)`` for one FMI 3 type group."""
    vrs = list(dict.fromkeys(v.vr for _, v in group))
    return ((ctypes.c_uint * len(vrs))(*vrs), ctypes.c_size_t(len(vrs)), (fmi3.C_TYPES[fmi_type] * len(group))(),
            ctypes.c_size_t(len(group)))


def make_pusher3(fn: Any, c: ctypes.c_void_p, group: list[tuple[PortState, FMUVariable]], fmi_type: str,
                  failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that sets the ports of one FMI 3 type in one call."""
    vrs, nvr, buf, n = _buffers3(group, fmi_type)
    ports = [p for p, _ in group]
    fname = fmi3.SETTERS[fmi_type]
    encode = fmi_type == "String"

    def push() -> None:
        buf[:] = [str(p.value).encode() for p in ports] if encode else [p.value for p in ports]
        status = fn(c, vrs, nvr, buf, n)
        if status > 1:
            raise failed(fname, status)

    return push


def make_puller3(fn: Any, c: ctypes.c_void_p, group: list[tuple[PortState, FMUVariable]], fmi_type: str,
                  failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that reads the ports of one FMI 3 type in one call."""
    vrs, nvr, buf, n = _buffers3(group, fmi_type)
    ports = [p for p, _ in group]
    fname = fmi3.GETTERS[fmi_type]
    convert = fmi_type in ("Boolean", "String")

    def pull() -> None:
        status = fn(c, vrs, nvr, buf, n)
        if status > 1:
            raise failed(fname, status)
        for port, value in zip(ports, buf[:], strict=True):
            port.value = fmi3.from_c(fmi_type, value) if convert else value

    return pull


def set_values(inst: Instance, items: list[tuple[FMUVariable, Any]], t: float, log: FMULog) -> None:
    """Set variables through ``fmi2Set*``/``fmi3Set*``, grouped by type, at simulation time *t* (every element of an
    FMI 3 array among *items*: see :func:`~cosimrun.fmi.fmi3.value_groups`)."""
    if isinstance(inst, fmi3.Instance):
        for fname, vrs, buf, names in fmi3.value_groups(items):
            status = inst.f[fname](inst.c, vrs, len(vrs), buf, len(buf))
            if status > 1:
                raise log.error(f"{fname} of {', '.join(names)} returned {log.status(status)}", t)
        return
    for type_name in ("Real", "Integer", "Boolean", "String"):
        chosen = [(v, x) for v, x in items if v.type == type_name or (type_name == "Integer"
                                                                        and v.type == "Enumeration")]
        if not chosen:
            continue
        n = len(chosen)
        vr = (ctypes.c_uint * n)(*(v.vr for v, _ in chosen))
        raw = [x.encode() if type_name == "String" else x for _, x in chosen]
        buf = (C_TYPES[type_name] * n)(*raw)
        status = inst.f[SETTERS[type_name]](inst.c, vr, n, buf)
        if status > 1:
            names = ", ".join(v.name for v, _ in chosen)
            raise log.error(f"{SETTERS[type_name]} of {names} returned {log.status(status)}", t)


def get_values(inst: Instance, variables: Sequence[FMUVariable], t: float, log: FMULog) -> list[Any]:
    """The current values of *variables*, one ``fmi2Get*``/``fmi3Get*`` call each (*t*: the time for errors)."""
    out = []
    for var in variables:
        if isinstance(inst, fmi3.Instance):
            status, value = fmi3.read_value(inst, var)
            fname = fmi3.GETTERS[var.fmi_type]
        else:
            vr = (ctypes.c_uint * 1)(var.vr)
            buf = (C_TYPES[var.type] * 1)()
            fname = GETTERS[var.type]
            status = inst.f[fname](inst.c, vr, 1, buf)
            value = from_c(var.type, buf[0])
        if status > 1:
            raise log.error(f"{fname} of {var.name} returned {log.status(status)}", t)
        out.append(value)
    return out


def transfer(inst: Instance, ports: list[tuple[PortState, FMUVariable]], failed: Callable[[str, int], FMUError],
             read: bool = False) -> Callable[[], None]:
    """One function setting (*read*: reading) *ports* in one ``fmi2Set*``/``fmi3Get*`` ... call per type."""
    f, c = inst.f, inst.c
    if isinstance(inst, fmi3.Instance):
        names3, maker3 = (fmi3.GETTERS, make_puller3) if read else (fmi3.SETTERS, make_pusher3)
        return chain([maker3(f[names3[t]], c, group, t, failed) for t, group in groups3(ports)])
    names, maker = (GETTERS, make_puller) if read else (SETTERS, make_pusher)
    calls = []
    for kinds in KINDS2:
        group = port_group(ports, kinds)
        if group is not None:
            calls.append(maker(f[names[kinds[0]]], c, *group, kinds[0], failed))
    return chain(calls)


KINDS2 = (("Real",), ("Integer", "Enumeration"), ("Boolean",), ("String",))
"""The FMI 2.0 variable types by the get/set functions that carry them."""
