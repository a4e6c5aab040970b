"""Launcher and run-directory settings that cannot work: one line naming the setting, exit 2, nothing left.

Each test runs the ``cosimrun`` command in a subprocess (fixtures in ``tests/conftest.py``) and checks the
exit status, that stderr is exactly the one line, and that no run or sweep directory was left behind.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cosimrun.runner.load import load_sweep

pytestmark = pytest.mark.slow

SWEEP = ["-m", "+experiment=bouncing_ball", "run.tf=0.5", "hydra.launcher.progress=false",
         "components.ball.params.e=0.5,0.6"]
ADDRESS = ("a dask scheduler's address, PROTOCOL://HOST:PORT with PROTOCOL one of tcp, tls, ucx, ws, wss, inproc "
           "(tcp://127.0.0.1:8786), or null for a local cluster")
SETTINGS = ("address, n_workers, retries, resume, cluster, memory_limit, dashboard_address, quiet_workers, progress, "
            "objective, timeout, no_worker_timeout, connect_timeout, chunk_seconds, ensemble_size")


@pytest.mark.parametrize(
    ("setting", "valid"),
    [
        ("address=notaurl", ADDRESS),
        ("address=http://127.0.0.1:8786", ADDRESS),
        ("memory_limit=lots", "a size per worker (4GB, 512MiB), a fraction of the machine's memory (0.25), auto (the "
                              "memory shared among the workers) or null/0 (no limit)"),
        ("no_worker_timeout=0", "a number of seconds > 0"),
        ("connect_timeout=-1", "a number of seconds > 0"),
    ],
)
def test_a_launcher_setting_that_cannot_work_is_refused_in_one_line(cosimrun, tmp_path: Path, setting, valid) -> None:
    proc = cosimrun(*SWEEP, f"hydra.launcher.{setting}", f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=120)
    assert proc.returncode == 2, proc.stderr
    name, _, value = setting.partition("=")
    shown = f"{float(value):g}" if value.lstrip("-").isdigit() else value
    assert proc.stderr == f"cosimrun: error: hydra.launcher.{name}={shown} cannot work: give {valid}\n"
    assert not (tmp_path / "sweep").exists()


def test_an_unreachable_scheduler_is_refused_within_the_connect_timeout(cosimrun, tmp_path: Path) -> None:
    start = time.monotonic()
    proc = cosimrun(*SWEEP, "hydra.launcher.address=tcp://127.0.0.1:1", "hydra.launcher.connect_timeout=2",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=120)
    elapsed = time.monotonic() - start
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(
        "cosimrun: error: hydra.launcher.address=tcp://127.0.0.1:1: no dask scheduler answered within 2 s "
        "(hydra.launcher.connect_timeout): "
    ), proc.stderr
    assert elapsed < 60  # the start-up on a loaded machine plus 2 s, not dask's 30 s per attempt
    assert not (tmp_path / "sweep").exists()


def test_an_objective_naming_no_index_column_is_refused_with_the_columns_there_are(cosimrun, tmp_path: Path) -> None:
    proc = cosimrun(*SWEEP, "hydra.launcher.objective=final.ball.hh", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "cosimrun: error: hydra.launcher.objective: 'final.ball.hh' is no number of the sweep index; did you mean "
        "'final.ball.h' or 'final.ball.v' or 'final.ball.bounce'? (the index's numbers: final.ball.h, final.ball.v, "
        "final.ball.bounce, wall_time_s, job_time_s, coupling_error_max)\n"
    )
    assert not (tmp_path / "sweep").exists()
    proc = cosimrun(*SWEEP, "hydra.launcher.objective=final.ball.h", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 0, proc.stderr  # the column it suggests works
    df = load_sweep(tmp_path / "sweep")
    assert list(df["status"]) == ["complete", "complete"] and df["final.ball.h"].notna().all()


def test_an_unknown_launcher_key_is_refused_with_advice_that_works(cosimrun, tmp_path: Path) -> None:
    """The same line whether the key is set, added (+) or forced (++); the setting it advises runs the sweep."""
    for plus in ("", "+", "++"):
        proc = cosimrun(*SWEEP, f"{plus}hydra.launcher.n_worker=1", f"hydra.sweep.dir={tmp_path / 'sweep'}")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (
            "cosimrun: error: hydra.launcher.n_worker: the dask launcher has no setting 'n_worker'; did you mean "
            f"'n_workers' or 'quiet_workers' or 'no_worker_timeout'? (its settings: {SETTINGS}; "
            "hydra.launcher.NAME=VALUE sets one)\n"
        ), plus
        assert not (tmp_path / "sweep").exists()
    proc = cosimrun(*SWEEP, "hydra.launcher.n_workers=1", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 0, proc.stderr  # as the advice says
    assert list(load_sweep(tmp_path / "sweep")["status"]) == ["complete", "complete"]


@pytest.mark.parametrize(
    ("args", "key", "kind"),
    [
        (["+experiment=bouncing_ball", "run.tf=0.5"], "hydra.run.dir", "run"),
        (SWEEP, "hydra.sweep.dir", "sweep"),
    ],
    ids=["run", "sweep"],
)
@pytest.mark.parametrize("where", ["a_file/out", "a_file", "/proc/self/cosimrun"])
def test_a_run_or_sweep_directory_that_cannot_be_made_is_refused_in_one_line(
    cosimrun, tmp_path: Path, args, key, kind, where
) -> None:
    (tmp_path / "a_file").write_text("not a directory\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = cosimrun(*args, f"{key}={where}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"cosimrun: error: {key}={where}: cannot use it as the {kind} directory: ")
    reason = {"a_file/out": "Not a directory", "a_file": "File exists", "/proc/self/cosimrun": "No such file"}
    assert f": {reason[where]}" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "a_file").read_text() == "not a directory\n"
