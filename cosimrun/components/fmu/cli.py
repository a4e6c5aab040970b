"""The command line of :mod:`cosimrun.components.fmu`: ``build-example DIR`` and ``info MODEL.fmu``.

Run as ``python -m cosimrun.components.fmu ...`` (see ``__main__.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from cosimrun.components.fmu.build import EXAMPLES, build_example
from cosimrun.components.fmu.component import FMUComponent
from cosimrun.components.fmu.errors import FMUError


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
