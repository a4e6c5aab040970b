"""The outcome of one sweep job (:class:`JobOutcome`) and what is read from its results file.

A job's outcome is what its worker returns to the driver, what the driver
records in the sweep index (:mod:`cosimrun.runner.index`) and what Hydra's
sweeper gets as the job's return value (an optimizing sweeper its
:func:`objective_value`). What it takes from a results file is read by
:mod:`cosimrun.storage.summary`.
"""

from __future__ import annotations

import math
import os
import traceback as _traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cosimrun.storage.summary import final_values, largest_coupling_error, read_run_status

SUMMARY_PREFIX = "final."
"""Summary columns are named ``final.<component>.<port>``."""
FAILED_STATUSES = frozenset({"failed", "interrupted"})


@dataclass(slots=True)
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
    member: int = -1
    """The member of the ensemble file :attr:`path` that holds this job's results (-1: ``path`` is its own
    results file)."""
    fingerprint: str = ""
    """Of a complete job's own results file: its ``stat``, config key and input files as the driver found them
    when the job completed, JSON (:func:`cosimrun.runner.resume.fingerprint`); a resume trusts the file while
    they match."""
    inputs: str = ""
    """The files the job's run read besides its config, by content (:func:`cosimrun.runner.inputs.recorded`)."""
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


ROW_FIELDS = tuple(f.name for f in fields(JobOutcome) if f.name != "objective")
"""What an outcome keeps as plain data (a row of the index's parts, a finished job's record on its worker)."""


def outcome_row(outcome: JobOutcome) -> dict[str, Any]:
    """*outcome* as plain data (JSON with numpy scalars as numbers)."""
    return {name: getattr(outcome, name) for name in ROW_FIELDS}


def outcome_from_row(row: dict[str, Any]) -> JobOutcome:
    """The outcome :func:`outcome_row` made *row* of."""
    return JobOutcome(**{k: v for k, v in row.items() if k in ROW_FIELDS})


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


def outcome_from_file(num: int, overrides: Sequence[str], path: str | os.PathLike[str]) -> JobOutcome:
    """The outcome recorded in an existing results file (used for jobs a resume takes over)."""
    path = Path(path)
    recorded = read_run_status(path)
    return JobOutcome(
        num=num,
        status="failed" if recorded.status is None else recorded.status,
        overrides=list(overrides),
        path=str(path),
        error=recorded.error,
        traceback=recorded.traceback,
        wall_time_s=recorded.wall_time_s,
        summaries=final_values(path),
        coupling_error_max=largest_coupling_error(path),
        attempts=0,
        reused=True,
        inputs=recorded.inputs,
    )
