"""The sweep index file, ``index.h5``: one row per job, written whole (atomically) and read whole.

Laid out netCDF-style like a results file: root attributes (``format="cosimrun-sweep"``,
``format_version``, ``updated``, the caller's attributes, ``columns``, ``params``,
``summaries``), the ``run`` dimension scale (int64 job numbers), one column dataset
per name over ``run`` (int64, float64, ``int8`` with ``dtype="bool"``, or UTF-8
strings) and ``/runs/<run>``, an external link to each job's results file. What
the columns mean is the runner's (:mod:`cosimrun.runner.index`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from cosimrun.errors import ResultsReadError
from cosimrun.storage.results import read_column

INDEX_FILE = "index.h5"
SWEEP_FORMAT = "cosimrun-sweep"
SWEEP_FORMAT_VERSION = 1

_STR = h5py.string_dtype("utf-8")
_UNITS = {"wall_time_s": "s", "job_time_s": "s"}
"""Units of the columns that have one."""


def _column(values: list[Any]) -> tuple[np.ndarray, str]:
    """A column array and its kind (``bool``, ``int``, ``float``, ``str``) from Python values (None: missing)."""
    present = [v for v in values if v is not None]
    missing = len(present) < len(values)
    if present and all(isinstance(v, bool | np.bool_) for v in present):
        if not missing:
            return np.array(values, dtype=np.int8), "bool"
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64), "float"
    numeric = all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) for v in present)
    if present and numeric:
        if not missing and all(isinstance(v, int | np.integer) for v in present):
            return np.array(values, dtype=np.int64), "int"
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64), "float"
    if not present:
        return np.full(len(values), math.nan), "float"
    arr = np.empty(len(values), dtype=object)
    arr[:] = ["" if v is None else str(v) for v in values]
    return arr, "str"


def write_sweep_index(
    path: str | os.PathLike[str],
    run: Sequence[int],
    columns: Mapping[str, list[Any]],
    *,
    attrs: Mapping[str, Any],
    params: Sequence[str],
    summaries: Sequence[str],
    links: Mapping[int, str],
) -> Path:
    """Write a sweep index to *path* (atomically: a temporary file renamed over it).

    *run* holds the job numbers, *columns* one list of Python values per column
    (aligned with *run*; ``None``: missing), *attrs* the root attributes to set,
    *params* and *summaries* the names of the parameter and summary columns and
    *links* ``{run: results file relative to the index}`` for ``/runs/<run>``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with h5py.File(tmp, "w", track_order=True, locking=False) as f:
        f.attrs["_NCProperties"] = np.bytes_(f"version=2,cosimrun,hdf5={h5py.version.hdf5_version}")
        f.attrs["format"] = SWEEP_FORMAT
        f.attrs["format_version"] = np.int32(SWEEP_FORMAT_VERSION)
        f.attrs["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        for key, value in attrs.items():
            f.attrs[key] = value
        f.attrs["columns"] = np.array(list(columns), dtype=_STR)
        f.attrs["params"] = np.array(list(params), dtype=_STR)
        f.attrs["summaries"] = np.array(list(summaries), dtype=_STR)
        scale = f.create_dataset("run", data=np.array(run, dtype=np.int64), maxshape=(None,))
        scale.make_scale("run")
        scale.attrs["_Netcdf4Dimid"] = np.int32(0)
        scale.attrs["_Netcdf4Coordinates"] = np.array([0], dtype=np.int32)
        for name, values in columns.items():
            data, kind = _column(values)
            if kind == "str":
                ds = f.create_dataset(name, shape=(len(data),), dtype=_STR, maxshape=(None,))
                if len(data):
                    ds[...] = data
            else:
                ds = f.create_dataset(name, data=data, maxshape=(None,))
            if kind == "bool":
                ds.attrs["dtype"] = "bool"
            if name in _UNITS:
                ds.attrs["units"] = _UNITS[name]
            ds.dims[0].attach_scale(scale)
            ds.attrs["_Netcdf4Coordinates"] = np.array([0], dtype=np.int32)
        group = f.create_group("runs", track_order=True)
        for num in run:
            if links.get(num):
                group[str(num)] = h5py.ExternalLink(links[num], "/")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class SweepIndex:
    """The contents of a sweep index: job numbers, columns in file order, and which are parameters and summaries."""

    run: np.ndarray
    columns: dict[str, np.ndarray]
    params: list[str]
    summaries: list[str]


def read_sweep_index(path: str | os.PathLike[str]) -> SweepIndex:
    """Read the sweep index *path* (``FileNotFoundError`` without one, :class:`ResultsReadError` for
    a file that is not a sweep index)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no sweep index {path}")
    with h5py.File(path, "r", locking=False) as f:
        found = f.attrs.get("format")
        if _text(found) != SWEEP_FORMAT:
            raise ResultsReadError(f"{path} is not a cosimrun sweep index", path=str(path), expected=SWEEP_FORMAT,
                                   found=None if found is None else _text(found))
        names = [_text(c) for c in f.attrs["columns"]]
        return SweepIndex(
            run=f["run"][...],
            columns={c: read_column(f[c]) for c in names},
            params=[_text(c) for c in f.attrs.get("params", [])],
            summaries=[_text(c) for c in f.attrs.get("summaries", [])],
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
