"""One results file per ensemble: every member's status, parameters, final values and histories over a
``member`` dimension, readable by xarray without cosimrun.

Layout of the group (``ensemble`` by default), written with h5netcdf (netCDF-4 dimensions)::

    dimensions  member (M), time (samples kept)
    member(member), time(time)                coordinates
    status(member)                            complete | failed
    failure(member), failure_time(member)     the cause ("" when complete) and the instant (NaN)
    parameter.<component>.<name>(member)      every given parameter, one value per member
    final.<component>.<port>(member)          final values (a failed member's: at its last sound point)
    stats.<name>(member)                      counts per member (ijcsa's iterations)
    <component>.<port>(time, member)          the histories kept (``record_every``); NaN after a failure
    attributes                                format, system, master, t0, tf, dt, record_every, members,
                                              master settings and statistics (JSON)

Read it with ``xarray.open_dataset(path, engine="h5netcdf", group="ensemble")``. The file is written as
``<path>.partial`` and renamed when complete, as run results are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import h5netcdf
import h5py
import numpy as np

from cosimrun.storage.hdf5 import check_name, partial_path, to_attr

if TYPE_CHECKING:
    from cosimrun.ensemble import EnsembleResult

FORMAT = "cosimrun-ensemble"
FORMAT_VERSION = 1
DEFAULT_GROUP = "ensemble"
_STR = h5py.string_dtype("utf-8")


def write_ensemble(path: str | os.PathLike[str], result: EnsembleResult, *, group: str = DEFAULT_GROUP,
                   attrs: dict[str, object] | None = None) -> Path:
    """Write *result* to the group *group* of a new file *path* (replaced if it exists); returns *path*.

    *attrs* are extra attributes of the group (an experiment's name, a sweep's id).
    """
    check_name(group, "group")
    path = Path(path)
    partial = partial_path(path)
    partial.unlink(missing_ok=True)
    members = result.members
    with h5netcdf.File(partial, "w") as f:
        g = f.create_group(group)
        g.dimensions = {"member": members, "time": len(result.time)}
        g.create_variable("member", ("member",), data=np.arange(members, dtype=np.int64))
        g.create_variable("time", ("time",), data=np.asarray(result.time, dtype=float)).attrs["units"] = "s"
        g.create_variable("status", ("member",), dtype=_STR, data=np.asarray(result.status, dtype=object))
        failures = [result.failures.get(m) for m in range(members)]
        g.create_variable("failure", ("member",), dtype=_STR,
                          data=np.array(["" if fl is None else str(fl) for fl in failures], dtype=object))
        g.create_variable("failure_time", ("member",),
                          data=np.array([np.nan if fl is None else fl.time for fl in failures], dtype=float))
        for key, values in result.parameters.items():
            values = np.asarray(values)
            if values.dtype.kind in "biuf":
                g.create_variable(f"parameter.{key}", ("member",), data=values.astype(float))
            else:
                g.create_variable(f"parameter.{key}", ("member",), dtype=_STR,
                                  data=np.array([str(v) for v in values], dtype=object))
        for key, values in result.member_stats.items():
            g.create_variable(f"stats.{key}", ("member",), data=np.asarray(values, dtype=np.int64))
        for key, values in result.final.items():
            var = g.create_variable(f"final.{key}", ("member",), data=np.asarray(values, dtype=float))
            _unit(var, result.units.get(key))
        for key, values in result.history.items():
            var = g.create_variable(key, ("time", "member"), data=np.asarray(values, dtype=float),
                                    chunks=_chunks(values.shape), compression="gzip", compression_opts=1)
            _unit(var, result.units.get(key))
        info = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "system": result.system, "master": result.master,
            "t0": result.t0, "tf": result.tf, "dt": result.dt, "record_every": result.record_every,
            "members": members, "complete": int(result.stats.complete), "failed": int(result.stats.failed),
            "master_settings": json.dumps(result.master_settings, sort_keys=True, default=str),
            "stats": json.dumps(result.stats.as_dict(), sort_keys=True), **(attrs or {}),
        }
        for name, value in info.items():
            stored = to_attr(value)
            if stored is not None:
                g.attrs[name] = stored
    os.replace(partial, path)
    return path


def _unit(var: h5netcdf.Variable, unit: str | None) -> None:
    if unit:
        var.attrs["units"] = unit


def _chunks(shape: tuple[int, ...]) -> tuple[int, int]:
    """Chunks of about 1 MiB: whole rows of members, as many samples as fit."""
    samples, members = shape
    rows = max(1, min(samples, (1 << 17) // max(1, members)))
    return rows, max(1, min(members, 1 << 17))
