"""Reading a sweep: ``load_sweep`` (the index as a DataFrame) and ``load_sweep_dataset`` (the runs' histories).

``load_sweep(dir)`` reads the table (:mod:`cosimrun.runner.index`) as a
DataFrame; ``load_sweep_dataset`` opens the runs' histories of one component as
one xarray Dataset along ``run``. Both read through :mod:`cosimrun.storage`.
pandas and xarray are imported where they are used.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.runner.index import read_index
from cosimrun.runner.layout import SHARD_SIZE
from cosimrun.storage.chunkfile import split_address
from cosimrun.storage.hdf5 import partial_path
from cosimrun.storage.sweep_index import INDEX_FILE

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr


def _index_path(sweep: str | os.PathLike[str]) -> Path:
    path = Path(sweep)
    return path / INDEX_FILE if path.is_dir() else path


def load_sweep(sweep: str | os.PathLike[str]) -> pd.DataFrame:
    """The sweep index of a sweep directory (or an ``index.h5``) as a DataFrame indexed by ``run``.

    Columns: ``status``, ``overrides``, one per override key (the swept
    parameters, typed), ``final.<comp>.<port>`` summaries, ``wall_time_s``,
    ``path`` (relative to the sweep directory), ``error``, ``traceback``,
    ``attempts``, ``reused``, ``worker``, ``note``, and in a sweep that ran ensembles ``member`` (the member of
    the ensemble file ``path`` that holds the run; -1 for a run with its own file). ``df.attrs`` holds ``sweep_dir``,
    ``params`` and ``summaries`` (column names). Pass the frame (or a filtered
    part of it) to :func:`load_sweep_dataset` to read the runs' histories.
    While the sweep runs (or after its driver was killed) the rows come from
    the index's parts, as they will be in the file when it is written whole.
    """
    import pandas as pd

    path = _index_path(sweep)
    table = read_index(path)
    df = pd.DataFrame(table.columns, index=pd.Index(table.run, name="run"))
    df.attrs.update(sweep_dir=str(path.parent.absolute()), params=table.params, summaries=table.summaries)
    return df


def load_sweep_dataset(
    sweep: str | os.PathLike[str] | pd.DataFrame,
    component: str,
    ports: Sequence[str] | None = None,
    *,
    time: Sequence[float] | np.ndarray | None = None,
    sweep_dir: str | os.PathLike[str] | None = None,
) -> xr.Dataset:
    """The histories of *component* in every run of a sweep as one Dataset along ``run``.

    *sweep* is a sweep directory or a frame from :func:`load_sweep` (filter it
    to choose runs, e.g. ``df[df.status == "complete"]``). Runs have their own
    time grids (events, adaptive steps), so by default the dims are ``(run,
    sample)``: ``time`` and ``micro`` are variables over both, shorter runs are
    padded (NaN, ``micro`` -1) and ``n_samples`` gives each run's length. With
    *time* the ports are put on that common grid instead (dims ``(run, time)``):
    real ports interpolated linearly, others held from the last sample, the value
    right after an event at event instants, NaN outside a run's interval.
    The index columns (status, swept parameters, summaries, ...) become
    coordinates along ``run``; runs without a results file are all NaN. A run that was a member of an
    ensemble is read from its column of the ensemble's file.
    """
    import pandas as pd
    import xarray as xr

    from cosimrun.storage.results import load_results

    if isinstance(sweep, pd.DataFrame):
        df = sweep
        root = Path(sweep_dir or df.attrs.get("sweep_dir", "."))
    else:
        df = load_sweep(sweep)
        root = Path(df.attrs["sweep_dir"])
    histories: list[dict[str, Any] | None] = []
    port_info: dict[str, tuple[str | None, str]] = {}
    members = df["member"] if "member" in df.columns else [-1] * len(df)
    for rel, member in zip(df["path"], members, strict=True):
        series = None
        if rel:
            with contextlib.suppress(FileNotFoundError, IndexError, KeyError, OSError, ValueError):
                res = load_results(root / rel, member=None if member < 0 else int(member))
                if component in res.components:
                    series = res.history(component, list(ports) if ports is not None else None)
                    for name, s in series.items():
                        port_info.setdefault(name, (s.unit, s.port_type))
        histories.append(series)
    names = list(ports) if ports is not None else list(port_info)
    n_runs = len(df)
    data_vars: dict[str, Any] = {}
    coords: dict[str, Any] = {"run": np.asarray(df.index)}
    if time is None:
        n = max((len(next(iter(h.values()))) for h in histories if h), default=0)
        t = np.full((n_runs, n), np.nan)
        micro = np.full((n_runs, n), -1, dtype=np.int64)
        lengths = np.zeros(n_runs, dtype=np.int64)
        values = {name: _padded(port_info.get(name, (None, "real"))[1], n_runs, n) for name in names}
        for i, h in enumerate(histories):
            if not h:
                continue
            first = next(iter(h.values()))
            k = len(first)
            lengths[i] = k
            t[i, :k], micro[i, :k] = first.time, first.micro
            for name in names:
                if name in h:
                    values[name][i, :k] = h[name].values
        dims = ("run", "sample")
        data_vars["time"] = (dims, t, {"units": "s"})
        data_vars["micro"] = (dims, micro)
        data_vars["n_samples"] = ("run", lengths)
    else:
        grid = np.asarray(time, dtype=np.float64)
        values = {name: _padded(port_info.get(name, (None, "real"))[1], n_runs, len(grid)) for name in names}
        for i, h in enumerate(histories):
            if not h:
                continue
            for name in names:
                if name in h:
                    values[name][i, :] = _on_grid(h[name], grid)
        dims = ("run", "time")
        coords["time"] = ("time", grid, {"units": "s"})
    for name in names:
        unit, kind = port_info.get(name, (None, "real"))
        attrs = {"port_type": kind}
        if unit:
            attrs["units"] = unit
        data_vars[name] = (dims, values[name], attrs)
    for col in df.columns:
        if col not in ("traceback",):
            coords[col] = ("run", np.asarray(df[col]))
    ds = xr.Dataset(data_vars, coords=coords, attrs={"component": component, "sweep_dir": str(root)})
    return ds


def _padded(kind: str, n_runs: int, n: int) -> np.ndarray:
    if kind == "string":
        out = np.empty((n_runs, n), dtype=object)
        out[...] = ""
        return out
    return np.full((n_runs, n), np.nan)


def _on_grid(series: Any, grid: np.ndarray) -> np.ndarray:
    t = np.asarray(series.time, dtype=np.float64)
    v = np.asarray(series.values)
    if len(t) == 0:
        return np.full(len(grid), np.nan)
    # several samples at one instant (events, superdense time): between instants np.interp uses the
    # left limit, at the instant itself the last sample (the value after the event), like the hold below
    inside = (grid >= t[0]) & (grid <= t[-1])
    if series.port_type == "real":
        out = np.interp(grid, t, v.astype(np.float64))
        out[~inside] = np.nan
        return out
    pos = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
    held = v[pos]
    if series.port_type == "string":
        held = held.astype(object)
        held[~inside] = ""
        return held
    held = held.astype(np.float64)
    held[~inside] = np.nan
    return held


def job_results(sweep: str | os.PathLike[str], run: int) -> tuple[Path, int | None]:
    """Where job *run* of a sweep (its directory or ``index.h5``) keeps its results: ``(file, None)`` for a job
    that ran on its own (under ``storage.layout: per_chunk``, the address ``<chunk file>::/runs/<job>`` of its
    group), ``(ensemble file, member)`` for a member of an ensemble, as the sweep index says.

    A ``FileNotFoundError`` with one line when the job is not in the index, or has no results (its status said).
    """
    index = _index_path(sweep)
    table = read_index(index)
    runs = [int(r) for r in table.run]
    if run not in runs:
        span = f"jobs {min(runs)} to {max(runs)}" if runs else "no job yet"
        raise FileNotFoundError(f"job {run} is not in the sweep index {index} ({span})")
    row = runs.index(run)
    status, rel = str(table.columns["status"][row]), str(table.columns["path"][row])
    error = str(table.columns["error"][row]) if "error" in table.columns else ""
    if not rel:
        raise FileNotFoundError(f"job {run} of the sweep {index.parent} has no results: it is {status}"
                                + (f" ({error})" if error else ""))
    member = int(table.columns["member"][row]) if "member" in table.columns else -1
    path = index.parent / rel
    file = split_address(path)[0]
    if not file.exists() and not partial_path(file).exists():
        raise FileNotFoundError(f"job {run} of the sweep {index.parent} ({status}): its results file {file} is missing")
    return path, None if member < 0 else member


def sweep_job(path: str | os.PathLike[str]) -> tuple[Path, int | None] | None:
    """:func:`job_results` of *path* when it addresses a job of a sweep as ``<sweep dir>/<job number>`` or as
    its shard's ``<sweep dir>/<N>k/<job number>`` (the job's folder, which a member of an ensemble does not
    have); ``None`` when it names no job of a sweep."""
    path = Path(path)
    if not path.name.isdecimal():
        return None
    run = int(path.name)
    shard = run >= SHARD_SIZE and path.parent.name == f"{run // SHARD_SIZE}k"
    for sweep in (path.parent, path.parent.parent) if shard else (path.parent,):
        if (sweep / INDEX_FILE).is_file():
            return job_results(sweep, run)
    return None


def load_run(sweep: str | os.PathLike[str], run: int) -> Any:
    """The results of run *run* of a sweep: its results file (:func:`~cosimrun.storage.results.load_results`), or
    for a member of an ensemble its member of the ensemble's file (:class:`~cosimrun.storage.ensemble.EnsembleMember`,
    read as a run's results are). A ``FileNotFoundError`` names a run not in the index or without results."""
    from cosimrun.storage.results import load_results

    path, member = job_results(sweep, run)
    return load_results(path, member=member)
