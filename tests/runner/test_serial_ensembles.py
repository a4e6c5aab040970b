"""``cosimrun -m`` on the dask launcher runs the jobs of a system the vectorized engine does not step (an FMU, an
implicit integrator) as ensembles whose members run one after the other: one task and one file per ensemble, no
folder, config files, log or results file per member.

Every test runs the command end to end on a local cluster of one worker and compares with the same sweep run one
job per member (``hydra.launcher.ensemble_size=0``): rows, final values, histories, events, mode switches,
coupling-error estimates and statistics bitwise equal.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_ensemble_sweep import LAUNCHER, _finals, _sweep

from cosimrun.runner.load import load_run, load_sweep, load_sweep_dataset
from cosimrun.storage.ensemble import EnsembleMember
from cosimrun.storage.results import Results

pytestmark = pytest.mark.slow

FMU_SWEEP = ["-m", "+experiment=pendulum_switch_fmu", "run.tf=1.0", "components.ctrl.params.kp=40,60,80"]
RADAU_SWEEP = ["-m", "+experiment=coupled_oscillators", "run.tf=0.05", "master=jacobi",
               "+components.mass1.params.integrator=radau", "components.mass1.params.stiffness=10,1e300,12,14"]


def _assert_members_are_their_jobs(ens_dir: Path, jobs_dir: Path, runs: list[int]) -> None:
    for run in runs:
        member, job = load_run(ens_dir, run), load_run(jobs_dir, run)
        assert isinstance(member, EnsembleMember) and isinstance(job, Results)
        assert sorted(member.components) == sorted(job.components)
        for comp in job.components:
            mine, theirs = member.history(comp), job.history(comp)
            assert sorted(mine) == sorted(theirs)
            for port, series in theirs.items():
                for attr in ("time", "micro", "values"):
                    assert np.array_equal(getattr(mine[port], attr), getattr(series, attr)), (run, comp, port, attr)
                assert (mine[port].unit, mine[port].port_type) == (series.unit, series.port_type)
        for table in ("events", "mode_switches", "coupling_error"):
            pd.testing.assert_frame_equal(getattr(member, table).reset_index(drop=True),
                                          getattr(job, table).reset_index(drop=True), check_exact=True)
        for name in ("macro_steps", "trial_steps", "rollbacks", "events"):
            assert member.stats[name] == job.stats[name], name


def test_an_fmu_sweep_runs_as_ensembles_whose_members_are_their_jobs(tmp_path: Path, cosimrun) -> None:
    jobs = _sweep(cosimrun, tmp_path / "jobs", *FMU_SWEEP, "hydra.launcher.ensemble_size=0")
    proc = cosimrun(*FMU_SWEEP, *LAUNCHER, f"hydra.sweep.dir={tmp_path / 'ens'}")
    assert proc.returncode == 0, proc.stderr
    said = [line.split("dask: ")[-1] for line in proc.stdout.splitlines() if "one after the other" in line]
    assert said == ["3 sweep jobs run as ensembles of members one after the other (not as arrays: "
                    "components.pendulum.modes.nonlinear: mode 'nonlinear' of component 'pendulum' (FMUComponent) is "
                    "not a vectorizable ODE model, which ensembles switch between per member)"]
    ens = load_sweep_dataset(tmp_path / "ens", "pendulum").reset_coords(drop=True)
    theirs = load_sweep_dataset(tmp_path / "jobs", "pendulum").reset_coords(drop=True)
    xr.testing.assert_equal(ens, theirs)  # the histories along the sweep: the same Dataset either way
    df = load_sweep(tmp_path / "ens")
    (file,) = (tmp_path / "ens" / "ensembles").iterdir()
    assert list(df["status"]) == ["complete"] * 3 and list(df["member"]) == [0, 1, 2]
    assert list(df["attempts"]) == [1, 1, 1] and list(df["note"]) == [""] * 3  # each ran once, in its ensemble
    assert list(df["path"]) == [f"ensembles/{file.name}"] * 3 and not (tmp_path / "ens" / "0").exists()
    pd.testing.assert_frame_equal(_finals(df), _finals(jobs), check_exact=True)
    assert list(df["coupling_error_max"]) == list(jobs["coupling_error_max"])
    assert (df["wall_time_s"] > 0).all() and df["wall_time_s"].nunique() == 3  # each member's own run
    _assert_members_are_their_jobs(tmp_path / "ens", tmp_path / "jobs", [0, 1, 2])
    assert not list((tmp_path / "ens" / "ensembles").glob("*.member"))  # the running member's mark is gone


def test_a_failing_member_runs_as_its_own_job_and_a_resume_takes_over_the_others(tmp_path: Path, cosimrun) -> None:
    jobs = _sweep(cosimrun, tmp_path / "jobs", *RADAU_SWEEP, "hydra.launcher.ensemble_size=0", code=1)
    ens = _sweep(cosimrun, tmp_path / "ens", *RADAU_SWEEP, code=1)
    assert list(ens["status"]) == list(jobs["status"]) == ["complete", "failed", "complete", "complete"]
    assert ens["error"].iloc[1] == jobs["error"].iloc[1] and "array must not contain infs" in ens["error"].iloc[1]
    assert ens["note"].iloc[1] == ("ran as its own job: failed in its ensemble (member 1: ValueError: array must not "
                                   "contain infs or NaNs at t=0)")
    assert ens["path"].iloc[1] == "1/results.h5" and list(ens["member"]) == [0, -1, 2, 3]
    pd.testing.assert_frame_equal(_finals(ens), _finals(jobs), check_exact=True)
    _assert_members_are_their_jobs(tmp_path / "ens", tmp_path / "jobs", [0, 2, 3])
    (file,) = (tmp_path / "ens" / "ensembles").iterdir()
    written = file.stat().st_mtime_ns
    again = _sweep(cosimrun, tmp_path / "ens", *RADAU_SWEEP, "hydra.launcher.resume=true", code=1)
    assert list(again["reused"]) == [True, False, True, True] and list(again["attempts"]) == [0, 1, 0, 0]
    assert file.stat().st_mtime_ns == written
    pd.testing.assert_frame_equal(_finals(again), _finals(ens), check_exact=True)
