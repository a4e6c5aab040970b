"""The FMU component's parameters: its own settings, ``path`` (which loads the model) and the FMU's parameters.

An element of an FMI 3 array variable is the parameter ``A[1,2]`` (1-based,
row-major). Hydra's override grammar allows no ``[`` in a key, so an element
may also be named by its indices as further keys, ``A.1.2`` on the command line
and ``A: {1: {2: VALUE}}`` in YAML; :func:`array_shapes` and
:meth:`FMUParameters._elements` turn either spelling into the element's name.
A list is refused for a whole array: an override ``A.1.2`` of a list would be
indexed from 0 by OmegaConf.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pint

from cosimrun.components.fmu.base import FMUBase
from cosimrun.components.fmu.build import resolve_example
from cosimrun.core.units import Q_, compile_conversion
from cosimrun.errors import ConfigError, UnknownNameError
from cosimrun.fmi.description import INTERFACE_NAMES, FMUInterface, FMUModel, FMUVariable, read_fmu
from cosimrun.fmi.errors import FMUError

_log = logging.getLogger("cosimrun.fmu")

OWN_DEFAULTS: dict[str, Any] = {
    "path": None,
    "aliases": {},
    "start": {},
    "events": {},
    "states": None,
    "tolerance": None,
    "logging": False,
    "private_copy": False,
    "interface": None,
}
"""The component's own parameters (everything else comes from the FMU)."""

STRUCTURAL = ("aliases", "events", "states")
"""Own parameters that change the ports, the state or the event indicators."""

INTERFACES = ("cs", "me")
"""Values of the ``interface`` parameter: co-simulation, model exchange (``null``: co-simulation if offered)."""

_ELEMENT = re.compile(r"(?P<base>.+)\[(?P<indices>[^\[\]]*)\]")
"""An element name ``A[1,2]``: the array variable's name and the indices."""


def array_shapes(variables: Mapping[str, FMUVariable]) -> dict[str, tuple[int, ...]]:
    """The shape of every FMI 3 array variable among *variables* (one variable per element, ``A[i,j]``), by name."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, var in variables.items():
        match = _ELEMENT.fullmatch(name) if var.index is not None else None
        if match is None:
            continue
        position = tuple(int(i) for i in match["indices"].split(","))
        shape = shapes.get(match["base"], (0,) * len(position))
        shapes[match["base"]] = tuple(max(n, i) for n, i in zip(shape, position, strict=True))
    return shapes


def _by_name_first(values: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The items of *values*, elements named ``A[1,2]`` first: the same element named by indices (``A.1.2``, the
    only way an override can name it) is set after them and wins, whatever the order in the file."""
    return sorted(values.items(), key=lambda item: "[" not in item[0])


def _array_text(base: str, shape: tuple[int, ...], brackets: bool) -> str:
    """``A is a 2x2 array (valid: A.1.1 to A.2.2, 1-based, row-major)``, with ``A[1,1]`` ... under *brackets*."""
    def name(position: Sequence[int]) -> str:
        return f"{base}[{','.join(map(str, position))}]" if brackets else ".".join([base, *map(str, position)])

    size = "a " + "x".join(map(str, shape)) + " array" if len(shape) > 1 else f"an array of {shape[0]} elements"
    order = ", row-major" if len(shape) > 1 else ""
    return f"{base} is {size} (valid: {name([1] * len(shape))} to {name(shape)}, 1-based{order})"


class FMUParameters(FMUBase):
    """Parameters: the own settings are checked here, the FMU's are converted to the variable's type and unit."""

    INTERFACE: ClassVar[str] = "cs"
    """The FMI interface this class runs (``cs`` or ``me``)."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in OWN_DEFAULTS.items()})
        self._pending: dict[str, Any] = {}
        """FMU parameters set before ``path``: checked when it arrives."""
        self._fmu_values: dict[str, Any] = {}
        """FMU parameters set by the user: variable name -> value in the FMU's unit."""
        self._start_values: dict[str, Any] = {}
        """Values of the 'start' setting: variable name -> value in the FMU's unit."""
        self._shapes: tuple[FMUModel, dict[str, tuple[int, ...]]] | None = None
        """The model and the shapes of its array variables (:func:`array_shapes`), read once per model."""

    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters by name; ``path`` is applied first, so it may come in any position.

        Names other than the component's own are FMU parameters; before ``path``
        is known they are kept and checked when it is set.
        """
        if "path" in parameters:
            self._set_path(parameters.pop("path"))
        if self.model is None:
            for name, value in parameters.items():
                self._set_one(name, value)
            return
        items = [item for name, value in _by_name_first(parameters) for item in self._elements(name, value)]
        for name, key, value in items:
            self._set_element(name, key, value)

    def _elements(self, key: str, value: Any, known: Mapping[str, Any] | None = None,
                  kind: str = "parameter", where: str = "") -> Iterator[tuple[str, str, Any]]:
        """``(name, key, value)`` of each variable that *key*: *value* sets: the name itself, or the elements of
        an FMI 3 array named ``A[1,2]``, ``A.1.2`` or by a mapping ``A: {1: {2: VALUE}}`` (*key* is then the
        dotted path, as a config names it). Names are checked against *known* (the parameters by default);
        ``ConfigError`` for an index outside the array or a whole array, naming *key*, the value and what is valid.
        """
        assert self.model is not None
        known = self.parameters if known is None else known
        where = where or f"of {self._where()}"
        if key in known:
            yield key, key, value
            return
        if isinstance(value, Mapping):
            for sub, item in value.items():
                yield from self._elements(f"{key}.{sub}", item, known, kind, where)
            return
        if self._shapes is None or self._shapes[0] is not self.model:
            self._shapes = (self.model, array_shapes(self.model.variables))
        shapes = self._shapes[1]
        match = _ELEMENT.fullmatch(key)
        if match is not None and match["base"] in shapes:
            base, indices, brackets = match["base"], match["indices"].split(","), True
        else:
            parts = key.split(".")
            base = next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in shapes), "")
            if not base:
                raise UnknownNameError(kind, key, known, where, key=key)
            indices, brackets = parts[base.count(".") + 1:], False
        shape = shapes[base]
        if not indices:
            raise ConfigError(key, f"{value!r}: {_array_text(base, shape, brackets)}; set its elements one by one "
                                   f"(a list would be indexed from 0 by overrides)")
        if len(indices) != len(shape):
            raise ConfigError(key, f"{value!r}: an element of {base} has {len(shape)} "
                                   f"{'index' if len(shape) == 1 else 'indices'}: {_array_text(base, shape, brackets)}")
        position = [int(i) if i.strip().isdigit() else 0 for i in indices]
        if not all(1 <= i <= n for i, n in zip(position, shape, strict=True)):
            raise ConfigError(key, f"{value!r}: no element [{','.join(indices)}]: {_array_text(base, shape, brackets)}")
        name = f"{base}[{','.join(map(str, position))}]"
        if name not in known:
            var = self.model.variables[name]
            raise ConfigError(key, f"{value!r}: {name} is not a {kind} of {where.removeprefix('of ')} "
                                   f"(its causality is {var.causality})")
        yield name, key, value

    def _set_element(self, name: str, key: str, value: Any) -> None:
        """:meth:`_set_one`; an invalid value of an element named by a dotted *key* is a ``ConfigError`` there."""
        if key == name:
            self._set_one(name, value)
            return
        try:
            self._set_one(name, value)
        except ConfigError:
            raise
        except ValueError as exc:
            raise ConfigError(key, f"{value!r} is invalid: {exc}") from None

    def _unknown(self, name: str, note: str = "") -> UnknownNameError:
        return UnknownNameError("parameter", name, self.parameters, f"of {self._where()}{note}")

    def _set_one(self, name: str, value: Any) -> None:
        if name in OWN_DEFAULTS:
            self._check_structural_change(name)
            self.parameters[name] = self._validate_own(name, value)
            if name == "private_copy":
                self._unload()  # the next initialize loads the library from the chosen copy
            elif self.model is not None and name in STRUCTURAL:
                self._rebuild()
            elif name == "start" and self.model is not None:
                self._apply_start(self.parameters["start"])
            elif name == "interface" and self.model is not None:
                self._choose_interface(self.model)
            return
        if self.model is None:
            self._pending[name] = value
            return
        var = self.model.variables.get(name)
        if var is None or name not in self.parameters:
            raise self._unknown(name)
        converted = self._convert(var, value, f"parameter {name!r}")
        if self._is_initialized and self._instance is not None:
            if var.variability != "tunable":
                raise ValueError(
                    f"{self._where()}: parameter {name!r} is {var.variability}; it can only change before "
                    "initialize (or after reset); tunable parameters can change during a run"
                )
            self._set_values([(var, converted)], self.t)
        self.parameters[name] = converted
        self._fmu_values[name] = converted

    def _check_structural_change(self, name: str) -> None:
        if self._is_initialized and name in ("path", *STRUCTURAL, "start", "tolerance", "private_copy", "interface"):
            raise ValueError(f"{self._where()}: parameter {name!r} can only change before initialize (or after reset)")

    def _validate_own(self, name: str, value: Any) -> Any:
        where = self._where()
        if name in ("aliases", "start", "events"):
            if value is None:
                return {}
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}: parameter {name!r} must be a mapping, got {value!r}")
            return {str(k): v for k, v in value.items()}
        if name == "states":
            if value is None:
                return None
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"{where}: parameter 'states' must be a list of variable names, got {value!r}")
            return [str(v) for v in value]
        if name == "tolerance":
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{where}: parameter 'tolerance' must be a number > 0 (or null), got {value!r}")
            return float(value)
        if name == "interface":
            if value is not None and value not in INTERFACES:
                raise ValueError(f"{where}: parameter 'interface' must be cs (co-simulation) or me (model exchange), "
                                 f"got {value!r}")
            return value
        if name in ("logging", "private_copy"):
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{where}: parameter {name!r} must be true or false, got {value!r}")
            return bool(value)
        return value

    def _set_path(self, value: Any) -> None:
        """Load the model description; the FMU's parameters replace those of a previous FMU."""
        self._check_structural_change("path")
        if value is None:
            self._unload()
            self.model = None
            self.parameters["path"] = None
            return
        if not isinstance(value, (str, os.PathLike)):
            raise ValueError(f"{self._where()}: parameter 'path' must name an FMU file, got {value!r}")
        text = os.fspath(value)
        try:
            file = resolve_example(text[len("example:"):]) if text.startswith("example:") else Path(text)
            model = read_fmu(file)
            self._choose_interface(model)
        except (ValueError, FMUError) as exc:
            raise ValueError(f"component {self.name!r}: parameter 'path': {exc}") from None
        if self.model is not None and model is not self.model:
            self._unload()
        own = {k: self.parameters[k] for k in OWN_DEFAULTS}
        previous = {k: v for k, v in self.parameters.items() if k not in OWN_DEFAULTS}
        self.model = model
        self.parameters = {**own, "path": text}
        for var in model.parameters:
            if var.name in OWN_DEFAULTS:
                _log.warning("%s: FMU parameter %r is shadowed by the component setting of that name; set it "
                             "through 'start: {%s: ...}'", self._where(), var.name, var.name)
                continue
            self.parameters[var.name] = var.start
        self._fmu_values = {k: v for k, v in self._fmu_values.items() if k in model.variables}
        for name, value in previous.items():
            if name in self.parameters and name in self._fmu_values:
                self.parameters[name] = value
        self._rebuild()
        self._apply_start(self.parameters["start"])
        pending, self._pending = self._pending, {}
        items = [item for name, value in _by_name_first(pending)
                 for item in self._elements(name, value, where=f"of {self._where()} (set before 'path')")]
        for name, key, value in items:
            self._set_element(name, key, value)

    def _choose_interface(self, model: FMUModel) -> FMUInterface:
        """The interface of *model* this class runs; ``ValueError`` when the FMU or the ``interface`` setting
        asks for the other one, or the FMU needs what cosimrun does not run (clocks)."""
        kind = self.INTERFACE
        requested = self.parameters["interface"]
        if requested is not None and requested != kind:
            raise ValueError(
                f"{self._where()}: parameter 'interface' is {requested!r}, but {type(self).__name__} runs "
                f"{INTERFACE_NAMES[kind]} ({kind!r}); in a config, type: fmu picks the class from 'interface'")
        if kind not in model.interfaces:
            other = next(iter(model.interfaces))
            raise ValueError(
                f"{model.label} is a {INTERFACE_NAMES[other].replace(' ', '-')}-only FMU (no "
                f"{INTERFACE_NAMES[kind]} interface in its modelDescription.xml); type: fmu runs it as "
                f"{INTERFACE_NAMES[other]} (interface: {other})")
        model.check_supported()
        return model.interface(kind)

    def _apply_start(self, start: Mapping[str, Any]) -> None:
        assert self.model is not None
        variables = self.model.variables
        values = {}
        known = {**self._port_vars, **variables}
        try:
            items = [item for name, value in _by_name_first(start)
                     for item in self._elements(name, value, known, "variable", f"in 'start' of {self._where()}")]
        except ConfigError as exc:
            raise exc.within("start") from None
        for name, _key, value in items:
            var = known[name]
            if not var.settable_start:
                raise ValueError(
                    f"{self._where()}: the start value of {var.name!r} cannot be set "
                    f"(causality {var.causality}, variability {var.variability}, initial {var.initial})"
                )
            values[var.name] = self._convert(var, value, f"start value of {var.name!r}")
        self._start_values = values

    def _convert(self, var: FMUVariable, value: Any, what: str) -> Any:
        """*value* checked for *var*'s type and range; quantities are converted to its unit."""
        where = f"{self._where()}: {what}"
        if isinstance(value, np.generic):
            value = value.item()
        if var.type == "Real":
            try:
                if isinstance(value, str):
                    value = Q_(value)
                if isinstance(value, pint.Quantity):
                    magnitude = float(value.magnitude)
                    value = magnitude if value.unitless else compile_conversion(f"{value.units}", var.unit)(magnitude)
            except (pint.PintError, ValueError, TypeError, AttributeError) as exc:
                raise ValueError(f"{where} [{var.unit or 'no unit'}]: {exc}") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where} must be a finite number (or a quantity like '2 m'), got {value!r}")
            value = float(value)
        elif var.type in ("Integer", "Enumeration"):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{where} must be an integer, got {value!r}")
        elif var.type == "Boolean":
            if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
                value = bool(value)
            if not isinstance(value, bool):
                raise ValueError(f"{where} must be true or false, got {value!r}")
        elif not isinstance(value, str):
            raise ValueError(f"{where} must be a string, got {value!r}")
        if var.minimum is not None and value < var.minimum:
            raise ValueError(f"{where} must be >= {var.minimum:g} (the FMU's min), got {value!r}")
        if var.maximum is not None and value > var.maximum:
            raise ValueError(f"{where} must be <= {var.maximum:g} (the FMU's max), got {value!r}")
        return value
