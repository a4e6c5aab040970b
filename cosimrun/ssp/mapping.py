"""Map the declarations read from an SSP archive onto a cosimrun experiment config, checked against the FMUs.

What maps to what:

* each ``ssd:Component`` -> a component ``{type: fmu, params: {path: ...}}``;
* its ``ssd:Connector`` elements are checked against the FMU's variables
  (name, kind = causality, type); a connector's unit must mean what the FMU's
  unit means, except on a unit-less FMU variable, which it gives a unit
  (``units: {port: unit}``);
* parameter values (SSV files and inline sets, at the component or, named
  ``component.variable``, at the system) -> the FMU's parameters by name, and
  start values of other settable variables -> ``params.start``; a real value in
  another unit is kept as a quantity (``'2.5 km'``) which the FMU component
  converts; the same variable given two different values is refused;
* ``ssd:Connection`` -> a connection; ``suppressUnitConversion`` ->
  ``convert_units: false``; ``LinearTransformation`` -> ``scale`` and ``offset``
  (SSP applies them after the unit conversion, as cosimrun does); a mapping
  transformation that maps each value to itself -> a plain connection;
* ``DefaultExperiment`` -> ``run.t0`` and ``run.tf``; ``run.dt`` is the smallest
  ``stepSize`` of the FMUs' default experiments, else a thousandth of the interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cosimrun.components.fmu.base import OWN_DEFAULTS
from cosimrun.core.units import compile_conversion
from cosimrun.errors import IncompatibleUnitsError, suggest
from cosimrun.fmi.description import FMUModel, FMUVariable
from cosimrun.ssp.reader import SSD_FILE, ComponentDecl, ConnectionDecl, SSPError, SystemDecl
from cosimrun.system.system import IDENTIFIER

STEPS_WITHOUT_HINT = 1000
"""``run.dt`` is the interval over this when no FMU suggests a step size."""
DEFAULT_STOP_TIME = 1.0
"""``run.tf - run.t0`` when neither the SSD nor an FMU gives a stop time."""
EXPERIMENT = f"{SSD_FILE}: /ssd:SystemStructureDescription/ssd:DefaultExperiment"


def experiment_config(system: SystemDecl, models: Mapping[str, FMUModel], paths: Mapping[str, str],
                      name: str) -> tuple[dict[str, Any], list[str]]:
    """The experiment config of *system* and notes on the choices made for it.

    *models* are the components' FMUs (read from the files the experiment will
    use), *paths* the ``path`` each component's config gets. Raises
    :class:`SSPError` at the SSD element that cannot be mapped.
    """
    components: dict[str, Any] = {}
    for comp in system.components:
        if comp.name in components:
            raise SSPError(comp.where, f"a second component named {comp.name!r}")
        components[comp.name] = _component(comp, models[comp.name], paths[comp.name])
    connections = [_connection(c, system.components, models) for c in system.connections]
    run, notes = _run(system, models)
    config: dict[str, Any] = {"name": name}
    if system.description:
        config["description"] = system.description
    config.update({"run": run, "components": components, "connections": connections})
    return config, notes


def _component(comp: ComponentDecl, model: FMUModel, path: str) -> dict[str, Any]:
    if not comp.name.isidentifier():
        raise SSPError(comp.where, f"component name {comp.name!r} cannot name a cosimrun component: it is not "
                                   f"{IDENTIFIER}")
    params: dict[str, Any] = {"path": path}
    units: dict[str, str] = {}
    for conn in comp.connectors:
        var = _variable(model, conn.name, conn.where, "connector")
        if conn.kind != var.causality:
            raise SSPError(conn.where, f"connector {conn.name!r} has kind {conn.kind!r} but the FMU's variable has "
                                       f"causality {var.causality!r}")
        if conn.type is not None and conn.type != var.type:
            raise SSPError(conn.where, f"connector {conn.name!r} is declared {conn.type} but the FMU's variable is "
                                       f"{var.type}")
        relabel = _connector_unit(conn.unit, var, conn.where)
        if relabel is not None:
            units[conn.name] = relabel
    given: dict[str, tuple[Any, str]] = {}
    start: dict[str, Any] = {}
    for value in comp.values:
        var = _variable(model, value.name, value.where, "parameter")
        if not var.settable_start:
            raise SSPError(value.where, f"{value.name!r} cannot be set (causality {var.causality}, variability "
                                        f"{var.variability}, initial {var.initial})")
        if not _same_type(value.type, var.type):
            raise SSPError(value.where, f"{value.name!r} is given a {value.type} value but is {var.type} in the FMU")
        setting = _parameter_value(value.value, value.unit, var, value.where)
        if value.name in given and given[value.name][0] != setting:
            raise SSPError(value.where, f"{value.name!r} = {setting!r} contradicts {given[value.name][0]!r} "
                                        f"given at {given[value.name][1]}")
        given[value.name] = (setting, value.where)
        if var.causality == "parameter" and var.name not in OWN_DEFAULTS:
            params[var.name] = setting
        else:
            start[var.name] = setting
    if start:
        params["start"] = start
    out: dict[str, Any] = {"type": "fmu", "params": params}
    if units:
        out["units"] = units
    return out


def _variable(model: FMUModel, name: str, where: str, what: str) -> FMUVariable:
    var = model.variables.get(name)
    if var is None:
        raise SSPError(where, f"{what} {name!r} names no variable of the FMU {model.label}"
                              f"{suggest(name, model.variables)}")
    return var


def _same_type(given: str, declared: str) -> bool:
    return given == declared or (given == "Integer" and declared == "Enumeration")


def _connector_unit(unit: str | None, var: FMUVariable, where: str) -> str | None:
    """The unit a connector gives a unit-less variable (``None``: nothing to relabel); refused when it disagrees."""
    if unit is None or var.type != "Real":
        return None
    if var.unit is None:
        return unit
    try:
        same = compile_conversion(unit, var.unit).is_identity
    except IncompatibleUnitsError:
        same = False
    if not same:
        raise SSPError(where, f"connector {var.name!r} is declared in {unit} but the FMU's variable is in "
                              f"{var.fmu_unit} ({var.unit})")
    return None


def _parameter_value(value: Any, unit: str | None, var: FMUVariable, where: str) -> Any:
    """*value* as the FMU component takes it: a quantity string when its unit is not the variable's."""
    if var.type != "Real" or unit is None:
        return value
    try:
        conversion = compile_conversion(unit, var.unit)
    except IncompatibleUnitsError:
        raise SSPError(where, f"{var.name!r} is given in {unit} but the FMU's variable is in "
                              f"{var.unit or 'no unit'}") from None
    return value if conversion.is_identity else f"{value!r} {unit}"


def _connection(conn: ConnectionDecl, components: list[ComponentDecl],
                models: Mapping[str, FMUModel]) -> str | dict[str, Any]:
    names = [c.name for c in components]
    ends = []
    for (element, connector), causality in ((conn.start, "output"), (conn.end, "input")):
        if element not in models:
            raise SSPError(conn.where, f"element {element!r} is not a component of the system{suggest(element, names)}")
        var = _variable(models[element], connector, conn.where, "connector")
        if var.causality != causality:
            raise SSPError(conn.where, f"{element}.{connector} has causality {var.causality!r}; a connection runs "
                                       "from an output to an input (parameter connections are not supported)")
        ends.append((f"{element}.{connector}", var))
    (src, src_var), (dst, _) = ends
    transforms = conn.factor != 1.0 or conn.offset != 0.0
    if transforms and src_var.type != "Real":
        raise SSPError(conn.where, f"a LinearTransformation applies to Real connectors; {src} is {src_var.type}")
    if conn.mapping is not None and not _same_type(conn.mapping, src_var.type):
        raise SSPError(conn.where, f"a {conn.mapping}MappingTransformation applies to {conn.mapping} connectors; "
                                   f"{src} is {src_var.type}")
    if not transforms and conn.convert_units:
        return f"{src} -> {dst}"
    out: dict[str, Any] = {"src": src, "dst": dst}
    if conn.factor != 1.0:
        out["scale"] = conn.factor
    if conn.offset != 0.0:
        out["offset"] = conn.offset
    if not conn.convert_units:
        out["convert_units"] = False
    return out


def _run(system: SystemDecl, models: Mapping[str, FMUModel]) -> tuple[dict[str, float], list[str]]:
    notes = []
    defaults = [m.default_experiment for m in models.values()]
    t0 = system.start_time if system.start_time is not None else 0.0
    stop = system.stop_time
    if stop is None:
        stops = [d["tf"] for d in defaults if d.get("tf", t0) > t0]
        stop = max(stops) if stops else t0 + DEFAULT_STOP_TIME
        notes.append(f"run.tf = {stop:g}: the SSD has no DefaultExperiment stopTime ("
                     + ("the FMUs' largest" if stops else "no FMU gives one either; a default") + ")")
    if not stop > t0:
        raise SSPError(EXPERIMENT, f"stopTime {stop:g} is not after startTime {t0:g}")
    hints = [d["dt"] for d in defaults if 0 < d.get("dt", 0.0) <= stop - t0]
    if hints:
        dt = min(hints)
        notes.append(f"run.dt = {dt:g}: the smallest stepSize of the FMUs' default experiments")
    else:
        dt = (stop - t0) / STEPS_WITHOUT_HINT
        notes.append(f"run.dt = {dt:g}: (tf - t0) / {STEPS_WITHOUT_HINT}, no FMU suggests a step size")
    if not all(math.isfinite(x) for x in (t0, stop, dt)):
        raise SSPError(EXPERIMENT, "the times are not finite")
    return {"t0": t0, "tf": stop, "dt": dt}, notes
