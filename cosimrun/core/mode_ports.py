"""The one set of ports of a multi component: its reference mode's, checked against every other mode.

Every mode must expose the same ports, of the same direction and type; a real
port may use another unit if it is compatible, and gets a compiled conversion.
Event ports of the models' own indicators are left out (a multi component
mirrors them at initialization).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.core.switching import ModeKey
from cosimrun.core.units import UnitConversion, compile_conversion, units_compatible
from cosimrun.errors import ConfigError


@dataclass
class ModePorts:
    """The unified port specs, and per mode the conversions of the ports whose unit differs."""

    inputs: dict[str, PortSpec]
    outputs: dict[str, PortSpec]
    to_model: dict[ModeKey, dict[str, UnitConversion]] = field(default_factory=dict)
    """Per mode, input port -> conversion from the unified unit to the model's."""
    from_model: dict[ModeKey, dict[str, UnitConversion]] = field(default_factory=dict)
    """Per mode, output port -> conversion from the model's unit to the unified one."""


def plain_outputs(model: CoSimComponent) -> dict[str, PortSpec]:
    """Output specs of *model* without the EVENT ports of its indicators."""
    indicators = model.event_indicators
    return {n: s for n, s in model.output_specs.items() if not (s.type is PortType.EVENT and n in indicators)}


def unify_ports(name: str, models: Mapping[ModeKey, CoSimComponent], ref_mode: ModeKey) -> ModePorts:
    """Adopt *ref_mode*'s port specs and check that every other model of multi component *name* has the same ports."""
    ref = models[ref_mode]
    ref_inputs = dict(ref.input_specs)
    ref_outputs = plain_outputs(ref)
    ports = ModePorts(dict(ref_inputs), dict(ref_outputs))
    for mode, model in models.items():
        ports.to_model[mode], ports.from_model[mode] = {}, {}
        if model is ref:
            continue
        for kind, ref_specs, specs, conv in (
            ("input", ref_inputs, dict(model.input_specs), ports.to_model[mode]),
            ("output", ref_outputs, plain_outputs(model), ports.from_model[mode]),
        ):
            missing = sorted(set(ref_specs) - set(specs))
            extra = sorted(set(specs) - set(ref_specs))
            if missing:
                raise ConfigError(
                    None, f"MultiComponent {name!r}: model {mode!r} lacks {kind} port(s) "
                    f"{', '.join(map(repr, missing))} of the reference model {ref_mode!r}"
                )
            if extra:
                raise ConfigError(
                    None, f"MultiComponent {name!r}: model {mode!r} has {kind} port(s) "
                    f"{', '.join(map(repr, extra))} that the reference model {ref_mode!r} lacks; "
                    "every mode must expose the same ports"
                )
            for port, ref_spec in ref_specs.items():
                spec = specs[port]
                problem = _incompatibility(ref_spec, spec, mode, port)
                if problem:
                    raise ConfigError(None, f"MultiComponent {name!r} (reference mode {ref_mode!r}): {problem}")
                if spec.type is PortType.REAL:
                    src, dst = (ref_spec, spec) if kind == "input" else (spec, ref_spec)
                    c = compile_conversion(src.unit, dst.unit)
                    if not c.is_identity:
                        conv[port] = c
    return ports


def _incompatibility(ref_spec: PortSpec, spec: PortSpec, model_name: str, port_name: str) -> str | None:
    """Why *spec* cannot stand in for *ref_spec* (naming model and port), or ``None``."""
    if spec.direction != ref_spec.direction:
        return (f"model {model_name!r}: port {port_name!r} is an {spec.direction}put, "
                f"the reference model declares an {ref_spec.direction}put")
    if spec.type is not ref_spec.type:
        return (f"model {model_name!r}: port {port_name!r} has type {spec.type.value}, "
                f"the reference model declares {ref_spec.type.value}")
    if spec.type is PortType.REAL and not units_compatible(ref_spec.unit, spec.unit):
        return (f"model {model_name!r}: port {port_name!r} has unit {spec.unit_name or 'none'!s}, "
                f"incompatible with unit {ref_spec.unit_name or 'none'!s} of the reference model")
    return None


def common_feedthrough(name: str, models: Mapping[ModeKey, CoSimComponent], initial_mode: ModeKey,
                       outputs: Sequence[str], inputs: set[str]) -> dict[str, set[str]]:
    """The direct feedthrough to *outputs* (from *inputs*) all models of multi component *name* share.

    A union would hide a loop from the master whenever the wrong model is
    active, so a disagreement is a ``ConfigError``; declaring
    ``direct_feedthrough`` on the multi component before initialize overrides it.
    """
    maps = {
        mode: {o: set(model.direct_feedthrough.get(o, ())) & inputs for o in outputs}
        for mode, model in models.items()
    }
    reference = maps[initial_mode]
    for mode, fmap in maps.items():
        for out in outputs:
            if fmap[out] != reference[out]:
                raise ConfigError(
                    None, f"MultiComponent {name!r}: models disagree on direct feedthrough to output {out!r}: "
                    f"{initial_mode!r} has inputs {sorted(reference[out])}, {mode!r} has {sorted(fmap[out])}; "
                    "declare direct_feedthrough on the MultiComponent before initialize to override"
                )
    return reference
