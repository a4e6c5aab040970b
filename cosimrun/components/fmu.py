"""FMI 2.0 co-simulation FMUs as cosimrun components, on FMPy's low-level API.

In a config::

    components:
      plant:
        type: fmu
        params:
          path: models/pendulum.fmu        # first: it defines the ports and the other parameters
          mass: 1.5                        # FMU parameters (causality parameter, fixed or tunable)
          length: "80 cm"                  # quantities are converted to the variable's unit
          start: {q: 0.5}                  # start values of other variables (initial exact/approx)
          aliases: {body.phi: angle}       # FMU variable -> port name
          events: {stop: {port: gap, direction: 1}}   # zero crossings of outputs as cosimrun events

How it works:

* **path** is read as soon as it is set: the model description gives the ports
  (causality input/output; Real, Integer/Enumeration, Boolean, String), their
  units (the variable's ``unit``, else its declared type's; Modelica spellings
  such as ``m/s2``, ``N.m``, ``1`` are translated for pint by
  :func:`modelica_unit_to_pint`), the parameters, the physical state (variables
  named by ``derivative`` attributes) and the direct feedthrough
  (``ModelStructure/Outputs`` dependencies on inputs; no ``dependencies``
  attribute means "all inputs", as the standard says). A missing file, a file
  that is no FMU, an FMI version other than 2.0, a model-exchange-only FMU or
  an FMU without a binary for this platform fail right there. Parameters set
  before ``path`` are kept and checked when ``path`` arrives (so any order
  works, but an unknown name is then reported on ``path``); the config builder
  applies ``params`` in mapping order, so write ``path`` first.
* **Extraction** happens once per process and FMU file (keyed by the file's
  SHA-256): every component of the same FMU shares the directory, which is
  removed when the last of them is freed and at interpreter exit. An FMU that
  declares ``canBeInstantiatedOnlyOncePerProcess`` gets a private copy per
  instance.
* **initialize(t0)** instantiates the FMU, calls ``fmi2SetupExperiment(t0)``,
  sets the parameters and start values given in the config, enters
  initialization mode, sets the inputs and exits it. **do_step** sets all
  inputs, calls ``fmi2DoStep`` and reads all outputs; a ``fmi2Discard``,
  ``fmi2Error`` or ``fmi2Fatal`` raises :class:`FMUError` naming the component,
  the FMU, the time, the step and the status with the FMU's last log messages.
* **Loops**: direct feedthrough is declared from the model description before
  ``initialize`` returns, so the base class never perturbs an FMU. Loop
  iteration (:meth:`evaluate_outputs`) sets the inputs and reads the outputs
  with ``fmi2Set*``/``fmi2Get*`` between two steps; ``fmi2DoStep`` is never
  called with a zero step. This relies on the FMU recomputing outputs that
  depend directly on inputs when they are read after new inputs were set, as
  FMI 2.0 requires for outputs with declared dependencies on inputs (FMI 3.0
  states it explicitly for Step Mode). An FMU that only refreshes outputs in
  ``fmi2DoStep`` must not declare such dependencies; it is then no part of an
  algebraic loop (the loop is broken by its step delay).
* **Rollback** (``snapshot_state``/``restore_state``) uses
  ``fmi2GetFMUstate``/``fmi2SetFMUstate``; a snapshot frees its FMU state when
  it is garbage-collected. FMUs with ``canGetAndSetFMUstate="false"`` report
  ``supports_rollback = False``: they run as passive components under the
  hybrid master and are refused as event sources (``events``) with a message
  saying why.
* **Events**: FMI 2.0 co-simulation has no event interface; an FMU handles its
  own events inside ``fmi2DoStep``. ``events`` turns zero crossings of outputs
  into cosimrun events (located by rollback under the hybrid master) that other
  components can subscribe to or that switch modes; ``handle_event`` only
  refreshes the outputs.
* **Physical state** (``get_state``/``set_state``, used when a multi-model
  component switches modes) is the value of every state variable. FMI 2.0 lets
  a co-simulation master set such variables only before initialization, so
  ``set_state`` re-instantiates the FMU at the given time with the states as
  start values (parameters and inputs are set again). Discrete internal
  variables of the FMU start afresh.
* ``path: example:pendulum`` builds the shipped example FMU (a C pendulum, see
  :data:`EXAMPLES`) with the C compiler into a cache directory on first use;
  ``python -m cosimrun.components.fmu build-example DIR`` writes it to ``DIR``
  and ``python -m cosimrun.components.fmu info MODEL.fmu`` lists what a
  component made from an FMU looks like.

FMI 1.0 and FMI 3.0 FMUs are refused with a clear message.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import hashlib
import itertools
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
import zipfile
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pint

from cosimrun.core.component import NO_EVENTS, CoSimComponent
from cosimrun.core.errors import suggest, unknown_name
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.units import Q_, compile_conversion, parse_unit

__all__ = [
    "EXAMPLES",
    "FMUComponent",
    "FMUError",
    "FMUModel",
    "build_c_fmu",
    "build_example",
    "modelica_unit_to_pint",
    "read_fmu",
]

_log = logging.getLogger("cosimrun.fmu")

STATUS_NAMES = ("OK", "Warning", "Discard", "Error", "Fatal", "Pending")
"""FMI 2.0 status codes by value."""

_FMI2_COSIMULATION = 1
"""``fmi2CoSimulation`` (the ``fmi2Type`` passed to ``fmi2Instantiate``)."""
_FMI2_LAST_SUCCESSFUL_TIME = 2
"""``fmi2LastSuccessfulTime`` (an ``fmi2StatusKind``)."""


class FMUError(RuntimeError):
    """An FMU call failed (status discard, error or fatal) or an FMU cannot be loaded."""


def _status_name(status: int) -> str:
    return f"fmi2{STATUS_NAMES[status]}" if 0 <= status < len(STATUS_NAMES) else f"status {status}"


# ============================================================================ units
_MODELICA_SYMBOLS: dict[str, str] = {
    "Ohm": "ohm",
    "%": "percent",
    "deg": "degree",
    "degC": "degC",
    "degF": "degF",
    "rev": "revolution",
}
"""Modelica unit symbols that pint spells differently (everything else is passed through)."""

_UNIT_FACTOR = re.compile(r"(?P<sym>%|[^\W\d_]+)(?P<exp>[+-]?\d+)?")


def modelica_unit_to_pint(unit: str | None) -> str | None:
    """Translate a Modelica/FMI unit string into pint syntax; ``None`` for no unit.

    Modelica writes factors with ``.``, exponents as trailing integers and ``1``
    for dimensionless: ``m/s2`` -> ``m/s**2``, ``N.m`` -> ``N*m``,
    ``kg.m2`` -> ``kg*m**2``, ``s-1`` -> ``s**-1``, ``W/(m2.K)`` ->
    ``W/(m**2*K)``, ``1`` -> ``dimensionless``, ``deg`` -> ``degree``,
    ``Ohm`` -> ``ohm``. Raises ``ValueError`` when pint does not know the result.
    """
    if unit is None:
        return None
    text = unit.strip()
    if not text:
        return None
    if text == "1":
        return "dimensionless"

    def factor(match: re.Match[str]) -> str:
        sym = _MODELICA_SYMBOLS.get(match["sym"], match["sym"])
        return sym if match["exp"] is None else f"{sym}**{int(match['exp'])}"

    translated = _UNIT_FACTOR.sub(factor, text).replace(".", "*")
    try:
        parse_unit(translated)
    except ValueError as exc:
        raise ValueError(f"FMU unit {unit!r} (read as {translated!r}): {exc}") from None
    return translated


_BASE_UNITS = ("kg", "m", "s", "A", "K", "mol", "cd", "rad")


def _base_unit_expression(base: Any) -> str | None:
    """A pint expression for an FMI ``BaseUnit`` with factor 1 and offset 0 (else ``None``)."""
    if base is None or float(base.factor) != 1.0 or float(base.offset) != 0.0:
        return None
    parts = [f"{name}**{getattr(base, name)}" for name in _BASE_UNITS if getattr(base, name)]
    return "*".join(parts) or "dimensionless"


# ============================================================================ model description
_PORT_TYPES: dict[str, PortType] = {
    "Real": PortType.REAL,
    "Integer": PortType.INT,
    "Enumeration": PortType.INT,
    "Boolean": PortType.BOOL,
    "String": PortType.STRING,
}


@dataclass(frozen=True)
class FMUVariable:
    """One scalar variable of an FMU, as cosimrun uses it."""

    name: str
    vr: int
    type: str
    """``Real``, ``Integer``, ``Enumeration``, ``Boolean`` or ``String``."""
    causality: str
    variability: str
    initial: str | None
    start: Any
    """The start value as a Python value (``None`` when the model description has none)."""
    unit: str | None
    """The unit in pint syntax (``None``: none or untranslatable, see ``unit_problem``)."""
    fmu_unit: str | None
    """The unit as the FMU writes it."""
    unit_problem: str | None = None
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None

    @property
    def port_type(self) -> PortType:
        return _PORT_TYPES[self.type]

    @property
    def settable_start(self) -> bool:
        """True when a start value may be set before initialization."""
        if self.variability == "constant" or self.causality in ("independent", "calculatedParameter"):
            return False
        return self.causality in ("parameter", "input") or self.initial in ("exact", "approx")


@dataclass
class FMUModel:
    """What cosimrun reads from one FMU file (cached per file version)."""

    path: Path
    description: Any
    """FMPy's ``ModelDescription``."""
    identifier: str
    guid: str
    variables: dict[str, FMUVariable]
    inputs: list[FMUVariable]
    outputs: list[FMUVariable]
    parameters: list[FMUVariable]
    states: list[FMUVariable]
    feedthrough: dict[str, set[str]]
    """Output variable -> input variables it depends on directly."""
    can_rollback: bool
    only_once_per_process: bool
    variable_step: bool

    @property
    def label(self) -> str:
        return self.path.name


def _python_value(type_name: str, text: str | None) -> Any:
    if text is None:
        return None
    if type_name == "Real":
        return float(text)
    if type_name in ("Integer", "Enumeration"):
        return int(text)
    if type_name == "Boolean":
        return text.strip().lower() in ("true", "1")
    return text


def _float_or_none(text: Any) -> float | None:
    try:
        return None if text is None else float(text)
    except (TypeError, ValueError):
        return None


def _variable(md: Any, v: Any) -> FMUVariable:
    fmu_unit = None
    unit = problem = None
    if v.type == "Real":
        fmu_unit = v.unit or (v.declaredType.unit if v.declaredType is not None else None)
        if fmu_unit:
            try:
                unit = modelica_unit_to_pint(fmu_unit)
            except ValueError as exc:
                definition = next((u for u in md.unitDefinitions if u.name == fmu_unit), None)
                unit = _base_unit_expression(definition.baseUnit if definition is not None else None)
                if unit is None:
                    problem = str(exc)
            if unit == "dimensionless":
                unit = None
    minimum = maximum = None
    if v.type in ("Real", "Integer", "Enumeration"):
        declared = v.declaredType
        minimum = _float_or_none(v.min if v.min is not None else getattr(declared, "min", None))
        maximum = _float_or_none(v.max if v.max is not None else getattr(declared, "max", None))
    return FMUVariable(
        name=v.name,
        vr=int(v.valueReference),
        type=v.type,
        causality=v.causality,
        variability=v.variability,
        initial=v.initial,
        start=_python_value(v.type, v.start),
        unit=unit,
        fmu_unit=fmu_unit,
        unit_problem=problem,
        description=v.description,
        minimum=minimum,
        maximum=maximum,
    )


_MODEL_CACHE: dict[tuple[str, int, int], FMUModel] = {}


class _NeverRaised(Exception):
    """Stands in for FMPy's ValidationError in versions without it."""


def read_fmu(path: str | os.PathLike[str]) -> FMUModel:
    """Read and check an FMU file; ``ValueError`` explains why it cannot be used here."""
    import fmpy
    import fmpy.model_description as _md
    from fmpy.model_description import read_model_description

    ValidationError = getattr(_md, "ValidationError", _NeverRaised)

    path = Path(path).expanduser()
    shown = f"{str(path)!r}" + ("" if path.is_absolute() else f" ({path.resolve()})")
    if not path.is_file():
        if path.is_dir():
            raise ValueError(f"FMU file {shown} is a directory; name the .fmu file")
        near = suggest(path.name, [p.name for p in path.resolve().parent.glob("*.fmu")]) \
            if path.resolve().parent.is_dir() else ""
        raise ValueError(f"FMU file not found: {shown}{near}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    cached = _MODEL_CACHE.get(key)
    if cached is not None:
        return cached
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{shown} is not an FMU (an FMU is a zip archive with a modelDescription.xml)")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    if "modelDescription.xml" not in names:
        raise ValueError(f"{shown} is not an FMU: the archive has no modelDescription.xml")
    from xml.etree import ElementTree

    try:
        with zipfile.ZipFile(path) as zf:
            root = ElementTree.fromstring(zf.read("modelDescription.xml"))
    except ElementTree.ParseError as exc:
        raise ValueError(f"{shown}: modelDescription.xml is not well-formed XML: {exc}") from None
    version = str(root.get("fmiVersion"))
    if not version.startswith("2."):
        raise ValueError(f"{shown} is an FMI {version} FMU; cosimrun runs FMI 2.0 co-simulation FMUs only")
    if root.find("CoSimulation") is None:
        raise ValueError(
            f"{shown} is a model-exchange-only FMU (no <CoSimulation> element in its modelDescription.xml); "
            "cosimrun runs FMI 2.0 co-simulation FMUs: export the model for co-simulation"
        )
    try:
        md = read_model_description(str(path), validate=True)
    except ValidationError as exc:  # schema-valid but inconsistent: usable, as most tools are lenient here
        _log.warning("%s: modelDescription.xml has problems (continuing): %s", shown, exc)
        md = read_model_description(str(path), validate=False)
    except Exception as exc:  # FMPy raises assorted types for invalid XML
        raise ValueError(f"{shown}: invalid modelDescription.xml: {exc}") from None
    cs = md.coSimulation
    identifier = cs.modelIdentifier
    binary = f"binaries/{fmpy.platform}/{identifier}{fmpy.sharedLibraryExtension}"
    if binary not in names:
        available = [p for p in fmpy.supported_platforms(str(path)) if p != "c-code"]
        hint = f"it has binaries for: {', '.join(available)}" if available else "it has no binaries at all"
        if "c-code" in fmpy.supported_platforms(str(path)):
            hint += ("; it ships C sources: compile a binary for this platform with "
                     "fmpy.util.compile_platform_binary(path)")
        raise ValueError(f"{shown} has no binary for this platform ({binary} is missing; {hint})")
    variables = {v.name: _variable(md, v) for v in md.modelVariables if v.type in _PORT_TYPES}
    inputs = [v for v in variables.values() if v.causality == "input"]
    outputs = [v for v in variables.values() if v.causality == "output"]
    parameters = [v for v in variables.values()
                  if v.causality == "parameter" and v.variability in ("fixed", "tunable")]
    structure = _model_structure(path)
    order = [v.name for v in md.modelVariables]
    states = [variables[order[i]] for i in structure.states if 0 <= i < len(order) and order[i] in variables]
    input_names = {v.name for v in inputs}
    feedthrough: dict[str, set[str]] = {v.name: set(input_names) for v in outputs}
    for index, deps in structure.outputs.items():
        name = order[index] if 0 <= index < len(order) else None
        if name in feedthrough and deps is not None:
            feedthrough[name] = {order[d] for d in deps if 0 <= d < len(order) and order[d] in input_names}
    model = FMUModel(
        path=path.resolve(),
        description=md,
        identifier=identifier,
        guid=md.guid,
        variables=variables,
        inputs=inputs,
        outputs=outputs,
        parameters=parameters,
        states=list(dict.fromkeys(states)),
        feedthrough=feedthrough,
        can_rollback=bool(cs.canGetAndSetFMUstate),
        only_once_per_process=bool(cs.canBeInstantiatedOnlyOncePerProcess),
        variable_step=bool(cs.canHandleVariableCommunicationStepSize),
    )
    _MODEL_CACHE[key] = model
    return model


@dataclass
class _Structure:
    states: list[int]
    """0-based indices (in ModelVariables) of the variables that have a derivative."""
    outputs: dict[int, list[int] | None]
    """0-based output index -> indices it depends on (``None``: no ``dependencies`` attribute = all)."""


def _model_structure(path: Path) -> _Structure:
    """Derivative relations and output dependencies, read from the XML itself.

    FMPy's representation of both changed over its versions; the standard's
    is fixed: 1-based ``index``/``dependencies`` into ``ModelVariables`` and a
    ``derivative`` attribute on the derivative's ``Real`` element.
    """
    from xml.etree import ElementTree

    with zipfile.ZipFile(path) as zf:
        root = ElementTree.fromstring(zf.read("modelDescription.xml"))
    states = []
    variables = root.find("ModelVariables")
    for sv in variables if variables is not None else ():
        real = sv.find("Real")
        if real is not None and real.get("derivative"):
            states.append(int(real.get("derivative")) - 1)
    outputs: dict[int, list[int] | None] = {}
    for unknown in root.findall("ModelStructure/Outputs/Unknown"):
        deps = unknown.get("dependencies")
        outputs[int(unknown.get("index")) - 1] = (
            None if deps is None else [int(d) - 1 for d in deps.split()]
        )
    return _Structure(states, outputs)


# ============================================================================ extraction cache
@dataclass
class _Extraction:
    key: str
    directory: Path
    users: int = 0


_EXTRACTIONS: dict[str, _Extraction] = {}
_EXTRACTION_LOCK = threading.Lock()
_HASHES: dict[tuple[str, int, int], str] = {}
_PRIVATE = itertools.count(1)


def _file_hash(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    digest = _HASHES.get(key)
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = _HASHES[key] = h.hexdigest()
    return digest


def _acquire_extraction(path: Path, private: bool = False) -> _Extraction:
    """The extracted directory of *path*, shared by every user in the process (unless *private*)."""
    import fmpy

    key = _file_hash(path)
    with _EXTRACTION_LOCK:
        ex = _EXTRACTIONS.get(key)
        if ex is not None and private and ex.users > 0:
            key, ex = f"{key}#{next(_PRIVATE)}", None
        if ex is None:
            directory = Path(tempfile.mkdtemp(prefix="cosimrun-fmu-"))
            try:
                fmpy.extract(str(path), str(directory))
            except Exception as exc:
                shutil.rmtree(directory, ignore_errors=True)
                raise FMUError(f"cannot extract FMU {str(path)!r}: {exc}") from exc
            ex = _EXTRACTIONS[key] = _Extraction(key, directory)
        ex.users += 1
        return ex


def _release_extraction(ex: _Extraction) -> None:
    """Drop one use; the last user's release removes the directory."""
    with _EXTRACTION_LOCK:
        ex.users -= 1
        if ex.users <= 0 and _EXTRACTIONS.get(ex.key) is ex:
            del _EXTRACTIONS[ex.key]
            shutil.rmtree(ex.directory, ignore_errors=True)


def extracted_directories() -> list[Path]:
    """Directories currently holding extracted FMUs (for tests and diagnostics)."""
    with _EXTRACTION_LOCK:
        return [ex.directory for ex in _EXTRACTIONS.values()]


@atexit.register
def _remove_extractions() -> None:
    with _EXTRACTION_LOCK:
        for ex in _EXTRACTIONS.values():
            shutil.rmtree(ex.directory, ignore_errors=True)
        _EXTRACTIONS.clear()


# ============================================================================ FMU log messages
_SINKS: weakref.WeakValueDictionary[int, deque[str]] = weakref.WeakValueDictionary()
_ENVIRONMENTS = itertools.count(1)
_LOG_LEVELS = (logging.DEBUG, logging.WARNING, logging.WARNING, logging.ERROR, logging.CRITICAL, logging.INFO)


def _on_fmu_log(env: int | None, instance: bytes | None, status: int, category: bytes | None,
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


_LOGGER_CALLBACK: Any = None


def _callbacks(env: int) -> Any:
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
        _LOGGER_CALLBACK = fmi2CallbackLoggerTYPE(_on_fmu_log)
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


# ============================================================================ FMU instance
_C_TYPES = {"Real": ctypes.c_double, "Integer": ctypes.c_int, "Enumeration": ctypes.c_int,
            "Boolean": ctypes.c_int, "String": ctypes.c_char_p}
_SETTERS = {"Real": "fmi2SetReal", "Integer": "fmi2SetInteger", "Enumeration": "fmi2SetInteger",
            "Boolean": "fmi2SetBoolean", "String": "fmi2SetString"}
_GETTERS = {"Real": "fmi2GetReal", "Integer": "fmi2GetInteger", "Enumeration": "fmi2GetInteger",
            "Boolean": "fmi2GetBoolean", "String": "fmi2GetString"}


_P = ctypes.POINTER
_VR = _P(ctypes.c_uint)
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
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
    "fmi2DoStep": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]),
    "fmi2GetRealStatus": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, _P(ctypes.c_double)]),
}
"""The FMI 2.0 functions cosimrun calls, with their C signatures."""

_OPTIONAL = ("fmi2GetFMUstate", "fmi2SetFMUstate", "fmi2FreeFMUstate", "fmi2GetRealStatus")


def _raw_functions(dll: Any) -> dict[str, Any]:
    """Fresh ctypes function pointers of the FMU library (independent of FMPy's own wrappers)."""
    table = {}
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = dll[name]
        except AttributeError:
            if name in _OPTIONAL:
                continue
            raise FMUError(f"the FMU's shared library does not export {name}") from None
        fn.restype, fn.argtypes = restype, argtypes
        table[name] = fn
    return table


class _Instance:
    """One instantiated FMU (``fmi2Component``) with its raw FMI functions.

    Snapshots keep a reference to the instance they belong to; once the
    instance is freed (``alive`` false) they no longer call into the library.
    """

    def __init__(self, functions: dict[str, Any], handle: int) -> None:
        self.c = ctypes.c_void_p(handle)
        self.f = functions
        self.alive = True

    def free_state(self, state: ctypes.c_void_p) -> None:
        if self.alive and state and "fmi2FreeFMUstate" in self.f:
            self.f["fmi2FreeFMUstate"](self.c, ctypes.byref(state))


class _Snapshot:
    """Opaque rollback point: the FMU state plus time and port values; frees the FMU state when dropped."""

    __slots__ = ("instance", "state", "t", "ports")

    def __init__(self, instance: _Instance, state: ctypes.c_void_p, t: float, ports: tuple[Any, ...]) -> None:
        self.instance = instance
        self.state = state
        self.t = t
        self.ports = ports

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # never raise from a finalizer (e.g. at interpreter exit)
            self.instance.free_state(self.state)


def _group(ports: list[tuple[PortState, FMUVariable]], type_names: tuple[str, ...]) -> Any:
    """``(value references, buffer, ports)`` for the ports of the given FMI types, or ``None``."""
    chosen = [(p, v) for p, v in ports if v.type in type_names]
    if not chosen:
        return None
    n = len(chosen)
    vr = (ctypes.c_uint * n)(*(v.vr for _, v in chosen))
    buf = (_C_TYPES[type_names[0]] * n)()
    return vr, buf, [p for p, _ in chosen], n


# ============================================================================ the component
_OWN_DEFAULTS: dict[str, Any] = {
    "path": None,
    "aliases": {},
    "start": {},
    "events": {},
    "states": None,
    "tolerance": None,
    "logging": False,
}
"""The component's own parameters (everything else comes from the FMU)."""

_STRUCTURAL = ("aliases", "events", "states")


class FMUComponent(CoSimComponent):
    """An FMI 2.0 co-simulation FMU (``path`` names the .fmu; its parameters become component parameters).

    Own parameters: ``path`` (the FMU file; ``example:NAME`` builds a shipped
    example), ``aliases`` (FMU variable -> port name), ``start`` (start values of
    variables by name), ``events`` (event name -> ``{port, direction, level,
    abs}``: indicator ``(|y| if abs else y) - level`` on an output), ``states``
    (variables that form the physical state; default: those with a
    ``derivative``), ``tolerance`` (passed to ``fmi2SetupExperiment``) and
    ``logging`` (FMU debug logging). See the module docstring.
    """

    FIRST_PARAMETERS: ClassVar[tuple[str, ...]] = ("path",)
    """Parameters a config builder should apply before the others (they define the rest)."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in _OWN_DEFAULTS.items()})
        self.model: FMUModel | None = None
        self._pending: dict[str, Any] = {}
        self._fmu_values: dict[str, Any] = {}
        """FMU parameters set by the user: variable name -> value in the FMU's unit."""
        self._port_vars: dict[str, FMUVariable] = {}
        self._var_ports: dict[str, str] = {}
        self._state_vars: list[tuple[str, FMUVariable]] = []
        self._start_values: dict[str, Any] = {}
        """Values of the 'start' setting: variable name -> value in the FMU's unit."""
        self._slave: Any = None
        self._functions: dict[str, Any] = {}
        self._extraction: _Extraction | None = None
        self._instance: _Instance | None = None
        self._messages: deque[str] = deque(maxlen=20)
        self._env = next(_ENVIRONMENTS)
        _SINKS[self._env] = self._messages
        self._cb: Any = None
        self._push_all: Callable[[], None] = _nothing
        self._pull_all: Callable[[], None] = _nothing
        self._push_on_read = False
        self._fast_step: Callable[[float, float], None] = self._not_running

    # ------------------------------------------------------------------ descriptions
    @property
    def fmu_label(self) -> str:
        """The FMU file name (or ``no FMU`` before ``path`` is set)."""
        return self.model.label if self.model is not None else "no FMU"

    def _where(self) -> str:
        return f"FMU component {self.name!r} ({self.fmu_label})"

    def _log_tail(self) -> str:
        if not self._messages:
            return ""
        return "; FMU log: " + " | ".join(list(self._messages)[-5:])

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name; ``path`` is applied first, so it may come in any position.

        Names other than the component's own are FMU parameters; before ``path``
        is known they are kept and checked when it is set.
        """
        if "path" in parameters:
            self._set_path(parameters.pop("path"))
        if self.model is not None:
            for name in parameters:
                if name not in self.parameters:
                    raise KeyError(self._unknown(name))
        for name, value in parameters.items():
            self._set_one(name, value)

    def _unknown(self, name: str, note: str = "") -> str:
        return unknown_name("parameter", name, self.parameters, f"of {self._where()}{note}")

    def _set_one(self, name: str, value: Any) -> None:
        if name in _OWN_DEFAULTS:
            self._check_structural_change(name)
            self.parameters[name] = self._validate_own(name, value)
            if self.model is not None and name in _STRUCTURAL:
                self._rebuild()
            elif name == "start" and self.model is not None:
                self._apply_start(self.parameters["start"])
            return
        if self.model is None:
            self._pending[name] = value
            return
        var = self.model.variables.get(name)
        if var is None or name not in self.parameters:
            raise KeyError(self._unknown(name))
        converted = self._convert(var, value, f"parameter {name!r}")
        if self._is_initialized and self._instance is not None:
            if var.variability != "tunable":
                raise ValueError(
                    f"{self._where()}: parameter {name!r} is {var.variability}; it can only change before "
                    "initialize (or after reset); tunable parameters can change during a run"
                )
            self._set_values([(var, converted)])
        self.parameters[name] = converted
        self._fmu_values[name] = converted

    def _check_structural_change(self, name: str) -> None:
        if self._is_initialized and name in ("path", *_STRUCTURAL, "start", "tolerance"):
            raise ValueError(f"{self._where()}: parameter {name!r} can only change before initialize (or after reset)")

    def _validate_own(self, name: str, value: Any) -> Any:
        where = self._where()
        if name in ("aliases", "start", "events"):
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}: parameter {name!r} must be a mapping, got {value!r}")
            return {str(k): v for k, v in value.items()}
        if name == "states":
            if value is None:
                return None
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"{where}: parameter 'states' must be a list of variable names, got {value!r}")
            return [str(v) for v in value]
        if name == "tolerance":
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{where}: parameter 'tolerance' must be a number > 0 (or null), got {value!r}")
            return float(value)
        if name == "logging":
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{where}: parameter 'logging' must be true or false, got {value!r}")
            return bool(value)
        return value

    def _set_path(self, value: Any) -> None:
        self._check_structural_change("path")
        if value is None:
            self._unload()
            self.model = None
            self.parameters["path"] = None
            return
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"{self._where()}: parameter 'path' must name an FMU file, got {value!r}")
        text = os.fspath(value)
        try:
            file = resolve_example(text[len("example:"):]) if text.startswith("example:") else Path(text)
            model = read_fmu(file)
        except (ValueError, FMUError) as exc:
            raise ValueError(f"component {self.name!r}: parameter 'path': {exc}") from None
        if self.model is not None and model is not self.model:
            self._unload()
        own = {k: self.parameters[k] for k in _OWN_DEFAULTS}
        previous = {k: v for k, v in self.parameters.items() if k not in _OWN_DEFAULTS}
        self.model = model
        self.parameters = {**own, "path": text}
        for var in model.parameters:
            if var.name in _OWN_DEFAULTS:
                _log.warning("%s: FMU parameter %r is shadowed by the component setting of that name; set it "
                             "through 'start: {%s: ...}'", self._where(), var.name, var.name)
                continue
            self.parameters[var.name] = var.start
        self._fmu_values = {k: v for k, v in self._fmu_values.items() if k in model.variables}
        for name, value in previous.items():
            if name in self.parameters and name in self._fmu_values:
                self.parameters[name] = value
        self._rebuild()
        self._apply_start(self.parameters["start"])
        pending, self._pending = self._pending, {}
        for name, value in pending.items():
            if name not in self.parameters:
                raise KeyError(self._unknown(name, " (set before 'path')"))
            self._set_one(name, value)

    def _apply_start(self, start: Mapping[str, Any]) -> None:
        assert self.model is not None
        variables = self.model.variables
        values = {}
        for key, value in start.items():
            var = variables.get(key)
            if var is None and key in self._port_vars:
                var = self._port_vars[key]
            if var is None:
                raise KeyError(unknown_name("variable", key, variables, f"in 'start' of {self._where()}"))
            if not var.settable_start:
                raise ValueError(
                    f"{self._where()}: the start value of {var.name!r} cannot be set "
                    f"(causality {var.causality}, variability {var.variability}, initial {var.initial})"
                )
            values[var.name] = self._convert(var, value, f"start value of {var.name!r}")
        self._start_values = values

    # ------------------------------------------------------------------ value conversion
    def _convert(self, var: FMUVariable, value: Any, what: str) -> Any:
        """*value* checked for *var*'s type and range; quantities are converted to its unit."""
        where = f"{self._where()}: {what}"
        if isinstance(value, np.generic):
            value = value.item()
        if var.type == "Real":
            try:
                if isinstance(value, str):
                    value = Q_(value)
                if isinstance(value, pint.Quantity):
                    magnitude = float(value.magnitude)
                    value = magnitude if value.unitless else compile_conversion(f"{value.units}", var.unit)(magnitude)
            except (pint.PintError, ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"{where} [{var.unit or 'no unit'}]: {exc}") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where} must be a finite number (or a quantity like '2 m'), got {value!r}")
            value = float(value)
        elif var.type in ("Integer", "Enumeration"):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{where} must be an integer, got {value!r}")
        elif var.type == "Boolean":
            if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
                value = bool(value)
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be true or false, got {value!r}")
        elif not isinstance(value, str):
            raise ValueError(f"{where} must be a string, got {value!r}")
        if var.minimum is not None and value < var.minimum:
            raise ValueError(f"{where} must be >= {var.minimum:g} (the FMU's min), got {value!r}")
        if var.maximum is not None and value > var.maximum:
            raise ValueError(f"{where} must be <= {var.maximum:g} (the FMU's max), got {value!r}")
        return value

    # ------------------------------------------------------------------ ports from the model description
    def _rebuild(self) -> None:
        """Declare ports, feedthrough, states and event indicators from the model and the settings."""
        model = self.model
        assert model is not None
        where = self._where()
        aliases: dict[str, str] = {}
        port_vars = {v.name: v for v in (*model.inputs, *model.outputs)}
        for var_name, port in self.parameters["aliases"].items():
            if var_name not in port_vars:
                raise KeyError(unknown_name("input or output", var_name, port_vars, f"in 'aliases' of {where}"))
            aliases[var_name] = str(port)
        in_specs: dict[str, PortSpec] = {}
        out_specs: dict[str, PortSpec] = {}
        by_port: dict[str, FMUVariable] = {}
        for var in (*model.inputs, *model.outputs):
            port = aliases.get(var.name, var.name)
            if port in by_port:
                raise ValueError(f"{where}: variables {by_port[port].name!r} and {var.name!r} would both be port "
                                 f"{port!r}; give one of them another name in 'aliases'")
            if not port or "/" in port:
                raise ValueError(f"{where}: FMU variable {var.name!r} cannot be a port name (no '/' allowed); "
                                 f"rename it with aliases: {{{var.name!r}: new_name}}")
            if var.unit_problem is not None:
                _log.warning("%s: %s; port %r has no unit (give it one with the component's 'units' setting)",
                             where, var.unit_problem, port)
            direction = "in" if var.causality == "input" else "out"
            spec = PortSpec(port, var.port_type, direction, var.unit, var.description)
            (in_specs if direction == "in" else out_specs)[port] = spec
            by_port[port] = var
        self.input_specs, self.output_specs = in_specs, out_specs
        self.inputs, self.outputs = {}, {}
        self._port_vars = by_port
        self._var_ports = {v.name: p for p, v in by_port.items()}
        ports = self._var_ports
        self.direct_feedthrough = {
            ports[out.name]: {ports[i] for i in model.feedthrough.get(out.name, ())} for out in model.outputs
        }
        self._detected_feedthrough = None
        if self.parameters["states"] is not None:
            states = []
            for key in self.parameters["states"]:
                var = model.variables.get(key) or by_port.get(key)
                if var is None:
                    raise KeyError(unknown_name("variable", key, model.variables, f"in 'states' of {where}"))
                if var.type != "Real":
                    raise ValueError(f"{where}: state {key!r} must be a Real variable, not {var.type}")
                states.append(var)
        else:
            states = model.states
        self._state_vars = [(ports.get(v.name, v.name), v) for v in states]
        self.event_indicators.clear()
        for name, spec in self.parameters["events"].items():
            self._add_event(str(name), spec)

    def _add_event(self, name: str, spec: Any) -> None:
        where = f"{self._where()}: event {name!r}"
        if isinstance(spec, str):
            spec = {"port": spec}
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: write {{port: NAME, direction: -1|0|1, level: 0.0, abs: false}}, got {spec!r}")
        extra = set(spec) - {"port", "direction", "level", "abs"}
        if extra or "port" not in spec:
            raise ValueError(f"{where}: keys are port (required), direction, level and abs; got {sorted(spec)}")
        port = str(spec["port"])
        out = self.output_specs.get(port)
        if out is None:
            raise KeyError(unknown_name("output", port, self.output_specs, f"for {where}"))
        if out.type is PortType.STRING:
            raise ValueError(f"{where}: output {port!r} is a string; an event indicator needs a number")
        direction = spec.get("direction", 0)
        if direction not in (-1, 0, 1) or isinstance(direction, bool):
            raise ValueError(f"{where}: direction must be -1 (falling), 0 (both) or 1 (rising), got {direction!r}")
        level = spec.get("level", 0.0)
        if isinstance(level, bool) or not isinstance(level, (int, float)):
            raise ValueError(f"{where}: level must be a number, got {level!r}")
        use_abs = spec.get("abs", False)
        if not isinstance(use_abs, bool):
            raise ValueError(f"{where}: abs must be true or false, got {use_abs!r}")
        if not self.supports_rollback:
            raise ValueError(self._no_event_source(name))
        level = float(level)

        def indicator(comp: CoSimComponent, port: str = port) -> float:
            value = float(comp.outputs[port].value)
            return (abs(value) if use_abs else value) - level

        super().add_event_indicator(name, indicator, int(direction))

    def _no_event_source(self, event: str) -> str:
        return (
            f"{self._where()} cannot be an event source (event {event!r}): its modelDescription.xml declares "
            "canGetAndSetFMUstate=\"false\", so cosimrun cannot roll it back to locate an event instant. "
            "It still runs as a passive component under the hybrid master; to use it as an event source, "
            "export the FMU with FMU-state support (for pythonfmu: --handle-state)"
        )

    def add_event_indicator(self, name: str, func: Callable[[CoSimComponent], float], direction: int = 0) -> None:
        """Register an indicator; refused with an explanation when the FMU cannot roll back."""
        if not self.supports_rollback:
            raise RuntimeError(self._no_event_source(name))
        super().add_event_indicator(name, func, direction)

    # ------------------------------------------------------------------ rollback support
    @property
    def supports_rollback(self) -> bool:
        """True when the FMU declares ``canGetAndSetFMUstate``."""
        return self.model is not None and self.model.can_rollback

    @property
    def state_names(self) -> tuple[str, ...]:
        """Names of the physical state (``get_state`` keys)."""
        return tuple(name for name, _ in self._state_vars)

    # ------------------------------------------------------------------ FMU lifecycle
    def _initialize_ports_from_specs(self) -> None:
        for name, spec in self.input_specs.items():
            if name not in self.inputs:
                var = self._port_vars[name]
                self.inputs[name] = PortState(spec, self._start_values.get(var.name, var.start))
        super()._initialize_ports_from_specs()

    def _load(self) -> None:
        """Extract the FMU (shared) and load its library once for this component."""
        if self._slave is not None:
            return
        from fmpy.fmi2 import FMU2Slave

        model = self.model
        assert model is not None
        self._extraction = _acquire_extraction(model.path, private=model.only_once_per_process)
        try:
            self._slave = FMU2Slave(guid=model.guid, unzipDirectory=str(self._extraction.directory),
                                    modelIdentifier=model.identifier, instanceName=self.name)
            self._functions = _raw_functions(self._slave.dll)
        except Exception as exc:
            _release_extraction(self._extraction)
            self._extraction = None
            raise FMUError(f"{self._where()}: cannot load the FMU's shared library: {exc}") from exc

    def _unload(self) -> None:
        """Free the instance, unload the library and release the extraction."""
        self._free_instance()
        if self._slave is not None:
            with contextlib.suppress(Exception):
                self._slave.freeLibrary()
            self._slave = None
            self._functions = {}
        if self._extraction is not None:
            _release_extraction(self._extraction)
            self._extraction = None

    def _free_instance(self) -> None:
        inst, self._instance = self._instance, None
        self._push_all = self._pull_all = _nothing
        self._fast_step = self._not_running
        if inst is None:
            return
        inst.alive = False
        with contextlib.suppress(Exception):
            inst.f["fmi2Terminate"](inst.c)
        with contextlib.suppress(Exception):
            inst.f["fmi2FreeInstance"](inst.c)

    def _call(self, name: str, *args: Any) -> None:
        inst = self._instance
        assert inst is not None
        status = inst.f[name](inst.c, *args)
        if status > 1:
            raise FMUError(f"{self._where()}: {name} returned {_status_name(status)} at t={self.t:.12g}"
                           f"{self._log_tail()}")

    def _start_instance(self, t0: float, states: Mapping[str, float] | None = None) -> None:
        """Instantiate at *t0*, set parameters, start values and inputs, and leave initialization mode."""
        model = self.model
        assert model is not None
        self._load()
        self._free_instance()
        if self._cb is None:
            self._cb = _callbacks(self._env)
        functions = self._functions
        resources = (self._extraction.directory / "resources").as_uri()  # type: ignore[union-attr]
        handle = functions["fmi2Instantiate"](
            self.name.encode(), _FMI2_COSIMULATION, model.guid.encode(), resources.encode(),
            ctypes.addressof(self._cb), 0, 1 if self.parameters["logging"] else 0,
        )
        if not handle:
            raise FMUError(f"{self._where()}: fmi2Instantiate failed{self._log_tail()}")
        self._instance = _Instance(functions, handle)
        tol = self.parameters["tolerance"]
        self._call("fmi2SetupExperiment", 1 if tol is not None else 0, tol or 0.0, float(t0), 0, 0.0)
        values: dict[str, tuple[FMUVariable, Any]] = {}
        for name, value in self._start_values.items():
            values[name] = (model.variables[name], value)
        for name, value in self._fmu_values.items():
            values[name] = (model.variables[name], value)
        for name, value in (states or {}).items():
            values[name] = (model.variables[name], value)
        self._set_values(list(values.values()))
        self._call("fmi2EnterInitializationMode")
        self._bind()
        self._push_all()
        self._call("fmi2ExitInitializationMode")

    def _set_values(self, items: list[tuple[FMUVariable, Any]]) -> None:
        """Set variables through ``fmi2Set*``, grouped by type."""
        inst = self._instance
        assert inst is not None
        for type_name in ("Real", "Integer", "Boolean", "String"):
            chosen = [(v, x) for v, x in items if v.type == type_name or (type_name == "Integer"
                                                                            and v.type == "Enumeration")]
            if not chosen:
                continue
            n = len(chosen)
            vr = (ctypes.c_uint * n)(*(v.vr for v, _ in chosen))
            raw = [x.encode() if type_name == "String" else x for _, x in chosen]
            buf = (_C_TYPES[type_name] * n)(*raw)
            status = inst.f[_SETTERS[type_name]](inst.c, vr, n, buf)
            if status > 1:
                names = ", ".join(v.name for v, _ in chosen)
                raise FMUError(f"{self._where()}: {_SETTERS[type_name]} of {names} returned "
                               f"{_status_name(status)}{self._log_tail()}")

    def _get_values(self, variables: Sequence[FMUVariable]) -> list[Any]:
        inst = self._instance
        assert inst is not None
        out = []
        for var in variables:
            vr = (ctypes.c_uint * 1)(var.vr)
            buf = (_C_TYPES[var.type] * 1)()
            status = inst.f[_GETTERS[var.type]](inst.c, vr, 1, buf)
            if status > 1:
                raise FMUError(f"{self._where()}: {_GETTERS[var.type]} of {var.name} returned "
                               f"{_status_name(status)}{self._log_tail()}")
            out.append(_from_c(var.type, buf[0]))
        return out

    def _bind(self) -> None:
        """Compile the per-step input push and output pull.

        They call the FMU through function pointers without ctypes argument
        conversion (``argtypes``) on pre-built arguments of the exact C types:
        the value references, the sizes and the value buffers are allocated once
        here, so a step costs three foreign calls and no allocation besides the
        two ``c_double`` times.
        """
        inst = self._instance
        assert inst is not None
        fast = _fast_functions(self._slave.dll)
        c = inst.c
        ins = [(self.inputs[p], v) for p, v in self._port_vars.items() if p in self.input_specs]
        outs = [(self.outputs[p], v) for p, v in self._port_vars.items() if p in self.output_specs]
        pushers: list[Callable[[], None]] = []
        pullers: list[Callable[[], None]] = []
        for kinds in (("Real",), ("Integer", "Enumeration"), ("Boolean",), ("String",)):
            group = _group(ins, kinds)
            if group is not None:
                pushers.append(_make_pusher(fast[_SETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
            group = _group(outs, kinds)
            if group is not None:
                pullers.append(_make_puller(fast[_GETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
        self._push_all = push_all = _chain(pushers)
        self._pull_all = pull_all = _chain(pullers)
        self._push_on_read = any(self.direct_feedthrough.values())
        do_step = fast["fmi2DoStep"]
        no_prior = ctypes.c_int(0 if self.model is not None and self.model.can_rollback else 1)
        t_c, dt_c = ctypes.c_double(), ctypes.c_double()
        step_failed = self._step_failed
        real_in, real_out = _group(ins, ("Real",)), _group(outs, ("Real",))
        only_real = len(pushers) == (real_in is not None) and len(pullers) == (real_out is not None)
        if only_real and real_in is not None and real_out is not None and real_in[3] == 1:
            # The common case (real ports, one input) with the FMI calls inline: no nested calls.
            vr_in, buf_in, (port_in,), _ = real_in
            vr_out, buf_out, ports_out, n_out = real_out
            set_real, get_real = fast["fmi2SetReal"], fast["fmi2GetReal"]
            one, size_out = ctypes.c_size_t(1), ctypes.c_size_t(n_out)
            failed = self._call_failed

            def step(t: float, dt: float) -> None:
                buf_in[0] = port_in.value
                status = set_real(c, vr_in, one, buf_in)
                if status > 1:
                    raise failed("fmi2SetReal", status)
                t_c.value = t
                dt_c.value = dt
                status = do_step(c, t_c, dt_c, no_prior)
                if status > 1:
                    step_failed(status, t, dt)
                status = get_real(c, vr_out, size_out, buf_out)
                if status > 1:
                    raise failed("fmi2GetReal", status)
                for port, value in zip(ports_out, buf_out[:], strict=True):
                    port.value = value
        else:
            def step(t: float, dt: float) -> None:
                push_all()
                t_c.value = t
                dt_c.value = dt
                status = do_step(c, t_c, dt_c, no_prior)
                if status > 1:
                    step_failed(status, t, dt)
                pull_all()

        self._fast_step = step

    def _not_running(self, *args: Any) -> None:
        raise RuntimeError(f"{self._where()}: the FMU is not instantiated; call initialize(t0) first "
                           "(after reset or free, too)")

    def _call_failed(self, fname: str, status: int) -> FMUError:
        return FMUError(f"{self._where()}: {fname} returned {_status_name(status)} at t={self.t:.12g}"
                        f"{self._log_tail()}")

    def _initialize_component(self, t0: float) -> None:
        if self.model is None:
            raise ValueError(f"component {self.name!r} (type fmu): parameter 'path' is not set; "
                             "name an FMU file (params: {path: model.fmu})")
        self._start_instance(t0)

    # ------------------------------------------------------------------ stepping
    def do_step(self, t: float, dt: float) -> None:
        """Advance from *t* to *t + dt*: set the inputs, ``fmi2DoStep``, read the outputs, record them.

        The contract of :meth:`CoSimComponent.do_step`, written out so that a
        step is one compiled call around the three FMI calls (see :meth:`_bind`).
        """
        if not dt > 0.0:
            raise ValueError(f"component {self.name!r}: step size must be positive, got dt={dt!r} at t={t!r}")
        self._fast_step(t, dt)
        t = t + dt
        self.t = t
        if self._event_ports:
            for port in self._event_ports:
                port.value = False
        if self.record_history:
            for port, append_t, append_v in self._step_recorders:
                append_t(t)
                append_v(port.value)

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._fast_step(t, dt)  # also reads the outputs: _update_output_states after it finds them fresh

    def _step_failed(self, status: int, t: float, dt: float) -> None:
        detail = ""
        if status == 2:
            try:
                last = ctypes.c_double()
                inst = self._instance
                assert inst is not None
                if inst.f["fmi2GetRealStatus"](inst.c, _FMI2_LAST_SUCCESSFUL_TIME, ctypes.byref(last)) <= 1:
                    detail = f" (last successful time {last.value:.12g})"
            except Exception:
                pass
        raise FMUError(f"{self._where()}: fmi2DoStep from t={t:.12g} with step {dt:.6g} returned "
                       f"{_status_name(status)}{detail}{self._log_tail()}")

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        # Inputs are set again first when an output depends on them directly: between two steps the
        # master may have changed them (loop iteration), and FMI 2.0 lets outputs be read after that.
        if self._push_on_read:
            self._push_all()
        self._pull_all()

    # ------------------------------------------------------------------ rollback
    def snapshot_state(self) -> Any:
        """Capture the FMU state (``fmi2GetFMUstate``), the time and the port values."""
        if not self.supports_rollback:
            raise NotImplementedError(
                f"{self._where()} does not support rollback (canGetAndSetFMUstate is false)")
        inst = self._instance
        if inst is None:
            raise RuntimeError(f"{self._where()}: call initialize(t0) before snapshot_state")
        state = ctypes.c_void_p()
        status = inst.f["fmi2GetFMUstate"](inst.c, ctypes.byref(state))
        if status > 1:
            raise FMUError(f"{self._where()}: fmi2GetFMUstate returned {_status_name(status)} at "
                           f"t={self.t:.12g}{self._log_tail()}")
        ports = tuple((p, p.value) for p in (*self.inputs.values(), *self.outputs.values()))
        return _Snapshot(inst, state, self.t, ports)

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return exactly to *snapshot* (``fmi2SetFMUstate``); ports get their values of that time."""
        if not isinstance(snapshot, _Snapshot):
            raise TypeError(f"{self._where()}: not a snapshot of an FMU component: {snapshot!r}")
        inst = self._instance
        if snapshot.instance is not inst:
            raise ValueError(f"{self._where()}: the snapshot belongs to another FMU instance (taken before a "
                             "reset, set_state or free, or by another component); it cannot be restored")
        status = inst.f["fmi2SetFMUstate"](inst.c, snapshot.state)
        if status > 1:
            raise FMUError(f"{self._where()}: fmi2SetFMUstate returned {_status_name(status)} at "
                           f"t={t:.12g}{self._log_tail()}")
        for port, value in snapshot.ports:
            port.value = value
        self.t = snapshot.t

    # ------------------------------------------------------------------ physical state
    def get_state(self) -> dict[str, Any]:
        """``{state: {'value', 'unit'}}`` of the state variables (read from the FMU once initialized)."""
        names = [name for name, _ in self._state_vars]
        variables = [v for _, v in self._state_vars]
        if self._instance is not None:
            values = self._get_values(variables)
        else:
            values = [self._start_values.get(v.name, v.start) for v in variables]
        return {n: {"value": None if x is None else float(x), "unit": v.unit}
                for n, v, x in zip(names, variables, values, strict=True)}

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set every state variable (``{name: {'value', 'unit'}}``, numbers or quantities) at time *t*.

        Once initialized this re-instantiates the FMU at *t* with the states as
        start values (FMI 2.0 lets a co-simulation master set them only before
        initialization); snapshots taken before cannot be restored afterwards.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"{self._where()}: set_state expects a mapping, got {type(state).__name__}")
        known = dict(self._state_vars)
        for key in state:
            if key not in known:
                raise KeyError(unknown_name("state", key, known, f"of {self._where()}"))
        missing = [n for n in known if n not in state]
        if missing:
            raise KeyError(f"{self._where()}: set_state is missing state(s) {', '.join(missing)} "
                           f"(expected: {', '.join(known)})")
        values: dict[str, float] = {}
        for name, var in self._state_vars:
            entry = state[name]
            if isinstance(entry, Mapping):
                if "value" not in entry:
                    raise ValueError(f"{self._where()}: state {name!r} entry has no 'value'")
                value, unit = entry["value"], entry.get("unit")
                if unit is not None and not isinstance(value, (str, pint.Quantity)):
                    value = Q_(float(value), unit)
                entry = value
            values[var.name] = self._convert(var, entry, f"state {name!r}")
        if not self._is_initialized:  # they become start values, like the 'start' setting
            self._start_values.update(values)
            return
        self._start_instance(t, values)
        self.t = float(t)
        self._update_output_states(self.t, NO_EVENTS)

    # ------------------------------------------------------------------ lifecycle end
    def reset(self) -> None:
        """Forget time and history; the FMU instance is freed and re-created by the next initialize."""
        super().reset()
        self._free_instance()
        for name, port in self.inputs.items():
            var = self._port_vars.get(name)
            if var is not None and var.start is not None:
                port.value = self._start_values.get(var.name, var.start)

    def free(self) -> None:
        """Terminate and free the FMU instance, unload its library and release the extracted files.

        Histories stay readable; the component can be initialized again later.
        """
        self._unload()
        self._is_initialized = False

    def __del__(self) -> None:
        try:
            if self._extraction is not None:
                self._unload()
        except Exception:  # never raise from a finalizer
            pass


def _from_c(type_name: str, value: Any) -> Any:
    if type_name == "Boolean":
        return bool(value)
    if type_name == "String":
        return (value or b"").decode("utf-8", "replace")
    return value


_c_double = ctypes.c_double


def _nothing() -> None:
    pass


def _chain(functions: list[Callable[[], None]]) -> Callable[[], None]:
    """One function calling *functions* in order (the function itself when there is one)."""
    if not functions:
        return _nothing
    if len(functions) == 1:
        return functions[0]

    def chained() -> None:
        for fn in functions:
            fn()

    return chained


def _fast_functions(dll: Any) -> dict[str, Any]:
    """Function pointers of the step path without argument conversion (callers pass exact C types)."""
    table = {}
    for name in ("fmi2DoStep", *_SETTERS.values(), *_GETTERS.values()):
        fn = dll[name]
        fn.restype = ctypes.c_int
        table[name] = fn
    return table


def _make_pusher(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that copies the port values into *buf* and sets them in one FMI call."""
    size = ctypes.c_size_t(n)
    fname = _SETTERS[type_name]
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


def _make_puller(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that reads the outputs in one FMI call and stores them in the ports."""
    size = ctypes.c_size_t(n)
    fname = _GETTERS[type_name]
    if type_name in ("Boolean", "String"):
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = _from_c(type_name, value)
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


# ============================================================================ building C FMUs
FRAMEWORK_HEADER = "cosimrun_fmi2cs.h"
"""File name of :data:`FMI2_CS_FRAMEWORK` when a model is compiled."""


def fmi_headers() -> Path:
    """The FMI header directory that FMPy ships."""
    import fmpy

    return Path(fmpy.__file__).parent / "c-code"


def find_c_compiler(cc: str | None = None) -> str:
    """*cc*, ``$CC``, ``gcc`` or ``cc``; ``FMUError`` when none is installed."""
    for candidate in (cc, os.environ.get("CC"), "gcc", "cc", "clang"):
        if candidate and shutil.which(candidate):
            return candidate
    raise FMUError("building an FMU from C needs a C compiler (gcc, cc or clang on PATH, or $CC)")


def build_c_fmu(
    out: str | os.PathLike[str],
    *,
    model_identifier: str,
    model_description: str,
    source: str,
    defines: Mapping[str, Any] | None = None,
    cc: str | None = None,
) -> Path:
    """Compile *source* (a model on :data:`FMI2_CS_FRAMEWORK`) into a co-simulation FMU at *out*.

    The FMU holds *model_description* as ``modelDescription.xml`` and the shared
    library for this platform; it is written atomically (a concurrent build of
    the same file is harmless). Returns the path of the FMU.
    """
    import fmpy

    out = Path(out)
    compiler = find_c_compiler(cc)
    with tempfile.TemporaryDirectory(prefix="cosimrun-fmu-build-") as tmp:
        work = Path(tmp)
        (work / FRAMEWORK_HEADER).write_text(FMI2_CS_FRAMEWORK)
        src = work / f"{model_identifier}.c"
        src.write_text(source)
        lib_rel = f"binaries/{fmpy.platform}/{model_identifier}{fmpy.sharedLibraryExtension}"
        lib = work / lib_rel
        lib.parent.mkdir(parents=True)
        flags = [f"-D{k}={v}" for k, v in (defines or {}).items()]
        cmd = [compiler, "-shared", "-fPIC", "-O2", "-ffp-contract=off", f"-I{fmi_headers()}", f"-I{work}",
               *flags, "-o", str(lib), str(src), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise FMUError(f"compiling FMU {model_identifier!r} failed ({' '.join(cmd)}):\n{proc.stderr}")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("modelDescription.xml", model_description)
            zf.write(lib, lib_rel)
        os.replace(partial, out)
    return out


@dataclass(frozen=True)
class Example:
    """A small FMU shipped as C source."""

    identifier: str
    description: str
    model_description: str
    source: str
    defines: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """Hash of everything the built file depends on."""
        import fmpy

        h = hashlib.sha256()
        for part in (FMI2_CS_FRAMEWORK, self.model_description, self.source, repr(sorted(self.defines.items())),
                     fmpy.platform, fmpy.__version__):
            h.update(part.encode())
        return h.hexdigest()[:16]


def build_example(name: str, directory: str | os.PathLike[str], cc: str | None = None) -> Path:
    """Build example FMU *name* (see :data:`EXAMPLES`) as ``<directory>/<name>.fmu``."""
    example = EXAMPLES.get(name)
    if example is None:
        raise ValueError(unknown_name("example FMU", name, EXAMPLES))
    return build_c_fmu(Path(directory) / f"{name}.fmu", model_identifier=example.identifier,
                       model_description=example.model_description, source=example.source,
                       defines=example.defines, cc=cc)


def cache_directory() -> Path:
    """Where ``example:NAME`` FMUs are built: ``$COSIMRUN_CACHE_DIR``, else the user cache dir."""
    env = os.environ.get("COSIMRUN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cosimrun"


def resolve_example(name: str) -> Path:
    """The cached build of example FMU *name* (built with the C compiler on first use)."""
    example = EXAMPLES.get(name)
    if example is None:
        raise ValueError(unknown_name("example FMU", name, EXAMPLES))
    target = cache_directory() / "fmus" / f"{name}-{example.digest()}.fmu"
    if not target.is_file():
        build_c_fmu(target, model_identifier=example.identifier, model_description=example.model_description,
                    source=example.source, defines=example.defines)
    return target


# ============================================================================ command line
def describe(path: str | os.PathLike[str]) -> str:
    """A text summary of the component an FMU file makes."""
    comp = FMUComponent("fmu")
    comp.set_parameters(path=os.fspath(path))
    model = comp.model
    assert model is not None
    md = model.description
    tool = md.generationTool or "unknown tool"
    lines = [f"{model.label}: {md.modelName} (FMI {md.fmiVersion} co-simulation, {tool})",
             f"  rollback: {'yes' if model.can_rollback else 'no (canGetAndSetFMUstate=false)'}",
             "  ports:"]
    for specs in (comp.input_specs, comp.output_specs):
        for name, spec in specs.items():
            var = comp._port_vars[name]
            unit = f" [{spec.unit_name}]" if spec.unit_name else ""
            raw = f" (FMU unit {var.fmu_unit!r})" if var.fmu_unit and var.fmu_unit != spec.unit_name else ""
            lines.append(f"    {spec.direction:<3} {name}: {spec.type.value}{unit}{raw}")
    lines.append("  parameters:")
    for var in model.parameters:
        unit = f" [{var.unit}]" if var.unit else ""
        lines.append(f"    {var.name} = {var.start!r}{unit} ({var.variability})")
    lines.append("  direct feedthrough:")
    for out, ins in comp.direct_feedthrough.items():
        lines.append(f"    {out} <- {', '.join(sorted(ins)) or 'none'}")
    lines.append(f"  state: {', '.join(comp.state_names) or 'none declared'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cosimrun.components.fmu build-example DIR`` | ``info MODEL.fmu``."""
    parser = argparse.ArgumentParser(prog="python -m cosimrun.components.fmu",
                                     description="Helpers for FMU components.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-example", help="compile a shipped example FMU into DIR")
    build.add_argument("directory")
    build.add_argument("--name", default="pendulum", choices=sorted(EXAMPLES))
    build.add_argument("--cc", default=None, help="C compiler (default: $CC, gcc or cc)")
    info = sub.add_parser("info", help="show the ports, parameters and feedthrough of an FMU")
    info.add_argument("path")
    args = parser.parse_args(argv)
    try:
        if args.command == "build-example":
            print(build_example(args.name, args.directory, args.cc))
        else:
            print(describe(args.path))
    except (ValueError, FMUError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


# ============================================================================ C sources
FMI2_CS_FRAMEWORK = r"""/* cosimrun_fmi2cs.h - a minimal FMI 2.0 co-simulation framework for small models.
 *
 * A model file defines MODEL_GUID and N_REAL, N_INTEGER, N_BOOLEAN (the sizes of
 * its value-reference tables; String variables are not supported), optionally
 * CAN_GET_SET_STATE (default 1), includes this header and implements
 *   static void model_defaults(ModelState *s);                       start values
 *   static void model_update(ModelState *s);                         outputs and derivatives
 *   static fmi2Status model_step(Instance *m, double t, double h);   advance the states by h
 * Every variable lives in s->r, s->i or s->b at its value reference, so an FMU
 * state (rollback) is a plain copy of ModelState.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fmi2Functions.h"

#ifndef N_REAL
#define N_REAL 0
#endif
#ifndef N_INTEGER
#define N_INTEGER 0
#endif
#ifndef N_BOOLEAN
#define N_BOOLEAN 0
#endif
#ifndef CAN_GET_SET_STATE
#define CAN_GET_SET_STATE 1
#endif

typedef struct {
    double time;
    double r[N_REAL + 1];
    int i[N_INTEGER + 1];
    fmi2Boolean b[N_BOOLEAN + 1];
} ModelState;

typedef struct {
    ModelState s;
    fmi2CallbackFunctions cb;
    char name[256];
    int mode; /* 0 instantiated, 1 initialization mode, 2 step mode, 3 terminated */
    int logging;
} Instance;

static void model_defaults(ModelState *s);
static void model_update(ModelState *s);
static fmi2Status model_step(Instance *m, double t, double h);

static void log_message(Instance *m, fmi2Status status, const char *category, const char *fmt, ...) {
    char buffer[1024];
    va_list args;
    if (!m || !m->cb.logger) return;
    if (status == fmi2OK && !m->logging) return;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof buffer, fmt, args);
    va_end(args);
    m->cb.logger(m->cb.componentEnvironment, m->name, status, category, "%s", buffer);
}

#define INSTANCE ((Instance *)c)
#define CHECK_VR(kind, n)                                                                             \
    for (size_t k = 0; k < nvr; k++)                                                                  \
        if ((long)vr[k] >= (long)(n)) {                                                               \
            log_message(INSTANCE, fmi2Error, "logStatusError", kind " value reference %u out of range", \
                        vr[k]);                                                                       \
            return fmi2Error;                                                                         \
        }

FMI2_Export const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
FMI2_Export const char *fmi2GetVersion(void) { return fmi2Version; }

FMI2_Export fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean on, size_t n, const fmi2String cats[]) {
    (void)n; (void)cats;
    INSTANCE->logging = on;
    return fmi2OK;
}

FMI2_Export fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String resources,
                                          const fmi2CallbackFunctions *functions, fmi2Boolean visible,
                                          fmi2Boolean loggingOn) {
    Instance *m;
    (void)resources; (void)visible;
    if (!functions || !functions->logger) return NULL;
    if (type != fmi2CoSimulation || !guid || strcmp(guid, MODEL_GUID) != 0) {
        functions->logger(functions->componentEnvironment, name, fmi2Error, "logStatusError",
                          type != fmi2CoSimulation ? "only co-simulation is supported" : "GUID mismatch");
        return NULL;
    }
    m = (Instance *)calloc(1, sizeof(Instance));
    if (!m) return NULL;
    m->cb = *functions;
    strncpy(m->name, name ? name : "", sizeof m->name - 1);
    m->logging = loggingOn;
    model_defaults(&m->s);
    return m;
}

FMI2_Export void fmi2FreeInstance(fmi2Component c) { free(c); }

FMI2_Export fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDefined, fmi2Real tol, fmi2Real start,
                                           fmi2Boolean stopDefined, fmi2Real stop) {
    (void)tolDefined; (void)tol; (void)stopDefined; (void)stop;
    INSTANCE->s.time = start;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2EnterInitializationMode(fmi2Component c) { INSTANCE->mode = 1; return fmi2OK; }

FMI2_Export fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    model_update(&INSTANCE->s);
    INSTANCE->mode = 2;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2Terminate(fmi2Component c) { INSTANCE->mode = 3; return fmi2OK; }

FMI2_Export fmi2Status fmi2Reset(fmi2Component c) {
    memset(&INSTANCE->s, 0, sizeof(ModelState));
    model_defaults(&INSTANCE->s);
    INSTANCE->mode = 0;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    CHECK_VR("Real", N_REAL)
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.r[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      fmi2Integer value[]) {
    CHECK_VR("Integer", N_INTEGER)
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.i[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      fmi2Boolean value[]) {
    CHECK_VR("Boolean", N_BOOLEAN)
    model_update(&INSTANCE->s);
    for (size_t k = 0; k < nvr; k++) value[k] = INSTANCE->s.b[vr[k]];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                     fmi2String value[]) {
    (void)value;
    CHECK_VR("String", 0)
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                   const fmi2Real value[]) {
    CHECK_VR("Real", N_REAL)
    for (size_t k = 0; k < nvr; k++) INSTANCE->s.r[vr[k]] = value[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      const fmi2Integer value[]) {
    CHECK_VR("Integer", N_INTEGER)
    for (size_t k = 0; k < nvr; k++) INSTANCE->s.i[vr[k]] = value[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                      const fmi2Boolean value[]) {
    CHECK_VR("Boolean", N_BOOLEAN)
    for (size_t k = 0; k < nvr; k++) INSTANCE->s.b[vr[k]] = value[k];
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                     const fmi2String value[]) {
    (void)value;
    CHECK_VR("String", 0)
    return fmi2OK;
}

#if CAN_GET_SET_STATE
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) {
    ModelState *copy = *state ? (ModelState *)*state : (ModelState *)malloc(sizeof(ModelState));
    if (!copy) return fmi2Error;
    memcpy(copy, &INSTANCE->s, sizeof(ModelState));
    *state = copy;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) {
    if (!state) return fmi2Error;
    memcpy(&INSTANCE->s, state, sizeof(ModelState));
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) {
    (void)c;
    if (state && *state) { free(*state); *state = NULL; }
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    (void)c; (void)state;
    *size = sizeof(ModelState);
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    (void)c;
    if (size != sizeof(ModelState)) return fmi2Error;
    memcpy(bytes, state, sizeof(ModelState));
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                               fmi2FMUstate *state) {
    (void)c;
    if (size != sizeof(ModelState)) return fmi2Error;
    if (!*state) *state = malloc(sizeof(ModelState));
    if (!*state) return fmi2Error;
    memcpy(*state, bytes, sizeof(ModelState));
    return fmi2OK;
}
#else
#define NO_STATE(c)                                                                                  \
    log_message((Instance *)(c), fmi2Error, "logStatusError", "this FMU cannot get or set its state"); \
    return fmi2Error;
FMI2_Export fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) { (void)state; NO_STATE(c) }
FMI2_Export fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    (void)state; (void)size; NO_STATE(c)
}
FMI2_Export fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    (void)state; (void)bytes; (void)size; NO_STATE(c)
}
FMI2_Export fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size,
                                               fmi2FMUstate *state) {
    (void)state; (void)bytes; (void)size; NO_STATE(c)
}
#endif

FMI2_Export fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                                    const fmi2ValueReference z[], size_t nz, const fmi2Real dz[],
                                                    fmi2Real du[]) {
    (void)u; (void)nu; (void)z; (void)nz; (void)dz; (void)du;
    log_message(INSTANCE, fmi2Error, "logStatusError", "directional derivatives are not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                                   const fmi2Integer order[], const fmi2Real value[]) {
    (void)vr; (void)nvr; (void)order; (void)value;
    log_message(INSTANCE, fmi2Error, "logStatusError", "input derivatives are not supported");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                                    const fmi2Integer order[], fmi2Real value[]) {
    (void)vr; (void)nvr; (void)order; (void)value;
    log_message(INSTANCE, fmi2Error, "logStatusError", "output derivatives are not provided");
    return fmi2Error;
}

FMI2_Export fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    Instance *m = INSTANCE;
    fmi2Status status;
    (void)noSetPrior;
    if (m->mode != 2) {
        log_message(m, fmi2Error, "logStatusError", "fmi2DoStep called outside step mode");
        return fmi2Error;
    }
    if (fabs(t - m->s.time) > 1e-9 * (1.0 + fabs(t))) {
        log_message(m, fmi2Error, "logStatusError", "fmi2DoStep at t=%.17g but the FMU is at t=%.17g", t,
                    m->s.time);
        return fmi2Error;
    }
    if (!(h > 0.0)) {
        log_message(m, fmi2Error, "logStatusError", "fmi2DoStep with step size %g <= 0", h);
        return fmi2Error;
    }
    status = model_step(m, t, h);
    if (status <= fmi2Warning) m->s.time = t + h;
    model_update(&m->s);
    return status;
}

FMI2_Export fmi2Status fmi2CancelStep(fmi2Component c) { (void)c; return fmi2Error; }

FMI2_Export fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value) {
    (void)c; (void)s; *value = fmi2OK; return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value) {
    if (s != fmi2LastSuccessfulTime) return fmi2Discard;
    *value = INSTANCE->s.time;
    return fmi2OK;
}

FMI2_Export fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}

FMI2_Export fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) {
    (void)c; (void)s; (void)value; return fmi2Discard;
}
"""
"""A minimal FMI 2.0 co-simulation framework in C (written as ``cosimrun_fmi2cs.h`` next to a model)."""

_PENDULUM_C = r"""/* Pendulum driven by a torque, with an optional end stop handled inside the step.
 * m L^2 q'' = -m g L sin(q) - damping q' + torque, integrated with classical RK4
 * (`substeps` sub-steps per communication step, the operation order of cosimrun's
 * OdeComponent). With q_max > 0 an impact |q| = q_max is located inside the
 * sub-step by bisection on the RK4 step length and reverses the velocity:
 * omega -> -restitution * omega.
 */
#define MODEL_GUID "cosimrun-example-pendulum-2"
#define N_REAL 11
#define N_INTEGER 1
enum { TORQUE, Q, OMEGA, MASS, LENGTH, DAMPING, G, Q_MAX, RESTITUTION, DER_Q, DER_OMEGA };
enum { SUBSTEPS };
#include "cosimrun_fmi2cs.h"

static void model_defaults(ModelState *s) {
    s->r[MASS] = 1.0; s->r[LENGTH] = 1.0; s->r[DAMPING] = 0.0; s->r[G] = 9.81;
    s->r[Q_MAX] = 0.0; s->r[RESTITUTION] = 0.5; s->i[SUBSTEPS] = 10;
}

static void rhs(const ModelState *s, const double x[2], double dx[2]) {
    double inertia = s->r[MASS] * (s->r[LENGTH] * s->r[LENGTH]);
    double a = s->r[G] / s->r[LENGTH], b = s->r[DAMPING] / inertia, c = 1.0 / inertia;
    dx[0] = x[1];
    dx[1] = -a * sin(x[0]) - b * x[1] + c * s->r[TORQUE];
}

static void model_update(ModelState *s) {
    double x[2], dx[2];
    x[0] = s->r[Q]; x[1] = s->r[OMEGA];
    rhs(s, x, dx);
    s->r[DER_Q] = dx[0];
    s->r[DER_OMEGA] = dx[1];
}

static void rk4(const ModelState *s, const double x[2], double h, double y[2]) {
    double k1[2], k2[2], k3[2], k4[2], t[2], h2 = 0.5 * h, h6 = h / 6.0;
    int j;
    rhs(s, x, k1);
    for (j = 0; j < 2; j++) t[j] = k1[j] * h2 + x[j];
    rhs(s, t, k2);
    for (j = 0; j < 2; j++) t[j] = k2[j] * h2 + x[j];
    rhs(s, t, k3);
    for (j = 0; j < 2; j++) t[j] = k3[j] * h + x[j];
    rhs(s, t, k4);
    for (j = 0; j < 2; j++) y[j] = x[j] + ((((k2[j] + k3[j]) * 2.0) + k1[j]) + k4[j]) * h6;
}

static fmi2Status model_step(Instance *m, double t, double h) {
    ModelState *s = &m->s;
    int n = s->i[SUBSTEPS] > 0 ? s->i[SUBSTEPS] : 1, k, impacts = 0;
    double hs = h / n, q_max = s->r[Q_MAX];
    double x[2], y[2];
    (void)t;
    x[0] = s->r[Q]; x[1] = s->r[OMEGA];
    if (s->r[MASS] <= 0.0 || s->r[LENGTH] <= 0.0) {
        log_message(m, fmi2Error, "logStatusError", "mass and length must be > 0");
        return fmi2Error;
    }
    for (k = 0; k < n; k++) {
        double rest = hs;
        while (rest > 0.0) {
            rk4(s, x, rest, y);
            if (q_max > 0.0 && fabs(y[0]) > q_max && fabs(x[0]) <= q_max) {
                double lo = 0.0, hi = rest, z[2];
                int it;
                for (it = 0; it < 200 && hi - lo > 1e-15 * (1.0 + hi); it++) {
                    double mid = 0.5 * (lo + hi);
                    rk4(s, x, mid, z);
                    if (fabs(z[0]) > q_max) hi = mid; else lo = mid;
                }
                rk4(s, x, hi, z);
                x[0] = copysign(q_max, z[0]);
                x[1] = -s->r[RESTITUTION] * z[1];
                rest -= hi;
                if (++impacts > 1000) {
                    log_message(m, fmi2Discard, "logStatusDiscard", "more than 1000 end-stop impacts in one step");
                    return fmi2Discard;
                }
            } else {
                x[0] = y[0]; x[1] = y[1];
                rest = 0.0;
            }
        }
    }
    s->r[Q] = x[0];
    s->r[OMEGA] = x[1];
    return fmi2OK;
}
"""

_PENDULUM_XML = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="2.0" modelName="pendulum" guid="cosimrun-example-pendulum-2"
  description="Pendulum driven by a torque, with an optional end stop (cosimrun example)"
  generationTool="cosimrun" variableNamingConvention="flat" numberOfEventIndicators="0">
  <CoSimulation modelIdentifier="pendulum" canHandleVariableCommunicationStepSize="true"
    canGetAndSetFMUstate="true" canSerializeFMUstate="true" canNotUseMemoryManagementFunctions="true"/>
  <UnitDefinitions>
    <Unit name="rad"><BaseUnit rad="1"/></Unit>
    <Unit name="rad/s"><BaseUnit s="-1" rad="1"/></Unit>
    <Unit name="rad/s2"><BaseUnit s="-2" rad="1"/></Unit>
    <Unit name="N.m"><BaseUnit kg="1" m="2" s="-2"/></Unit>
    <Unit name="N.m.s/rad"><BaseUnit kg="1" m="2" s="-1" rad="-1"/></Unit>
    <Unit name="kg"><BaseUnit kg="1"/></Unit>
    <Unit name="m"><BaseUnit m="1"/></Unit>
    <Unit name="m/s2"><BaseUnit m="1" s="-2"/></Unit>
    <Unit name="1"/>
  </UnitDefinitions>
  <TypeDefinitions>
    <SimpleType name="Modelica.SIunits.Angle"><Real quantity="Angle" unit="rad" displayUnit="deg"/></SimpleType>
    <SimpleType name="Modelica.SIunits.AngularVelocity"><Real quantity="AngularVelocity" unit="rad/s"/></SimpleType>
    <SimpleType name="Modelica.SIunits.Torque"><Real quantity="Torque" unit="N.m"/></SimpleType>
  </TypeDefinitions>
  <DefaultExperiment startTime="0" stopTime="10" stepSize="0.01"/>
  <ModelVariables>
    <ScalarVariable name="torque" valueReference="0" causality="input" variability="continuous"
      description="torque applied at the pivot">
      <Real declaredType="Modelica.SIunits.Torque" start="0"/></ScalarVariable>
    <ScalarVariable name="q" valueReference="1" causality="output" variability="continuous" initial="exact"
      description="angle from the downward vertical">
      <Real declaredType="Modelica.SIunits.Angle" start="0"/></ScalarVariable>
    <ScalarVariable name="omega" valueReference="2" causality="output" variability="continuous" initial="exact"
      description="angular velocity"><Real declaredType="Modelica.SIunits.AngularVelocity" start="0"/></ScalarVariable>
    <ScalarVariable name="mass" valueReference="3" causality="parameter" variability="tunable">
      <Real unit="kg" start="1" min="1e-12"/></ScalarVariable>
    <ScalarVariable name="length" valueReference="4" causality="parameter" variability="tunable">
      <Real unit="m" start="1" min="1e-12"/></ScalarVariable>
    <ScalarVariable name="damping" valueReference="5" causality="parameter" variability="tunable">
      <Real unit="N.m.s/rad" start="0" min="0"/></ScalarVariable>
    <ScalarVariable name="g" valueReference="6" causality="parameter" variability="tunable">
      <Real unit="m/s2" start="9.81" min="0"/></ScalarVariable>
    <ScalarVariable name="q_max" valueReference="7" causality="parameter" variability="tunable"
      description="end stop at |q| = q_max (0: none)"><Real unit="rad" start="0" min="0"/></ScalarVariable>
    <ScalarVariable name="restitution" valueReference="8" causality="parameter" variability="tunable">
      <Real unit="1" start="0.5" min="0" max="1"/></ScalarVariable>
    <ScalarVariable name="der(q)" valueReference="9" causality="local" variability="continuous">
      <Real unit="rad/s" derivative="2"/></ScalarVariable>
    <ScalarVariable name="der(omega)" valueReference="10" causality="local" variability="continuous">
      <Real unit="rad/s2" derivative="3"/></ScalarVariable>
    <ScalarVariable name="substeps" valueReference="0" causality="parameter" variability="fixed"
      description="RK4 sub-steps per communication step"><Integer start="10" min="1"/></ScalarVariable>
  </ModelVariables>
  <ModelStructure>
    <Outputs>
      <Unknown index="2" dependencies=""/>
      <Unknown index="3" dependencies=""/>
    </Outputs>
    <Derivatives>
      <Unknown index="10" dependencies="3"/>
      <Unknown index="11" dependencies="1 2 3"/>
    </Derivatives>
    <InitialUnknowns>
      <Unknown index="10" dependencies="3"/>
      <Unknown index="11" dependencies="1 2 3 4 5 6 7"/>
    </InitialUnknowns>
  </ModelStructure>
</fmiModelDescription>
"""

EXAMPLES: dict[str, Example] = {
    "pendulum": Example(
        identifier="pendulum",
        description="torque -> q [rad], omega [rad/s]; parameters like cosimrun's pendulum; end stop inside the FMU",
        model_description=_PENDULUM_XML,
        source=_PENDULUM_C,
    ),
}
"""Example FMUs shipped as C source (``path: example:NAME``)."""


if __name__ == "__main__":
    sys.exit(main())
