"""Read an SSP archive into plain declarations, refusing every element and attribute it does not map.

:func:`read_ssp` opens the archive, parses ``SystemStructure.ssd`` and the SSV
files its parameter bindings name, and returns a :class:`SystemDecl`. The walk
over the XML is explicit: each element lists the attributes and children it
accepts, and anything else raises an :class:`SSPError` naming the file and the
element's path (``SystemStructure.ssd: /ssd:SystemStructureDescription/
ssd:System/ssd:Elements/ssd:Component[2]/ssd:ParameterBindings/...``).
Accepted without effect on the simulation: ``id``, ``description`` and the
top-level metadata attributes (``author``, ``fileversion``, ``copyright``,
``license``, ``generationTool``, ``generationDateAndTime``) and the graphical
elements (``ElementGeometry``, ``ConnectorGeometry``, ``ConnectionGeometry``,
``SystemGeometry``, ``GraphicalElements``) and ``Annotations``, wherever they
stand: SSP's extension mechanism (SSP 1.0, "Extensibility"), tool-specific data
or layered standards that add ignorable content. No annotation type changes what
cosimrun simulates from the standard elements it maps, so none is read; their
``type`` attributes are counted (:attr:`SystemDecl.annotations`) for the import
to list once.

FMPy's ``fmpy.ssp.ssd.read_ssd`` is not used: it drops ``suppressUnitConversion``,
the mapping transformations, system-level parameter bindings, annotations and
unknown elements without a word, and looks for ``LinearTransformation`` in the
``ssd`` namespace instead of ``ssc``.

XML is parsed by expat, which resolves no external entities and refuses
entity-expansion bombs; each XML file and each FMU entry is bounded by the
FMU size limits (``COSIMRUN_FMU_MAX_DESCRIPTION_SIZE``, ``COSIMRUN_FMU_MAX_UNPACKED_SIZE``).
"""

from __future__ import annotations

import math
import posixpath
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from xml.etree import ElementTree

from cosimrun.core.units import compile_conversion
from cosimrun.errors import ConfigError, IncompatibleUnitsError
from cosimrun.fmi.extraction import FMUSettings, _safe_name
from cosimrun.fmi.units import base_unit_expression, modelica_unit_to_pint

SSD_FILE = "SystemStructure.ssd"
"""The system structure an SSP archive must hold at its root."""

NAMESPACES = {
    "http://ssp-standard.org/SSP1/SystemStructureDescription": "ssd",
    "http://ssp-standard.org/SSP1/SystemStructureCommon": "ssc",
    "http://ssp-standard.org/SSP1/SystemStructureParameterValues": "ssv",
    "http://ssp-standard.org/SSP1/SystemStructureParameterMapping": "ssm",
    "http://ssp-standard.org/SSP1/SystemStructureSignalDictionary": "ssb",
}
"""SSP 1.0 namespace URIs and the prefixes the standard (and the errors) use for them."""

FMU_TYPE = "application/x-fmu-sharedlibrary"
PARAMETER_SET_TYPE = "application/x-ssp-parameter-set"
BASE = ("id", "description")
METADATA = ("author", "fileversion", "copyright", "license", "generationTool", "generationDateAndTime")
GRAPHICAL = ("ssd:ElementGeometry", "ssd:ConnectorGeometry", "ssd:ConnectionGeometry", "ssd:SystemGeometry",
             "ssd:GraphicalElements")
"""Elements that only draw the system: accepted, not read."""
TYPES = ("Real", "Integer", "Boolean", "String", "Enumeration", "Binary")
ANNOTATIONS = frozenset(f"{prefix}:Annotations" for prefix in NAMESPACES.values())
"""The annotation blocks of every SSP file format (``ssd:Annotations``, ``ssv:Annotations`` ...): accepted, not
read."""
NO_TYPE = "(no type)"
"""How :attr:`SystemDecl.annotations` counts an ``ssc:Annotation`` without its required ``type``."""


class SSPError(ConfigError):
    """An SSP archive cosimrun cannot import: ``where`` is the file and element path, ``message`` why."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(None, f"{where}: {message}")
        self.where = where
        self.reason = message


# ------------------------------------------------------------------ declarations
@dataclass(frozen=True)
class ConnectorDecl:
    """A connector of a component: an FMU variable as the SSD declares it."""

    name: str
    kind: str
    type: str | None
    """``Real``, ``Integer``, ``Boolean``, ``String``, ``Enumeration``; ``None`` when not declared."""
    unit: str | None
    """Its unit in pint syntax (``None``: none declared)."""
    where: str


@dataclass(frozen=True)
class ValueDecl:
    """One parameter value of a parameter set (a name, after the binding's prefix is applied)."""

    name: str
    type: str
    value: Any
    unit: str | None
    where: str


@dataclass(frozen=True)
class ComponentDecl:
    """An FMU component of the system."""

    name: str
    source: str
    """The FMU's entry in the archive."""
    connectors: list[ConnectorDecl]
    values: list[ValueDecl]
    """Values of its parameter bindings, names relative to the component."""
    where: str


@dataclass(frozen=True)
class ConnectionDecl:
    """A connection between two component connectors, with its transformation."""

    start: tuple[str, str]
    end: tuple[str, str]
    convert_units: bool
    factor: float = 1.0
    offset: float = 0.0
    mapping: str | None = None
    """``Boolean``, ``Integer`` or ``Enumeration``: a mapping transformation of that type that maps every value
    to itself."""
    where: str = ""


@dataclass
class SystemDecl:
    """Everything cosimrun maps from an SSP archive."""

    name: str
    description: str
    components: list[ComponentDecl] = field(default_factory=list)
    connections: list[ConnectionDecl] = field(default_factory=list)
    start_time: float | None = None
    stop_time: float | None = None
    unused_entries: list[str] = field(default_factory=list)
    """Archive entries nothing refers to (other SSDs, documentation ...): not imported, listed by the importer."""
    annotations: dict[str, int] = field(default_factory=dict)
    """How many ``ssc:Annotation`` elements of each ``type`` the SSD and the SSV files it uses hold (ignored)."""


# ------------------------------------------------------------------ XML walk
class _Node:
    """An XML element with its file and path, for checks and error locations."""

    def __init__(self, element: ElementTree.Element, path: str, file: str) -> None:
        self.element = element
        self.path = path
        self.file = file

    @property
    def where(self) -> str:
        return f"{self.file}: {self.path}"

    @property
    def tag(self) -> str:
        return _qualified(self.element.tag)

    def fail(self, message: str) -> SSPError:
        return SSPError(self.where, message)

    def check(self, attributes: Iterable[str] = (), children: Iterable[str] = ()) -> None:
        """Refuse attributes and child elements not in the lists, and text content."""
        allowed = set(attributes)
        for name in self.element.attrib:
            if _qualified(name) not in allowed:
                raise self.fail(f"attribute {_qualified(name)}={self.element.attrib[name]!r} is not supported "
                                f"(supported here: {', '.join(sorted(allowed)) or 'none'})")
        known = set(children) | set(GRAPHICAL) | ANNOTATIONS
        for child in self.children():
            if child.tag not in known:
                raise child.fail(_unsupported(child.tag))
        if (self.element.text or "").strip():
            raise self.fail(f"text content {self.element.text.strip()[:40]!r} is not supported")

    def children(self, tag: str | None = None) -> list[_Node]:
        elements = list(self.element)
        counts: dict[str, int] = {}
        for el in elements:
            counts[_qualified(el.tag)] = counts.get(_qualified(el.tag), 0) + 1
        seen: dict[str, int] = {}
        out = []
        for el in elements:
            name = _qualified(el.tag)
            seen[name] = seen.get(name, 0) + 1
            step = f"{name}[{seen[name]}]" if counts[name] > 1 else name
            if tag is None or name == tag:
                out.append(_Node(el, f"{self.path}/{step}", self.file))
        return out

    def child(self, tag: str) -> _Node | None:
        found = self.children(tag)
        return found[0] if found else None

    def get(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.element.get(name)
        if value is None and required:
            raise self.fail(f"attribute {name} is missing")
        return default if value is None else value

    def number(self, name: str, default: float | None = None) -> float | None:
        text = self.get(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise self.fail(f"attribute {name}={text!r} is not a finite number")
        return value

    def flag(self, name: str, default: bool) -> bool:
        text = self.get(name)
        if text is None:
            return default
        if text.strip() not in ("true", "false", "1", "0"):
            raise self.fail(f"attribute {name}={text!r} is not a boolean (true, false, 1, 0)")
        return text.strip() in ("true", "1")


_UNSUPPORTED = {
    "ssd:System": "nested systems are not supported; flatten the system into one level of components",
    "ssd:SignalDictionaries": "signal dictionaries are not supported",
    "ssd:SignalDictionaryReference": "signal dictionaries are not supported",
    "ssd:ParameterMapping": "parameter mappings (SSM) are not supported; give the values under the FMU's "
                            "variable names",
    "ssd:Enumerations": "enumeration definitions are not supported (enumerations are mapped as integers)",
    "ssv:Enumerations": "enumeration definitions are not supported (enumerations are mapped as integers)",
    "ssc:Binary": "binary values are not supported",
    "ssv:Binary": "binary values are not supported",
}


def _unsupported(tag: str) -> str:
    return f"element {tag} is not supported" + (f": {_UNSUPPORTED[tag]}" if tag in _UNSUPPORTED else "")


def _qualified(name: str) -> str:
    """``{uri}local`` as ``prefix:local`` (an unknown namespace keeps its URI)."""
    if name.startswith("{"):
        uri, _, local = name[1:].partition("}")
        return f"{NAMESPACES[uri]}:{local}" if uri in NAMESPACES else name
    return name


# ------------------------------------------------------------------ archive
class SSPArchive:
    """An SSP zip archive: its entry names checked, reads bounded; ``zip`` is the open ``ZipFile``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.settings = FMUSettings.from_environment()
        if not path.is_file():
            raise SSPError(str(path), "no such file" if not path.exists() else "not a file")
        if not zipfile.is_zipfile(path):
            raise SSPError(str(path), "not an SSP archive (an SSP file is a zip archive with a SystemStructure.ssd)")
        self.zip = zipfile.ZipFile(path)
        for info in self.zip.infolist():
            if _safe_name(info.filename) is None:
                raise SSPError(str(path), f"entry {info.filename!r} points outside the archive's directory "
                                          "(absolute path, '..', drive letter or backslash)")
        self.names = {str(_safe_name(i.filename)): i for i in self.zip.infolist() if not i.is_dir()}
        self.annotations: dict[str, Counter[str]] = {}
        """Per XML file read: how many annotations of each type it holds."""
        if SSD_FILE not in self.names:
            raise SSPError(str(path), f"the archive has no {SSD_FILE} at its root "
                                      f"(entries: {', '.join(sorted(self.names)[:8]) or 'none'})")
        self.used = {SSD_FILE}

    def close(self) -> None:
        self.zip.close()

    def entry(self, source: str, node: _Node) -> str:
        """The archive entry a ``source`` URI relative to the SSD names (refused when absolute or missing)."""
        if ":" in source or source.startswith("/") or "\\" in source:
            raise node.fail(f"source {source!r} is not a relative path inside the archive (only those are supported)")
        name = posixpath.normpath(source)
        if name.startswith("../") or name == ".." or name not in self.names:
            raise node.fail(f"source {source!r} names no file of the archive")
        self.used.add(name)
        return name

    def xml(self, name: str) -> ElementTree.Element:
        info = self.names[name]
        limit = self.settings.max_description_size
        if info.file_size > limit:
            raise SSPError(name, f"{info.file_size} bytes, above the limit of {limit} "
                                 "(raise it with COSIMRUN_FMU_MAX_DESCRIPTION_SIZE)")
        try:
            root = ElementTree.fromstring(self.zip.read(info))
        except ElementTree.ParseError as exc:
            raise SSPError(name, f"not well-formed XML: {exc}") from None
        self.annotations[name] = _annotation_types(root)
        return root

    def copy(self, name: str, target: Path) -> None:
        """Write entry *name* to *target*, never more than its declared size."""
        info = self.names[name]
        if info.file_size > self.settings.max_unpacked_size:
            raise SSPError(name, f"{info.file_size} bytes, above the limit of {self.settings.max_unpacked_size} "
                                 "(raise it with COSIMRUN_FMU_MAX_UNPACKED_SIZE)")
        budget = info.file_size
        with self.zip.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 20):
                budget -= len(chunk)
                if budget < 0:
                    raise SSPError(name, f"decompresses to more than its declared {info.file_size} bytes")
                dst.write(chunk)


# ------------------------------------------------------------------ units
class _Units:
    """Unit names of an SSD or SSV (``ssc:Unit``) resolved to pint, each definition checked against pint."""

    def __init__(self, parent: _Units | None = None) -> None:
        self.defined: dict[str, str] = {}
        self.parent = parent

    def read(self, node: _Node | None) -> None:
        if node is None:
            return
        node.check(children=("ssc:Unit",))
        for unit in node.children("ssc:Unit"):
            unit.check(("name", *BASE), ("ssc:BaseUnit",))
            name = str(unit.get("name", required=True))
            base = unit.child("ssc:BaseUnit")
            if base is None:
                raise unit.fail("ssc:BaseUnit is missing")
            exponents = ("kg", "m", "s", "A", "K", "mol", "cd", "rad")
            base.check((*exponents, "factor", "offset"))
            values = {e: int(base.number(e, 0.0) or 0) for e in exponents}
            factor, offset = base.number("factor", 1.0), base.number("offset", 0.0)
            self.defined[name] = _checked_unit(unit, name, SimpleNamespace(**values, factor=factor, offset=offset))

    def resolve(self, name: str | None, node: _Node) -> str | None:
        """Unit *name* in pint syntax (``None`` for none or dimensionless)."""
        if name is None or not name.strip():
            return None
        if name in self.defined:
            unit = self.defined[name]
        elif self.parent is not None and name in self.parent.defined:
            unit = self.parent.defined[name]
        else:
            try:
                unit = modelica_unit_to_pint(name)
            except ValueError as exc:
                raise node.fail(f"unit {name!r} is unknown and not defined in ssd:Units ({exc})") from None
        return None if unit == "dimensionless" else unit


def _checked_unit(node: _Node, name: str, base: SimpleNamespace) -> str:
    """Unit *name* as pint reads it, refused when its ``BaseUnit`` says otherwise; a name pint does not know
    stands for its base-unit expression when its factor is 1 and offset 0."""
    si = "*".join(f"{u}**{getattr(base, u)}" for u in ("kg", "m", "s", "A", "K", "mol", "cd")
                  if getattr(base, u)) or "dimensionless"
    try:
        unit = modelica_unit_to_pint(name)
    except ValueError:
        unit = base_unit_expression(base)
        if unit is None:
            raise node.fail(f"unit {name!r} is unknown to cosimrun and its BaseUnit has factor {base.factor:g} and "
                            f"offset {base.offset:g}; only unknown units with factor 1 and offset 0 are supported")\
                from None
        return str(unit)
    try:
        conversion = compile_conversion(unit, si)
    except IncompatibleUnitsError:
        conversion = None
    if conversion is None or not (math.isclose(conversion.scale, base.factor, rel_tol=1e-9)
                                  and math.isclose(conversion.offset, base.offset, rel_tol=1e-9, abs_tol=1e-12)):
        raise node.fail(f"unit {name!r} is defined with BaseUnit {si} x {base.factor:g} {base.offset:+g}, which is "
                        f"not what {name!r} means to cosimrun ({unit}); rename the unit or correct its definition")
    return unit


# ------------------------------------------------------------------ the SSD
def read_ssp(path: str | Path) -> tuple[SystemDecl, SSPArchive]:
    """Read the archive at *path*; the caller closes the returned archive (it copies the FMUs out of it)."""
    archive = SSPArchive(Path(path))
    try:
        system = _read(archive)
    except BaseException:
        archive.close()
        raise
    system.unused_entries = sorted(set(archive.names) - archive.used - {s.source for s in system.components})
    system.annotations = dict(sum(archive.annotations.values(), Counter()))
    return system, archive


def _annotation_types(root: ElementTree.Element) -> Counter[str]:
    """How many ``ssc:Annotation`` elements of each ``type`` the annotation blocks under *root* hold."""
    return Counter(annotation.get("type") or NO_TYPE
                   for block in root.iter() if _qualified(block.tag) in ANNOTATIONS for annotation in block)


def _read(archive: SSPArchive) -> SystemDecl:
    root = _Node(archive.xml(SSD_FILE), "", SSD_FILE)
    root.path = f"/{root.tag}"
    if root.tag != "ssd:SystemStructureDescription":
        raise root.fail("the root element must be ssd:SystemStructureDescription "
                        "(namespace http://ssp-standard.org/SSP1/SystemStructureDescription)")
    root.check(("version", "name", *BASE, *METADATA), ("ssd:System", "ssd:Units", "ssd:DefaultExperiment"))
    version = str(root.get("version", required=True))
    if not version.startswith("1."):
        raise root.fail(f"SSP version {version!r} is not supported (supported: 1.0)")
    units = _Units()
    units.read(root.child("ssd:Units"))
    system_node = root.child("ssd:System")
    if system_node is None:
        raise root.fail("ssd:System is missing")
    out = SystemDecl(name=str(root.get("name", required=True)), description=str(root.get("description", "")))
    experiment = root.child("ssd:DefaultExperiment")
    if experiment is not None:
        experiment.check(("startTime", "stopTime"))
        out.start_time, out.stop_time = experiment.number("startTime"), experiment.number("stopTime")
    _read_system(archive, system_node, units, out)
    return out


def _read_system(archive: SSPArchive, node: _Node, units: _Units, out: SystemDecl) -> None:
    node.check(("name", *BASE), ("ssd:Connectors", "ssd:ParameterBindings", "ssd:Elements", "ssd:Connections"))
    connectors = node.child("ssd:Connectors")
    if connectors is not None and any(c.tag not in ANNOTATIONS for c in connectors.children()):
        raise connectors.fail("connectors of the system itself are not supported: cosimrun runs the system closed "
                              "(connect the components to each other)")
    system_values = _bindings(archive, node.child("ssd:ParameterBindings"), units)
    elements = node.child("ssd:Elements")
    if elements is not None:
        elements.check(children=("ssd:Component",))
        for comp in elements.children("ssd:Component"):
            out.components.append(_component(archive, comp, units))
    by_name = {c.name: c for c in out.components}
    for value in system_values:
        element, dot, name = value.name.partition(".")
        if not dot or element not in by_name:
            raise SSPError(value.where, f"parameter {value.name!r} names no component of the system "
                                        f"(a system-level value is named 'component.variable'; components: "
                                        f"{', '.join(by_name) or 'none'})")
        by_name[element].values.append(ValueDecl(name, value.type, value.value, value.unit, value.where))
    connections = node.child("ssd:Connections")
    if connections is not None:
        connections.check(children=("ssd:Connection",))
        out.connections.extend(_connection(c) for c in connections.children("ssd:Connection"))


def _component(archive: SSPArchive, node: _Node, units: _Units) -> ComponentDecl:
    node.check(("name", "type", "source", "implementation", *BASE),
               ("ssd:Connectors", "ssd:ParameterBindings"))
    name = str(node.get("name", required=True))
    kind = node.get("type", FMU_TYPE)
    if kind != FMU_TYPE:
        raise node.fail(f"component {name!r} has type {kind!r}; only FMUs ({FMU_TYPE}) are supported")
    implementation = node.get("implementation", "any")
    if implementation not in ("any", "CoSimulation"):
        raise node.fail(f"component {name!r}: implementation {implementation!r} is not supported "
                        "(cosimrun runs FMUs as co-simulation: any, CoSimulation)")
    source = archive.entry(str(node.get("source", required=True)), node)
    connectors = []
    block = node.child("ssd:Connectors")
    if block is not None:
        block.check(children=("ssd:Connector",))
        connectors = [_connector(c, units) for c in block.children("ssd:Connector")]
    values = _bindings(archive, node.child("ssd:ParameterBindings"), units)
    return ComponentDecl(name, source, connectors, values, node.where)


def _connector(node: _Node, units: _Units) -> ConnectorDecl:
    node.check(("name", "kind", *BASE), [f"ssc:{t}" for t in TYPES])
    types = [c for c in node.children() if c.tag.startswith("ssc:") and c.tag not in ANNOTATIONS]
    type_name = unit = None
    if len(types) > 1:
        raise types[1].fail(f"a connector has one type; {types[0].tag} is given already")
    if types:
        typed = types[0]
        type_name = typed.tag.removeprefix("ssc:")
        if type_name == "Binary":
            raise typed.fail(_unsupported("ssc:Binary"))
        typed.check(("unit",) if type_name == "Real" else ("name",) if type_name == "Enumeration" else ())
        unit = units.resolve(typed.get("unit"), typed) if type_name == "Real" else None
    return ConnectorDecl(str(node.get("name", required=True)), str(node.get("kind", required=True)), type_name,
                         unit, node.where)


def _connection(node: _Node) -> ConnectionDecl:
    node.check(("startElement", "startConnector", "endElement", "endConnector", "suppressUnitConversion", *BASE),
               ("ssc:LinearTransformation", "ssc:BooleanMappingTransformation", "ssc:IntegerMappingTransformation",
                "ssc:EnumerationMappingTransformation"))
    ends = []
    for end in ("start", "end"):
        element = node.get(f"{end}Element")
        if element is None:
            raise node.fail(f"{end}Element is missing: connections to the system's own connectors are not supported")
        ends.append((element, str(node.get(f"{end}Connector", required=True))))
    convert = not node.flag("suppressUnitConversion", False)
    linear = node.child("ssc:LinearTransformation")
    if linear is not None:
        linear.check(("factor", "offset"))
        factor, offset = linear.number("factor", 1.0), linear.number("offset", 0.0)
        return ConnectionDecl(ends[0], ends[1], convert, float(factor or 0.0), float(offset or 0.0), where=node.where)
    for tag in ("Boolean", "Integer", "Enumeration"):
        mapping = node.child(f"ssc:{tag}MappingTransformation")
        if mapping is not None:
            _identity_mapping(mapping, tag)
            return ConnectionDecl(ends[0], ends[1], convert, mapping=tag, where=node.where)
    return ConnectionDecl(ends[0], ends[1], convert, where=node.where)


def _identity_mapping(node: _Node, type_name: str) -> None:
    """A mapping transformation is mapped when it maps each listed value to itself (a plain connection)."""
    node.check(BASE, ("ssc:MapEntry",))
    for entry in node.children("ssc:MapEntry"):
        entry.check(("source", "target", *BASE))
        source, target = str(entry.get("source", required=True)), str(entry.get("target", required=True))
        if type_name == "Boolean":
            same = _typed_value(entry, "Boolean", source) == _typed_value(entry, "Boolean", target)
        elif type_name == "Integer":
            same = _typed_value(entry, "Integer", source) == _typed_value(entry, "Integer", target)
        else:
            same = source.strip() == target.strip()
        if not same:
            raise entry.fail(f"maps {source!r} to {target!r}; only mappings of each value to itself are supported "
                             "(a connection carries a value unchanged or through scale and offset on real ports)")


# ------------------------------------------------------------------ parameter values
def _bindings(archive: SSPArchive, node: _Node | None, units: _Units) -> list[ValueDecl]:
    """The values of the ``ssd:ParameterBindings`` at *node*, names with their binding's prefix."""
    if node is None:
        return []
    node.check(children=("ssd:ParameterBinding",))
    values = []
    for binding in node.children("ssd:ParameterBinding"):
        binding.check(("type", "source", "sourceBase", "prefix", *BASE), ("ssd:ParameterValues",))
        kind = binding.get("type", PARAMETER_SET_TYPE)
        if kind != PARAMETER_SET_TYPE:
            raise binding.fail(f"type {kind!r} is not supported (supported: {PARAMETER_SET_TYPE})")
        if binding.get("sourceBase", "SSD") != "SSD":
            raise binding.fail(f"sourceBase {binding.get('sourceBase')!r} is not supported (supported: SSD)")
        prefix = str(binding.get("prefix", ""))
        inline = binding.child("ssd:ParameterValues")
        source = binding.get("source")
        if (inline is None) == (source is None):
            raise binding.fail("give the values either in a source file or inline in ssd:ParameterValues")
        if inline is not None:
            inline.check(children=("ssv:ParameterSet",))
            sets = inline.children("ssv:ParameterSet")
            if len(sets) != 1:
                raise inline.fail("expected one ssv:ParameterSet")
            parameter_set = sets[0]
        else:
            name = archive.entry(str(source), binding)
            parameter_set = _Node(archive.xml(name), "", name)
            parameter_set.path = f"/{parameter_set.tag}"
            if parameter_set.tag != "ssv:ParameterSet":
                raise parameter_set.fail("the root element must be ssv:ParameterSet "
                                         "(namespace http://ssp-standard.org/SSP1/SystemStructureParameterValues)")
        values.extend(_parameter_set(parameter_set, prefix, units))
    return values


def _parameter_set(node: _Node, prefix: str, units: _Units) -> list[ValueDecl]:
    node.check(("version", "name", *BASE, *METADATA), ("ssv:Parameters", "ssv:Units"))
    own = _Units(units)
    own.read(node.child("ssv:Units"))
    parameters = node.child("ssv:Parameters")
    if parameters is None:
        return []
    parameters.check(children=("ssv:Parameter",))
    values = []
    for parameter in parameters.children("ssv:Parameter"):
        parameter.check(("name", *BASE), [f"ssv:{t}" for t in TYPES])
        typed = [c for c in parameter.children() if c.tag.startswith("ssv:") and c.tag not in ANNOTATIONS]
        if len(typed) != 1:
            raise parameter.fail("expected one value element (ssv:Real, ssv:Integer, ssv:Boolean, ssv:String)")
        value = typed[0]
        type_name = value.tag.removeprefix("ssv:")
        if type_name in ("Binary", "Enumeration"):
            raise value.fail(f"{value.tag} values are not supported" if type_name == "Enumeration"
                             else _unsupported(value.tag))
        value.check(("value", "unit") if type_name == "Real" else ("value",))
        text = str(value.get("value", required=True))
        unit = own.resolve(value.get("unit"), value) if type_name == "Real" else None
        values.append(ValueDecl(prefix + str(parameter.get("name", required=True)), type_name,
                                _typed_value(value, type_name, text), unit, parameter.where))
    return values


def _typed_value(node: _Node, type_name: str, text: str) -> Any:
    try:
        if type_name == "Real":
            number = float(text)
            if math.isfinite(number):
                return number
        elif type_name == "Integer":
            return int(text)
        elif type_name == "Boolean" and text.strip() in ("true", "false", "1", "0"):
            return text.strip() in ("true", "1")
        elif type_name == "String":
            return text
    except ValueError:
        pass
    raise node.fail(f"value {text!r} is not a valid {type_name}")
