"""What cosimrun reads from an FMU file: the model description, checked for use here.

:func:`read_fmu` checks the file (zip archive, FMI 2.0, co-simulation, a binary
for this platform) and returns an :class:`FMUModel` (cached per file version)
with the variables as :class:`FMUVariable`, their units translated for pint
(:func:`modelica_unit_to_pint`), the parameters, the physical state and the
direct feedthrough from ``ModelStructure``.
"""

from __future__ import annotations

import logging
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cosimrun.components.fmu.extraction import FMUSettings, check_archive
from cosimrun.core.ports import PortType
from cosimrun.core.units import parse_unit
from cosimrun.errors import suggest

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
    can_interpolate_inputs: bool = False
    """``canInterpolateInputs``: the FMU takes input derivatives (``fmi2SetRealInputDerivatives``)."""

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
    """Read and check an FMU file; ``ValueError`` explains why it cannot be used here.

    The archive's sizes and entry names are checked first
    (:func:`~cosimrun.components.fmu.extraction.check_archive`: an
    :class:`~cosimrun.errors.FMUError`), so an oversized ``modelDescription.xml``
    is refused without being read.
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
        can_interpolate_inputs=bool(cs.canInterpolateInputs),
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


