"""Failure isolation of sweeps that run as ensembles: a worker dying inside an ensemble's task, an ensemble running
past ``hydra.launcher.timeout``.

The members of such an ensemble run again as ordinary jobs, as a failing job fails alone: the test-only component
type ``fragile`` (a ``mass_spring_damper`` whose runs misbehave by their stiffness, registered by a distribution on
``PYTHONPATH`` as ``tests/conftest.py`` registers ``crash``) ends its process or hangs on request. Every test runs
the command end to end on a local cluster of one worker and compares what completed with the same sweep run one
job per member (``ensemble_size=0``), bit for bit.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pandas as pd
import pytest
from support import forkserver
from test_ensemble_sweep import LAUNCHER, _assert_members_equal_jobs, _finals, _sweep

from cosimrun.runner.load import load_run, load_sweep
from cosimrun.storage.results import Results

pytestmark = pytest.mark.slow

FRAGILE_MODULE = '''
"""Test-only component type for the ensemble fault tests."""

import os
import time

import numpy as np

from cosimrun.components.mechanics import MassSpringDamper
from cosimrun.parameters import Parameter


class Fragile(MassSpringDamper):
    """A mass_spring_damper whose runs misbehave by their stiffness, from t > 0 on.

    ``exit_in_ensemble``: a run of that stiffness ends its process (os._exit(17)) when it is a member of an
    ensemble (its run alone does not); ``exit_alone``: such a member goes non-finite in its ensemble and a run of it
    alone ends its process; ``nan_in_ensemble``: such a member goes non-finite in its ensemble only; ``hang``: a run
    of that stiffness sleeps for an hour, either way; ``nap``: every run sleeps that long once.
    """

    PARAMETERS = {
        **MassSpringDamper.PARAMETERS,
        "exit_in_ensemble": Parameter(float, default=-1.0, doc="stiffness whose ensemble ends its process"),
        "exit_alone": Parameter(float, default=-1.0, doc="stiffness whose run alone ends its process"),
        "nan_in_ensemble": Parameter(float, default=-1.0, doc="stiffness that goes non-finite in an ensemble"),
        "hang": Parameter(float, default=-1.0, doc="stiffness whose run sleeps for an hour"),
        "nap": Parameter(float, default=0.0, doc="seconds every run sleeps once"),
    }

    def derivatives(self, t, x, u):
        dx = super().derivatives(t, x, u)
        if t <= 0:  # the sweep's trial build on the driver
            return dx
        k, p = np.asarray(self._k), self.parameters
        ensemble = k.ndim > 0
        if p["nap"] and not getattr(self, "napped", False):
            self.napped = True
            time.sleep(p["nap"])
        if np.any(k == p["hang"]):
            time.sleep(3600)
        if ensemble and np.any(k == p["exit_in_ensemble"]):
            os._exit(17)
        if np.any(k == p["exit_alone"]):
            if not ensemble:
                os._exit(17)
            dx = np.where(k == p["exit_alone"], np.nan, dx)
        if ensemble:
            dx = np.where(k == p["nan_in_ensemble"], np.nan, dx)
        return dx
'''

STIFFNESS = [10, 11, 12]
SWEEP = ["-m", "+experiment=coupled_oscillators", "run.tf=0.05", "master=jacobi", "components.mass1.type=fragile",
         f"components.mass1.params.stiffness={','.join(map(str, STIFFNESS))}"]
RUNS = list(range(len(STIFFNESS)))


@pytest.fixture(scope="module")
def fragile_env(sweep_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """:func:`sweep_env` with a distribution that registers the component type ``fragile``."""
    root = tmp_path_factory.mktemp("fragile")
    (root / "cosimrun_ensemble_faults.py").write_text(textwrap.dedent(FRAGILE_MODULE))
    info = root / "cosimrun_ensemble_faults-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cosimrun-ensemble-faults\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cosimrun.components]\nfragile = cosimrun_ensemble_faults:Fragile\n")
    return {**sweep_env, "PYTHONPATH": os.pathsep.join([str(root), sweep_env["PYTHONPATH"]])}


@pytest.fixture
def run(fragile_env: dict[str, str], tmp_path: Path) -> Callable[..., CompletedProcess[str]]:
    """The ``cosimrun`` command as the ``cosimrun`` fixture runs it, in :func:`fragile_env`."""

    def command(*args: str, timeout: float = 120) -> CompletedProcess[str]:
        return forkserver.run(forkserver.Form.python_c(), list(args), fragile_env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=timeout)

    return command


@pytest.fixture(scope="module")
def reference(fragile_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    """The sweep run one job per member, nothing misbehaving: its directory and index."""
    sweep_dir = tmp_path_factory.mktemp("reference") / "s"
    df = _sweep(lambda *args: forkserver.run(forkserver.Form.python_c(), list(args), fragile_env,
                                             cwd=sweep_dir.parent, capture_output=True, text=True, timeout=120),
                sweep_dir, *SWEEP, "hydra.launcher.ensemble_size=0")
    assert list(df["status"]) == ["complete"] * len(STIFFNESS)
    return sweep_dir, df


def _assert_jobs_equal(df: pd.DataFrame, sweep_dir: Path, reference: tuple[Path, pd.DataFrame],
                       runs: list[int]) -> None:
    """Jobs *runs* ran as ordinary jobs, their final values and histories bitwise those of *reference*."""
    ref_dir, ref = reference
    pd.testing.assert_frame_equal(_finals(df.loc[runs]), _finals(ref.loc[runs]), check_exact=True)
    for num in runs:
        assert df["path"].loc[num] == f"{num}/results.h5" and df.get("member", pd.Series(-1, df.index))[num] == -1
        mine, theirs = load_run(sweep_dir, num), load_run(ref_dir, num)
        assert isinstance(mine, Results) and isinstance(theirs, Results)
        pd.testing.assert_frame_equal(mine.to_dataframe(), theirs.to_dataframe(), check_exact=True)


def _faulty_sweep(run, sweep_dir: Path, *args: str, code: int) -> tuple[pd.DataFrame, list[str]]:
    """The sweep's index and the lines its log gave about an ensemble whose members run as jobs."""
    proc = run(*SWEEP, *args, *LAUNCHER, f"hydra.sweep.dir={sweep_dir}")
    assert proc.returncode == code, proc.stderr
    lines = [line.split("dask: ")[-1] for line in (proc.stdout + proc.stderr).splitlines()
             if "run again as ordinary jobs" in line]
    return load_sweep(sweep_dir), lines


def test_a_worker_dying_in_an_ensemble_runs_its_members_as_jobs(tmp_path: Path, run, reference) -> None:
    # the ensemble's worker ends as it steps the member of stiffness 11; each member then runs alone and completes
    df, lines = _faulty_sweep(run, tmp_path / "s", "+components.mass1.params.exit_in_ensemble=11", code=0)
    assert lines == ["the ensemble of jobs 0-2 lost its worker, which died; 3 of its 3 members run again as "
                     "ordinary jobs"]
    assert list(df["status"]) == ["complete"] * 3 and list(df["attempts"]) == [1] * 3
    assert list(df["note"]) == ["ran as its own job: its ensemble lost its worker, which died"] * 3
    _assert_jobs_equal(df, tmp_path / "s", reference, RUNS)
    assert not list((tmp_path / "s").glob("ensembles/*"))  # the ensemble ended before it wrote its file


def test_members_an_ensemble_completed_before_its_worker_died_are_not_run_again(tmp_path: Path, run,
                                                                                reference) -> None:
    # 11 and 12 go non-finite in the ensemble, which writes its file and runs them alone: 11 completes, 12 ends
    # the worker (and again as a job)
    df, lines = _faulty_sweep(run, tmp_path / "s", "+components.mass1.params.nan_in_ensemble=11",
                              "+components.mass1.params.exit_alone=12", code=1)
    assert lines == ["the ensemble of jobs 0-2 lost its worker, which died; 1 of its 3 members run again as "
                     "ordinary jobs"]
    assert list(df["status"]) == ["complete", "complete", "failed"] and list(df["attempts"]) == [1, 1, 2]
    (file,) = (tmp_path / "s" / "ensembles").iterdir()
    assert df["path"].iloc[0] == f"ensembles/{file.name}" and df["member"].iloc[0] == 0
    assert not (tmp_path / "s" / "0").exists()  # not run again
    _assert_members_equal_jobs(df, reference[1], tmp_path / "s", reference[0], [0])
    # 11 finished alone before the worker died: its outcome is kept, not run again nor recovered from its file
    assert df["note"].iloc[1].startswith("ran as its own job: failed in its ensemble (member 1: "), df["note"].iloc[1]
    _assert_jobs_equal(df, tmp_path / "s", reference, [1])
    assert df["error"].iloc[2].startswith("WorkerDied: the worker process running this job died 2 times"), df
    assert df["path"].iloc[2] == "" and df["member"].iloc[2] == -1  # as for a job whose worker died
    assert (tmp_path / "s" / "2" / "results.h5.partial").exists()


def test_an_ensemble_past_the_timeout_runs_its_members_as_jobs_under_it(tmp_path: Path, run, reference) -> None:
    # stiffness 11 hangs in the ensemble and alone: the ensemble is stopped, then that job alone; the others complete
    df, lines = _faulty_sweep(run, tmp_path / "s", "+components.mass1.params.hang=11", "hydra.launcher.timeout=3",
                              code=1)
    assert len(lines) == 1, lines
    assert lines[0].startswith("the ensemble of jobs 0-2 ran longer than hydra.launcher.timeout=3 s (its worker ")
    assert lines[0].endswith(" was restarted); 3 of its 3 members run again as ordinary jobs")
    assert list(df["status"]) == ["complete", "failed", "complete"] and list(df["attempts"]) == [1] * 3
    assert df["error"].iloc[1] == "timeout after 3 s"
    assert list(df["note"]) == ["ran as its own job: its ensemble ran longer than hydra.launcher.timeout=3 s"] * 3
    _assert_jobs_equal(df, tmp_path / "s", reference, [0, 2])


ONE_AFTER_THE_OTHER = "+components.mass1.params.integrator=radau"
"""Not vectorized: the members of the sweep's ensemble run one after the other."""


def test_members_run_one_after_the_other_are_each_timed_against_the_timeout(tmp_path: Path, run) -> None:
    # three members of 1.2 s each: the ensemble runs longer than the timeout, none of its members does
    df, lines = _faulty_sweep(run, tmp_path / "s", ONE_AFTER_THE_OTHER, "+components.mass1.params.nap=1.2",
                              "hydra.launcher.timeout=3", code=0)
    assert lines == [] and list(df["status"]) == ["complete"] * 3 and list(df["member"]) == [0, 1, 2]
    (file,) = (tmp_path / "s" / "ensembles").iterdir()
    assert list(df["path"]) == [f"ensembles/{file.name}"] * 3 and list(df["note"]) == [""] * 3
    assert (df["wall_time_s"] > 1.2).all()


def test_a_member_run_one_after_the_other_that_hangs_stops_its_ensemble(tmp_path: Path, run) -> None:
    # the member of stiffness 11 runs past the timeout in the ensemble and alone; the others complete as jobs
    df, lines = _faulty_sweep(run, tmp_path / "s", ONE_AFTER_THE_OTHER, "+components.mass1.params.hang=11",
                              "hydra.launcher.timeout=2", code=1)
    assert len(lines) == 1 and lines[0].startswith("the ensemble of jobs 0-2 ran member 1 (job 1) longer than "
                                                   "hydra.launcher.timeout=2 s (its worker "), lines
    assert list(df["note"]) == ["ran as its own job: its ensemble ran member 1 (job 1) longer than "
                                "hydra.launcher.timeout=2 s"] * 3
    assert list(df["status"]) == ["complete", "failed", "complete"] and df["error"].iloc[1] == "timeout after 2 s"
    assert list(df["path"]) == ["0/results.h5", "1/results.h5", "2/results.h5"]
    assert not list((tmp_path / "s" / "ensembles").glob("*"))  # no file, and the running member's mark removed
