"""The sweep index file, ``index.h5``: one row per job, written whole (atomically), and its parts while a sweep runs.

Laid out netCDF-style like a results file: root attributes (``format="cosimrun-sweep"``,
``format_version``, ``updated``, the caller's attributes, ``columns``, ``params``,
``summaries``), the ``run`` dimension scale (int64 job numbers), one column dataset
per name over ``run`` (int64, float64, ``int8`` with ``dtype="bool"``, or UTF-8
strings) and ``/runs/<run>``, an external link to each job's results file. What
the columns mean is the runner's (:mod:`cosimrun.runner.index`).

A sweep that runs does not rewrite the file as jobs finish: it writes it once
with a *generation* attribute and appends the rows entered since to a columnar
store, ``index.parts/<generation>.h5`` (:func:`append_index_rows`): one chunked
HDF5 dataset per field that grows by rows (text as UTF-8 bytes with each row's
end offset), and ``count``, the rows written whole, set last. The store is
written in HDF5's single-writer/multiple-reader mode (SWMR), so a reader in
another process sees a consistent file while rows are appended and after the
driver was killed in the middle of an append, or failed to write one (a full
disk: :class:`~cosimrun.errors.ResultsWriteError`, the rows before it kept);
appending N rows costs O(N) in all. At the sweep's end the file is written whole again and the store removed.
A reader takes the rows from the store while there is one
(:func:`read_index_parts`), so an index is readable at any moment. Sweep
directories of earlier versions may hold JSON-lines parts instead, which are
read the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from cosimrun.errors import ResultsReadError
from cosimrun.storage.chunkfile import split_address
from cosimrun.storage.hdf5 import check_room, writing, written_whole
from cosimrun.storage.results import read_column

INDEX_FILE = "index.h5"
PARTS_DIR = "index.parts"
"""Beside ``index.h5`` while a sweep runs: the rows entered since the index was last written whole."""
PART_SUFFIX = ".jsonl"
"""The parts of earlier versions: JSON lines (read, no longer written)."""
PARTS_PER_LEVEL = 8
"""Earlier versions merged their JSON-lines parts by this many, so one generation had fewer than twice as many part
files (it now has one row store)."""
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
    """Write a sweep index to *path* (atomically: a temporary file renamed over it), or raise
    :class:`~cosimrun.errors.ResultsWriteError` leaving *path* as it was.

    The file is made in memory and written out in one piece (:func:`~cosimrun.storage.hdf5.written_whole`).

    *run* holds the job numbers, *columns* one list of Python values per column
    (aligned with *run*; ``None``: missing), *attrs* the root attributes to set,
    *params* and *summaries* the names of the parameter and summary columns and
    *links* ``{run: results file relative to the index}`` for ``/runs/<run>`` (an address ``<file>::<group>``
    links to the run's group of a chunk's file).
    A *generation* names the row store (:func:`append_index_rows`) that holds the rows
    entered since: the file is then the table as it was when that generation
    started, and :func:`read_index_parts` reads the rows.
    """
    path = Path(path)
    with written_whole(path, path.with_name(f".{path.name}.{os.getpid()}.tmp")) as f:
        _write_table(f, run, columns, attrs, params, summaries)
        if generation:
            f.attrs[GENERATION_ATTR] = generation
        group = f.create_group("runs", track_order=True)
        for num in run:
            if links.get(num):
                file, run_group = split_address(links[num])
                group[str(num)] = h5py.ExternalLink(file.as_posix(), run_group or "/")
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


ROW_KINDS = ("int", "float", "bool", "text", "json")
"""Kinds of the fields of the row store: int64, float64, int8 (bool), UTF-8 text, JSON of any other value."""
_ROW_DTYPES = {"int": np.int64, "float": np.float64, "bool": np.int8}
_ROWS_CHUNK = 512
_BYTES_CHUNK = 1 << 13
"""Chunks of the row store: a chunk is written whole once a row lands in it, so a store of a few rows takes some
100 kB with these, not the megabyte that 4096 rows and 64 kB per chunk took (under a file-size limit on the
sweep's processes that was the driver's own file failing); appends of a hundred rows stay a chunk or two per
field."""


def rows_file(path: str | os.PathLike[str], generation: str) -> Path:
    """The row store of generation *generation* of the sweep index *path*."""
    return parts_dir(path) / f"{generation}.h5"


def append_index_rows(
    path: str | os.PathLike[str], generation: str, seq: int, schema: Mapping[str, str],
    rows: Sequence[Mapping[str, Any]],
) -> Path:
    """Append *rows* (mappings with the fields of *schema*, ``{field: kind}`` of :data:`ROW_KINDS`, among them an
    int ``num``; a later row replaces an earlier one of that ``num``) to the row store of *generation* of the sweep
    index *path* as its append number *seq*: the first (0) makes the store anew. The rows count once written whole
    (see the module)."""
    if set(schema.values()) - set(ROW_KINDS) or schema.get("num") != "int":
        raise ValueError(f"a row store needs an int field 'num' and fields of the kinds {ROW_KINDS}: {dict(schema)}")
    file = rows_file(path, generation)
    file.parent.mkdir(exist_ok=True)
    with writing(file, "w" if seq == 0 else "a", libver="latest", locking=False) as f:
        if seq == 0:
            _create_store(f, generation, schema)
        f.swmr_mode = True
        stored = json.loads(_text(f.attrs["schema"]))
        count = f["count"]
        n, k = int(count[0]), len(rows)
        columns: dict[str, np.ndarray | tuple[np.ndarray, np.ndarray]] = {}
        for name, kind in stored.items():
            values = [row.get(name) for row in rows]
            if kind in _ROW_DTYPES:
                columns[name] = np.array([_number(v, kind) for v in values], dtype=_ROW_DTYPES[kind])
                continue
            encoded = [(v if kind == "text" else json.dumps(v, default=json_value, ensure_ascii=False))
                       .encode("utf-8") for v in ("" if v is None and kind == "text" else v for v in values)]
            lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=k)
            columns[name] = (lengths, np.frombuffer(b"".join(encoded), dtype=np.uint8))
        check_room(f, file, _append_size(columns, k))
        for name, column in columns.items():
            if isinstance(column, np.ndarray):
                ds = f[name]
                ds.resize((n + k,))
                ds[n:] = column
                ds.flush()
                continue
            lengths, blob = column
            ends, data = f[f"{name}.end"], f[f"{name}.bytes"]
            base = int(ends[n - 1]) if n else 0
            data.resize((base + len(blob),))
            if len(blob):
                data[base:] = blob
            ends.resize((n + k,))
            ends[n:] = base + np.cumsum(lengths)
            data.flush()
            ends.flush()
        count[0] = n + k  # last: a reader sees the new rows once they are all there
        count.flush()
    return file


_APPEND_SLACK = 1 << 16
"""Bytes an append may add to a row store beyond its rows and new chunks: HDF5's indexes and metadata."""


def _append_size(columns: Mapping[str, np.ndarray | tuple[np.ndarray, np.ndarray]], k: int) -> int:
    """An upper bound of the bytes appending *k* rows of *columns* adds to a row store: each dataset's new
    chunks, one more for the partly filled one, and :data:`_APPEND_SLACK`."""
    size = _APPEND_SLACK
    for column in columns.values():
        if isinstance(column, np.ndarray):
            size += (k // _ROWS_CHUNK + 1) * _ROWS_CHUNK * column.itemsize
        else:
            size += (k // _ROWS_CHUNK + 1) * _ROWS_CHUNK * 8 + (len(column[1]) // _BYTES_CHUNK + 1) * _BYTES_CHUNK
    return size


def _create_store(f: h5py.File, generation: str, schema: Mapping[str, str]) -> None:
    f.attrs[GENERATION_ATTR] = generation
    f.attrs["schema"] = json.dumps(dict(schema))
    f.create_dataset("count", data=np.zeros(1, dtype=np.int64))
    for name, kind in schema.items():
        if kind in _ROW_DTYPES:
            f.create_dataset(name, shape=(0,), maxshape=(None,), dtype=_ROW_DTYPES[kind], chunks=(_ROWS_CHUNK,))
        else:
            f.create_dataset(f"{name}.end", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(_ROWS_CHUNK,))
            f.create_dataset(f"{name}.bytes", shape=(0,), maxshape=(None,), dtype=np.uint8, chunks=(_BYTES_CHUNK,))


def _number(value: Any, kind: str) -> Any:
    if kind == "float":
        return math.nan if value is None else float(value)
    return 0 if value is None else int(value)


STORE_READ_ATTEMPTS = 10
"""Reads of a row store that fails to open or lacks a dataset before it is taken as never initialized (about half
a second in all): a read that meets the driver appending fails now and then, and the file's table alone would show
rows that arrived since as pending."""


def _read_store(file: Path) -> list[dict[str, Any]]:
    """The rows of the row store *file*, one per ``num`` (the latest), ordered by ``num``."""
    with h5py.File(file, "r", libver="latest", swmr=True, locking=False) as f:
        schema = json.loads(_text(f.attrs["schema"]))
        count = f["count"]
        count.refresh()
        n = int(count[0])
        columns: dict[str, list[Any]] = {}
        nums = _refreshed(f["num"], n)
        last = np.unique(nums[::-1], return_index=True)  # each num's latest row, by num
        keep = (n - 1 - last[1]) if n else np.zeros(0, dtype=np.int64)
        for name, kind in schema.items():
            if kind in _ROW_DTYPES:
                values = _refreshed(f[name], n)[keep]
                columns[name] = [bool(v) for v in values] if kind == "bool" else values.tolist()
                continue
            ends = _refreshed(f[f"{name}.end"], n)
            blob = _refreshed(f[f"{name}.bytes"], int(ends[-1]) if n else 0).tobytes()
            starts = np.concatenate(([0], ends[:-1])) if n else ends
            texts = [blob[starts[i]:ends[i]].decode("utf-8") for i in keep]
            columns[name] = texts if kind == "text" else [json.loads(t) for t in texts]
    return [{name: values[i] for name, values in columns.items()} for i in range(len(keep))]


def _refreshed(ds: h5py.Dataset, n: int) -> np.ndarray:
    ds.refresh()
    return ds[:n]


def json_value(value: Any) -> Any:
    """numpy scalars as Python numbers for JSON; anything else as text."""
    return value.item() if isinstance(value, np.generic) else str(value)


def _read_part(part: Path) -> list[dict[str, Any]]:
    with open(part, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_index_parts(path: str | os.PathLike[str]) -> list[dict[str, Any]] | None:
    """The rows of the sweep index *path* held in its row store (or the JSON-lines parts of an earlier version),
    one per ``num`` (the latest), ordered by ``num``; None when the index is whole (no generation, as every index a
    sweep finished, and every index written before parts existed) or its store was not made yet."""
    generation = index_generation(path)
    if not generation:
        return None
    store = rows_file(path, generation)
    if store.exists():
        for attempt in range(STORE_READ_ATTEMPTS):
            try:
                return _read_store(store)
            except (OSError, KeyError):  # being made or appended to this instant: read it again
                time.sleep(0.01 * (attempt + 1))
        return None  # made but never initialized (its driver was killed then): the file's table
    rows: dict[int, dict[str, Any]] = {}
    parts = _parts(path, generation)
    if not parts:  # its driver was killed before it appended the first rows: the file's table
        return None
    for _, _, part in parts:
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
