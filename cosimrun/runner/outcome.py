"""The outcome of one sweep job (:class:`JobOutcome`) and what is read from its results file.

A job's outcome is what its worker returns to the driver, what the driver
records in the sweep index (:mod:`cosimrun.runner.index`) and what Hydra's
sweeper gets as the job's return value (an optimizing sweeper its
:func:`objective_value`).
"""

from __future__ import annotations

import math
import os
import traceback as _traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from cosimrun.storage.hdf5 import PORT_TYPES, partial_path, stored_scalar

SUMMARY_PREFIX = "final."
"""Summary columns are named ``final.<component>.<port>``."""
FAILED_STATUSES = frozenset({"failed", "interrupted"})


@dataclass
class JobOutcome:
    """What one job of a sweep left behind; the return value of a sweep job."""

    num: int
    status: str
    """``complete``, ``failed``, ``interrupted`` or ``pending`` (not finished yet)."""
    overrides: list[str] = field(default_factory=list)
    path: str = ""
    """Absolute path of the job's results file; ``""`` when none was written."""
    error: str = ""
    traceback: str = ""
    wall_time_s: float = math.nan
    """Wall time of the simulation itself (as the run measured it; NaN when it did not run)."""
    job_time_s: float = math.nan
    """Wall time of the whole job on its worker (set up, run, write, summarize)."""
    coupling_error_max: float = math.nan
    """The run's largest estimated coupling error relative to its input's range (NaN when it has none)."""
    summaries: dict[str, Any] = field(default_factory=dict)
    """``{"comp.port": last recorded value}``."""
    attempts: int = 1
    reused: bool = False
    worker: str = ""
    note: str = ""
    """What the sweep did about this job beyond running it, e.g. ``rerun: results file damaged (...)``
    (a resume) or ``recovered: ...`` (a job whose worker died after it finished)."""
    objective: float | None = None
    """The value an optimizing sweeper (Optuna) gets: see :func:`objective_value`."""

    @property
    def ok(self) -> bool:
        return self.status == "complete"

    def __float__(self) -> float:
        if self.objective is None:
            raise TypeError(
                f"sweep job #{self.num} has no objective value: set hydra.launcher.objective to an index "
                "column such as final.<component>.<port> for a sweeper that optimizes (e.g. Optuna)"
            )
        return float(self.objective)

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES


def objective_value(outcome: JobOutcome, column: str) -> float:
    """The number in index column *column* (``final.<comp>.<port>``, ``wall_time_s``, ...) of *outcome*.

    NaN when the job did not complete or the value is not a number (Optuna
    records such a trial as failed and goes on).
    """
    if not outcome.ok:
        return math.nan
    if column.startswith(SUMMARY_PREFIX):
        value = outcome.summaries.get(column[len(SUMMARY_PREFIX) :])
    else:
        value = outcome.summaries.get(column, getattr(outcome, column, None))
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def describe_exception(exc: BaseException) -> tuple[str, str]:
    """``(error, traceback)`` texts of *exc* as a failed outcome (and the sweep index) stores them."""
    return f"{type(exc).__name__}: {exc}", "".join(_traceback.format_exception(exc))


def results_attrs(path: str | os.PathLike[str], names: Sequence[str]) -> dict[str, Any]:
    """The file attributes *names* of a results file that has them, text decoded (``OSError`` if unreadable)."""
    with h5py.File(path, "r", locking=False) as f:
        attrs = {k: f.attrs[k] for k in names if k in f.attrs}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


def _written(path: str | os.PathLike[str]) -> Path:
    """*path*, or its ``.partial`` file while only that exists (a run that did not close its file)."""
    path = Path(path)
    return partial_path(path) if not path.exists() and partial_path(path).exists() else path


def final_values(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"comp.port": last value}`` of every recorded port of a results file ("" / {} if unreadable)."""
    out: dict[str, Any] = {}
    path = _written(path)
    try:
        with h5py.File(path, "r", locking=False) as f:
            comps = f.get("components")
            if comps is None:
                return out
            for comp, group in comps.items():
                names = [n for n in group if n not in ("time", "micro")]
                n = min((group[x].shape[0] for x in ("time", *names)), default=0)
                for name in names:
                    ds = group[name]
                    kind = _port_kind(ds)
                    if n and kind in PORT_TYPES and kind != "event":
                        out[f"{comp}.{name}"] = stored_scalar(ds[n - 1], kind)
    except (OSError, KeyError):
        pass
    return out


def largest_coupling_error(path: str | os.PathLike[str]) -> float:
    """The largest ``relative`` of a results file's ``/coupling_error`` (NaN without estimates or file)."""
    path = _written(path)
    try:
        with h5py.File(path, "r", locking=False) as f:
            table = f.get("coupling_error")
            values = table["relative"][:] if table is not None and "relative" in table else np.zeros(0)
    except (OSError, KeyError):
        return math.nan
    return float(np.max(values)) if len(values) else math.nan


def _port_kind(ds: h5py.Dataset) -> str:
    """A stored port's type: its ``port_type`` attribute, else guessed from the dataset (files of other writers)."""
    kind = ds.attrs.get("port_type")
    if kind is not None:
        return kind.decode() if isinstance(kind, bytes) else str(kind)
    if h5py.check_string_dtype(ds.dtype) is not None:
        return "string"
    if ds.attrs.get("dtype") in ("bool", b"bool"):
        return "bool"
    return "real" if np.issubdtype(ds.dtype, np.number) else ""


def outcome_from_file(num: int, overrides: Sequence[str], path: str | os.PathLike[str]) -> JobOutcome:
    """The outcome recorded in an existing results file (used for jobs a resume takes over)."""
    path = Path(path)
    attrs = results_attrs(path, ("status", "error", "traceback", "wall_time_s"))
    text = {k: str(v) for k, v in attrs.items() if k != "wall_time_s"}
    return JobOutcome(
        num=num,
        status=text.get("status", "failed"),
        overrides=list(overrides),
        path=str(path),
        error=text.get("error", ""),
        traceback=text.get("traceback", ""),
        wall_time_s=float(attrs.get("wall_time_s", math.nan)),
        summaries=final_values(path),
        coupling_error_max=largest_coupling_error(path),
        attempts=0,
        reused=True,
    )
