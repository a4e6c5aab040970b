"""Whether a results file can be trusted as a complete run: :func:`verify_results`.

A resumed sweep reuses a job's results file, and a job whose worker died after
it finished is taken as complete, only when the file passes this check: it
opens, it is a cosimrun results file with status ``complete``, its groups pass
the checks every read makes (:func:`~cosimrun.storage.results.group_damage`:
dtypes, stored data, the lengths recorded at close, equal lengths within a
group), time never goes back (equal times are one instant's micro steps), and
each dataset's data has the CRC-32 the writer computed while writing it
(``data_crc32``, see :class:`~cosimrun.storage.hdf5.HDF5Writer`).
"""

from __future__ import annotations

import json
import os
from typing import Any

import h5py
import numpy as np

from cosimrun.storage.chunkfile import open_results
from cosimrun.storage.hdf5 import CHECKSUMS_ATTR, FORMAT, dataset_crc32
from cosimrun.storage.results import TABLE_COLUMNS, Damage, group_damage

_BLOCK = 1 << 20
"""Samples read at a time while checking that time does not go back."""


def verify_results(path: str | os.PathLike[str]) -> list[str]:
    """The problems that keep *path* (a file, or a run's group addressed ``<file>::<group>``) from being a whole,
    complete results file (empty: none).

    Each problem is one line naming what is wrong (``/components/mass/x: CRC-32
    mismatch``); the check stops at the first problem that makes the rest
    unreadable.
    """
    try:
        with open_results(path) as f:
            return _problems(f)
    except (OSError, KeyError, ValueError, RuntimeError) as exc:
        return [f"unreadable: {type(exc).__name__}: {exc}"]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _problems(f: h5py.File) -> list[str]:
    if _text(f.attrs.get("format", "")) != FORMAT:
        return ["not a cosimrun results file"]
    status = _text(f.attrs.get("status", ""))
    if status != "complete":
        return [f"status is {status or 'missing'}, not complete"]
    if CHECKSUMS_ATTR not in f.attrs:
        return ["no checksums (the file was not closed by a cosimrun that writes them)"]
    try:
        expected = json.loads(_text(f.attrs[CHECKSUMS_ATTR]))
    except ValueError:
        return [f"the {CHECKSUMS_ATTR} attribute is not valid JSON"]
    try:
        recorded = {str(name): int(entry[0]) for name, entry in expected.items()}
    except (TypeError, ValueError, IndexError, AttributeError):
        return [f"the {CHECKSUMS_ATTR} attribute is not a JSON map of dataset lengths and checksums"]
    damage = _damage(f, recorded)
    damaged = {d.where for d in damage}
    problems = [d.message for d in damage] + _time_going_back(f)
    for name, (_, crc) in expected.items():
        ds = f.get(name.lstrip("/"))  # relative: the root may be a run's group in a shared file
        if not isinstance(ds, h5py.Dataset):
            problems.append(f"{name}: missing")
        elif name not in damaged and dataset_crc32(ds) != crc:
            problems.append(f"{name}: CRC-32 mismatch (the data changed after it was written)")
    return problems


def _damage(f: h5py.File, recorded: dict[str, int]) -> list[Damage]:
    """What keeps the components' groups and the tables from being read whole (see
    :func:`~cosimrun.storage.results.group_damage`)."""
    groups: list[tuple[str, tuple[str, ...] | None]] = [(f"components/{c}", None) for c in f.get("components", {})]
    groups += [(name, columns) for name, columns in TABLE_COLUMNS.items() if name in f]
    return [damage for group, read in groups for damage in group_damage(f, group, read, recorded, [])]


def _time_going_back(f: h5py.File) -> list[str]:
    """Time axes (of the components and the events) that decrease somewhere: a block stored twice, or data
    out of order. Equal times are the micro steps of one instant (superdense time)."""
    problems = []
    axes = [g["time"] for g in f.get("components", {}).values() if isinstance(g, h5py.Group) and "time" in g]
    axes += [f["events/time"]] if "events/time" in f else []
    for ds in axes:
        previous = -np.inf
        for start in range(0, ds.shape[0], _BLOCK):
            t = np.concatenate(([previous], ds[start : start + _BLOCK]))
            back = np.flatnonzero(np.diff(t) < 0)
            if len(back):
                i = start + int(back[0])
                problems.append(f"{ds.name}: time goes back from {t[back[0]]:.12g} to {t[back[0] + 1]:.12g} "
                                f"at sample {i}")
                break
            previous = t[-1]
    return problems
