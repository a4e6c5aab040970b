"""Whether a results file can be trusted as a complete run: :func:`verify_results`.

A resumed sweep reuses a job's results file, and a job whose worker died after
it finished is taken as complete, only when the file passes this check: it
opens, it is a cosimrun results file with status ``complete``, every dataset
has the length recorded at close, the datasets of one group have equal
lengths, time never goes back (equal times are one instant's micro steps), and
each dataset's data has the CRC-32 the writer computed while writing it
(``data_crc32``, see :class:`~cosimrun.storage.hdf5.HDF5Writer`).
"""

from __future__ import annotations

import json
import os
from typing import Any

import h5py
import numpy as np

from cosimrun.storage.hdf5 import CHECKSUMS_ATTR, FORMAT, crc32

_BLOCK = 1 << 20
"""Samples read at a time while summing a dataset."""


def verify_results(path: str | os.PathLike[str]) -> list[str]:
    """The problems that keep *path* from being a whole, complete results file (empty: none).

    Each problem is one line naming what is wrong (``/components/mass/x: CRC-32
    mismatch``); the check stops at the first problem that makes the rest
    unreadable.
    """
    try:
        with h5py.File(path, "r", locking=False) as f:
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
    problems = _unequal_groups(f) + _time_going_back(f)
    for name, (length, crc) in expected.items():
        ds = f.get(name)
        if not isinstance(ds, h5py.Dataset):
            problems.append(f"{name}: missing")
        elif ds.shape[0] != length:
            problems.append(f"{name}: {ds.shape[0]} samples, {length} written")
        elif _crc(ds) != crc:
            problems.append(f"{name}: CRC-32 mismatch (the data changed after it was written)")
    return problems


def _unequal_groups(f: h5py.File) -> list[str]:
    """Groups whose datasets (one dimension each) differ in length."""
    problems = []
    groups = [g for g in f.get("components", {}).values() if isinstance(g, h5py.Group)]
    groups += [f[name] for name in ("events", "mode_switches") if name in f]
    for group in groups:
        lengths = {name: ds.shape[0] for name, ds in group.items() if isinstance(ds, h5py.Dataset)}
        if len(set(lengths.values())) > 1:
            problems.append(f"{group.name}: datasets of different lengths {lengths}")
    return problems


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


def _crc(ds: h5py.Dataset) -> int:
    value = 0
    for start in range(0, ds.shape[0], _BLOCK):
        value = crc32(ds[start : start + _BLOCK], value)
    return value
