"""An FMU's parameter and start values: names (array elements too), conversion to the variable's type and unit.

An element of an FMI 3 array variable is the parameter ``A[1,2]`` (1-based,
row-major). Hydra's override grammar allows no ``[`` in a key, so an element
may also be named by its indices as further keys, ``A.1.2`` on the command line
and ``A: {1: {2: VALUE}}`` in YAML; :func:`array_shapes` and
:meth:`ParameterValues.elements` turn either spelling into the element's name.
A list is refused for a whole array: an override ``A.1.2`` of a list would be
indexed from 0 by OmegaConf.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pint

from cosimrun.core.units import Q_, compile_conversion
from cosimrun.errors import ConfigError, UnknownNameError
from cosimrun.fmi.model import FMUModel, FMUVariable

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


def by_name_first(values: Mapping[str, Any]) -> list[tuple[str, Any]]:
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


class ParameterValues:
    """The values given to the variables of *model*: FMU parameters and start values, in the FMU's units.

    ``fmu_values`` holds the parameters set by the user (variable name ->
    value), ``start_values`` the values of the ``start`` setting; both are set
    when the FMU is instantiated.
    """

    def __init__(self, model: FMUModel) -> None:
        self.model = model
        self.fmu_values: dict[str, Any] = {}
        self.start_values: dict[str, Any] = {}
        self._shapes: dict[str, tuple[int, ...]] | None = None

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The shapes of the model's array variables (:func:`array_shapes`), read once."""
        if self._shapes is None:
            self._shapes = array_shapes(self.model.variables)
        return self._shapes

    def elements(self, key: str, value: Any, known: Mapping[str, Any], kind: str,
                 where: str) -> Iterator[tuple[str, str, Any]]:
        """``(name, key, value)`` of each variable that *key*: *value* sets: the name itself, or the elements of
        an FMI 3 array named ``A[1,2]``, ``A.1.2`` or by a mapping ``A: {1: {2: VALUE}}`` (*key* is then the
        dotted path, as a config names it). Names are checked against *known*; ``ConfigError`` for an index
        outside the array or a whole array, naming *key*, the value and what is valid (*where*: ``of ...``).
        """
        if key in known:
            yield key, key, value
            return
        if isinstance(value, Mapping):
            for sub, item in value.items():
                yield from self.elements(f"{key}.{sub}", item, known, kind, where)
            return
        shapes = self.shapes
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

    def apply_start(self, start: Mapping[str, Any], ports: Mapping[str, FMUVariable], where: str) -> None:
        """The ``start`` setting (variable or port name -> value) as :attr:`start_values` (*where*: the
        component, for errors)."""
        known = {**ports, **self.model.variables}
        values = {}
        try:
            items = [item for name, value in by_name_first(start)
                     for item in self.elements(name, value, known, "variable", f"in 'start' of {where}")]
        except ConfigError as exc:
            raise exc.within("start") from None
        for name, _key, value in items:
            var = known[name]
            if not var.settable_start:
                raise ConfigError(f"start.{name}", f"{where}: the start value of {var.name!r} cannot be set "
                                                   f"(causality {var.causality}, variability {var.variability}, "
                                                   f"initial {var.initial})")
            values[var.name] = convert(var, value, f"{where}: start value of {var.name!r}", f"start.{name}")
        self.start_values = values

    def whole_arrays(self, items: list[tuple[FMUVariable, Any]],
                     parameters: Mapping[str, Any]) -> list[tuple[FMUVariable, Any]]:
        """*items* completed with the other elements of each FMI 3 array among them (FMI 3 sets arrays whole):
        their current values in *parameters*, else their start values."""
        given = {v.slot for v, _ in items}
        extra = []
        for var in {v.vr: v for v, _ in items if v.index is not None}.values():
            for other in self.model.variables.values():
                if other.vr == var.vr and other.slot not in given and other.fmi_type == var.fmi_type \
                        and other.alias_of is None:
                    value = parameters.get(other.name, self.start_values.get(other.name, other.start))
                    extra.append((other, value))
        return [*items, *extra]

    def instance_values(self, states: Mapping[str, Any] | None = None) -> list[tuple[FMUVariable, Any]]:
        """What an instance is given before initialization: start values, then parameters, then *states*."""
        values: dict[str, tuple[FMUVariable, Any]] = {}
        variables = self.model.variables
        for source in (self.start_values, self.fmu_values, states or {}):
            for name, value in source.items():
                values[name] = (variables[name], value)
        return list(values.values())


def convert(var: FMUVariable, value: Any, what: str, key: str | None = None) -> Any:
    """*value* checked for *var*'s type and range; quantities are converted to its unit. An invalid value is a
    ``ConfigError`` at *key* (the setting that gave it), *what* naming the value in its message."""
    where = what
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
            raise ConfigError(key, f"{where} [{var.unit or 'no unit'}]: {exc}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(key, f"{where} must be a finite number (or a quantity like '2 m'), got {value!r}")
        value = float(value)
    elif var.type in ("Integer", "Enumeration"):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"{where} must be an integer, got {value!r}")
    elif var.type == "Boolean":
        if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
            value = bool(value)
        if not isinstance(value, bool):
            raise ConfigError(key, f"{where} must be true or false, got {value!r}")
    elif not isinstance(value, str):
        raise ConfigError(key, f"{where} must be a string, got {value!r}")
    if var.minimum is not None and value < var.minimum:
        raise ConfigError(key, f"{where} must be >= {var.minimum:g} (the FMU's min), got {value!r}")
    if var.maximum is not None and value > var.maximum:
        raise ConfigError(key, f"{where} must be <= {var.maximum:g} (the FMU's max), got {value!r}")
    return value
