"""``cosimrun -m`` on the dask launcher groups jobs into ensembles (``hydra.launcher.ensemble_size``).

Every test runs the command end to end on a local cluster and compares with the same sweep run one job per
member (``hydra.launcher.ensemble_size=0``): the members' rows, final values and histories must be bitwise equal.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from cosimrun.runner.load import load_run, load_sweep, load_sweep_dataset
from cosimrun.storage.ensemble import EnsembleMember
from cosimrun.storage.results import Results, load_results

pytestmark = pytest.mark.slow

SWEEP = ["-m", "+experiment=coupled_oscillators", "run.tf=0.2", "master=jacobi", "master.extrapolation=1",
         "components.mass1.params.stiffness=5,10,15", "components.mass2.params.coupling_stiffness=50,100"]
LAUNCHER = ["hydra/launcher=dask", "hydra.launcher.n_workers=1", "hydra.launcher.progress=false"]


def _sweep(cosimrun, sweep_dir: Path, *args: str, code: int = 0) -> pd.DataFrame:
    proc = cosimrun(*args, *LAUNCHER, f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == code, proc.stderr
    return load_sweep(sweep_dir)


def _finals(df: pd.DataFrame) -> pd.DataFrame:
    return df[[c for c in df.columns if c.startswith("final.")]]


def _assert_members_equal_jobs(ens: pd.DataFrame, jobs: pd.DataFrame, ens_dir: Path, jobs_dir: Path,
                               runs: list[int]) -> None:
    """Rows, final values and every recorded history of *runs* bitwise equal in both sweeps."""
    pd.testing.assert_frame_equal(_finals(ens.loc[runs]), _finals(jobs.loc[runs]), check_exact=True)
    for run in runs:
        member, job = load_run(ens_dir, run), load_run(jobs_dir, run)
        assert isinstance(member, EnsembleMember) and isinstance(job, Results)
        assert sorted(member.components) == sorted(job.components) == ["mass1", "mass2"]
        for comp in member.components:
            mine, theirs = member.history(comp), job.history(comp)
            assert sorted(mine) == sorted(theirs)
            for port, series in theirs.items():
                assert np.array_equal(mine[port].time, series.time), (run, comp, port)
                assert np.array_equal(mine[port].values, series.values), (run, comp, port)
                assert mine[port].unit == series.unit


def test_ensembles_equal_one_job_per_member_bit_for_bit(tmp_path: Path, cosimrun) -> None:
    jobs = _sweep(cosimrun, tmp_path / "jobs", *SWEEP, "hydra.launcher.ensemble_size=0")
    ens = _sweep(cosimrun, tmp_path / "ens", *SWEEP, "hydra.launcher.ensemble_size=4")
    assert not (tmp_path / "jobs" / "ensembles").exists() and "member" not in jobs.columns
    assert list(ens["status"]) == list(jobs["status"]) == ["complete"] * 6
    # 6 members, at most 4 per ensemble: two ensembles of 3, one file each, one row per member
    files = sorted(p.name for p in (tmp_path / "ens" / "ensembles").iterdir())
    assert len(files) == 2 and files[0].startswith("0-2.") and files[1].startswith("3-5.")
    assert list(ens["member"]) == [0, 1, 2, 0, 1, 2]
    assert list(ens["path"]) == [f"ensembles/{files[0]}"] * 3 + [f"ensembles/{files[1]}"] * 3
    assert not (tmp_path / "ens" / "0").exists()  # no folder or results file per member
    for col in ("components.mass1.params.stiffness", "components.mass2.params.coupling_stiffness", "overrides"):
        assert list(ens[col]) == list(jobs[col])
    assert jobs["coupling_error_max"].notna().all() and (ens["wall_time_s"] > 0).all()
    np.testing.assert_allclose(ens["coupling_error_max"], jobs["coupling_error_max"], rtol=1e-12, atol=0.0)
    _assert_members_equal_jobs(ens, jobs, tmp_path / "ens", tmp_path / "jobs", list(range(6)))
    # the histories of a component along run are the same Dataset either way
    mine, theirs = (load_sweep_dataset(tmp_path / d, "mass1").reset_coords(drop=True) for d in ("ens", "jobs"))
    xr.testing.assert_equal(mine, theirs)
    assert list(mine.data_vars) == ["time", "micro", "n_samples", "x", "v"]
    # an ensemble's file is read by xarray without cosimrun; load_results reads one member of it
    path = tmp_path / "ens" / ens["path"].iloc[4]
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
        assert list(ds["job"].values) == [3, 4, 5] and ds["mass1.x"].sizes["member"] == 3
        assert np.array_equal(ds["mass1.x"].values[:, 1], load_results(path, member=1).history("mass1")["x"].values)
    with pytest.raises(ValueError, match="give the member"):
        load_results(path)


def test_a_member_that_fails_fails_alone_with_its_cause(tmp_path: Path, cosimrun) -> None:
    sweep = ["-m", "+experiment=coupled_oscillators", "run.tf=0.1", "components.mass1.params.stiffness=10,1e12,12"]
    jobs = _sweep(cosimrun, tmp_path / "jobs", *sweep, "hydra.launcher.ensemble_size=0", code=1)
    ens = _sweep(cosimrun, tmp_path / "ens", *sweep, code=1)  # the exit status of a sweep with a failed job
    assert list(ens["status"]) == list(jobs["status"]) == ["complete", "failed", "complete"]
    assert ens["error"].iloc[1] == jobs["error"].iloc[1] and "NonFiniteValueError" in ens["error"].iloc[1]
    assert ens["note"].iloc[1].startswith("ran as its own job: failed in its ensemble (member 1: ")
    assert ens["path"].iloc[1] == jobs["path"].iloc[1] == "1/results.h5" and ens["member"].iloc[1] == -1
    assert list(ens["member"].iloc[[0, 2]]) == [0, 2]
    _assert_members_equal_jobs(ens, jobs, tmp_path / "ens", tmp_path / "jobs", [0, 2])
    failed = load_run(tmp_path / "ens", 1)
    assert isinstance(failed, Results) and failed.status == "failed"


def test_jobs_that_cannot_be_grouped_run_as_jobs_saying_why_once(tmp_path: Path, cosimrun) -> None:
    sweep = ["-m", "+experiment=coupled_oscillators", "run.tf=0.05", "storage.allow_nonfinite=true",
             "components.mass1.params.stiffness=5,10,15"]
    proc = cosimrun(*sweep, *LAUNCHER, f"hydra.sweep.dir={tmp_path / 's'}")
    assert proc.returncode == 0, proc.stderr
    lines = [line.split("[HYDRA] ")[-1] for line in proc.stdout.splitlines() if "not as ensembles" in line]
    assert lines == ["dask: 3 sweep jobs run as separate jobs, not as ensembles: storage.allow_nonfinite: ensembles "
                     "stop a member at its first non-finite value"]
    assert "ensembles" not in proc.stderr  # a fact of the launch, not a warning
    df = load_sweep(tmp_path / "s")
    assert list(df["status"]) == ["complete"] * 3 and "member" not in df.columns
    assert list(df["path"]) == ["0/results.h5", "1/results.h5", "2/results.h5"]
    assert not (tmp_path / "s" / "ensembles").exists()


def test_a_resume_runs_only_the_members_not_complete(tmp_path: Path, cosimrun) -> None:
    sweep = [*SWEEP, "hydra.launcher.ensemble_size=3"]
    first = _sweep(cosimrun, tmp_path / "s", *sweep)
    files = sorted((tmp_path / "s" / "ensembles").iterdir())
    assert len(files) == 2
    # an interrupted sweep leaves the ensembles that finished; the one still running wrote no file
    kept, lost = files
    kept_mtime = kept.stat().st_mtime_ns
    lost.unlink()
    again = _sweep(cosimrun, tmp_path / "s", *sweep, "hydra.launcher.resume=true")
    assert list(again["status"]) == ["complete"] * 6
    assert list(again["reused"]) == [True] * 3 + [False] * 3
    assert list(again["attempts"]) == [0] * 3 + [1] * 3
    assert kept.stat().st_mtime_ns == kept_mtime
    assert list(again["path"].iloc[:3]) == [f"ensembles/{kept.name}"] * 3 and list(again["member"]) == [0, 1, 2] * 2
    pd.testing.assert_frame_equal(_finals(again), _finals(first), check_exact=True)
    # a changed config runs every member again
    changed = _sweep(cosimrun, tmp_path / "s", *[a.replace("run.tf=0.2", "run.tf=0.1") for a in sweep],
                     "hydra.launcher.resume=true")
    assert list(changed["reused"]) == [False] * 6


def _statuses_now(sweep_dir: Path) -> list[str]:
    try:
        return list(load_sweep(sweep_dir)["status"])
    except (OSError, KeyError, ValueError):  # not written yet
        return []


def test_an_interrupted_ensemble_sweep_resumes_with_the_finished_ensembles(tmp_path: Path, start_cosimrun,
                                                                           cosimrun) -> None:
    sweep_dir = tmp_path / "s"
    # two ensembles on one worker: jobs 0-1 (0.1 s simulated) finish, jobs 2-3 (300 s) are still running
    args = ["-m", "+experiment=coupled_oscillators", "run.tf=0.1,300", "components.mass1.params.stiffness=5,10",
            *LAUNCHER, f"hydra.sweep.dir={sweep_dir}"]
    proc = start_cosimrun(*args)
    deadline = time.monotonic() + 120
    while _statuses_now(sweep_dir)[:2] != ["complete", "complete"]:
        assert time.monotonic() < deadline and proc.poll() is None, "the first ensemble did not finish"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "sweep: 4 jobs, 2 complete, 0 failed, 2 interrupted" in err
    assert _statuses_now(sweep_dir) == ["complete", "complete", "interrupted", "interrupted"]
    (kept,) = (sweep_dir / "ensembles").glob("*.h5")  # the interrupted ensemble left no file
    kept_mtime = kept.stat().st_mtime_ns
    resumed = _sweep(cosimrun, sweep_dir, *[a.replace("0.1,300", "0.1,0.2") for a in args[:-4]],
                     "hydra.launcher.resume=true")
    assert list(resumed["status"]) == ["complete"] * 4
    assert list(resumed["reused"]) == [True, True, False, False] and kept.stat().st_mtime_ns == kept_mtime
    assert list(resumed["path"].iloc[:2]) == [f"ensembles/{kept.name}"] * 2
