"""Turn a composed experiment config into a ready `System`, master and run settings.

Every error is a :class:`ConfigError` naming the offending key (``run.dt``,
``components.pendulum.params.length``, ``connections[2]`` ...), the value and
what would be valid. Every key is checked against the schema
(:mod:`cosimrun.config.schema`, see :func:`known_keys`), whichever way it
arrived: Hydra does not check keys added with ``+``. A ``ConfigError`` from the engine or a component carries
its key relative to what raised it (a parameter ``e``, a setting
``time_tolerance``); the builder places it in the experiment with
:meth:`ConfigError.within`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from cosimrun.checkpoint.schedule import checkpoint_settings, parse_reference
from cosimrun.config.schema import (
    CheckpointConfig,
    ComponentConfig,
    ConnectionConfig,
    CosimConfig,
    ModelConfig,
    MultiComponentConfig,
    RunSettings,
    StorageSettings,
)
from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ConfigError, PluginError, UnknownNameError
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master
from cosimrun.plugins import create_component, get_component_class
from cosimrun.system import Connection, System
from cosimrun.system.system import require_identifier

MASTERS: dict[str, type[Master]] = {m.name: m for m in (Jacobi, GaussSeidel, IJCSA, Hybrid)}
"""Master algorithms by config name."""

DEFAULT_MASTER = GaussSeidel.name
"""The master of a config that names none (``conf/config.yaml`` selects it too)."""
STEP_CONTROL_SETTINGS = ("step_control", "rtol", "atol", "min_step", "max_step", "global_error")
"""The explicit masters' step-control settings (see :mod:`cosimrun.masters.step_control`)."""

ACTIONS = ("run", "describe")

COMPONENTS_EXAMPLE = "{NAME: {type: TYPE, params: {...}}, ...}"
"""How ``components`` is written: a mapping of component names to components."""

RESULTS_SUFFIXES = (".h5", ".hdf5", ".nc")
"""File name endings of ``storage.file``: the results are HDF5 (``.nc``: readable as netCDF-4)."""


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
    parent: Any = None
    """The checkpoint ``run.restart`` continues (``cosimrun.storage.checkpoints.Parent``), read by the runner."""


def build_experiment(cfg: Mapping[str, Any]) -> Experiment:
    """Validate *cfg* (a plain mapping, e.g. ``OmegaConf.to_container(cfg, resolve=True)``) and build it."""
    cfg = _mapping("", cfg, "a mapping of the keys " + ", ".join(_fields(CosimConfig)))
    check_keys("", cfg)
    top = defaults(CosimConfig)
    action = str(cfg.get("action", top["action"]))
    if action not in ACTIONS:
        raise UnknownNameError("action", action, ACTIONS, key="action")
    name = str(cfg.get("name") or top["name"])
    run = build_run(_mapping("run", cfg.get("run"), _example(RunSettings, "t0", "tf", "dt")))
    storage = build_storage(_mapping("storage", cfg.get("storage"), _example(StorageSettings, "file", "record")))
    master = build_master(_mapping("master", cfg.get("master"), f"{{name: {DEFAULT_MASTER}, ...}}"))
    components = _mapping("components", cfg.get("components"), COMPONENTS_EXAMPLE)
    if not components:
        raise ConfigError("components", "the experiment declares no components (select one with +experiment=NAME)")
    system = System(name)
    for comp_name, comp_cfg in components.items():
        key = f"components.{comp_name}"
        try:
            require_identifier(comp_name, "component name")  # before building it (an FMU is opened)
        except ConfigError as exc:
            raise _placed(key, exc) from None
        component = build_component(key, comp_name, comp_cfg)
        try:
            system.add_component(component)
        except ConfigError as exc:
            raise _placed(key, exc) from None
    for i, item in enumerate(_list("connections", cfg.get("connections"), "['a.y -> b.u']")):
        _connect(system, f"connections[{i}]", item)
    for i, item in enumerate(_list("events", cfg.get("events"), "['ball.bounce -> counter']")):
        _connect_event(system, f"events[{i}]", item)
    for comp_name, comp_cfg in components.items():
        key = f"components.{comp_name}.initial"
        for given, raw in _mapping(key, comp_cfg.get("initial"), "{INPUT: VALUE, ...}").items():
            for port, path, value in _elements(str(given), raw):
                try:
                    system.set_initial_value(f"{comp_name}.{port}", value)
                except (KeyError, ValueError, TypeError) as exc:
                    raise _placed(f"{key}.{path}", exc) from None
    recorded = recorded_ports(system, storage.record)
    return Experiment(name, action, system, master, run, storage, recorded)


def _elements(name: str, value: Any, indices: tuple[str, ...] = ()) -> list[tuple[str, str, Any]]:
    """``(port, key, value)``: a mapping keyed by indices names array elements (``{y: {2: v}}``, the override
    ``y.2=v``, is port ``y[2]`` at key ``y.2``); any other value is *name*'s."""
    if isinstance(value, Mapping) and value and all(str(k).strip().isdigit() for k in value):
        return [item for k, v in value.items() for item in _elements(name, v, (*indices, str(k).strip()))]
    return [(f"{name}[{','.join(indices)}]" if indices else name, ".".join([name, *indices]), value)]


def known_keys(path: str, node: Mapping[str, Any] | None = None) -> list[str] | None:
    """The keys the config node at dotted *path* may hold (``""``: the top level); None where any name goes.

    Read from the schema dataclasses (:mod:`cosimrun.config.schema`) and, for
    ``master``, the settings of the master class the node names. *node* is the
    node itself, where the keys depend on it (a component's ``type``, the
    master's ``name``).
    """
    node = node if isinstance(node, Mapping) else {}
    match path.split(".") if path else []:
        case []:
            return _fields(CosimConfig)
        case ["run"]:
            return _fields(RunSettings)
        case ["storage"]:
            return _fields(StorageSettings)
        case ["master"]:
            cls = MASTERS.get(str(node.get("name", DEFAULT_MASTER)))
            return None if cls is None else ["name", *_fields(cls)]
        case ["components", _]:
            return _fields(MultiComponentConfig if node.get("type") == "multi" else ComponentConfig)
        case ["components", _, "modes", _]:
            return _fields(ModelConfig)
    return None


def unknown_key(path: str, key: str, node: Mapping[str, Any] | None = None) -> ConfigError:
    """The error for *key*, which the node at *path* (see :func:`known_keys`) does not know."""
    full = f"{path}.{key}" if path else str(key)
    node = node if isinstance(node, Mapping) else {}
    known = known_keys(path, node) or []
    if path == "master" and str(node.get("name", DEFAULT_MASTER)) in MASTERS:
        name = str(node.get("name", DEFAULT_MASTER))
        if name == "hybrid" and key in STEP_CONTROL_SETTINGS:
            return ConfigError(full, "the hybrid master steps by run.dt between the events it locates; step control "
                                     f"({', '.join(STEP_CONTROL_SETTINGS)}) is a setting of jacobi, gauss_seidel and "
                                     "ijcsa")
        return UnknownNameError("setting", key, [k for k in known if k != "name"], f"of the {name} master", key=full)
    parts = path.split(".")
    multi_only = set(_fields(MultiComponentConfig)) - set(_fields(ComponentConfig))
    if len(parts) == 2 and parts[0] == "components":
        if node.get("type") == "multi" and key == "params":
            modes = node.get("modes")
            names = f" ({', '.join(sorted(map(str, modes)))})" if isinstance(modes, Mapping) and modes else ""
            return ConfigError(full, f"a multi component takes its parameters per mode: {path}.modes.MODE.params"
                                     f"{names}")
        if key in multi_only:
            return ConfigError(full, f"only components of type multi have {key} (type is {node.get('type')!r})")
    if len(parts) == 4 and parts[0] == "components" and parts[2] == "modes" and key in _fields(MultiComponentConfig):
        owner = ".".join(parts[:2])
        return ConfigError(full, f"{key} belongs to the multi component, not to one of its modes: {owner}.{key} "
                                 f"(a mode has {', '.join(known)})")
    return UnknownNameError("key", key, known, f"in {path}" if path else "at the top level", key=full)


def check_keys(path: str, node: Mapping[str, Any]) -> None:
    """Raise :func:`unknown_key`'s error for the first key of *node* that its place *path* does not know."""
    known = known_keys(path, node)
    if known is None:
        return
    for key in node:
        if str(key) not in known:
            raise unknown_key(path, str(key), node)


def _fields(schema: type) -> list[str]:
    """The keys of a schema or settings dataclass: its fields set by its constructor."""
    return list(_init_fields(schema))


@functools.cache
def _init_fields(schema: type) -> tuple[str, ...]:
    """:func:`_fields` of *schema*, read once per class (a class's fields do not change; every job asks)."""
    return tuple(f.name for f in dataclasses.fields(schema) if f.init)


def defaults(settings: type) -> dict[str, Any]:
    """The default of each key of a settings dataclass (:class:`RunSettings`, a master ...): their one source.

    A default factory is called on every call: each caller gets values of its own.
    """
    return {name: f.default_factory() if f.default is dataclasses.MISSING else f.default
            for name, f in _defaulted(settings)}


@functools.cache
def _defaulted(settings: type) -> tuple[tuple[str, dataclasses.Field[Any]], ...]:
    """The fields of *settings* that its constructor sets and that have a default or a default factory."""
    return tuple((f.name, f) for f in dataclasses.fields(settings)
                 if f.init and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING))


def setting_types(settings: type) -> dict[str, Any]:
    """The declared type of each key of a settings dataclass, resolved in the module that declares it.

    A key whose annotation does not resolve there maps to None: the settings check that value themselves.
    Resolved once per class (:func:`_setting_types`); each call gets a dict of its own.
    """
    return dict(_setting_types(settings))


@functools.cache
def _setting_types(settings: type) -> dict[str, Any]:
    """:func:`setting_types`, computed (the annotations evaluated) once per class."""
    types: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        if not f.init:
            continue
        kind = f.type
        if isinstance(kind, str):
            owner = next(c for c in settings.__mro__ if f.name in vars(c).get("__annotations__", {}))
            try:
                kind = eval(kind, vars(sys.modules[owner.__module__]))  # as typing.get_type_hints does, per field
            except Exception:  # any annotation that does not evaluate there
                kind = None
        types[f.name] = kind
    return types


@functools.cache
def _example(settings: type, *keys: str) -> str:
    """``{key: default, ...}`` of *keys* (all by default) of a settings dataclass, for an error's advice."""
    values = defaults(settings)
    return "{" + ", ".join(f"{key}: {values[key]}" for key in keys or values) + "}"


def _mapping(key: str, value: Any, example: str) -> Mapping[str, Any]:
    """*value* if it is a mapping (``{}`` for None), else a :class:`ConfigError` showing *example*."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        what = f"{value!r} is not a mapping"
        raise ConfigError(key or None, f"{what}; write it as {example}" if key else f"the config {what}")
    return value


def _list(key: str, value: Any, example: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise ConfigError(key, f"{value!r} is not a list; write it as a list, e.g. {example}")
    return list(value)


MAX_MACRO_STEPS = 1e12
"""The most macro steps ``(run.tf - run.t0) / run.dt`` a run may take: more would not finish (and a
``run.dt`` far below the resolution of the times would not advance them)."""


def build_run(run: Mapping[str, Any]) -> RunSettings:
    """Check ``run.t0``, ``run.tf``, ``run.dt``."""
    check_keys("run", run)
    values: dict[str, Any] = {}
    default_of = defaults(RunSettings)
    for key in ("t0", "tf", "dt"):
        raw = run.get(key, default_of[key])
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
    restart, start_from = run.get("restart"), run.get("start_from")
    for key, reference in (("restart", restart), ("start_from", start_from)):
        if reference is not None:
            parse_reference(reference, f"run.{key}")
    if restart is not None and start_from is not None:
        raise ConfigError("run.start_from", "give run.restart (the same run goes on) or run.start_from (a fork "
                                            "with other parameters), not both")
    checkpoint = checkpoint_settings(run.get("checkpoint"))  # checked, times in seconds
    return RunSettings(**values, checkpoint=CheckpointConfig(checkpoint.every, checkpoint.wall, list(checkpoint.at)),
                       restart=restart, start_from=start_from)


def build_component(key: str, name: str, cfg: Mapping[str, Any]) -> CoSimComponent:
    """Create one component (or a multi-model component) from its config node at *key*.

    A top-level component's node is checked against :class:`~cosimrun.config.schema.ComponentConfig`
    (or ``MultiComponentConfig``), a mode's against ``ModelConfig``.
    """
    cfg = _mapping(key, cfg, "{type: TYPE, params: {NAME: VALUE, ...}}")
    check_keys(key, cfg)
    type_name = cfg.get("type")
    if not type_name:
        raise ConfigError(f"{key}.type", "missing: every component needs a type (see cosimrun --list-components)")
    if not isinstance(type_name, str):
        raise ConfigError(f"{key}.type", f"{type_name!r} is not a component type name (see cosimrun --list-components)")
    if type_name == "multi":
        comp = _build_multi(key, name, cfg)
    else:
        params = _mapping(f"{key}.params", cfg.get("params"), "{NAME: VALUE, ...}")
        comp = _create(key, name, type_name, params)
    for port, unit in _mapping(f"{key}.units", cfg.get("units"), "{PORT: UNIT, ...}").items():
        _relabel(f"{key}.units.{port}", comp, str(port), unit)
    return comp


def _create(key: str, name: str, type_name: str, params: Mapping[str, Any]) -> CoSimComponent:
    try:
        comp = create_component(type_name, name, params, configure=False)  # the class may depend on params
    except PluginError as exc:
        raise _placed(f"{key}.type", exc) from None
    except (KeyError, ValueError, TypeError) as exc:
        raise _placed(key, exc) from None
    first = getattr(type(comp), "FIRST_PARAMETERS", ())
    # then elements named A[1,2], before keys that may name them by indices (A.1.2, as an override must): these win
    ordered = sorted(params.items(), key=lambda item: (item[0] not in first, "[" not in str(item[0])))
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
    modes = _mapping(f"{key}.modes", cfg.get("modes"), "{MODE: {type: TYPE, params: {...}}, ...}")
    if not modes:
        raise ConfigError(f"{key}.modes", "a multi component needs at least one mode")
    models = {}
    for mode, mode_cfg in modes.items():
        mode_cfg = _mapping(f"{key}.modes.{mode}", mode_cfg, "{type: TYPE, params: {...}}")
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
            known = _fields(ConnectionConfig)
            for name in item:
                if str(name) not in known:
                    raise UnknownNameError("key", str(name), known, f"in {key}", key=str(name))
            missing = [name for name in ("src", "dst") if name not in item]
            if missing:
                raise ConfigError(None, f"a connection mapping needs {' and '.join(missing)}: {{src: a.y, dst: b.u}}")
            transform = {name: item[name] for name in ("scale", "offset", "convert_units") if name in item}
            system.connect(str(item["src"]), str(item["dst"]), **transform)
        else:
            raise ConfigError(None, f"write a connection as 'a.y -> b.u' or {{src: a.y, dst: b.u}}, got {item!r}")
    except (KeyError, ValueError) as exc:
        raise _placed(key, exc) from None


def _connect_event(system: System, key: str, item: Any) -> None:
    try:
        if not isinstance(item, str) or item.count("->") != 1:
            raise ConfigError(None, f"write an event connection as 'comp.event -> subscriber', got {item!r}")
        source, subscriber = (part.strip() for part in item.split("->"))
        system.connect_event(source, subscriber)
    except (KeyError, ValueError) as exc:
        raise _placed(key, exc) from None


def build_master(cfg: Mapping[str, Any]) -> Master:
    """Create the master named ``cfg['name']`` with the remaining keys as settings, each of its declared type.

    The keys, types and defaults are the fields of the master's settings dataclass
    (``conf/master/*.yaml`` repeats them for the reader; a test keeps them equal).
    """
    settings = dict(cfg)
    name = str(settings.pop("name", DEFAULT_MASTER))
    cls = MASTERS.get(name)
    if cls is None:
        raise UnknownNameError("master", name, MASTERS, key="master")
    check_keys("master", cfg)
    try:
        key: Hashable = (cls, tuple((setting, type(value), value) for setting, value in settings.items()))
        master = _masters.get(key)
    except TypeError:  # a value that is no plain setting: checked below, never kept
        key, master = None, None
    if master is not None:
        return master
    types, given = setting_types(cls), defaults(cls)
    for setting, value in settings.items():
        settings[setting] = _typed(f"master.{setting}", value, types.get(setting), given.get(setting))
    try:
        master = cls(**settings)
    except (TypeError, ValueError) as exc:
        raise _placed("master", exc) from None
    if key is not None:
        if len(_masters) >= MASTERS_KEPT:
            _masters.clear()
        _masters[key] = master
    return master


MASTERS_KEPT = 64
"""How many masters :func:`build_master` keeps (a sweep's jobs name one or a few)."""

_masters: dict[Hashable, Master] = {}
"""Masters built, by class and settings as given (each value with its type: ``1``, ``1.0`` and ``true`` are
checked apart): a master is only settings (frozen; each run is a run object of its own), so the jobs of a process
that configure the same one share it."""


TYPE_NAMES: dict[type, str] = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}
"""How errors name the setting types the builder checks."""


def _typed(key: str, value: Any, kind: Any, default: Any = dataclasses.MISSING) -> Any:
    """*value* as the setting type *kind* (``float``, ``int``, ``bool``, ``str``; others pass), or a ConfigError."""
    if kind not in TYPE_NAMES:
        return value
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if kind is int and isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if ok:
        return value
    example = "" if default is dataclasses.MISSING else f", e.g. {default!r}"
    raise ConfigError(key, f"{value!r} is not {TYPE_NAMES[kind]}; expected {TYPE_NAMES[kind]}{example}")


STORAGE_LAYOUTS = ("per_job", "per_chunk")
"""The values of ``storage.layout``."""


def build_storage(cfg: Mapping[str, Any]) -> StorageSettings:
    """Check the storage settings."""
    check_keys("storage", cfg)
    default = defaults(StorageSettings)
    file = str(cfg.get("file") or default["file"])
    if any(c in file for c in "/\\\0") or file in (".", "..") or file.strip() != file:
        raise ConfigError(
            "storage.file",
            f"{file!r} must be a plain file name such as results.h5 (it is written in the run directory)",
        )
    if PurePath(file).suffix.lower() not in RESULTS_SUFFIXES:
        raise ConfigError(
            "storage.file",
            f"{file!r} does not name an HDF5 file; end it in {', '.join(RESULTS_SUFFIXES)} (the results are HDF5)",
        )
    record = cfg.get("record", default["record"])
    record = [record] if isinstance(record, str) else _list("storage.record", record, "['*'] or ['comp.port']")
    compression = cfg.get("compression", default["compression"])
    if compression not in (None, "gzip", "lzf"):
        raise ConfigError("storage.compression", f"{compression!r} is not supported (valid: gzip, lzf, null)")
    level = _typed("storage.compression_level", cfg.get("compression_level", default["compression_level"]), int)
    if not 0 <= level <= 9:
        raise ConfigError("storage.compression_level", f"{level} is not in 0..9")
    flush = _typed("storage.flush_interval", cfg.get("flush_interval", default["flush_interval"]), int)
    if flush < 1:
        raise ConfigError("storage.flush_interval", f"{flush} must be >= 1")
    allow_nonfinite = _typed("storage.allow_nonfinite", cfg.get("allow_nonfinite", default["allow_nonfinite"]), bool)
    seconds = _typed("storage.flush_seconds", cfg.get("flush_seconds", default["flush_seconds"]), float)
    if not 0 < seconds < math.inf:
        raise ConfigError("storage.flush_seconds", f"{seconds} must be a positive number of seconds")
    decimate = _typed("storage.decimate", cfg.get("decimate", default["decimate"]), int)
    if decimate < 1:
        raise ConfigError("storage.decimate", f"{decimate} must be >= 1 (record every N-th communication point; "
                                              "1 records them all)")
    layout = cfg.get("layout", default["layout"])
    if layout not in STORAGE_LAYOUTS:
        raise UnknownNameError("layout", str(layout), STORAGE_LAYOUTS, key="storage.layout")
    return StorageSettings(file, [str(r) for r in record], compression, level, flush, allow_nonfinite, seconds,
                           decimate, layout)


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
