"""What cosimrun reads from an FMU file: the model description, checked for use here.

:func:`read_fmu` checks the file (zip archive, FMI 2.0 or 3.0, a binary for
this platform) and returns an :class:`FMUModel` (cached per file version): the
FMI version, the interfaces it offers (co-simulation ``cs``, model exchange
``me``, each an :class:`FMUInterface` with its model identifier and capability
flags), the variables as :class:`FMUVariable` (an FMI 3 array is one variable
per element, ``name[i]``), their units translated for pint
(:func:`modelica_unit_to_pint`), the parameters, the physical state and the
direct feedthrough from ``ModelStructure``. Aliases (FMI 2 variables sharing a
value reference with ``alias``/``negatedAlias``, FMI 3 ``<Alias>`` elements)
are variables of their own name with the value reference they share and the
conversion from the FMU's value (:attr:`FMUVariable.scale`,
:attr:`FMUVariable.negated`): an FMI 3 alias with a ``displayUnit`` has that
unit. Which interface a component uses is
chosen by the component (:meth:`FMUModel.interface` refuses one the FMU does
not offer); FMI 1.0 is refused here. The classes it returns are in
:mod:`~cosimrun.fmi.model`, the unit translation in :mod:`~cosimrun.fmi.units`
(both re-exported here).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.errors import ConfigError, FMUError, FMUFileError, suggest
from cosimrun.fmi.extraction import (
    ENV_MAX_ARRAY_ELEMENTS,
    ENV_MAX_PORTS,
    FMUSettings,
    check_archive,
    count_limit_error,
)
from cosimrun.fmi.model import (
    DEFAULT_EXPERIMENT,
    FMI3_KINDS,
    INTEGER_RANGES,
    INTERFACE_NAMES,
    PORT_TYPES,
    FMUInterface,
    FMUModel,
    FMUVariable,
    float_or_none,
)
from cosimrun.fmi.units import base_unit_expression, display_unit, modelica_unit_to_pint

__all__ = ["DEFAULT_EXPERIMENT", "INTERFACE_NAMES", "FMUInterface", "FMUModel", "FMUVariable", "modelica_unit_to_pint",
           "read_fmu"]

_log = logging.getLogger("cosimrun.fmu")


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


def _variables(md: Any, v: Any, kind: str, negated: bool = False) -> list[FMUVariable]:
    """The cosimrun variables of FMPy's variable *v* of kind *kind*: one, or one per element of an FMI 3 array.

    An FMI 3 alias (``v.alias``) takes the unit of its ``displayUnit`` where pint knows it as the FMU defines it;
    *negated* marks an FMI 2 ``negatedAlias``.
    """
    fmu_unit = None
    unit = problem = None
    scale, offset = (-1.0 if negated else 1.0), 0.0
    alias = getattr(v, "alias", None)
    if kind == "Real":
        fmu_unit = v.unit or (v.declaredType.unit if v.declaredType is not None else None)
        if fmu_unit:
            try:
                unit = modelica_unit_to_pint(fmu_unit)
            except ValueError as exc:
                definition = next((u for u in md.unitDefinitions if u.name == fmu_unit), None)
                unit = base_unit_expression(definition.baseUnit if definition is not None else None)
                if unit is None:
                    problem = str(exc)
            if unit == "dimensionless":
                unit = None
        element = next((a for a in alias.aliases if a.name == v.name), None) if alias is not None else None
        if element is not None and element.displayUnit:
            unit, scale, offset = display_unit(md, v, fmu_unit, unit)
    minimum = maximum = None
    if kind in ("Real", "Integer", "Enumeration"):
        declared = v.declaredType
        minimum = float_or_none(v.min if v.min is not None else getattr(declared, "min", None))
        maximum = float_or_none(v.max if v.max is not None else getattr(declared, "max", None))
        bounds = INTEGER_RANGES.get(v.type)
        if bounds is not None:
            minimum = float(bounds[0]) if minimum is None else max(minimum, bounds[0])
            maximum = float(bounds[1]) if maximum is None else min(maximum, bounds[1])
    if scale != 1.0 or offset != 0.0:
        minimum, maximum = (None if x is None else scale * x + offset for x in (minimum, maximum))
        if scale < 0:
            minimum, maximum = maximum, minimum
    elif negated:
        minimum, maximum = (None if x is None else -x for x in (maximum, minimum))
    common = dict(vr=int(v.valueReference), type=kind, causality=v.causality, variability=v.variability,
                  initial=v.initial, unit=unit, fmu_unit=fmu_unit, unit_problem=problem, description=v.description,
                  minimum=minimum, maximum=maximum, fmi_type=v.type,
                  alias_of=alias.name if alias is not None else None, negated=negated,
                  scale=scale, offset=offset)
    shape = tuple(getattr(v, "shape", None) or ())
    if not v.dimensions or not shape:
        var = FMUVariable(name=v.name, start=None, **common)
        return [replace(var, start=var.to_port(_python_value(kind, v.start)))]
    size = math.prod(shape)
    starts = (v.start or "").split() if kind != "String" else []
    to_port = FMUVariable(name=v.name, start=None, **common).to_port  # the same conversion for every element
    elements = []
    for i, position in enumerate(np.ndindex(*shape)):
        name = f"{v.name}[{','.join(str(k + 1) for k in position)}]"
        start = _python_value(kind, starts[i] if i < len(starts) else (starts[-1] if starts else None))
        elements.append(FMUVariable(name=name, start=to_port(start), index=i, size=size, **common))
    return elements


_MODEL_CACHE: dict[tuple[str, int, int, int, int], FMUModel] = {}
"""Models read, by file version: ``(resolved path, mtime in ns, size, ctime in ns, inode)`` (a file rewritten in
place with the same size and its modification time set back still has a new ctime; one replaced, a new inode)."""

_CHECKED: set[tuple[tuple[str, int, int, int, int], FMUSettings]] = set()
"""The file versions (keys of :data:`_MODEL_CACHE`) whose archive and declarations passed the checks under those
settings: :func:`read_fmu` does not open their archive again (a job of a sweep reads its FMU a few times)."""


@contextlib.contextmanager
def _archive_read(shown: str) -> Iterator[None]:
    """An archive that cannot be read (a damaged or cut-off zip file) raises :class:`FMUFileError` naming it
    instead of zipfile's or the operating system's error."""
    try:
        yield
    except FMUError:
        raise
    except (OSError, zipfile.BadZipFile, EOFError, NotImplementedError, zlib.error) as exc:
        raise FMUFileError(f"{shown} is not a readable FMU archive: {exc}") from None


class _NeverRaised(Exception):
    """Stands in for FMPy's ValidationError in versions without it."""


def read_fmu(path: str | os.PathLike[str]) -> FMUModel:
    """Read and check an FMU file; a ``ConfigError`` (a ``ValueError``) explains why it cannot be used here.

    The archive's sizes and entry names are checked first
    (:func:`~cosimrun.fmi.extraction.check_archive`: an
    :class:`~cosimrun.errors.FMUError`), so an oversized ``modelDescription.xml``
    is refused without being read. FMI 2.0 and 3.0 FMUs are read, with either
    interface and with or without a binary for this platform: a missing binary
    is refused when an interface is chosen (:meth:`FMUModel.interface`).
    """
    import fmpy
    import fmpy.model_description as _md
    from fmpy.model_description import read_model_description

    ValidationError = getattr(_md, "ValidationError", _NeverRaised)

    path = Path(path).expanduser()
    shown = f"{str(path)!r}" + ("" if path.is_absolute() else f" ({path.resolve()})")
    if not path.is_file():
        if path.is_dir():
            raise ConfigError(None, f"FMU file {shown} is a directory; name the .fmu file")
        near = suggest(path.name, [p.name for p in path.resolve().parent.glob("*.fmu")]) \
            if path.resolve().parent.is_dir() else ""
        raise ConfigError(None, f"FMU file not found: {shown}{near}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, stat.st_ctime_ns, stat.st_ino)
    settings = FMUSettings.from_environment()  # read on every call: limits may change
    cached = _MODEL_CACHE.get(key)
    if cached is not None and (key, settings) in _CHECKED:  # this file version passed these limits
        return cached
    if not zipfile.is_zipfile(path):
        raise ConfigError(None, f"{shown} is not an FMU (an FMU is a zip archive with a modelDescription.xml)")
    with _archive_read(shown), zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        check_archive(zf, path, settings)  # before any entry is read
    if cached is not None:
        _check_declarations(path, shown, cached.description, settings)
        _CHECKED.add((key, settings))
        return cached
    if "modelDescription.xml" not in names:
        raise ConfigError(None, f"{shown} is not an FMU: the archive has no modelDescription.xml")
    from xml.etree import ElementTree

    try:
        with _archive_read(shown), zipfile.ZipFile(path) as zf:
            root = ElementTree.fromstring(zf.read("modelDescription.xml"))
    except ElementTree.ParseError as exc:
        raise ConfigError(None, f"{shown}: modelDescription.xml is not well-formed XML: {exc}") from None
    version = _version(shown, root)
    fmi3 = version.startswith("3.")
    if root.find("CoSimulation") is None and root.find("ModelExchange") is None:
        only = " (it offers scheduled execution only)" if root.find("ScheduledExecution") is not None else ""
        raise ConfigError(None, f"{shown} offers neither co-simulation nor model exchange{only}; "
                                "cosimrun runs co-simulation and model-exchange FMUs")
    problems = None
    try:
        md = read_model_description(str(path), validate=True)
    except ValidationError as exc:  # schema-valid but inconsistent: usable, as most tools are lenient here
        try:
            md = read_model_description(str(path), validate=False)
        except Exception:  # FMPy raises assorted types for invalid XML
            raise ConfigError(None, f"{shown}: invalid FMI {version} modelDescription.xml: "
                                    f"{_problems(exc)}") from None
        problems = _problems(exc)
    except Exception as exc:  # FMPy raises assorted types for invalid XML
        raise ConfigError(None, f"{shown}: invalid modelDescription.xml: {_one_line(str(exc))}") from None
    _check_declarations(path, shown, md, settings)
    interfaces = {}
    for kind, element in (("cs", md.coSimulation), ("me", md.modelExchange)):
        if element is not None:
            interfaces[kind] = _interface(kind, element, names, fmi3)
    platforms = fmpy.supported_platforms(str(path))
    available = [p for p in platforms if p != "c-code"]
    hint = f"it has binaries for: {', '.join(available)}" if available else "it has no binaries at all"
    if "c-code" in platforms:
        hint += "; it ships C sources: compile a binary for this platform with fmpy.util.compile_platform_binary(path)"
    first = next(iter(interfaces.values()))
    kinds = FMI3_KINDS if fmi3 else {k: k for k in PORT_TYPES}
    variables: dict[str, FMUVariable] = {}
    elements: dict[str, list[FMUVariable]] = {}
    clocks, unsupported = [], []
    negated = set() if fmi3 else {sv.get("name") for sv in root.iterfind("ModelVariables/ScalarVariable")
                                  if sv.get("alias") == "negatedAlias"}
    for v in md.modelVariables:
        kind = kinds.get(v.type)
        if kind is None:
            if v.type == "Clock":
                clocks.append(v.name)
            elif v.causality in ("input", "output") and getattr(v, "alias", None) is None:
                unsupported.append(f"{v.name} ({v.type})")
            continue
        elements[v.name] = _variables(md, v, kind, v.name in negated)
        variables.update((e.name, e) for e in elements[v.name])
    if not fmi3:
        variables = _aliases2(variables, root)
    inputs = [v for v in variables.values() if v.causality == "input"]
    outputs = [v for v in variables.values() if v.causality == "output"]
    parameters = [v for v in variables.values()
                  if v.causality == "parameter" and v.variability in ("fixed", "tunable") and not v.converted]
    if fmi3:
        states, feedthrough = _structure3(md, elements, inputs, outputs)
    else:
        states, feedthrough = _structure2(path, md, variables, inputs, outputs)
    _alias_feedthrough(feedthrough, inputs, outputs)
    model = FMUModel(
        path=path.resolve(),
        description=md,
        identifier=first.identifier,
        guid=md.instantiationToken if fmi3 else md.guid,
        variables=variables,
        inputs=inputs,
        outputs=outputs,
        parameters=parameters,
        states=list(dict.fromkeys(states)),
        feedthrough=feedthrough,
        can_rollback=first.can_rollback,
        only_once_per_process=first.only_once_per_process,
        variable_step=first.variable_step,
        can_interpolate_inputs=first.can_interpolate_inputs,
        fmi_version="3.0" if fmi3 else "2.0",
        interfaces=interfaces,
        clocks=clocks,
        unsupported=unsupported,
        binary_hint=hint,
    )
    if problems is not None:  # said once per file version, and only of an FMU that is used
        _log.warning("%s: modelDescription.xml has problems (continuing): %s", shown, problems)
    _MODEL_CACHE[key] = model
    _CHECKED.add((key, settings))
    return model


def _version(shown: str, root: Any) -> str:
    """The ``fmiVersion`` of model description *root*: ``2.x`` or ``3.x``; ``ConfigError`` for anything else, and for
    a description whose elements are those of the other version."""
    if root.tag != "fmiModelDescription":
        raise ConfigError(None, f"{shown} is not an FMU: its modelDescription.xml is no FMI model description (root "
                                f"element <{root.tag}>, not <fmiModelDescription>)")
    version = root.get("fmiVersion")
    if version is None:
        raise ConfigError(None, f"{shown}: modelDescription.xml has no fmiVersion attribute; cosimrun runs FMI 2.0 "
                                "and 3.0 FMUs")
    if not version.startswith(("2.", "3.")):
        raise ConfigError(None, f"{shown} is an FMI {version} FMU; cosimrun runs FMI 2.0 and 3.0 FMUs only "
                                "(export the model as FMI 2.0 or 3.0)")
    tags = {element.tag for element in root.iterfind("ModelVariables/*")}
    fmi3 = version.startswith("3.")
    other = ({"ScalarVariable"} if fmi3 else tags - {"ScalarVariable"}) & tags
    if other:
        raise ConfigError(None, f"{shown}: modelDescription.xml says fmiVersion=\"{version}\" but declares its "
                                f"variables as FMI {'2.0' if fmi3 else '3.0'} does (<{min(other)}> elements); the FMU "
                                "was exported wrongly")
    return version


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _problems(exc: Any) -> str:
    """The first problem FMPy's ``ValidationError`` *exc* lists, on one line, and how many more there are."""
    problems = [re.sub(r"^ERROR \(line (\d+), column \d+\): ", r"line \1: ", _one_line(str(p)))
                for p in getattr(exc, "problems", None) or [str(exc)]]
    more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
    return problems[0] + more


_UINT32 = 2**32 - 1


def _check_declarations(path: Path, shown: str, md: Any, settings: FMUSettings) -> None:
    """Refuse, before any variable is made, value references outside FMI's unsigned 32 bits (``ConfigError``) and
    more array elements or ports than the settings allow (:class:`~cosimrun.errors.FMULimitError`); an array's
    size is the product of its dimensions (FMPy reads the ``Dimension`` elements, allocating nothing)."""
    elements = ports = 0
    arrays = []
    for v in md.modelVariables:
        vr = v.valueReference
        if not isinstance(vr, int) or not 0 <= vr <= _UINT32:
            raise ConfigError(None, f"{shown}: variable {v.name!r} has valueReference={vr!r}; a value reference "
                                    f"is an integer from 0 to {_UINT32}")
        shape = tuple(getattr(v, "shape", None) or ()) if v.dimensions else ()
        if any(n < 0 for n in shape):
            raise ConfigError(None, f"{shown}: array variable {v.name!r} has a negative dimension {shape}")
        count = math.prod(shape) if shape else 1
        if shape:
            elements += count
            arrays.append(f"{v.name}[{','.join(map(str, shape))}]")
        if v.causality in ("input", "output"):
            ports += count
    if elements > settings.max_array_elements:
        shown_arrays = ", ".join(arrays[:3]) + (", ..." if len(arrays) > 3 else "")
        raise count_limit_error(path, f"array elements ({shown_arrays})", elements, settings.max_array_elements,
                                ENV_MAX_ARRAY_ELEMENTS)
    if ports > settings.max_ports:
        raise count_limit_error(path, "inputs and outputs", ports, settings.max_ports, ENV_MAX_PORTS)


def _interface(kind: str, element: Any, names: set[str], fmi3: bool) -> FMUInterface:
    """The :class:`FMUInterface` of FMPy's ``CoSimulation``/``ModelExchange`` *element*."""
    import fmpy

    identifier = element.modelIdentifier
    platform = fmpy.platform_tuple if fmi3 else fmpy.platform  # FMI 3 names platforms like x86_64-linux
    binary = f"binaries/{platform}/{identifier}{fmpy.sharedLibraryExtension}"
    flags: dict[str, Any] = {}
    if kind == "cs":
        flags = dict(
            variable_step=bool(element.canHandleVariableCommunicationStepSize),
            can_interpolate_inputs=bool(element.canInterpolateInputs),
            has_event_mode=fmi3 and bool(element.hasEventMode),
            might_return_early=fmi3 and bool(element.mightReturnEarlyFromDoStep),
            provides_intermediate_update=fmi3 and bool(element.providesIntermediateUpdate),
        )
    else:
        needs = bool(element.needsCompletedIntegratorStep) if fmi3 \
            else not bool(element.completedIntegratorStepNotNeeded)
        flags = dict(needs_completed_integrator_step=needs,
                     provides_evaluate_discrete_states=fmi3 and bool(element.providesEvaluateDiscreteStates))
    return FMUInterface(
        kind=kind, identifier=identifier, binary=binary, has_binary=binary in names,
        can_rollback=bool(element.canGetAndSetFMUstate),
        can_serialize=bool(element.canSerializeFMUstate),
        only_once_per_process=bool(element.canBeInstantiatedOnlyOncePerProcess), **flags,
    )


def _aliases2(variables: dict[str, FMUVariable], root: Any) -> dict[str, FMUVariable]:
    """*variables* of an FMI 2.0 model with ``alias_of`` set on the ``alias``/``negatedAlias`` ones: the
    ``noAlias`` variable of the same value reference and type."""
    kinds = {sv.get("name"): sv.get("alias", "noAlias") for sv in root.iterfind("ModelVariables/ScalarVariable")}
    owners = {v.slot: v.name for v in variables.values() if kinds.get(v.name, "noAlias") == "noAlias"}
    return {name: v if kinds.get(name, "noAlias") == "noAlias" else replace(v, alias_of=owners.get(v.slot))
            for name, v in variables.items()}


def _alias_feedthrough(feedthrough: dict[str, set[str]], inputs: list[FMUVariable],
                       outputs: list[FMUVariable]) -> None:
    """Give aliases the direct feedthrough of their value: an output without ``ModelStructure`` entry of its own (an
    FMI 3 alias) that of the output it shares its value with, and an output depending on an input also on that
    input's aliases."""
    by_slot: dict[tuple[str, int, int], list[str]] = {}
    for var in inputs:
        by_slot.setdefault(var.slot, []).append(var.name)
    named = {v.slot: v.name for v in outputs if v.alias_of is None}
    input_slots = {v.name: v.slot for v in inputs}
    aliased = any(len(names) > 1 for names in by_slot.values())
    for out in outputs:
        source = named.get(out.slot) if out.alias_of is not None else None
        deps = set(feedthrough.get(source, ())) if source is not None and source != out.name \
            else set(feedthrough.get(out.name, ()))
        feedthrough[out.name] = {name for dep in deps for name in by_slot.get(input_slots[dep], (dep,))} \
            if aliased else deps


def _structure2(path: Path, md: Any, variables: dict[str, FMUVariable], inputs: list[FMUVariable],
                outputs: list[FMUVariable]) -> tuple[list[FMUVariable], dict[str, set[str]]]:
    """The state variables and the feedthrough of an FMI 2.0 model (index-based ``ModelStructure``)."""
    structure = _model_structure(path)
    order = [v.name for v in md.modelVariables]
    states = [variables[order[i]] for i in structure.states if 0 <= i < len(order) and order[i] in variables]
    input_names = {v.name for v in inputs}
    feedthrough: dict[str, set[str]] = {v.name: set(input_names) for v in outputs}
    for index, deps in structure.outputs.items():
        name = order[index] if 0 <= index < len(order) else None
        if name in feedthrough and deps is not None:
            feedthrough[name] = {order[d] for d in deps if 0 <= d < len(order) and order[d] in input_names}
    return states, feedthrough


def _structure3(md: Any, elements: dict[str, list[FMUVariable]], inputs: list[FMUVariable],
                outputs: list[FMUVariable]) -> tuple[list[FMUVariable], dict[str, set[str]]]:
    """The state variables and the feedthrough of an FMI 3.0 model (value-reference-based ``ModelStructure``).

    An array output depends on every element of each array input it lists.
    """
    states = []
    for unknown in md.derivatives:
        state = getattr(unknown.variable, "derivative", None)
        if state is not None:
            states.extend(e for e in elements.get(state.name, ()) if e.type == "Real")
    input_names = {v.name for v in inputs}
    feedthrough: dict[str, set[str]] = {v.name: set(input_names) for v in outputs}
    for unknown in md.outputs:
        if unknown.variable is None or unknown.dependencies is None:
            continue
        deps = {e.name for d in unknown.dependencies for e in elements.get(d.name, ()) if e.name in input_names}
        for element in elements.get(unknown.variable.name, ()):
            if element.name in feedthrough:
                feedthrough[element.name] = deps
    return states, feedthrough


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
