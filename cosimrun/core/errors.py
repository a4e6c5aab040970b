"""Error messages that name what was asked for and what would have been valid."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(word: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ``"; did you mean 'x'?"`` for close matches of *word*, or ``""``."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=n, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown_name(kind: str, name: str, known: Iterable[str], where: str = "") -> str:
    """``unknown port 'x' in 'comp'; did you mean 'y'? (known: y, z)``."""
    known = sorted(str(k) for k in known)
    where = f" {where}" if where else ""
    listing = ", ".join(known) if len(known) <= 30 else ", ".join(known[:30]) + ", ..."
    return f"unknown {kind} {name!r}{where}{suggest(name, known)} (known: {listing or 'none'})"
