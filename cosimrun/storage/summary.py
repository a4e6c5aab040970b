"""What a sweep reads of a run's results file without loading it: how the run ended, its last values.

The driver of a sweep records each job in the sweep index from these reads
(:mod:`cosimrun.runner.outcome`); a resume checks a file's root attributes
before it verifies the file. Each function opens the file briefly, without HDF5
file locking, so the file of a job still running can be read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from cosimrun.errors import ResultsReadError
from cosimrun.storage.chunkfile import open_results
from cosimrun.storage.hdf5 import PORT_TYPES, stored_scalar, written_path
from cosimrun.storage.results import readable_length, recorded_lengths


def results_attrs(path: str | os.PathLike[str], names: Sequence[str]) -> dict[str, Any]:
    """The root attributes *names* a results file (or a run's group, addressed ``<file>::<group>``) has, text
    decoded (``OSError`` if unreadable)."""
    with open_results(path) as f:
        attrs = {k: f.attrs[k] for k in names if k in f.attrs}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


@dataclass(frozen=True)
class RunStatus:
    """How a results file says its run ended (its root attributes ``status, error, traceback, wall_time_s``) and
    what it read (``inputs``)."""

    status: str | None
    """``complete``, ``failed``, ``interrupted``, ``running``; ``None`` when the file records none."""
    error: str = ""
    traceback: str = ""
    wall_time_s: float = math.nan
    """The simulation's wall time; NaN when the file records none (the run did not close its file)."""
    inputs: str = ""
    """The files the run read besides its config, by content (``""``: none, or a file older than this record)."""


def read_run_status(path: str | os.PathLike[str]) -> RunStatus:
    """The status, failure and wall time recorded in the results file *path* (``OSError`` if unreadable)."""
    attrs = results_attrs(path, ("status", "error", "traceback", "wall_time_s", "inputs"))
    return RunStatus(
        status=str(attrs["status"]) if "status" in attrs else None,
        error=str(attrs.get("error", "")),
        traceback=str(attrs.get("traceback", "")),
        wall_time_s=float(attrs.get("wall_time_s", math.nan)),
        inputs=str(attrs.get("inputs", "")),
    )


def final_values(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"comp.port": last value}`` of every recorded port of a results file, event ports left out
    ({} if unreadable or damaged, see :func:`~cosimrun.storage.results.readable_length`); what
    :meth:`~cosimrun.storage.hdf5.HDF5Writer.final_values` gives while writing."""
    out: dict[str, Any] = {}
    path = written_path(path)
    try:
        with open_results(path) as f:
            comps = f.get("components")
            if comps is None:
                return out
            if not isinstance(comps, h5py.Group):
                return {}
            recorded = recorded_lengths(path, f)
            for comp, group in comps.items():
                n = readable_length(path, f, f"/components/{comp}", None, recorded)
                for name in group:
                    ds = group[name]
                    kind = _port_kind(ds)
                    if n and name not in ("time", "micro") and kind in PORT_TYPES and kind != "event":
                        out[f"{comp}.{name}"] = stored_scalar(ds[n - 1], kind)
    except (OSError, KeyError, ResultsReadError):
        return {}
    return out


def largest_coupling_error(path: str | os.PathLike[str]) -> float:
    """The largest ``relative`` of a results file's ``/coupling_error`` (NaN without estimates or file)."""
    path = written_path(path)
    try:
        with open_results(path) as f:
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
