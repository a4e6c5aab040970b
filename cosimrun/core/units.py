"""The process-wide pint registry and compiled unit conversions.

Pint is used only when ports are declared and connections are compiled; the step
loop sees plain ``(scale, offset)`` pairs so that ``dst = scale * src + offset``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import pint

from cosimrun.errors import ConfigError, IncompatibleUnitsError, did_you_mean, suggest
from cosimrun.fmi.extraction import _locked, cache_directory


def _new_registry() -> pint.UnitRegistry:
    """A registry whose parsed definitions pint keeps in ``pint/`` of cosimrun's cache directory.

    Parsing pint's definitions is most of a process's start-up (every command, every sweep worker); the
    cache (keyed by pint's and Python's versions and the definitions' content) is read and written under the
    cache's lock, as pint writes it in place. A cache that cannot be used (a read-only folder, a damaged
    file, which is removed for the next process to write again) is passed over: the definitions are parsed
    as without one.
    """
    folder = cache_directory() / "pint"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _locked(folder, exclusive=True, wait=True):
            try:
                return pint.UnitRegistry(autoconvert_offset_to_baseunit=True, cache_folder=folder)
            except Exception:
                for damaged in folder.glob("*.pickle"):
                    damaged.unlink(missing_ok=True)
                raise
    except Exception:  # noqa: BLE001 - any failure of the cache: parse without it
        return pint.UnitRegistry(autoconvert_offset_to_baseunit=True)


ureg: pint.UnitRegistry = _new_registry()
"""The single unit registry of cosimrun; every unit string is parsed here."""

Q_ = ureg.Quantity

UnitLike = str | pint.Unit | None


def unit_str(unit: UnitLike) -> str | None:
    """Return a unit as the string the user wrote (or pint's name for a Unit)."""
    if unit is None:
        return None
    return unit if isinstance(unit, str) else f"{unit:~}" or "1"


@lru_cache(maxsize=1024)
def _parse(unit: str) -> pint.Unit:
    return ureg.Unit(unit)


def parse_unit(unit: UnitLike) -> pint.Unit | None:
    """Parse a unit string with the shared registry; ``None`` stays ``None``.

    Raises a :class:`~cosimrun.errors.ConfigError` (a ``ValueError``) naming the
    unit (and close registry names, the closest in ``suggestion``) when pint
    does not know it.
    """
    if unit is None or isinstance(unit, pint.Unit):
        return unit
    try:
        return _parse(unit.strip() or "dimensionless")
    except (pint.UndefinedUnitError, pint.errors.DefinitionSyntaxError, AttributeError,
            TypeError, ValueError, AssertionError) as exc:
        close = did_you_mean(str(unit), _unit_names())
        raise ConfigError(None, f"unknown unit {unit!r}{suggest(unit, close)}",
                          suggestion=close[0] if close else None) from exc


@lru_cache(maxsize=1)
def _unit_names() -> tuple[str, ...]:
    return tuple(sorted(set(ureg._units.keys())))


def is_dimensionless(unit: UnitLike) -> bool:
    """True for ``None`` and for units without physical dimension."""
    parsed = parse_unit(unit)
    return parsed is None or parsed.dimensionless


def units_compatible(unit1: UnitLike, unit2: UnitLike) -> bool:
    """True when a value in *unit1* can be converted to *unit2*.

    ``None`` (no unit) is compatible with ``None`` and with dimensionless units
    only; a physical unit never silently meets a unit-less port.
    """
    if unit1 is None or unit2 is None:
        return is_dimensionless(unit1) and is_dimensionless(unit2)
    return parse_unit(unit1).dimensionality == parse_unit(unit2).dimensionality


@dataclass(frozen=True, slots=True)
class UnitConversion:
    """Affine map ``dst = scale * src + offset`` compiled from two units."""

    scale: float = 1.0
    offset: float = 0.0

    @property
    def is_identity(self) -> bool:
        return self.scale == 1.0 and self.offset == 0.0

    def __call__(self, value: float) -> float:
        return self.scale * value + self.offset


IDENTITY = UnitConversion()


@lru_cache(maxsize=4096)
def _compile(src: str | None, dst: str | None) -> UnitConversion:
    # No unit means a plain (dimensionless) number, as for a quantity set on a
    # unit-less port: None -> "percent" scales by 100, not 1.
    src, dst = src or "dimensionless", dst or "dimensionless"
    if src == dst:
        return IDENTITY
    src_u, dst_u = parse_unit(src), parse_unit(dst)
    if src_u == dst_u:
        return IDENTITY
    at0 = float(Q_(0.0, src_u).to(dst_u).magnitude)
    if at0 == 0.0:
        return UnitConversion(scale=float(Q_(1.0, src_u).to(dst_u).magnitude))
    # An offset unit: measure the slope over a wide span so the offset's
    # rounding does not leak into the scale.
    span = 1.0e6
    return UnitConversion(scale=(float(Q_(span, src_u).to(dst_u).magnitude) - at0) / span,
                          offset=at0)


def compile_conversion(src: UnitLike, dst: UnitLike) -> UnitConversion:
    """Compile the affine conversion from *src* to *dst* units.

    >>> compile_conversion("degC", "K")
    UnitConversion(scale=1.0, offset=273.15)

    Raises :class:`IncompatibleUnitsError` when the dimensions differ.
    """
    if not units_compatible(src, dst):
        raise IncompatibleUnitsError(
            f"cannot convert {unit_str(src) or 'no unit'!s} to {unit_str(dst) or 'no unit'!s}: "
            f"{_dimension(src)} vs {_dimension(dst)}"
        )
    return _compile(unit_str(src), unit_str(dst))


def _dimension(unit: UnitLike) -> str:
    parsed = parse_unit(unit)
    if parsed is None:
        return "no unit"
    return str(parsed.dimensionality) or "dimensionless"

