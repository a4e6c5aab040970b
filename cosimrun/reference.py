"""The reference of a component type: its description, parameters and ports, from the code itself.

:func:`describe_component` gives it as data (:class:`ComponentDoc`) and
:func:`component_reference` as text, for a builtin type, a plugin's type (through
the registry of :mod:`cosimrun.plugins`) or an FMU file (a name ending in
``.fmu``, or ``example:NAME``). :func:`markdown_table` is the README's table of
the builtin types, between :data:`TABLE_START` and :data:`TABLE_END`::

    python -m cosimrun.reference pendulum               # one component's reference
    python -m cosimrun.reference --markdown             # the README table
    python -m cosimrun.reference --update README.md     # rewrite the table in a file
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cosimrun.components import TYPES
from cosimrun.core.ode.registry import INTEGRATORS
from cosimrun.core.parameters import Parameter, declared_parameters
from cosimrun.errors import ConfigError, CosimrunError
from cosimrun.plugins import ComponentRegistry, distribution_name, first_doc_line, get_registry

TABLE_START = "<!-- components:start -->"
TABLE_END = "<!-- components:end -->"

ODE_PARAMETERS: dict[str, Parameter] = {
    "integrator": Parameter("choice", choices=tuple(INTEGRATORS), default="rk4",
                            doc="integration method: fixed-step rk4, an adaptive scipy method, or cvode (BDF, stiff)"),
    "substeps": Parameter(int, default=10, ge=1, doc="rk4 steps per macro step"),
    "rtol": Parameter(float, default=1e-6, gt=0, doc="relative tolerance of the adaptive methods"),
    "atol": Parameter(float, default=1e-9, gt=0, doc="absolute tolerance of the adaptive methods (or one per state)"),
    "max_substep": Parameter(float, unit="s", gt=0, doc="largest integrator step (null: no limit)"),
}
"""What every :class:`~cosimrun.core.ode.OdeComponent` takes besides its own parameters (for the reference)."""


@dataclass(frozen=True)
class ParameterDoc:
    """One parameter as the reference lists it."""

    name: str
    type: str
    """``float``, ``int``, ``bool``, ``str``, ``unit``, ``choice``, ``path`` (declared) or the default's type."""
    unit: str | None
    default: Any
    bounds: str = ""
    """E.g. ``"> 0 and <= 1"``."""
    choices: tuple[str, ...] = ()
    doc: str = ""

    @classmethod
    def of(cls, name: str, declared: Parameter) -> ParameterDoc:
        """The reference entry of a declared parameter."""
        return cls(name, str(declared.type), declared.unit, declared.default, declared.bounds, declared.choices,
                   declared.doc)


@dataclass(frozen=True)
class PortDoc:
    """One port as the reference lists it."""

    name: str
    direction: str
    """``in`` or ``out``."""
    type: str
    """``real``, ``int``, ``bool``, ``string`` or ``event``."""
    unit: str | None
    doc: str = ""


@dataclass(frozen=True)
class ComponentDoc:
    """The reference of one component type (or FMU file)."""

    name: str
    source: str
    """Where it comes from: ``module:Class (distribution)`` or the FMU file."""
    summary: str
    """The first line of the class docstring (of the model, for an FMU)."""
    description: str
    """The first paragraph of the class docstring."""
    parameters: tuple[ParameterDoc, ...]
    ports: tuple[PortDoc, ...]
    notes: tuple[str, ...] = ()
    """Anything else worth knowing (ports that depend on parameters, rollback, state ...)."""


def describe_component(name: str, registry: ComponentRegistry | None = None) -> ComponentDoc:
    """The reference of component type *name*, or of the FMU file *name* (ending in ``.fmu``, or ``example:NAME``).

    Raises :class:`~cosimrun.errors.PluginError` (with "did you mean") for an
    unknown type or one that fails to load.
    """
    if name.lower().endswith(".fmu") or name.startswith("example:"):
        from cosimrun.components.fmu.cli import fmu_reference

        return fmu_reference(name)
    registry = registry or get_registry()
    cls = registry.get_component_class(name)
    ep = registry.entry_point(name)
    dist = distribution_name(ep)
    source = f"{ep.value}, distribution {dist}" if dist else ep.value
    summary, description = _ROLE.sub(r"\1", first_doc_line(cls)), _first_paragraph(cls.__dict__.get("__doc__") or "")
    if getattr(cls, "requires_models", False):
        notes = ("built from sub-components (modes); its ports and parameters are those of its modes",)
        return ComponentDoc(name, source, summary, description, (), (), notes)
    try:
        comp = cls(name)
    except Exception as exc:  # a plugin whose constructor needs more than a name
        notes = (f"ports not listed: {cls.__qualname__}({name!r}) failed: {type(exc).__name__}: {exc}",)
        params = tuple(ParameterDoc.of(n, p) for n, p in declared_parameters(cls).items())
        return ComponentDoc(name, source, summary, description, params, (), notes)
    notes = ("ports and further parameters come from the FMU: describe a file with NAME.fmu",) if name == "fmu" else ()
    return ComponentDoc(name, source, summary, description, instance_parameters(comp), instance_ports(comp), notes)


def instance_parameters(comp: Any) -> tuple[ParameterDoc, ...]:
    """The parameters of a constructed component: declared ones, then the rest with their current values."""
    from cosimrun.core.ode import ContinuousComponent, OdeComponent

    declared = declared_parameters(type(comp))
    states = comp.get_state() if isinstance(comp, ContinuousComponent) else {}
    docs = []
    for name, value in comp.parameters.items():
        if name in declared:
            docs.append(ParameterDoc.of(name, declared[name]))
        elif isinstance(comp, OdeComponent) and name in ODE_PARAMETERS:
            docs.append(ParameterDoc.of(name, ODE_PARAMETERS[name]))
        elif name.endswith("0") and name[:-1] in states:
            docs.append(ParameterDoc(name, "float", states[name[:-1]]["unit"], value,
                                     doc=f"initial value of state {name[:-1]}"))
        else:
            docs.append(ParameterDoc(name, _type_name(value), None, value))
    return tuple(docs)


def instance_ports(comp: Any) -> tuple[PortDoc, ...]:
    """The ports of a constructed component, inputs first; event indicators are boolean event outputs."""
    ports = [PortDoc(name, spec.direction, spec.type.value, spec.unit_name, spec.description or "")
             for specs in (comp.input_specs, comp.output_specs) for name, spec in specs.items()]
    ports += [PortDoc(name, "out", "event", None, f"true at instants of event {name!r}")
              for name in comp.event_indicators if name not in comp.output_specs]
    return tuple(ports)


def component_reference(name: str, registry: ComponentRegistry | None = None) -> str:
    """The reference of component type (or FMU file) *name* as text (see :func:`describe_component`)."""
    return format_reference(describe_component(name, registry))


def format_reference(doc: ComponentDoc) -> str:
    """*doc* as text: a header, the description, parameters, ports and notes."""
    lines = [f"{doc.name}  ({doc.source})", ""]
    lines += textwrap.wrap(doc.description, 100, initial_indent="  ", subsequent_indent="  ") or ["  (no description)"]
    lines += ["", "  parameters:" if doc.parameters else "  parameters: none"]
    lines += [f"    {p.name}: {_parameter_text(p)}" for p in doc.parameters]
    lines += ["  ports:" if doc.ports else "  ports: none listed"]
    for port in doc.ports:
        unit = f" [{port.unit}]" if port.unit else ""
        lines.append(f"    {port.direction:<3} {port.name}: {port.type}{unit}" + (f"  {port.doc}" if port.doc else ""))
    lines += [f"  {note}" for note in doc.notes]
    return "\n".join(lines)


def _parameter_text(p: ParameterDoc) -> str:
    kind = f"choice of {', '.join(p.choices)}" if p.choices else p.type
    unit = f" [{p.unit}]" if p.unit else ""
    bounds = f", {p.bounds}" if p.bounds else ""
    return f"{kind}{unit} = {_default(p.default)}{bounds}" + (f"  {p.doc}" if p.doc else "")


# ---------------------------------------------------------------------------- the README table
def markdown_table(names: Iterable[str] | None = None, registry: ComponentRegistry | None = None) -> str:
    """The markdown table of component types *names* (default: every builtin), between the markers.

    Columns: type, description (first sentence), parameters (name = default unit).
    ODE components also take the integrator settings, listed once below the table.
    """
    rows = [TABLE_START, "| type | description | parameters |", "| --- | --- | --- |"]
    for name in names or TYPES:
        doc = describe_component(name, registry)
        params = ", ".join(_cell_parameter(p) for p in doc.parameters if p.name not in ODE_PARAMETERS)
        rows.append(f"| `{name}` | {_cell(doc.summary)} | {_cell(params) or '(see the description)'} |")
    settings = ", ".join(f"`{n}`" for n in ODE_PARAMETERS)
    rows += ["", "A unit in braces is another parameter's value: `value` = 0.0 {unit} is in the unit set by `unit`.",
             f"ODE components (those with an initial-state parameter such as `q0`) also take {settings}.",
             "Run `cosimrun --list-components NAME` for a type's full reference: units, bounds, ports.", TABLE_END]
    return "\n".join(rows)


def _cell_parameter(p: ParameterDoc) -> str:
    unit = f" {p.unit}" if p.unit and p.default is not None else ""
    return f"`{p.name}` = {_default(p.default)}{unit}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def replace_table(text: str, table: str) -> str:
    """*text* with the part from :data:`TABLE_START` to :data:`TABLE_END` replaced by *table*."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ConfigError(None, f"no {TABLE_START} ... {TABLE_END} block found")
    return text[:start] + table + text[end + len(TABLE_END):]


# ---------------------------------------------------------------------------- helpers
def _first_paragraph(doc: str) -> str:
    paragraph = inspect.cleandoc(doc).split("\n\n")[0] if doc.strip() else ""
    return _ROLE.sub(r"\1", " ".join(paragraph.split())).replace("``", "")


_ROLE = re.compile(r":\w+:`~?([^`]+)`")
"""A Sphinx cross-reference such as ``:class:`~cosimrun.core.MultiComponent```: its target is kept."""


def _default(value: Any) -> str:
    """*value* as a config would write it (``null``, ``true``), strings quoted."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


def _type_name(value: Any) -> str:
    return "any" if value is None else type(value).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cosimrun.reference NAME | --markdown | --update FILE``."""
    parser = argparse.ArgumentParser(prog="python -m cosimrun.reference",
                                     description="The reference of a component type, or the README's table.")
    parser.add_argument("name", nargs="?", help="component type, or an FMU file (MODEL.fmu)")
    parser.add_argument("--markdown", action="store_true", help="print the table of the builtin types")
    parser.add_argument("--update", metavar="FILE", help=f"rewrite the table between {TABLE_START} and {TABLE_END}")
    args = parser.parse_args(argv)
    try:
        if args.update:
            path = Path(args.update)
            path.write_text(replace_table(path.read_text(encoding="utf-8"), markdown_table()), encoding="utf-8")
        elif args.markdown:
            print(markdown_table())
        elif args.name:
            print(component_reference(args.name))
        else:
            parser.error("give a component type, --markdown or --update FILE")
    except (CosimrunError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
