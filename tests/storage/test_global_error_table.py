"""``/global_error``: the estimated global error per output, written with a run's summary and read back."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import xarray as xr

from cosimrun.core.history import SystemHistory
from cosimrun.masters.base import MasterStats
from cosimrun.masters.global_error import GlobalError
from cosimrun.storage import HDF5Writer, load_results, write_run_result
from cosimrun.system import RunResult

ROWS = [GlobalError("a.x", "m", 0.03, 7.25, 2.0, 2.00000001e-3),
        GlobalError("b.y", None, 1e-6, 0.5, 4.0, 4.00000001e-3)]


def result(errors: list[GlobalError]) -> RunResult:
    stats = MasterStats(macro_steps=10, step_control="error",
                        global_error_ratio=errors[0].ratio if errors else math.nan)
    return RunResult(system="s", history=SystemHistory("s"), events=[], mode_switches=[], stats=stats,
                     master="jacobi", t0=0.0, tf=1.0, dt=0.1, wall_time_s=0.1, global_errors=errors)


def test_the_table_round_trips_and_xarray_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    with HDF5Writer(path) as writer:
        write_run_result(writer, result(ROWS))
    res = load_results(path)
    table = res.global_error
    assert list(table.columns) == ["output", "unit", "max", "time_of_max", "scale", "tolerance", "ratio"]
    assert table["output"].tolist() == ["a.x", "b.y"] and table["unit"].tolist() == ["m", ""]
    np.testing.assert_array_equal(table["max"], [0.03, 1e-6])
    np.testing.assert_array_equal(table["time_of_max"], [7.25, 0.5])
    np.testing.assert_array_equal(table["scale"], [2.0, 4.0])
    np.testing.assert_array_equal(table["tolerance"], [2.00000001e-3, 4.00000001e-3])
    np.testing.assert_array_equal(table["ratio"], [0.03 / 2.00000001e-3, 1e-6 / 4.00000001e-3])
    assert res.stats["global_error_ratio"] == ROWS[0].ratio
    with open(path, "rb") as fh, xr.open_dataset(fh, engine="h5netcdf", group="global_error") as ds:
        assert ds["ratio"].dims == ("output",) and ds["time_of_max"].attrs["units"] == "s"
        assert ds["output"].values.tolist() == ["a.x", "b.y"]


def test_a_run_without_the_estimate_has_no_table(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    with HDF5Writer(path) as writer:
        write_run_result(writer, result([]))
    res = load_results(path)
    assert res.global_error.empty and list(res.global_error.columns)[0] == "output"
    assert math.isnan(res.stats["global_error_ratio"])
    with h5py.File(path, "r") as f:
        assert "global_error" not in f
