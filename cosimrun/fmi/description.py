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
not offer); FMI 1.0 is refused here.
"""

from __future__ import annotations

import logging
import os
import re
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.core.ports import PortType
from cosimrun.core.units import compile_conversion, parse_unit
from cosimrun.errors import suggest
from cosimrun.fmi.extraction import FMUSettings, check_archive

_log = logging.getLogger("cosimrun.fmu")


# ------------------------------------------------------------------ units
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


# ------------------------------------------------------------------ model description
_PORT_TYPES: dict[str, PortType] = {
    "Real": PortType.REAL,
    "Integer": PortType.INT,
    "Enumeration": PortType.INT,
    "Boolean": PortType.BOOL,
    "String": PortType.STRING,
}

FMI3_KINDS: dict[str, str] = {
    "Float32": "Real", "Float64": "Real",
    "Int8": "Integer", "UInt8": "Integer", "Int16": "Integer", "UInt16": "Integer",
    "Int32": "Integer", "UInt32": "Integer", "Int64": "Integer", "UInt64": "Integer",
    "Enumeration": "Enumeration", "Boolean": "Boolean", "String": "String",
}
"""FMI 3.0 variable types -> the kind cosimrun maps them by (``Real``, ``Integer``, ``Enumeration``, ...)."""

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    f"{sign}Int{bits}": ((0, 2**bits - 1) if sign else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    for sign in ("", "U") for bits in (8, 16, 32, 64)
}
"""The value range of each FMI 3.0 integer type (checked when a value is set)."""


@dataclass(frozen=True)
class FMUVariable:
    """One scalar variable of an FMU, as cosimrun uses it."""

    name: str
    vr: int
    type: str
    """``Real``, ``Integer``, ``Enumeration``, ``Boolean`` or ``String`` (for FMI 3 the kind of its type)."""
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
    fmi_type: str = ""
    """The type as the FMI version names it (``Real`` ... for FMI 2, ``Float32``, ``UInt16`` ... for FMI 3)."""
    index: int | None = None
    """The element's position in its FMI 3 array variable (row-major), ``None`` for a scalar."""
    size: int = 1
    """Elements of the variable behind value reference ``vr`` (1 for a scalar)."""
    alias_of: str | None = None
    """The variable this one is an alias of (FMI 3 ``<Alias>``; FMI 2: the ``noAlias`` variable of its value
    reference), ``None`` for the variable itself."""
    negated: bool = False
    """FMI 2 ``negatedAlias``: the value is minus the FMU's."""
    scale: float = 1.0
    offset: float = 0.0
    """A Real's value is ``scale * FMU value + offset`` (an FMI 3 alias in its ``displayUnit``; -1 when negated)."""

    def __post_init__(self) -> None:
        if not self.fmi_type:
            object.__setattr__(self, "fmi_type", self.type)

    @property
    def converted(self) -> bool:
        """Whether the value differs from the FMU's (a negated alias, an alias in another unit)."""
        return self.negated or self.scale != 1.0 or self.offset != 0.0

    @property
    def slot(self) -> tuple[str, int, int]:
        """What identifies the FMU value behind the variable: its get/set function kind, value reference and
        element (aliases share it)."""
        return self.fmi_type if self.fmi_type not in ("Integer", "Enumeration") else "Integer", self.vr, \
            self.index or 0

    def to_port(self, value: Any) -> Any:
        """The FMU's *value* as this variable's value (see :attr:`scale`, :attr:`negated`)."""
        if value is None or not self.converted:
            return value
        return self.scale * value + self.offset if self.type == "Real" else -value

    def from_port(self, value: Any) -> Any:
        """This variable's *value* as the FMU's value (the inverse of :meth:`to_port`)."""
        if value is None or not self.converted:
            return value
        return (value - self.offset) / self.scale if self.type == "Real" else -value

    @property
    def port_type(self) -> PortType:
        return _PORT_TYPES[self.type]

    @property
    def settable_start(self) -> bool:
        """True when a start value may be set before initialization."""
        if self.variability == "constant" or self.causality in ("independent", "calculatedParameter") \
                or self.converted:
            return False
        return self.causality in ("parameter", "input") or self.initial in ("exact", "approx")


@dataclass(frozen=True)
class FMUInterface:
    """One interface an FMU offers (``cs``: co-simulation, ``me``: model exchange) and its capability flags."""

    kind: str
    """``cs`` or ``me``."""
    identifier: str
    """The ``modelIdentifier``: the name of the shared library."""
    binary: str
    """The shared library's path in the archive for this platform."""
    has_binary: bool
    can_rollback: bool
    """``canGetAndSetFMUstate`` (FMI 2) / ``canGetAndSetFMUState`` (FMI 3)."""
    only_once_per_process: bool
    variable_step: bool = True
    """``canHandleVariableCommunicationStepSize`` (co-simulation)."""
    can_interpolate_inputs: bool = False
    has_event_mode: bool = False
    """FMI 3 co-simulation ``hasEventMode``: the FMU can hand its events to the importer (early return)."""
    might_return_early: bool = False
    """FMI 3 co-simulation ``mightReturnEarlyFromDoStep``."""
    provides_intermediate_update: bool = False
    needs_completed_integrator_step: bool = True
    """Model exchange: ``completedIntegratorStepNotNeeded`` (FMI 2) / ``needsCompletedIntegratorStep`` (FMI 3)."""
    provides_evaluate_discrete_states: bool = False


INTERFACE_NAMES = {"cs": "co-simulation", "me": "model exchange"}
DEFAULT_EXPERIMENT = {"t0": "startTime", "tf": "stopTime", "dt": "stepSize", "tolerance": "tolerance"}
"""The run settings an FMU's ``DefaultExperiment`` may give, by the attribute that gives each."""


@dataclass
class FMUModel:
    """What cosimrun reads from one FMU file (cached per file version).

    ``identifier`` and the capability fields (``can_rollback`` ...) are those of
    the co-simulation interface when the FMU offers one, else of model
    exchange; :attr:`interfaces` holds both.
    """

    path: Path
    description: Any
    """FMPy's ``ModelDescription``."""
    identifier: str
    guid: str
    """``guid`` (FMI 2) or ``instantiationToken`` (FMI 3)."""
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
    can_interpolate_inputs: bool = False
    """``canInterpolateInputs``: the FMU takes input derivatives (``fmi2SetRealInputDerivatives``)."""
    fmi_version: str = "2.0"
    """``2.0`` or ``3.0``."""
    interfaces: dict[str, FMUInterface] = field(default_factory=dict)
    """The interfaces the FMU offers by kind (``cs``, ``me``), co-simulation first."""
    clocks: list[str] = field(default_factory=list)
    """Names of FMI 3 clock variables (cosimrun runs no clocked partitions)."""
    unsupported: list[str] = field(default_factory=list)
    """Inputs and outputs no port can carry (FMI 3 ``Binary``), as ``name (type)``."""
    binary_hint: str = ""
    """What binaries the archive has instead (for the message when one is missing)."""

    @property
    def label(self) -> str:
        return self.path.name

    @property
    def default_experiment(self) -> dict[str, float]:
        """The run settings (``t0``, ``tf``, ``dt``, ``tolerance``, see :data:`DEFAULT_EXPERIMENT`) the FMU's
        ``DefaultExperiment`` gives, each only where it gives it."""
        default = self.description.defaultExperiment
        if default is None:
            return {}
        given = {key: _float_or_none(getattr(default, attr, None)) for key, attr in DEFAULT_EXPERIMENT.items()}
        return {key: value for key, value in given.items() if value is not None}

    @property
    def offers(self) -> str:
        """``co-simulation``, ``model exchange`` or ``co-simulation and model exchange``."""
        return " and ".join(INTERFACE_NAMES[k] for k in self.interfaces)

    def interface(self, kind: str) -> FMUInterface:
        """The interface *kind* (``cs``/``me``); ``ValueError`` naming what the FMU offers, or the missing binary."""
        found = self.interfaces.get(kind)
        if found is None:
            raise ValueError(f"{self.label} offers {self.offers} only, not {INTERFACE_NAMES.get(kind, kind)} "
                             f"(interface {kind!r}); valid: {', '.join(self.interfaces)}")
        if not found.has_binary:
            raise ValueError(f"{self.label} has no binary for this platform ({found.binary} is missing; "
                             f"{self.binary_hint})")
        return found

    def check_supported(self) -> None:
        """``ValueError`` for what cosimrun cannot run: FMI 3 clocks and inputs or outputs of type ``Binary``."""
        if self.clocks:
            raise ValueError(f"{self.label} declares clocks ({', '.join(self.clocks)}); cosimrun does not run FMI 3 "
                             "clocks (clocked or scheduled partitions): export the model without clocks")
        if self.unsupported:
            raise ValueError(f"{self.label} has inputs or outputs no port can carry: {', '.join(self.unsupported)} "
                             "(ports are Float, Int, UInt, Boolean, Enumeration or String)")


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
                unit = _base_unit_expression(definition.baseUnit if definition is not None else None)
                if unit is None:
                    problem = str(exc)
            if unit == "dimensionless":
                unit = None
        element = next((a for a in alias.aliases if a.name == v.name), None) if alias is not None else None
        if element is not None and element.displayUnit:
            unit, scale, offset = _display_unit(md, v, fmu_unit, unit)
    minimum = maximum = None
    if kind in ("Real", "Integer", "Enumeration"):
        declared = v.declaredType
        minimum = _float_or_none(v.min if v.min is not None else getattr(declared, "min", None))
        maximum = _float_or_none(v.max if v.max is not None else getattr(declared, "max", None))
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
    size = int(np.prod(shape))
    starts = (v.start or "").split() if kind != "String" else []
    elements = []
    for i, position in enumerate(np.ndindex(*shape)):
        name = f"{v.name}[{','.join(str(k + 1) for k in position)}]"
        var = FMUVariable(name=name, start=None, index=i, size=size, **common)
        start = _python_value(kind, starts[i] if i < len(starts) else (starts[-1] if starts else None))
        elements.append(replace(var, start=var.to_port(start)))
    return elements


_DISPLAY_TOLERANCE = 1e-6
"""Relative difference between an FMU's ``DisplayUnit`` factor and pint's conversion that counts as agreement."""


def _display_unit(md: Any, v: Any, fmu_unit: str | None, unit: str | None) -> tuple[str | None, float, float]:
    """``(unit, scale, offset)`` of FMI 3 alias *v* in its ``displayUnit``: pint's unit of that name and the
    conversion from the variable's *unit*; the variable's own unit (and a warning) when pint does not know the
    display unit, it does not convert from *unit*, or the FMU's ``DisplayUnit`` definition says otherwise."""
    display = v.displayUnit
    try:
        if unit is None:
            raise ValueError(f"the variable has no unit ({fmu_unit or 'none'}) to convert from")
        target = modelica_unit_to_pint(display)
        conversion = compile_conversion(unit, target)
        definition = next((u for u in md.unitDefinitions if u.name == fmu_unit), None)
        declared = next((d for d in getattr(definition, "displayUnits", ()) if d.name == display), None)
        if declared is not None:
            factor, shift = float(declared.factor), float(declared.offset)
            if abs(factor - conversion.scale) > _DISPLAY_TOLERANCE * abs(conversion.scale) \
                    or abs(shift - conversion.offset) > _DISPLAY_TOLERANCE * max(1.0, abs(conversion.offset)):
                raise ValueError(f"the FMU defines {display} as {factor:g} * {fmu_unit} + {shift:g}, pint as "
                                 f"{conversion.scale:g} * {fmu_unit} + {conversion.offset:g}")
    except ValueError as exc:  # IncompatibleUnitsError is one
        _log.warning("FMU alias %r of %r: display unit %r not used (%s); the alias has the variable's unit %s",
                     v.name, v.alias.name, display, exc, unit or "(none)")
        return unit, 1.0, 0.0
    if target == "dimensionless":
        target = None
    return target, conversion.scale, conversion.offset


_MODEL_CACHE: dict[tuple[str, int, int], FMUModel] = {}


class _NeverRaised(Exception):
    """Stands in for FMPy's ValidationError in versions without it."""


def read_fmu(path: str | os.PathLike[str]) -> FMUModel:
    """Read and check an FMU file; ``ValueError`` explains why it cannot be used here.

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
            raise ValueError(f"FMU file {shown} is a directory; name the .fmu file")
        near = suggest(path.name, [p.name for p in path.resolve().parent.glob("*.fmu")]) \
            if path.resolve().parent.is_dir() else ""
        raise ValueError(f"FMU file not found: {shown}{near}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{shown} is not an FMU (an FMU is a zip archive with a modelDescription.xml)")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        check_archive(zf, path, FMUSettings.from_environment())  # before any entry is read (limits may change)
    cached = _MODEL_CACHE.get(key)
    if cached is not None:
        return cached
    if "modelDescription.xml" not in names:
        raise ValueError(f"{shown} is not an FMU: the archive has no modelDescription.xml")
    from xml.etree import ElementTree

    try:
        with zipfile.ZipFile(path) as zf:
            root = ElementTree.fromstring(zf.read("modelDescription.xml"))
    except ElementTree.ParseError as exc:
        raise ValueError(f"{shown}: modelDescription.xml is not well-formed XML: {exc}") from None
    version = str(root.get("fmiVersion"))
    if not version.startswith(("2.", "3.")):
        raise ValueError(f"{shown} is an FMI {version} FMU; cosimrun runs FMI 2.0 and 3.0 FMUs only "
                         "(export the model as FMI 2.0 or 3.0)")
    fmi3 = version.startswith("3.")
    if root.find("CoSimulation") is None and root.find("ModelExchange") is None:
        only = " (it offers scheduled execution only)" if root.find("ScheduledExecution") is not None else ""
        raise ValueError(f"{shown} offers neither co-simulation nor model exchange{only}; "
                         "cosimrun runs co-simulation and model-exchange FMUs")
    try:
        md = read_model_description(str(path), validate=True)
    except ValidationError as exc:  # schema-valid but inconsistent: usable, as most tools are lenient here
        _log.warning("%s: modelDescription.xml has problems (continuing): %s", shown, exc)
        try:
            md = read_model_description(str(path), validate=False)
        except Exception:  # FMPy raises assorted types for invalid XML
            raise ValueError(f"{shown}: invalid FMI {version} modelDescription.xml: {exc}") from None
    except Exception as exc:  # FMPy raises assorted types for invalid XML
        raise ValueError(f"{shown}: invalid modelDescription.xml: {exc}") from None
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
    kinds = FMI3_KINDS if fmi3 else {k: k for k in _PORT_TYPES}
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
    _MODEL_CACHE[key] = model
    return model


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
    for out in outputs:
        source = named.get(out.slot) if out.alias_of is not None else None
        deps = set(feedthrough.get(source, ())) if source is not None and source != out.name \
            else set(feedthrough.get(out.name, ()))
        feedthrough[out.name] = {name for dep in deps for name in by_slot.get(input_slots[dep], (dep,))}


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


