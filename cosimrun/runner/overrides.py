"""Plain override lines read without Hydra's parser.

A sweep of 10^5 jobs has 10^5 distinct lines such as ``components.k.params.k=41``:
Hydra's parser (an ANTLR grammar) takes milliseconds for each, which the driver
would spend for minutes composing the jobs and writing the index. A line of the
form ``[+|++]dotted.key=number-or-word`` is read here instead, typed as Hydra
types it (``tests/runner/test_overrides.py`` holds both equal); anything else is
left to Hydra's parser.
"""

from __future__ import annotations

import math
import re
from typing import Any

_LINE = re.compile(r"(\+{0,2})([A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)*)=([^=]*)")
_INT = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]*\.[0-9]+|[0-9]+\.)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None, "inf": math.inf, "nan": math.nan}
"""Hydra's words for values (in any case)."""


def plain_value(text: str) -> tuple[bool, Any]:
    """``(True, value)`` of an override's value that is a plain number or word, typed as Hydra types it; ``(False,
    None)`` for anything else (Hydra's parser reads it)."""
    if _INT.fullmatch(text):
        return True, int(text)
    if _FLOAT.fullmatch(text):
        return True, float(text)
    if _WORD.fullmatch(text):
        return True, _WORDS.get(text.lower(), text)
    return False, None


def plain_override(line: str) -> tuple[str, str, Any] | None:
    """``(prefix, key, value)`` of a line ``[+|++]dotted.key=number-or-word`` (prefix ``""``, ``"+"`` or ``"++"``),
    the value typed as Hydra types it; None for any other line."""
    match = _LINE.fullmatch(line)
    if match is None:
        return None
    ok, value = plain_value(match[3])
    return (match[1], match[2], value) if ok else None


def parsed_plain(line: str) -> Any:
    """Hydra's ``Override`` of a plain line (see :func:`plain_override`), made as Hydra's parser makes it; None for
    any other line."""
    plain = plain_override(line)
    if plain is None:
        return None
    from hydra.core.override_parser.types import Override, OverrideType, ValueType

    kind = {"": OverrideType.CHANGE, "+": OverrideType.ADD, "++": OverrideType.FORCE_ADD}[plain[0]]
    return Override(type=kind, key_or_group=plain[1], value_type=ValueType.ELEMENT, _value=plain[2],
                    input_line=line)
