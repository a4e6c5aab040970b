"""The sweep index file, ``index.h5``: one row per job, written whole (atomically), and its parts while a sweep runs.

Laid out netCDF-style like a results file: root attributes (``format="cosimrun-sweep"``,
``format_version``, ``updated``, the caller's attributes, ``columns``, ``params``,
``summaries``), the ``run`` dimension scale (int64 job numbers), one column dataset
per name over ``run`` (int64, float64, ``int8`` with ``dtype="bool"``, or UTF-8
strings) and ``/runs/<run>``, an external link to each job's results file. What
the columns mean is the runner's (:mod:`cosimrun.runner.index`).

A sweep that runs does not rewrite the file as jobs finish: it writes it once
with a *generation* attribute and adds the rows entered since as parts, small
JSON-lines files in ``index.parts/`` written atomically and merged in sizes
growing eightfold (:func:`write_index_part`); at its end the file is written
whole again and the parts removed. A reader takes the rows from the parts
while there are any (:func:`read_index_parts`), so an index is readable at
any moment, also after the driver was killed.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
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
PARTS_DIR = "index.parts"
"""Beside ``index.h5`` while a sweep runs: the rows entered since the index was last written whole."""
PART_SUFFIX = ".jsonl"
PARTS_PER_LEVEL = 8
"""Parts of one size merged into one part of the next size."""
GENERATION_ATTR = "parts_generation"
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
    generation: str = "",
) -> Path:
    """Write a sweep index to *path* (atomically: a temporary file renamed over it).

    *run* holds the job numbers, *columns* one list of Python values per column
    (aligned with *run*; ``None``: missing), *attrs* the root attributes to set,
    *params* and *summaries* the names of the parameter and summary columns and
    *links* ``{run: results file relative to the index}`` for ``/runs/<run>``.
    A *generation* names the parts (:func:`write_index_part`) that hold the rows
    entered since: the file is then the table as it was when that generation
    started, and :func:`read_index_parts` reads the rows.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with h5py.File(tmp, "w", track_order=True, locking=False) as f:
        _write_table(f, run, columns, attrs, params, summaries)
        if generation:
            f.attrs[GENERATION_ATTR] = generation
        group = f.create_group("runs", track_order=True)
        for num in run:
            if links.get(num):
                group[str(num)] = h5py.ExternalLink(links[num], "/")
    os.replace(tmp, path)
    return path


def sweep_index_table(
    run: Sequence[int], columns: Mapping[str, list[Any]], *, params: Sequence[str], summaries: Sequence[str]
) -> SweepIndex:
    """The :class:`SweepIndex` that :func:`write_sweep_index` of these columns reads back as (made in memory)."""
    with h5py.File(io.BytesIO(), "w", track_order=True) as f:
        _write_table(f, run, columns, {}, params, summaries)
        return _read_table(f)


def _write_table(
    f: h5py.File,
    run: Sequence[int],
    columns: Mapping[str, list[Any]],
    attrs: Mapping[str, Any],
    params: Sequence[str],
    summaries: Sequence[str],
) -> None:
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


@dataclass(frozen=True)
class SweepIndex:
    """The contents of a sweep index: job numbers, columns in file order, and which are parameters and summaries."""

    run: np.ndarray
    columns: dict[str, np.ndarray]
    params: list[str]
    summaries: list[str]


def read_sweep_index(path: str | os.PathLike[str]) -> SweepIndex:
    """Read the table of the sweep index *path* (``FileNotFoundError`` without one, :class:`ResultsReadError` for
    a file that is not a sweep index). Rows entered since a generation started are in its parts
    (:func:`read_index_parts`), not here."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no sweep index {path}")
    with h5py.File(path, "r", locking=False) as f:
        found = f.attrs.get("format")
        if _text(found) != SWEEP_FORMAT:
            raise ResultsReadError(f"{path} is not a cosimrun sweep index", path=str(path), expected=SWEEP_FORMAT,
                                   found=None if found is None else _text(found))
        return _read_table(f)


def _read_table(f: h5py.File) -> SweepIndex:
    names = [_text(c) for c in f.attrs["columns"]]
    return SweepIndex(
        run=f["run"][...],
        columns={c: read_column(f[c]) for c in names},
        params=[_text(c) for c in f.attrs.get("params", [])],
        summaries=[_text(c) for c in f.attrs.get("summaries", [])],
    )


def index_generation(path: str | os.PathLike[str]) -> str:
    """The generation of the sweep index *path* whose parts hold its newer rows ("" when it is whole)."""
    try:
        with h5py.File(path, "r", locking=False) as f:
            return _text(f.attrs.get(GENERATION_ATTR, ""))
    except (OSError, KeyError):
        return ""


def parts_dir(path: str | os.PathLike[str]) -> Path:
    """The directory of the parts of the sweep index *path* (``index.parts`` beside ``index.h5``)."""
    return Path(path).with_name(PARTS_DIR)


def _part_name(generation: str, seq: int, level: int) -> str:
    return f"{generation}-{seq:09d}-{level}{PART_SUFFIX}"


def _parts(path: str | os.PathLike[str], generation: str) -> list[tuple[int, int, Path]]:
    """``(seq, level, file)`` of the parts of *generation*, oldest first (a merged part after what it merged)."""
    folder = parts_dir(path)
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            stem = entry.name[: -len(PART_SUFFIX)] if entry.name.endswith(PART_SUFFIX) else ""
            gen, _, rest = stem.partition("-")
            seq, _, level = rest.partition("-")
            if gen == generation and seq.isdigit() and level.isdigit():
                found.append((int(seq), int(level), Path(entry.path)))
    return sorted(found)


def write_index_part(
    path: str | os.PathLike[str], generation: str, seq: int, rows: Sequence[Mapping[str, Any]]
) -> Path:
    """Add the rows *rows* (JSON objects with a ``num``; a later row replaces an earlier one of that ``num``)
    to the sweep index *path* as part *seq* of *generation* (atomically), then merge parts so that there are at
    most :data:`PARTS_PER_LEVEL` - 1 of each size: writing N rows costs O(N log N) in all."""
    folder = parts_dir(path)
    folder.mkdir(exist_ok=True)
    out = _write_part(folder, generation, seq, 0, rows)
    level = 0
    while True:
        same = [(s, lv, p) for s, lv, p in _parts(path, generation) if lv == level]
        if len(same) < PARTS_PER_LEVEL:
            return out
        merged: dict[int, Mapping[str, Any]] = {}
        for _, _, part in same:
            for row in _read_part(part):
                merged[int(row["num"])] = row
        out = _write_part(folder, generation, same[-1][0], level + 1, list(merged.values()))
        for _, _, part in same:
            part.unlink(missing_ok=True)
        level += 1


def _write_part(folder: Path, generation: str, seq: int, level: int, rows: Sequence[Mapping[str, Any]]) -> Path:
    target = folder / _part_name(generation, seq, level)
    tmp = folder / f".{target.name}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=json_value, ensure_ascii=False))
            f.write("\n")
    os.replace(tmp, target)
    return target


def json_value(value: Any) -> Any:
    """numpy scalars as Python numbers for JSON; anything else as text."""
    return value.item() if isinstance(value, np.generic) else str(value)


def _read_part(part: Path) -> list[dict[str, Any]]:
    with open(part, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_index_parts(path: str | os.PathLike[str]) -> list[dict[str, Any]] | None:
    """The rows of the sweep index *path* held in parts, one per ``num`` (the latest), ordered by ``num``;
    None when the index is whole (no generation, as every index a sweep finished, and every index written
    before parts existed)."""
    generation = index_generation(path)
    if not generation:
        return None
    rows: dict[int, dict[str, Any]] = {}
    for _, _, part in _parts(path, generation):
        try:
            found = _read_part(part)
        except FileNotFoundError:  # merged into a newer part meanwhile: read them again
            return read_index_parts(path)
        for row in found:
            rows[int(row["num"])] = row
    return [rows[num] for num in sorted(rows)]


def remove_index_parts(path: str | os.PathLike[str]) -> None:
    """Remove the parts directory of the sweep index *path* (after the index was written whole)."""
    shutil.rmtree(parts_dir(path), ignore_errors=True)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
