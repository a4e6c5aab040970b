"""FMU units for pint: Modelica unit strings, FMI ``BaseUnit`` definitions and FMI 3 display units."""

from __future__ import annotations

import logging
import re
from typing import Any

from cosimrun.core.units import compile_conversion, parse_unit
from cosimrun.errors import ConfigError

_log = logging.getLogger("cosimrun.fmu")

_MODELICA_SYMBOLS: dict[str, str] = {
    "Ohm": "ohm",
    "%": "percent",
    "deg": "degree",
    "degC": "degC",
    "degF": "degF",
    "rev": "revolution",
}
"""Modelica unit symbols that pint spells differently (everything else is passed through)."""

_UNIT_FACTOR = re.compile(r"(?P<sym>%|[^\W\d_]+)(?P<exp>[+-]?\d+)?")


def modelica_unit_to_pint(unit: str | None) -> str | None:
    """Translate a Modelica/FMI unit string into pint syntax; ``None`` for no unit.

    Modelica writes factors with ``.``, exponents as trailing integers and ``1``
    for dimensionless: ``m/s2`` -> ``m/s**2``, ``N.m`` -> ``N*m``,
    ``kg.m2`` -> ``kg*m**2``, ``s-1`` -> ``s**-1``, ``W/(m2.K)`` ->
    ``W/(m**2*K)``, ``1`` -> ``dimensionless``, ``deg`` -> ``degree``,
    ``Ohm`` -> ``ohm``. Raises ``ConfigError`` (a ``ValueError``) when pint does not know the result.
    """
    if unit is None:
        return None
    text = unit.strip()
    if not text:
        return None
    if text == "1":
        return "dimensionless"

    def factor(match: re.Match[str]) -> str:
        sym = _MODELICA_SYMBOLS.get(match["sym"], match["sym"])
        return sym if match["exp"] is None else f"{sym}**{int(match['exp'])}"

    translated = _UNIT_FACTOR.sub(factor, text).replace(".", "*")
    try:
        parse_unit(translated)
    except ValueError as exc:
        raise ConfigError(None, f"FMU unit {unit!r} (read as {translated!r}): {exc}") from None
    return translated


_BASE_UNITS = ("kg", "m", "s", "A", "K", "mol", "cd", "rad")


def base_unit_expression(base: Any) -> str | None:
    """A pint expression for an FMI ``BaseUnit`` with factor 1 and offset 0 (else ``None``)."""
    if base is None or float(base.factor) != 1.0 or float(base.offset) != 0.0:
        return None
    parts = [f"{name}**{getattr(base, name)}" for name in _BASE_UNITS if getattr(base, name)]
    return "*".join(parts) or "dimensionless"



_DISPLAY_TOLERANCE = 1e-6
"""Relative difference between an FMU's ``DisplayUnit`` factor and pint's conversion that counts as agreement."""


def display_unit(md: Any, v: Any, fmu_unit: str | None, unit: str | None) -> tuple[str | None, float, float]:
    """``(unit, scale, offset)`` of FMI 3 alias *v* in its ``displayUnit``: pint's unit of that name and the
    conversion from the variable's *unit*; the variable's own unit (and a warning) when pint does not know the
    display unit, it does not convert from *unit*, or the FMU's ``DisplayUnit`` definition says otherwise."""
    display = v.displayUnit
    try:
        if unit is None:
            raise ConfigError(None, f"the variable has no unit ({fmu_unit or 'none'}) to convert from")
        target = modelica_unit_to_pint(display)
        conversion = compile_conversion(unit, target)
        definition = next((u for u in md.unitDefinitions if u.name == fmu_unit), None)
        declared = next((d for d in getattr(definition, "displayUnits", ()) if d.name == display), None)
        if declared is not None:
            factor, shift = float(declared.factor), float(declared.offset)
            if abs(factor - conversion.scale) > _DISPLAY_TOLERANCE * abs(conversion.scale) \
                    or abs(shift - conversion.offset) > _DISPLAY_TOLERANCE * max(1.0, abs(conversion.offset)):
                raise ConfigError(None, f"the FMU defines {display} as {factor:g} * {fmu_unit} + {shift:g}, pint as "
                                        f"{conversion.scale:g} * {fmu_unit} + {conversion.offset:g}")
    except ValueError as exc:  # IncompatibleUnitsError is one
        _log.warning("FMU alias %r of %r: display unit %r not used (%s); the alias has the variable's unit %s",
                     v.name, v.alias.name, display, exc, unit or "(none)")
        return unit, 1.0, 0.0
    if target == "dimensionless":
        target = None
    return target, conversion.scale, conversion.offset
