"""Which component's native step a run is in, kept where a process that dies there leaves it.

A process that crashes in an FMU's C code (a segfault, ``abort()``, ``exit()``) runs no Python
afterwards, so it cannot say where it was. While a run is recorded (:func:`begin`), each component
that steps in C writes the time of the step it is in into its slot of a small file mapped into
memory, and NaN once the step returned: two stores a step, no system call. Whoever looks after
the crash (the command's crash witness, a sweep's launcher) reads the file (:func:`read`): the
slots still holding a time name the components whose step had not returned. A run that ends in
Python removes the file (:func:`end`).

Layout of ``<results file>.steps``: :data:`NAMES_BYTES` bytes of the component names as JSON
(space-padded), then one little-endian float64 per component.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

SUFFIX = ".steps"
CAUSE = ".crash"
"""``<results file>.crash``: how the process running the run died, written by the command's crash witness."""
NAMES_BYTES = 8192
"""Room for the component names; a run with more names than fit is not recorded."""
NAN = math.nan

_map: mmap.mmap | None = None
_slots: memoryview | None = None
_names: dict[str, int] = {}
_path: Path | None = None
_holders: list[Callable[[memoryview | None], None]] = []
listener: Callable[[Path | None], None] | None = None
"""Told the path of the record when a run begins and ``None`` when it ends (the command's crash witness)."""


def begin(results: str | os.PathLike[str], components: Mapping[str, Any]) -> None:
    """Record the native steps of *components* (by name) of a run writing *results* (in ``<results>.steps``).

    A component that steps in C has a method ``record_native_steps(slot)``; it is given its slot (see
    :func:`slot`), and ``None`` at :func:`end`.
    """
    global _map, _slots, _names, _path
    end()
    names = list(components)
    header = json.dumps(names).encode("utf-8")
    if len(header) > NAMES_BYTES or not names:
        return
    path = Path(os.fspath(results) + SUFFIX)
    try:
        Path(os.fspath(results) + CAUSE).unlink(missing_ok=True)  # an earlier attempt's
        with open(path, "wb+") as f:
            f.write(header.ljust(NAMES_BYTES) + bytes(8 * len(names)))
            f.flush()
            _map = mmap.mmap(f.fileno(), 0)
    except OSError:  # no record: a crash is still reported, without the component
        return
    _slots = memoryview(_map)[NAMES_BYTES:].cast("d")
    for i in range(len(names)):
        _slots[i] = NAN
    _names = {name: i for i, name in enumerate(names)}
    _path = path
    for name, comp in components.items():
        record = getattr(comp, "record_native_steps", None)
        if record is not None:
            record(slot(name))
            _holders.append(record)
    if listener is not None:
        listener(path)


def slot(name: str) -> memoryview | None:
    """The one-element slot where component *name* writes the time of its step (``None``: not recorded)."""
    index = _names.get(name)
    return None if index is None or _slots is None else _slots[index:index + 1]


def end() -> None:
    """Stop recording and remove the record: the run ended in Python. (The components' slots stay writable:
    the map lives as long as they hold it, on a file no longer named.)"""
    global _map, _slots, _names, _path
    path = _path
    _map = _slots = _path = None
    _names = {}
    while _holders:
        _holders.pop()(None)
    if path is not None:
        path.unlink(missing_ok=True)
        if listener is not None:
            listener(None)


def read(path: str | os.PathLike[str]) -> dict[str, float]:
    """``{component: time of its step}`` of the components whose native step had not returned (``{}``: none, or
    no readable record at *path*)."""
    try:
        data = Path(path).read_bytes()
        names = json.loads(data[:NAMES_BYTES])
        times = memoryview(data[NAMES_BYTES:NAMES_BYTES + 8 * len(names)]).cast("d")
    except (OSError, ValueError, TypeError):
        return {}
    return {name: t for name, t in zip(names, times, strict=False) if not math.isnan(t)}


def describe(path: str | os.PathLike[str]) -> str:
    """``component 'x' at t=0.99`` (or ``the components 'a', 'b' (stepped in parallel) at t=...``) from the
    record at *path*; ``""`` when it names none."""
    inside = read(path)
    if not inside:
        return ""
    t = max(inside.values())
    names = ", ".join(repr(name) for name in inside)
    who = f"component {names}" if len(inside) == 1 else f"the components {names} (stepped in parallel)"
    return f"{who} in its step from t={t:.12g}" if len(inside) == 1 else f"{who} in their step from t={t:.12g}"
