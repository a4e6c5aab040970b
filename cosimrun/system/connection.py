"""Connections between ports and their compiled, pint-free form.

A connection into a real input may carry a linear transformation, as SSP's
``LinearTransformation`` does: the destination receives
``scale * convert(source) + offset``, where ``convert`` is the unit conversion
from the source's unit to the destination's (the identity with
``convert_units=False``, SSP's ``suppressUnitConversion``). So ``scale`` and
``offset`` are in the destination's unit, applied after the unit conversion.
Both are folded into the link's one affine map (:meth:`Connection.transform`),
so a run pays nothing for them.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from cosimrun.core.ports import PortState
from cosimrun.core.units import IDENTITY, UnitConversion, UnitLike, compile_conversion
from cosimrun.errors import ConfigError, InvalidConnectionError


def split_port_path(path: str, *, what: str = "port") -> tuple[str, str]:
    """Split ``"comp.port"`` at the first dot; a clear :class:`ConfigError` (a ``ValueError``) otherwise."""
    comp, _, port = path.partition(".") if isinstance(path, str) else ("", "", "")
    if not comp or not port:
        raise ConfigError(None, f"{what} {path!r} must be written 'component.port'")
    return comp.strip(), port.strip()


def _number(name: str, value: Any) -> float:
    """*value* as a finite float, or a :class:`ConfigError` keyed *name*."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(name, f"{value!r} is not a finite number; expected a number, e.g. {name}: 2.0")
    return float(value)


@dataclass(frozen=True, slots=True)
class Connection:
    """A directed link from an output port to an input port, optionally with a linear transformation.

    The destination receives ``scale * convert(source) + offset`` (see the
    module docstring); ``convert_units=False`` passes the number unconverted.
    """

    src_component: str
    src_port: str
    dst_component: str
    dst_port: str
    scale: float = 1.0
    offset: float = 0.0
    convert_units: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _number("scale", self.scale))
        object.__setattr__(self, "offset", _number("offset", self.offset))
        if not isinstance(self.convert_units, bool):
            raise ConfigError("convert_units", f"{self.convert_units!r} is not true or false; "
                                               "expected true or false, e.g. convert_units: false")

    @classmethod
    def between(cls, src: str, dst: str, *, scale: float = 1.0, offset: float = 0.0,
                convert_units: bool = True) -> Connection:
        """Build from ``"a.y"`` and ``"b.u"`` (and the transformation).

        A path not written ``component.port`` is an :class:`InvalidConnectionError` whose ``connection``
        is ``"src -> dst"`` as given.
        """
        try:
            sc, sp = split_port_path(src, what="connection source")
            dc, dp = split_port_path(dst, what="connection destination")
        except ConfigError as exc:
            raise InvalidConnectionError(exc.message, connection=f"{src} -> {dst}") from None
        return cls(sc, sp, dc, dp, scale, offset, convert_units)

    @property
    def transforms(self) -> bool:
        """Whether the connection does more than copy (and convert units): a scale, an offset or no conversion."""
        return self.scale != 1.0 or self.offset != 0.0 or not self.convert_units

    def transform(self, src_unit: UnitLike, dst_unit: UnitLike) -> UnitConversion:
        """The affine map from the source value to the destination value: unit conversion, then scale and offset.

        Raises :class:`~cosimrun.errors.IncompatibleUnitsError` when units are
        converted and their dimensions differ.
        """
        units = compile_conversion(src_unit, dst_unit) if self.convert_units else IDENTITY
        if self.scale == 1.0 and self.offset == 0.0:
            return units
        return UnitConversion(self.scale * units.scale, self.scale * units.offset + self.offset)

    @classmethod
    def parse(cls, text: str) -> Connection:
        """Build from ``"a.y -> b.u"``; an :class:`InvalidConnectionError` (``connection``: *text*) otherwise."""
        if not isinstance(text, str) or text.count("->") != 1:
            raise InvalidConnectionError(f"connection {text!r} must be written 'src.port -> dst.port'",
                                         connection=text if isinstance(text, str) else None)
        src, dst = (part.strip() for part in text.split("->"))
        return cls.between(src, dst)

    @property
    def src(self) -> str:
        return f"{self.src_component}.{self.src_port}"

    @property
    def dst(self) -> str:
        return f"{self.dst_component}.{self.dst_port}"

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"

    def describe_transform(self) -> str:
        """The transformation as text (``""`` for none): ``scale 2, offset +1, units not converted``."""
        parts = [f"scale {self.scale:g}"] if self.scale != 1.0 else []
        parts += [f"offset {self.offset:+g}"] if self.offset != 0.0 else []
        parts += [] if self.convert_units else ["units not converted"]
        return ", ".join(parts)


@dataclass(slots=True)
class Link:
    """A connection bound to live port states, with its compiled unit conversion."""

    connection: Connection
    src: PortState
    dst: PortState
    conversion: UnitConversion

    def transfer(self) -> None:
        """Copy the source value into the destination, converting units."""
        c = self.conversion
        self.dst.value = c.scale * self.src.value + c.offset if not c.is_identity else self.src.value
