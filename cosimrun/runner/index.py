"""The sweep index: ``index.h5`` in a sweep directory, one row per job.

The driver (:mod:`cosimrun.runner.ledger`) keeps an index in the sweep
directory, ``index.h5``, written whole (atomically) when a sweep starts and
ends, the rows entered in between appended to its row store (:func:`write_index_rows`,
see :mod:`cosimrun.storage.sweep_index`), laid out netCDF-style like a
results file::

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
    fingerprint  str          of a complete job's own results file: its stat and config key, JSON
                              (what a resume trusts, see :mod:`cosimrun.runner.resume`)
    /runs/<run>  HDF5 external link to the job's results file (``/`` of it)

:func:`write_index` makes the rows of *outcomes*, which :mod:`cosimrun.storage.sweep_index`
writes; :mod:`cosimrun.runner.load` reads them back through :func:`read_index`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cosimrun.runner.outcome import ROW_FIELDS, SUMMARY_PREFIX, JobOutcome, outcome_from_row, outcome_row
from cosimrun.runner.overrides import plain_override
from cosimrun.storage.chunkfile import split_address
from cosimrun.storage.hdf5 import partial_path
from cosimrun.storage.sweep_index import (
    SweepIndex,
    append_index_rows,
    read_index_parts,
    read_sweep_index,
    sweep_index_table,
    write_sweep_index,
)

__all__ = ["read_index", "status_counts", "write_index", "write_index_rows"]

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
    "member",
    "fingerprint",
)
_RESERVED = frozenset((*_BASE_COLUMNS, "run", "runs"))


def _override_items(overrides: Iterable[str]) -> dict[str, Any]:
    """``{key: typed value}`` of task overrides (``+a.b=1`` -> ``{"a.b": 1}``); deletions are left out."""
    return dict(_parse_overrides(tuple(overrides)))


@functools.cache
def _parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def _simple_items(items: Sequence[str]) -> dict[str, Any] | None:
    """``{key: value}`` of overrides that are all ``[+|++]dotted.key=number-or-word``, without Hydra's parser (some
    ms per job, which a whole index of 10^5 jobs would spend for minutes); None when one is not."""
    out: dict[str, Any] = {}
    for item in items:
        simple = plain_override(item)
        if simple is None:
            return None
        out[simple[1]] = simple[2]
    return out


@functools.lru_cache(maxsize=1 << 12)
def _parse_overrides(overrides: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """:func:`_override_items` as pairs. Kept for the last jobs only: a running sweep's index grows by rows
    without them, and the driver's memory is for 10^5 jobs (a plain job's overrides parse in microseconds)."""
    items = [o for o in overrides if not o.startswith("hydra.") and not o.startswith("hydra/")]
    simple = _simple_items(items)
    if simple is not None:
        return tuple(simple.items())
    out: dict[str, Any] = {}
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


def _column_name(name: str) -> str:
    name = name.replace("/", "|")
    return f"param.{name}" if name in _RESERVED else name


def write_index(
    path: str | os.PathLike[str],
    outcomes: Iterable[JobOutcome],
    attrs: Mapping[str, Any] | None = None,
    generation: str = "",
) -> Path:
    """Write the sweep index of *outcomes* to *path* (atomically: a temporary file renamed over it); with a
    *generation*, the rows entered later go to its parts (:func:`write_index_rows`)."""
    path = Path(path)
    rows = sorted(outcomes, key=lambda o: o.num)
    root = path.parent
    columns, params, summaries = _columns(rows, root)
    return write_sweep_index(
        path,
        [o.num for o in rows],
        columns,
        attrs={**status_counts(rows), **(attrs or {})},
        params=params,
        summaries=summaries,
        links={o.num: _link_target(o.path, rel, root) for o, rel in zip(rows, columns["path"], strict=True)},
        generation=generation,
    )


def _columns(rows: Sequence[JobOutcome], root: Path) -> tuple[dict[str, list[Any]], list[str], list[str]]:
    """``(columns, parameter columns, summary columns)`` of the index of *rows* (ordered by job number)."""
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
        fingerprint=[o.fingerprint for o in rows],
    )
    if any(o.member >= 0 for o in rows):  # a sweep that ran ensembles: the member of the ensemble file ``path``
        columns["member"] = [int(o.member) for o in rows]
    return columns, param_columns, summary_columns


ROW_SCHEMA = {name: {"num": "int", "attempts": "int", "member": "int", "wall_time_s": "float", "job_time_s": "float",
                     "coupling_error_max": "float", "reused": "bool", "overrides": "json", "summaries": "json"}
              .get(name, "text") for name in ROW_FIELDS}
"""How the row store of a running sweep's index keeps each field of an outcome."""


def write_index_rows(path: str | os.PathLike[str], generation: str, seq: int, outcomes: Iterable[JobOutcome]) -> None:
    """Append *outcomes* to the row store of the index *path* written with *generation*, as its append number *seq*
    (0 makes the store; a few new rows cost what they are, not what the index is)."""
    append_index_rows(path, generation, seq, ROW_SCHEMA, [outcome_row(o) for o in outcomes])


def read_index(path: str | os.PathLike[str]) -> SweepIndex:
    """The table of the sweep index *path*: the file's, or while its sweep runs (or after its driver was
    killed), the table its parts' rows make, as the file will hold it when written whole."""
    rows = read_index_parts(path)
    if rows is None:
        return read_sweep_index(path)
    outcomes = [outcome_from_row(row) for row in rows]
    columns, params, summaries = _columns(outcomes, Path(path).parent)
    return sweep_index_table([o.num for o in outcomes], columns, params=params, summaries=summaries)


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
    file, group = split_address(path)
    if group is not None:  # a run's group of a chunk's file
        return rel if file.exists() else ""
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
