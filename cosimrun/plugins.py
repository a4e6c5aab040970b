"""Component registry: cosimrun's builtin types, then the entry-point group ``cosimrun.components``.

The builtins come from the table :data:`cosimrun.components.TYPES`, so they
resolve where package metadata is missing (a source tree on ``sys.path``,
stripped metadata). Third-party packages register their types as entry points::

    [project.entry-points."cosimrun.components"]
    mymodel = "mypkg.models:MyModel"

Discovery is lazy: listing names reads the table and package metadata only and
never imports a component module; a class is imported on first use. When a
third-party type has a builtin's name, or two distributions register the same
name, a warning names both and the builtin (else the first one found) wins.

A registered class may pick the class that is actually built from the
parameters: a classmethod ``resolve_class(params) -> type`` is called before
construction when parameters are given (``type: fmu`` chooses co-simulation or
model exchange from the FMU file this way). It may raise a
:class:`~cosimrun.errors.ConfigError` keyed ``params.NAME``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cosimrun.components import TYPES
from cosimrun.console import notice
from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ComponentContractError, PluginError, suggest

ENTRY_POINT_GROUP = "cosimrun.components"
"""The entry-point group components are registered in."""

OWN_DISTRIBUTION = "cosimrun"
"""The distribution the builtin types are listed under."""


class EntryPointLike(Protocol):
    """What the registry needs from an entry point (``importlib.metadata.EntryPoint`` fits)."""

    name: str
    value: str

    def load(self) -> Any: ...


EntryPointSource = Callable[[], Iterable[EntryPointLike]]
"""Returns the entry points of the group (injectable for tests)."""


@dataclass(frozen=True)
class BuiltinEntryPoint:
    """A builtin type from :data:`~cosimrun.components.TYPES`, loaded like an entry point."""

    name: str
    value: str
    """``"module:Class"``."""

    def load(self) -> Any:
        """Import and return the referenced object, as an entry point with this value would."""
        return importlib.metadata.EntryPoint(self.name, self.value, ENTRY_POINT_GROUP).load()


@dataclass(frozen=True)
class ComponentInfo:
    """One registered component type, as listed by :func:`list_components`."""

    name: str
    """The type name used in configs (``type: pendulum``)."""
    distribution: str | None
    """The package that registers it (``None`` if unknown)."""
    value: str
    """The entry point's object reference, ``"module:Class"``."""
    description: str
    """First line of the class docstring, or the load error."""
    error: str | None = None
    """Why loading failed, when it did."""


def distribution_name(ep: Any) -> str | None:
    """Name of the distribution that declares entry point *ep* (``None`` when unknown)."""
    if isinstance(ep, BuiltinEntryPoint):
        return OWN_DISTRIBUTION
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    name = getattr(dist, "name", None)
    if name is None:
        try:
            name = dist.metadata["Name"]
        except Exception:  # broken metadata: leave the name unknown
            return None
    return str(name)


def _describe(ep: Any) -> str:
    dist = distribution_name(ep)
    return f"entry point {ep.name!r} = {ep.value!r} (distribution {dist or 'unknown'!r})"


def first_doc_line(cls: type) -> str:
    """First line of *cls*'s own docstring (not an inherited one), or ``""``."""
    doc = cls.__dict__.get("__doc__") or ""
    for line in doc.strip().splitlines():
        if line.strip():
            return line.strip().replace("``", "")
    return ""


class ComponentRegistry:
    """Lazy registry of component classes: *builtins* first, then one entry-point group.

    *builtins* maps type names to ``"module:Class"`` (default
    :data:`cosimrun.components.TYPES`). *source* returns the entry points; the
    default reads installed package metadata through
    ``importlib.metadata.entry_points`` (looked up at call time, so tests may
    monkeypatch it). Discovery happens on first use and is cached;
    :meth:`refresh` forgets it.
    """

    def __init__(
        self,
        group: str = ENTRY_POINT_GROUP,
        source: EntryPointSource | None = None,
        builtins: Mapping[str, str] | None = None,
    ) -> None:
        self.group = group
        self._source = source
        self._builtins = TYPES if builtins is None else builtins
        self._entries: dict[str, Any] | None = None
        self._classes: dict[str, type[CoSimComponent]] = {}

    def refresh(self) -> None:
        """Forget discovered entry points and loaded classes."""
        self._entries = None
        self._classes.clear()

    # ------------------------------------------------------------------ discovery
    def _discover(self) -> Iterable[Any]:
        if self._source is not None:
            return self._source()
        return importlib.metadata.entry_points(group=self.group)

    def entry_points(self) -> dict[str, Any]:
        """``{name: entry point}``, builtins included, after resolving duplicates (imports nothing)."""
        if self._entries is None:
            entries: dict[str, Any] = {name: BuiltinEntryPoint(name, value) for name, value in self._builtins.items()}
            for ep in self._discover():
                if distribution_name(ep) == OWN_DISTRIBUTION:
                    continue  # builtins: the metadata of an install from before TYPES may still list them
                kept = entries.get(ep.name)
                if kept is None:
                    entries[ep.name] = ep
                    continue
                if kept.value == ep.value and distribution_name(kept) == distribution_name(ep):
                    continue  # the same distribution seen twice on the path
                notice(
                    f"component type {ep.name!r} is registered twice in entry-point group {self.group!r}: "
                    f"by {distribution_name(kept) or 'unknown'!r} ({kept.value}) and by "
                    f"{distribution_name(ep) or 'unknown'!r} ({ep.value}); using the one from "
                    f"{distribution_name(kept) or 'unknown'!r}",
                    stacklevel=2,
                )
            self._entries = entries
        return self._entries

    def names(self) -> list[str]:
        """Sorted registered type names (imports nothing)."""
        return sorted(self.entry_points())

    def __contains__(self, name: object) -> bool:
        return name in self.entry_points()

    def entry_point(self, name: str) -> Any:
        """The entry point of type *name*; :class:`PluginError` listing installed names if unknown."""
        entries = self.entry_points()
        ep = entries.get(name)
        if ep is None:
            installed = sorted(entries)
            raise PluginError(
                f"unknown component type {name!r}{suggest(str(name), installed)} "
                f"(installed: {', '.join(installed) or 'none'}); plugins register types in the entry-point "
                f"group {self.group!r}"
            )
        return ep

    # ------------------------------------------------------------------ loading
    def get_component_class(self, name: str) -> type[CoSimComponent]:
        """Import and return the class registered as *name*."""
        cls = self._classes.get(name)
        if cls is not None:
            return cls
        ep = self.entry_point(name)
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginError(f"component type {name!r}: {_describe(ep)} failed to load: "
                              f"{type(exc).__name__}: {exc}") from exc
        if not (isinstance(obj, type) and issubclass(obj, CoSimComponent)):
            kind = f"class {obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else type(obj).__name__
            raise PluginError(f"component type {name!r}: {_describe(ep)} refers to {kind}, "
                              "not a subclass of cosimrun.CoSimComponent")
        self._classes[name] = obj
        return obj

    def resolve_class(self, type_name: str, params: Mapping[str, Any]) -> type[CoSimComponent]:
        """The class a component of type *type_name* with *params* is built from.

        The registered class, or the one its ``resolve_class(params)`` classmethod picks.
        """
        cls = self.get_component_class(type_name)
        resolve = getattr(cls, "resolve_class", None)
        if not callable(resolve):
            return cls
        chosen = resolve(params)
        if not (isinstance(chosen, type) and issubclass(chosen, CoSimComponent)):
            raise PluginError(f"component type {type_name!r}: {cls.__qualname__}.resolve_class returned {chosen!r}, "
                              "not a subclass of cosimrun.CoSimComponent")
        return chosen

    def create_component(
        self, type_name: str, name: str, params: Mapping[str, Any] | None = None, *, configure: bool = True,
        **init_kwargs: Any,
    ) -> CoSimComponent:
        """Construct component *name* of type *type_name*, then ``set_parameters(**params)``.

        *init_kwargs* go to the constructor (e.g. ``models``/``initial_mode`` of
        ``multi``). The class is chosen from *params* where the registered class
        says so (:meth:`resolve_class`). When *params* are given, the class's
        cross-parameter checks (``check_parameters``, where it has one) run at
        once, so inconsistent or incomplete settings fail here rather than at
        initialize. Without *params*, or with ``configure=False`` (the caller
        sets them one by one), the component is returned unconfigured.
        """
        if params is not None and not isinstance(params, Mapping):
            raise ComponentContractError(f"component {name!r} ({type_name}): params must be a mapping, got "
                                         f"{type(params).__name__}", component=name)
        cls = self.resolve_class(type_name, params) if params else self.get_component_class(type_name)
        if getattr(cls, "requires_models", False) and "models" not in init_kwargs:
            raise PluginError(f"component {name!r}: type {type_name!r} is built from sub-components; pass "
                              "models=... and initial_mode=... (in a config: 'modes' and 'initial_mode')")
        comp = cls(name, **init_kwargs)
        if params and configure:
            comp.set_parameters(**{str(k): v for k, v in params.items()})
            check = getattr(comp, "check_parameters", None)
            if callable(check):
                check()
        return comp

    def list_components(self, load: bool = True) -> list[ComponentInfo]:
        """Every registered type, sorted by name.

        With *load* each class is imported for its description; a type that
        fails to load is listed with the error instead. ``load=False`` imports
        nothing and leaves descriptions empty.
        """
        infos = []
        for name in self.names():
            ep = self._entries[name]  # type: ignore[index]
            description, error = "", None
            if load:
                try:
                    description = first_doc_line(self.get_component_class(name))
                except PluginError as exc:
                    error = str(exc)
                    description = f"(failed to load: {exc.__cause__ or exc})"
            infos.append(ComponentInfo(name, distribution_name(ep), ep.value, description, error))
        return infos


_registry = ComponentRegistry()


def get_registry() -> ComponentRegistry:
    """The process-wide registry of the ``cosimrun.components`` group."""
    return _registry


def refresh() -> None:
    """Re-read installed entry points on next use (after installing a plugin at run time)."""
    _registry.refresh()


def component_names() -> list[str]:
    """Sorted names of the installed component types (imports no plugin module)."""
    return _registry.names()


def get_component_class(name: str) -> type[CoSimComponent]:
    """The component class registered as *name* (see :meth:`ComponentRegistry.get_component_class`)."""
    return _registry.get_component_class(name)


def create_component(
    type_name: str, name: str, params: Mapping[str, Any] | None = None, *, configure: bool = True,
    **init_kwargs: Any,
) -> CoSimComponent:
    """Component *name* of the installed type *type_name* (a builtin's or a plugin's, as a config's ``type``),
    with its *params* set and checked; also ``cosimrun.create_component``.

    ``create_component("pid", "ctrl", {"kp": 40.0, "kd": 6.0})`` is the component a config's
    ``ctrl: {type: pid, params: {kp: 40.0, kd: 6.0}}`` builds, ready for ``System.add_component``.
    *params* take the values a config takes (numbers in the declared unit, or quantities such as
    ``"200 kJ/K"``); an unknown type raises :class:`~cosimrun.errors.PluginError` and an unknown or
    invalid parameter a :class:`~cosimrun.errors.ConfigError` (both with "did you mean"), at once.
    ``configure=False`` leaves the parameters unset; *init_kwargs* go to the constructor (``multi``
    takes ``models={mode: component}`` and ``initial_mode``). See :meth:`ComponentRegistry.create_component`.
    """
    return _registry.create_component(type_name, name, params, configure=configure, **init_kwargs)


def list_components(load: bool = True) -> list[ComponentInfo]:
    """Every installed component type (see :meth:`ComponentRegistry.list_components`)."""
    return _registry.list_components(load)
