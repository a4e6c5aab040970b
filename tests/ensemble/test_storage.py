"""The ensemble results file: one file, a ``member`` dimension, readable by xarray without cosimrun."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr
from test_ensemble import DT, MASTERS, T0, TF, TWO_MASS, build

from cosimrun.ensemble import run_ensemble
from cosimrun.errors import ConfigError
from cosimrun.storage.ensemble import write_ensemble

READER = """
import json, sys
sys.modules["cosimrun"] = None  # any import of cosimrun fails: the file must be read without it
import xarray as xr
ds = xr.open_dataset(sys.argv[1], engine="h5netcdf", group="ensemble")
print(json.dumps({
    "dims": dict(ds.sizes), "status": ds["status"].values.tolist(), "failure": ds["failure"].values.tolist(),
    "stiffness": ds["parameter.mass1.stiffness"].values.tolist(), "x_final": ds["final.mass1.x"].values.tolist(),
    "x": ds["mass1.x"].values.tolist(), "time": ds["time"].values.tolist(), "unit": ds["mass1.x"].attrs["units"],
    "members": int(ds.attrs["members"]), "failed": int(ds.attrs["failed"]),
    "cosimrun_loaded": any(m.startswith("cosimrun.") for m in sys.modules),
}))
"""


@pytest.fixture(scope="module")
def result():
    exp = build(TWO_MASS, MASTERS["gauss_seidel"])
    return run_ensemble(exp.system, exp.master, {"mass1.stiffness": [10.0, 1e12, 5.0]}, t0=T0, tf=TF, dt=DT,
                        record_every=20)


def test_the_file_is_read_by_xarray_without_cosimrun(result, tmp_path: Path) -> None:
    path = write_ensemble(tmp_path / "ensemble.h5", result)
    assert path.exists() and not (tmp_path / "ensemble.h5.partial").exists()
    out = subprocess.run([sys.executable, "-c", READER, str(path)], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert not got["cosimrun_loaded"]
    assert got["dims"] == {"member": 3, "time": len(result.time), "connection": 3}
    assert got["status"] == ["complete", "failed", "complete"]
    assert got["failure"][0] == "" and got["failure"][1] == str(result.failures[1])
    assert got["stiffness"] == [10.0, 1e12, 5.0]
    assert got["x_final"] == result.final["mass1.x"].tolist()
    assert got["time"] == result.time.tolist()
    stored = np.array(got["x"], dtype=float)
    np.testing.assert_array_equal(stored, result.history["mass1.x"])
    assert np.isnan(stored[-1, 1]) and got["unit"] == "m"
    assert got["members"] == 3 and got["failed"] == 1


def test_the_file_holds_every_history_and_final_value(result, tmp_path: Path) -> None:
    path = write_ensemble(tmp_path / "e.h5", result, attrs={"experiment": "two_mass"})
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
        for key, values in result.history.items():
            np.testing.assert_array_equal(ds[key].values, values)
            np.testing.assert_array_equal(ds[f"final.{key}"].values, result.final[key])
        assert ds.attrs["experiment"] == "two_mass" and ds.attrs["master"] == "gauss_seidel"
        assert json.loads(ds.attrs["master_settings"])["extrapolation"] == 0
        assert json.loads(ds.attrs["stats"])["macro_steps"] == round((TF - T0) / DT)
        assert np.isclose(ds["failure_time"].values[1], result.failures[1].time)


def test_a_group_name_with_a_slash_is_refused(result, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="contains '/'"):
        write_ensemble(tmp_path / "e.h5", result, group="a/b")


def test_counts_per_member_are_stored(tmp_path: Path) -> None:
    exp = build(TWO_MASS, {"name": "ijcsa", "iterate_steps": True})
    result = run_ensemble(exp.system, exp.master, {"mass1.x0": [0.0, 1.0]}, t0=T0, tf=0.01, dt=DT)
    path = write_ensemble(tmp_path / "e.h5", result)
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
        for name in ("step_iterations", "newton_iterations", "unconverged_steps"):
            np.testing.assert_array_equal(ds[f"stats.{name}"].values, result.member_stats[name])
        assert ds["stats.step_iterations"].values.tolist() == [10, 20]  # at rest: converged at once; moving: twice


WRITER = """
import resource, sys
import numpy as np
from test_ensemble import DT, MASTERS, T0, TWO_MASS, build
from cosimrun.ensemble import run_ensemble
from cosimrun.errors import ResultsWriteError
from cosimrun.storage.ensemble import write_ensemble
exp = build(TWO_MASS, MASTERS["gauss_seidel"])
result = run_ensemble(exp.system, exp.master, {"mass1.stiffness": list(np.linspace(1.0, 10.0, 2000))}, t0=T0,
                      tf=0.1, dt=DT)
resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
try:
    write_ensemble(sys.argv[1], result)
except ResultsWriteError as exc:
    print(exc)
"""


def test_a_file_that_does_not_fit_raises_one_error_and_leaves_nothing(tmp_path: Path) -> None:
    """Under a 200 kB file-size limit a 2000-member file (about 1.5 MB) fails as an ordinary write: no crash at
    exit, nothing on disk."""
    path = tmp_path / "e.h5"
    proc = subprocess.run([sys.executable, "-c", WRITER, str(path)], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == [f"cannot write results to {path}: [Errno 27] File too large"]
    assert list(tmp_path.iterdir()) == []


def test_histories_are_shuffled_and_deflated_as_a_runs_are(result, tmp_path: Path) -> None:
    path = write_ensemble(tmp_path / "e.h5", result)
    with h5py.File(path, "r") as f:
        for key in result.history:
            ds = f["ensemble"][key]
            assert (ds.compression, ds.compression_opts, ds.shuffle) == ("gzip", 1, True), key
