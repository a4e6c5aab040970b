"""The state form: plain values as named, typed arrays and strings, with no pickle.

A component or a master run gives its state as *plain values*: ``None``,
``bool``, ``int``, ``float``, ``str``, numpy arrays of floats, integers,
booleans or bytes (``uint8``), and tuples, lists and string-keyed dicts of those. :func:`pack`
turns one plain value into entries of a flat mapping: ``<name>/layout``, a
JSON text naming the structure (``["d", [["x", ["a", 0]], ...]]``), and one
entry per leaf, ``<name>/<i>``: a numpy array (``float64``, ``int64``,
``bool`` or ``uint8``) or a string. :func:`unpack` reads them back to equal
values (floats bit for bit, containers of the same kind). Anything else (an
object, a C handle) has no state form: :class:`StateFormError` names its type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np

from cosimrun.errors import ComponentStateError

Leaf = np.ndarray | str
"""One entry of a state: a numeric array or a string."""
Entries = dict[str, Leaf]
"""A flat state: entry name (``/``-separated) -> leaf."""

LAYOUT = "layout"
"""The entry under a packed value's name that holds its structure."""
_NUMERIC = {"f": np.float64, "i": np.int64, "u": np.int64, "b": np.bool_}


class StateFormError(ComponentStateError):
    """A value that has no state form (its type is not a plain value)."""


def pack(value: Any, name: str, out: MutableMapping[str, Leaf]) -> None:
    """Write plain *value* as entries ``<name>/layout`` and ``<name>/<i>`` of *out*."""
    leaves: list[Leaf] = []

    def leaf(item: Leaf, tag: str) -> list[Any]:
        leaves.append(item)
        return [tag, len(leaves) - 1]

    def walk(v: Any, where: str) -> Any:
        if v is None:
            return None
        if isinstance(v, bool | np.bool_):
            return leaf(np.array(bool(v)), "b")
        if isinstance(v, int | np.integer):
            if not -(2**63) <= int(v) < 2**63:
                raise StateFormError(f"{where}: integer {int(v)} does not fit 64 bits")
            return leaf(np.array(int(v), dtype=np.int64), "i")
        if isinstance(v, float | np.floating):
            return leaf(np.array(float(v), dtype=np.float64), "f")
        if isinstance(v, str):
            return leaf(v, "s")
        if isinstance(v, np.ndarray):
            if v.dtype == np.uint8:  # bytes (a serialized FMU state) stay bytes
                return leaf(v.copy(), "a")
            kind = _NUMERIC.get(v.dtype.kind)
            if kind is None:
                raise StateFormError(f"{where}: array of dtype {v.dtype} has no state form")
            return leaf(np.array(v, dtype=kind, copy=True), "a")
        if isinstance(v, tuple | list):
            return ["t" if isinstance(v, tuple) else "l", [walk(x, f"{where}[{i}]") for i, x in enumerate(v)]]
        if isinstance(v, Mapping):
            items = []
            for k, x in v.items():
                if not isinstance(k, str):
                    raise StateFormError(f"{where}: key {k!r} is not a string")
                items.append([k, walk(x, f"{where}.{k}")])
            return ["d", items]
        raise StateFormError(f"{where}: a {type(v).__name__} has no state form")

    layout = walk(value, name)
    out[f"{name}/{LAYOUT}"] = json.dumps(layout, separators=(",", ":"))
    for i, item in enumerate(leaves):
        out[f"{name}/{i}"] = item


def unpack(entries: Mapping[str, Leaf], name: str) -> Any:
    """The plain value :func:`pack` wrote under *name* (``KeyError`` naming the entry if one is missing)."""
    layout = json.loads(str(entries[f"{name}/{LAYOUT}"]))

    def build(node: Any) -> Any:
        if node is None:
            return None
        tag, body = node
        if tag == "t":
            return tuple(build(x) for x in body)
        if tag == "l":
            return [build(x) for x in body]
        if tag == "d":
            return {k: build(x) for k, x in body}
        item = entries[f"{name}/{body}"]
        if tag == "s":
            return str(item)
        arr = np.asarray(item)
        if tag == "a":
            return arr.copy()
        scalar = arr.reshape(()).item()
        return {"b": bool, "i": int, "f": float}[tag](scalar)

    return build(layout)


def names_under(entries: Mapping[str, Leaf], prefix: str) -> list[str]:
    """The names of the values packed directly under *prefix* (``<prefix>/<name>/layout``), in entry order."""
    start, end = f"{prefix}/", f"/{LAYOUT}"
    return [k[len(start):-len(end)] for k in entries if k.startswith(start) and k.endswith(end)
            and "/" not in k[len(start):-len(end)]]
