"""Turn a composed experiment config into a ready `System`, master and run settings.

Every error is a :class:`ConfigError` naming the offending key (``run.dt``,
``components.pendulum.params.length``, ``connections[2]`` ...), the value and
what would be valid. A ``ConfigError`` from the engine or a component carries
its key relative to what raised it (a parameter ``e``, a setting
``time_tolerance``); the builder places it in the experiment with
:meth:`ConfigError.within`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ConfigError, PluginError, UnknownNameError
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master
from cosimrun.plugins import create_component, get_component_class
from cosimrun.system import Connection, System

MASTERS: dict[str, type[Master]] = {m.name: m for m in (Jacobi, GaussSeidel, IJCSA, Hybrid)}
"""Master algorithms by config name."""

ACTIONS = ("run", "describe")


@dataclass
class RunSettings:
    """The simulated interval and macro step, in seconds (``run.*``)."""

    t0: float
    tf: float
    dt: float


@dataclass
class StorageSettings:
    """What the run records and how it compresses it (``storage.*``)."""

    file: str
    record: list[str]
    compression: str | None
    compression_level: int
    flush_interval: int
    allow_nonfinite: bool


@dataclass
class Experiment:
    """A built experiment: what :func:`cosimrun.runner.run_experiment` executes."""

    name: str
    action: str
    system: System
    master: Master
    run: RunSettings
    storage: StorageSettings
    recorded: dict[str, list[str]]
    """Ports to store, per component."""


def build_experiment(cfg: Mapping[str, Any]) -> Experiment:
    """Validate *cfg* (a plain mapping, e.g. ``OmegaConf.to_container(cfg, resolve=True)``) and build it."""
    action = str(cfg.get("action", "run"))
    if action not in ACTIONS:
        raise UnknownNameError("action", action, ACTIONS, key="action")
    name = str(cfg.get("name") or "unnamed")
    run = build_run(cfg.get("run") or {})
    system = System(name)
    components = cfg.get("components") or {}
    if not components:
        raise ConfigError("components", "the experiment declares no components (select one with +experiment=NAME)")
    for comp_name, comp_cfg in components.items():
        system.add_component(build_component(f"components.{comp_name}", str(comp_name), comp_cfg or {}))
    for i, item in enumerate(cfg.get("connections") or []):
        _connect(system, f"connections[{i}]", item)
    for i, item in enumerate(cfg.get("events") or []):
        _connect_event(system, f"events[{i}]", item)
    for comp_name, comp_cfg in components.items():
        for port, value in ((comp_cfg or {}).get("initial") or {}).items():
            key = f"components.{comp_name}.initial.{port}"
            try:
                system.set_initial_value(f"{comp_name}.{port}", value)
            except (KeyError, ValueError, TypeError) as exc:
                raise _placed(key, exc) from None
    master = build_master(cfg.get("master") or {})
    storage = build_storage(cfg.get("storage") or {})
    recorded = recorded_ports(system, storage.record)
    return Experiment(name, action, system, master, run, storage, recorded)


MAX_MACRO_STEPS = 1e12
"""The most macro steps ``(run.tf - run.t0) / run.dt`` a run may take: more would not finish (and a
``run.dt`` far below the resolution of the times would not advance them)."""


def build_run(run: Mapping[str, Any]) -> RunSettings:
    """Check ``run.t0``, ``run.tf``, ``run.dt``."""
    values = {}
    for key, default in (("t0", 0.0), ("tf", 10.0), ("dt", 0.01)):
        raw = run.get(key, default)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"run.{key}", f"{raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ConfigError(f"run.{key}", f"{raw!r} is not a finite number")
        values[key] = value
    if not values["dt"] > 0.0:
        raise ConfigError("run.dt", f"the macro step must be positive, got {run.get('dt')!r}")
    if values["tf"] < values["t0"]:
        raise ConfigError("run.tf", f"the end time {values['tf']!r} is before the start time run.t0={values['t0']!r}")
    steps = (values["tf"] - values["t0"]) / values["dt"]
    if steps > MAX_MACRO_STEPS:
        raise ConfigError(
            "run.dt",
            f"{run.get('dt')!r} makes {steps:.3g} macro steps from run.t0={values['t0']!r} to "
            f"run.tf={values['tf']!r}, more than the {MAX_MACRO_STEPS:.0e} a run may take",
        )
    return RunSettings(**values)


def build_component(key: str, name: str, cfg: Mapping[str, Any]) -> CoSimComponent:
    """Create one component (or a multi-model component) from its config node."""
    type_name = cfg.get("type")
    if not type_name:
        raise ConfigError(f"{key}.type", "missing: every component needs a type (see cosimrun --list-components)")
    if type_name == "multi":
        comp = _build_multi(key, name, cfg)
    else:
        if cfg.get("modes") is not None:
            raise ConfigError(f"{key}.modes", f"only components of type multi have modes (type is {type_name!r})")
        comp = _create(key, name, str(type_name), cfg.get("params") or {})
    for port, unit in (cfg.get("units") or {}).items():
        _relabel(f"{key}.units.{port}", comp, str(port), unit)
    return comp


def _create(key: str, name: str, type_name: str, params: Mapping[str, Any]) -> CoSimComponent:
    try:
        comp = create_component(type_name, name)
    except PluginError as exc:
        raise _placed(f"{key}.type", exc) from None
    except (KeyError, ValueError, TypeError) as exc:
        raise _placed(key, exc) from None
    first = getattr(type(comp), "FIRST_PARAMETERS", ())
    ordered = sorted(params.items(), key=lambda item: item[0] not in first)
    for param, value in ordered:
        try:
            comp.set_parameters(**{str(param): value})
        except ConfigError as exc:  # its key, if it has one, names the parameter
            raise _placed(f"{key}.params" if exc.key else f"{key}.params.{param}", exc) from None
        except KeyError as exc:
            raise _placed(f"{key}.params.{param}", exc) from None
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{key}.params.{param}", f"{value!r} is invalid: {exc}") from None
    check = getattr(comp, "check_parameters", None)
    if check is not None:
        try:
            check()
        except (KeyError, ValueError, TypeError) as exc:
            raise _placed(f"{key}.params", exc) from None
    return comp


def _build_multi(key: str, name: str, cfg: Mapping[str, Any]) -> CoSimComponent:
    modes = cfg.get("modes") or {}
    if not modes:
        raise ConfigError(f"{key}.modes", "a multi component needs at least one mode")
    if cfg.get("params"):
        raise ConfigError(f"{key}.params", "a multi component takes its parameters per mode (modes.<mode>.params)")
    models = {}
    for mode, mode_cfg in modes.items():
        mode_cfg = mode_cfg or {}
        if mode_cfg.get("type") == "multi":
            raise ConfigError(f"{key}.modes.{mode}.type", "modes cannot themselves be multi components")
        models[str(mode)] = build_component(f"{key}.modes.{mode}", f"{name}_{mode}", mode_cfg)
    initial_mode = cfg.get("initial_mode") or next(iter(models))
    if initial_mode not in models:
        raise UnknownNameError("mode", str(initial_mode), models, key=f"{key}.initial_mode")
    multi_cls = get_component_class("multi")
    try:
        return multi_cls(
            name,
            models=models,
            initial_mode=initial_mode,
            selector=cfg.get("selector"),
            hysteresis=cfg.get("hysteresis"),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise _placed(key, exc) from None


def _relabel(key: str, comp: CoSimComponent, port: str, unit: Any) -> None:
    """Give a unit-less port of a generic block (gain, sum, pid ...) a unit.

    Ports whose unit the model declares keep it: their values mean that unit,
    so a different unit belongs on the connection, which converts.
    """
    from cosimrun.components._base import set_port_unit

    specs = {**comp.input_specs, **comp.output_specs}
    if port not in specs:
        raise UnknownNameError("port", port, specs, f"of component {comp.name!r}", key=key)
    declared = specs[port].unit_name
    if declared is not None:
        raise ConfigError(
            key,
            f"port {comp.name}.{port} is declared in {declared}; only unit-less ports can be given a unit "
            "(connect it to a port in another unit and the connection converts)",
        )
    try:
        set_port_unit(comp, port, None if unit in (None, "") else str(unit))
    except (KeyError, ValueError, TypeError) as exc:
        raise _placed(key, exc) from None


def _connect(system: System, key: str, item: Any) -> None:
    try:
        if isinstance(item, str):
            system.connect(Connection.parse(item))
        elif isinstance(item, Mapping):
            extra = set(item) - {"src", "dst"}
            if extra or not {"src", "dst"} <= set(item):
                raise ValueError(f"a connection mapping has exactly the keys src and dst, got {sorted(item)}")
            system.connect(str(item["src"]), str(item["dst"]))
        else:
            raise ValueError(f"write a connection as 'a.y -> b.u' or {{src: a.y, dst: b.u}}, got {item!r}")
    except (KeyError, ValueError) as exc:
        raise _placed(key, exc) from None


def _connect_event(system: System, key: str, item: Any) -> None:
    try:
        if not isinstance(item, str) or item.count("->") != 1:
            raise ValueError(f"write an event connection as 'comp.event -> subscriber', got {item!r}")
        source, subscriber = (part.strip() for part in item.split("->"))
        system.connect_event(source, subscriber)
    except (KeyError, ValueError) as exc:
        raise _placed(key, exc) from None


def build_master(cfg: Mapping[str, Any]) -> Master:
    """Create the master named ``cfg['name']`` with the remaining keys as settings."""
    settings = dict(cfg)
    name = str(settings.pop("name", "gauss_seidel"))
    cls = MASTERS.get(name)
    if cls is None:
        raise UnknownNameError("master", name, MASTERS, key="master")
    fields = {f.name for f in dataclasses.fields(cls)}
    for setting in settings:
        if setting not in fields:
            raise UnknownNameError("setting", setting, fields, f"of the {name} master", key=f"master.{setting}")
    try:
        return cls(**settings)
    except (TypeError, ValueError) as exc:
        raise _placed("master", exc) from None


def build_storage(cfg: Mapping[str, Any]) -> StorageSettings:
    """Check the storage settings."""
    file = str(cfg.get("file") or "results.h5")
    if any(c in file for c in "/\\\0") or file in (".", "..") or file.strip() != file:
        raise ConfigError(
            "storage.file",
            f"{file!r} must be a plain file name such as results.h5 (it is written in the run directory)",
        )
    record = cfg.get("record", ["*"])
    record = [record] if isinstance(record, str) else list(record or [])
    compression = cfg.get("compression", "gzip")
    if compression not in (None, "gzip", "lzf"):
        raise ConfigError("storage.compression", f"{compression!r} is not supported (valid: gzip, lzf, null)")
    level = int(cfg.get("compression_level", 4))
    if not 0 <= level <= 9:
        raise ConfigError("storage.compression_level", f"{level} is not in 0..9")
    flush = int(cfg.get("flush_interval", 2000))
    if flush < 1:
        raise ConfigError("storage.flush_interval", f"{flush} must be >= 1")
    allow_nonfinite = cfg.get("allow_nonfinite", False)
    if not isinstance(allow_nonfinite, bool):
        raise ConfigError("storage.allow_nonfinite", f"{allow_nonfinite!r} is not true or false")
    return StorageSettings(file, [str(r) for r in record], compression, level, flush, allow_nonfinite)


def recorded_ports(system: System, patterns: list[str]) -> dict[str, list[str]]:
    """Output ports matched by the ``storage.record`` patterns, per component.

    Evaluate again after initialization: components may add event ports then.
    """
    out: dict[str, list[str]] = {}
    for i, pattern in enumerate(patterns):
        key = f"storage.record[{i}]"
        if pattern == "*":
            for name, comp in system.components.items():
                out.setdefault(name, []).extend(_outputs(comp))
            continue
        comp_name, _, port = pattern.partition(".")
        if comp_name not in system.components:
            raise UnknownNameError("component", comp_name, system.components, key=key)
        ports = _outputs(system.components[comp_name])
        if port in ("", "*"):
            out.setdefault(comp_name, []).extend(ports)
        elif port in ports:
            out.setdefault(comp_name, []).append(port)
        else:
            raise UnknownNameError("output", port, ports, f"of component {comp_name!r}", key=key)
    return {c: list(dict.fromkeys(p)) for c, p in out.items()}


def _outputs(comp: CoSimComponent) -> list[str]:
    return [*comp.output_specs, *(n for n in comp.event_indicators if n not in comp.output_specs)]


def _placed(key: str, exc: Exception) -> ConfigError:
    """*exc* as a :class:`ConfigError` at config *key*.

    A ``ConfigError`` keeps its class and fields, its own key placed under
    *key* (:meth:`ConfigError.within`); another error gives its message. A
    plugin written against the reference API raises a plain ``KeyError`` for an
    unknown name: its message is its argument (its ``str`` is the argument's repr).
    """
    if isinstance(exc, ConfigError):
        return exc.within(key)
    if isinstance(exc, KeyError) and exc.args:
        return ConfigError(key, str(exc.args[0]))
    return ConfigError(key, str(exc))
