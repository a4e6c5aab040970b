"""The sweep index: ``index.h5`` in a sweep directory, one row per job.

The driver (:mod:`cosimrun.runner.ledger`) keeps an index in the sweep
directory, ``index.h5``, rewritten (atomically) as jobs finish, laid out
netCDF-style like a results file::

    /            attrs: format="cosimrun-sweep", format_version, experiment, updated,
                 n_jobs, n_complete, n_failed, n_interrupted, n_pending, n_reused,
                 jobs_wall_time_s (first job start to last job end), columns, params, summaries
    run          int64 (n,)   job number: the dimension scale of every column
    status       str          pending | complete | failed | interrupted
    overrides    str          the job's overrides, space separated
    <param>      one column per override key (``components.ball.params.e``, ``master``)
    final.<comp>.<port>       the port's last recorded value
    wall_time_s  float64      the simulation's wall time (NaN when it did not run)
    job_time_s   float64      the whole job's wall time on its worker
    coupling_error_max float64 the run's largest estimated coupling error relative to its input's range
                              (``/coupling_error`` of the results file; NaN without coupled real inputs)
    path         str          results file relative to the sweep directory ("" if none)
    error, traceback, worker  str
    attempts     int64        how often the job was started (0: reused by a resume)
    reused       bool         taken over from an earlier run of the sweep (resume)
    note         str          what the sweep did beyond running the job: ``rerun: results file
                              damaged (...)`` / ``rerun: configuration changed`` (resume),
                              ``recovered: ...`` (its worker died after the job finished)
    /runs/<run>  HDF5 external link to the job's results file (``/`` of it)

:func:`write_index` writes it; :mod:`cosimrun.runner.load` reads it.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from cosimrun.runner.outcome import SUMMARY_PREFIX
from cosimrun.storage.hdf5 import partial_path

if TYPE_CHECKING:
    from cosimrun.runner.outcome import JobOutcome

INDEX_FILE = "index.h5"
SWEEP_FORMAT = "cosimrun-sweep"
SWEEP_FORMAT_VERSION = 1

_STR = h5py.string_dtype("utf-8")
_BASE_COLUMNS = (
    "status",
    "overrides",
    "wall_time_s",
    "job_time_s",
    "coupling_error_max",
    "path",
    "error",
    "traceback",
    "attempts",
    "reused",
    "worker",
    "note",
)
_RESERVED = frozenset((*_BASE_COLUMNS, "run", "runs"))


def _override_items(overrides: Iterable[str]) -> dict[str, Any]:
    """``{key: typed value}`` of task overrides (``+a.b=1`` -> ``{"a.b": 1}``); deletions are left out."""
    return dict(_parse_overrides(tuple(overrides)))


@functools.cache
def _parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@functools.lru_cache(maxsize=1 << 16)
def _parse_overrides(overrides: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """:func:`_override_items` as pairs, parsed once per job: the index is rewritten as jobs finish."""
    out: dict[str, Any] = {}
    items = [o for o in overrides if not o.startswith("hydra.") and not o.startswith("hydra/")]
    try:
        parsed = _parser().parse_overrides(items)
    except Exception:  # not Hydra syntax (hand-made outcomes): split at the first '='
        for item in items:
            key, sep, value = item.lstrip("+~").partition("=")
            if sep:
                out[key] = value
        return tuple(out.items())
    for ov in parsed:
        if ov.is_delete():
            continue
        key = ov.key_or_group if ov.package is None else f"{ov.key_or_group}@{ov.package}"
        try:
            value = ov.value()
        except Exception:
            value = ov.get_value_element_as_str()
        if isinstance(value, list | dict):
            value = ov.get_value_element_as_str()
        out[key] = value
    return tuple(out.items())


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


def _column_name(name: str) -> str:
    name = name.replace("/", "|")
    return f"param.{name}" if name in _RESERVED else name


def write_index(
    path: str | os.PathLike[str], outcomes: Iterable[JobOutcome], attrs: Mapping[str, Any] | None = None
) -> Path:
    """Write the sweep index of *outcomes* to *path* (atomically: a temporary file renamed over it)."""
    path = Path(path)
    rows = sorted(outcomes, key=lambda o: o.num)
    root = path.parent
    params = [_override_items(o.overrides) for o in rows]
    param_names = list(dict.fromkeys(k for p in params for k in p))
    summary_names = sorted({k for o in rows for k in o.summaries})
    columns: dict[str, list[Any]] = {
        "status": [o.status for o in rows],
        "overrides": [" ".join(o.overrides) for o in rows],
    }
    param_columns = []
    for name in param_names:
        col = _column_name(name)
        param_columns.append(col)
        columns[col] = [p.get(name) for p in params]
    summary_columns = []
    for name in summary_names:
        col = _column_name(SUMMARY_PREFIX + name)
        summary_columns.append(col)
        columns[col] = [o.summaries.get(name) for o in rows]
    columns.update(
        wall_time_s=[float(o.wall_time_s) for o in rows],
        job_time_s=[float(o.job_time_s) for o in rows],
        coupling_error_max=[float(o.coupling_error_max) for o in rows],
        path=[_relative(o.path, root) for o in rows],
        error=[o.error for o in rows],
        traceback=[o.traceback for o in rows],
        attempts=[int(o.attempts) for o in rows],
        reused=[bool(o.reused) for o in rows],
        worker=[o.worker for o in rows],
        note=[o.note for o in rows],
    )
    counts = status_counts(rows)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with h5py.File(tmp, "w", track_order=True, locking=False) as f:
        f.attrs["_NCProperties"] = np.bytes_(f"version=2,cosimrun,hdf5={h5py.version.hdf5_version}")
        f.attrs["format"] = SWEEP_FORMAT
        f.attrs["format_version"] = np.int32(SWEEP_FORMAT_VERSION)
        f.attrs["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        for key, value in {**counts, **(attrs or {})}.items():
            f.attrs[key] = value
        f.attrs["columns"] = np.array(list(columns), dtype=_STR)
        f.attrs["params"] = np.array(param_columns, dtype=_STR)
        f.attrs["summaries"] = np.array(summary_columns, dtype=_STR)
        run = f.create_dataset("run", data=np.array([o.num for o in rows], dtype=np.int64), maxshape=(None,))
        run.make_scale("run")
        run.attrs["_Netcdf4Dimid"] = np.int32(0)
        run.attrs["_Netcdf4Coordinates"] = np.array([0], dtype=np.int32)
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
            if name in ("wall_time_s", "job_time_s"):
                ds.attrs["units"] = "s"
            ds.dims[0].attach_scale(run)
            ds.attrs["_Netcdf4Coordinates"] = np.array([0], dtype=np.int32)
        links = f.create_group("runs", track_order=True)
        for o, rel in zip(rows, columns["path"], strict=True):
            target = _link_target(o.path, rel, root)
            if target:
                links[str(o.num)] = h5py.ExternalLink(target, "/")
    os.replace(tmp, path)
    return path


def _relative(path: str, root: Path) -> str:
    if not path:
        return ""
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive
        return str(path)


def _link_target(path: str, rel: str, root: Path) -> str:
    """The file an external link should point at: the results file, else its ``.partial``, else none."""
    if not path:
        return ""
    if Path(path).exists():
        return rel
    if partial_path(path).exists():
        return rel + ".partial"
    return ""


def status_counts(rows: Sequence[JobOutcome]) -> dict[str, int]:
    statuses = [o.status for o in rows]
    return {
        "n_jobs": len(rows),
        "n_complete": statuses.count("complete"),
        "n_failed": statuses.count("failed"),
        "n_interrupted": statuses.count("interrupted"),
        "n_pending": statuses.count("pending"),
        "n_reused": sum(o.reused for o in rows),
    }
