"""The command line of :mod:`cosimrun.components.fmu`: ``build-example DIR`` and ``info MODEL.fmu``.

Run as ``python -m cosimrun.components.fmu ...`` (see ``__main__.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence

from cosimrun.components.fmu.build import EXAMPLES, build_example
from cosimrun.components.fmu.component import FMUComponent
from cosimrun.fmi.description import INTERFACE_NAMES
from cosimrun.fmi.errors import FMUError
from cosimrun.reference import ComponentDoc, ParameterDoc, format_reference, instance_parameters, instance_ports

_PARAMETER_TYPES = {"Real": "float", "Integer": "int", "Enumeration": "int", "Boolean": "bool", "String": "str"}
"""Parameter types by variable kind (FMI 3's Float32/Int16 ... are listed by their kind)."""


def fmu_reference(path: str | os.PathLike[str]) -> ComponentDoc:
    """The reference of the component an FMU file makes: ports, parameters (own and the FMU's), notes."""
    comp = FMUComponent.resolve_class({"path": os.fspath(path)})("fmu")
    comp.set_parameters(path=os.fspath(path))
    model = comp.model  # type: ignore[attr-defined]
    assert model is not None
    md = model.description
    kind = INTERFACE_NAMES[comp.INTERFACE]  # type: ignore[attr-defined]
    summary = f"{md.modelName}: FMI {model.fmi_version} {kind} FMU ({md.generationTool or 'unknown tool'})"
    description = f"{summary}. {md.description}" if md.description else summary
    fmu_vars = {var.name: var for var in model.parameters}
    params = []
    for entry in instance_parameters(comp):
        var = fmu_vars.get(entry.name)
        if var is None:
            params.append(entry)
            continue
        bounds = " and ".join(f"{op} {v:g}" for op, v in ((">=", var.minimum), ("<=", var.maximum)) if v is not None)
        doc = f"{var.description} ({var.variability})" if var.description else f"({var.variability})"
        params.append(ParameterDoc(var.name, _PARAMETER_TYPES[var.type], var.unit, var.start, bounds, doc=doc))
    ports = []
    for port in instance_ports(comp):
        var = comp._port_vars.get(port.name)
        if var is not None and var.fmu_unit and var.fmu_unit != port.unit:
            port = dataclasses.replace(port, doc=f"(FMU unit {var.fmu_unit!r}) {port.doc}".rstrip())
        ports.append(port)
    interface = model.interfaces[comp.INTERFACE]  # type: ignore[attr-defined]
    events = ("yes (early return from fmi3DoStep at the FMU's events)" if interface.has_event_mode
              else "no (the FMU handles its events inside its steps)")
    notes = (
        f"interfaces: {model.offers} (runs as {kind}"
        + (", choose with params.interface)" if len(model.interfaces) > 1 else ")"),
        *((f"event mode: {events}",) if model.fmi_version == "3.0" and comp.INTERFACE == "cs" else ()),  # type: ignore[attr-defined]
        f"rollback: {'yes' if interface.can_rollback else 'no (canGetAndSetFMUstate=false)'}",
        "direct feedthrough: " + ("; ".join(f"{out} <- {', '.join(sorted(ins)) or 'none'}"
                                            for out, ins in comp.direct_feedthrough.items()) or "none"),
        f"state: {', '.join(comp.state_names) or 'none declared'}",
    )
    return ComponentDoc(model.label, os.fspath(model.path), summary, description, tuple(params), tuple(ports), notes)


def describe(path: str | os.PathLike[str]) -> str:
    """A text summary of the component an FMU file makes (its :func:`fmu_reference` as text)."""
    return format_reference(fmu_reference(path))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cosimrun.components.fmu build-example DIR`` | ``info MODEL.fmu`` (FMI 2.0 and 3.0, CS and ME)."""
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
