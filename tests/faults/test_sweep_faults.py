"""What a sweep makes of faults: a second sweep into its directory, a damaged job file on resume, a
worker dying after its job finished, a hung job, Ctrl-C while a job hangs, settings that cannot work.

Every test runs the ``cosimrun`` command in a subprocess (fixtures in ``tests/conftest.py``; the
test-only component ``crash`` misbehaves on request) and checks the exit status, the line the
command printed and every file left behind: index rows and the results files' ``status``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from cosimrun.runner.load import load_sweep
from cosimrun.runner.lock import LOCK_FILE
from cosimrun.storage.verify import verify_results

pytestmark = pytest.mark.slow

QUICK = ["+experiment=bouncing_ball", "run.tf=0.5"]
CLI = "from cosimrun.cli import main; main()"  # the console script's entry point, as tests/conftest.py runs it
DASK = [*QUICK, "hydra.launcher.progress=false", "hydra.launcher.ensemble_size=0"]  # jobs, not an ensemble


def _status(path: Path) -> str:
    with h5py.File(path, "r") as f:
        return str(f.attrs["status"])


def _tree(root: Path) -> dict[str, Any]:
    """Every file under *root*: relative path -> (size, mtime in ns); the lock file by its content (its
    holder touches it every 30 s as a sign of life)."""
    def seen(p: Path) -> Any:
        return p.read_bytes() if p.name == LOCK_FILE else (p.stat().st_size, p.stat().st_mtime_ns)

    return {str(p.relative_to(root)): seen(p) for p in root.rglob("*") if p.is_file()}


def _settled(root: Path, quiet: float = 0.5, timeout: float = 60) -> dict[str, Any]:
    """:func:`_tree` of *root* once it stayed the same for *quiet* seconds."""
    deadline = time.monotonic() + timeout
    tree = _tree(root)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        tree, previous = _tree(root), tree
        if tree == previous:
            return tree
    raise AssertionError(f"{root} kept changing for {timeout} s")


def _wait_for(condition: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _lines(text: str, prefix: str = "cosimrun:") -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


# ---------------------------------------------------------------------- the sweep lock
def test_a_second_sweep_is_refused_while_the_first_lives_and_takes_over_once_it_died(
    cosimrun, start_cosimrun, with_crash: list[str], tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    # the first sweep runs its jobs in the driver (basic launcher) and hangs in job 0
    first = start_cosimrun(
        "-m",
        *with_crash,
        *QUICK,
        "components.bomb.params.hang_at=0.1",
        "components.ball.params.e=0.5,0.6",
        "hydra/launcher=basic",
        f"hydra.sweep.dir={sweep_dir}",
    )
    try:
        _wait_for(lambda: (sweep_dir / "0" / "results.h5.partial").exists(), what="the first sweep's job 0")
        holder = json.loads((sweep_dir / LOCK_FILE).read_text())
        assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()
        before = _settled(sweep_dir)  # job 0 hangs: nothing changes in the directory any more

        # the second sweep (dask launcher) is refused in one line and touches nothing
        second = cosimrun("-m", *DASK, "components.ball.params.e=0.7,0.8", f"hydra.sweep.dir={sweep_dir}")
        assert second.returncode == 2, second.stderr
        assert second.stderr.count("\n") == 1
        assert second.stderr.startswith(
            f"cosimrun: error: sweep directory {sweep_dir} is in use by a running sweep "
            f"(PID {first.pid} on host {socket.gethostname()}, started {holder['started']}); "
        )
        assert _tree(sweep_dir) == before
    finally:
        first.kill()
        first.wait(timeout=30)

    # the first sweep died holding the lock: the next sweep takes it over, says so, and runs
    assert (sweep_dir / LOCK_FILE).exists() and _status(sweep_dir / "0" / "results.h5.partial") == "running"
    third = cosimrun("-m", *DASK, "components.ball.params.e=0.7,0.8", "hydra.launcher.n_workers=1",
                     f"hydra.sweep.dir={sweep_dir}")
    assert third.returncode == 0, third.stderr
    assert _lines(third.stderr) == [
        f"cosimrun: took over the lock of sweep directory {sweep_dir} from PID {first.pid} on host "
        f"{socket.gethostname()}, started {holder['started']}: that process no longer runs"
    ]
    assert "sweep: 2 jobs, 2 complete, 0 failed" in third.stdout
    assert not (sweep_dir / LOCK_FILE).exists()  # released at the end
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete"] and list(df["components.ball.params.e"]) == [0.7, 0.8]
    assert list(df["note"]) == ["", ""] and list(df["error"]) == ["", ""]
    for job in ("0", "1"):
        assert _status(sweep_dir / job / "results.h5") == "complete"
        assert verify_results(sweep_dir / job / "results.h5") == []


# ---------------------------------------------------------------------- resume verifies
def _flip_data_bytes(path: Path, dataset: str) -> None:
    """Invert one stored sample of *dataset* (in the middle of its data), leaving the file's structure alone."""
    with h5py.File(path, "r") as f:
        ds = f[dataset]
        assert ds.compression is None and ds.shape[0] > 2
        offset = ds.id.get_chunk_info(0).byte_offset if ds.chunks else ds.id.get_offset()
        offset += (ds.shape[0] // 2) * ds.dtype.itemsize
    with open(path, "r+b") as raw:
        raw.seek(offset)
        data = raw.read(4)
        raw.seek(offset)
        raw.write(bytes(b ^ 0xFF for b in data))


def test_resume_reruns_a_job_whose_results_file_was_damaged(cosimrun, tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    args = [
        "-m",
        *DASK,
        "storage.compression=null",
        "components.ball.params.e=0.5,0.6",
        "hydra.launcher.n_workers=1",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    proc = cosimrun(*args)
    assert proc.returncode == 0, proc.stderr
    damaged = sweep_dir / "0" / "results.h5"
    kept_mtime = (sweep_dir / "1" / "results.h5").stat().st_mtime_ns
    _flip_data_bytes(damaged, "components/ball/h")
    assert _status(damaged) == "complete"  # it still says so
    assert verify_results(damaged) == ["/components/ball/h: CRC-32 mismatch (the data changed after it was written)"]

    proc = cosimrun(*args, "hydra.launcher.resume=true")
    assert proc.returncode == 0, proc.stderr
    assert _lines(proc.stderr) == []
    note = "rerun: results file damaged (/components/ball/h: CRC-32 mismatch (the data changed after it was written))"
    assert "sweep: 2 jobs, 2 complete (1 reused), 0 failed" in proc.stdout and f"  #0 {note}" in proc.stdout
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete"]
    assert list(df["reused"]) == [False, True] and list(df["attempts"]) == [1, 0]
    assert list(df["note"]) == [note, ""] and list(df["error"]) == ["", ""]
    assert _status(damaged) == "complete" and verify_results(damaged) == []  # run again, whole
    assert (sweep_dir / "1" / "results.h5").stat().st_mtime_ns == kept_mtime
    assert not (sweep_dir / LOCK_FILE).exists()


# ---------------------------------------------------------------------- lost is not failed
def test_a_worker_dying_after_its_job_finished_leaves_the_job_complete(
    cosimrun, with_crash: list[str], tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        *with_crash,
        *DASK,
        "components.bomb.params.exit_on_free=true,false",  # job 0's worker exits once its file is closed
        "hydra.launcher.n_workers=1",
        "hydra.launcher.retries=0",  # no retry: the job must not need one
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr
    assert "NoneType" not in proc.stdout + proc.stderr
    recovered = "recovered: its worker died after the job finished; outcome read from its verified results file"
    assert "sweep: 2 jobs, 2 complete, 0 failed" in proc.stdout and f"  #0 {recovered}" in proc.stdout
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete"]
    assert list(df["note"]) == [recovered, ""] and list(df["error"]) == ["", ""]
    assert list(df["attempts"]) == [1, 1] and list(df["reused"]) == [False, False]
    assert list(df["path"]) == ["0/results.h5", "1/results.h5"]
    assert df["final.ball.h"].notna().all() and df["wall_time_s"].iloc[0] > 0
    for job in ("0", "1"):
        assert _status(sweep_dir / job / "results.h5") == "complete"
        assert verify_results(sweep_dir / job / "results.h5") == []


# ---------------------------------------------------------------------- timeouts and the index while jobs run
HUNG_JOB_TIMEOUT = 5
"""``hydra.launcher.timeout`` of the hung-job test (the hung job sleeps for an hour): timed from a job's start on its
worker, and the jobs that finish run there for a fraction of a second, well within it on a loaded machine too (as in
``test_sweep_scale.py``'s chunk with a hung job)."""


def test_a_hung_job_times_out_and_the_sweep_goes_on(cosimrun, with_crash: list[str], tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        *with_crash,
        *DASK,
        "components.bomb.params.hang_at=0.1,100,100",  # job 0 hangs, the others finish
        "hydra.launcher.n_workers=1",  # the others run on the worker restarted after the timeout
        f"hydra.launcher.timeout={HUNG_JOB_TIMEOUT}",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 1, proc.stderr
    assert "sweep: 3 jobs, 2 complete, 1 failed" in proc.stderr
    assert "  #0 failed: " in proc.stderr and f": timeout after {HUNG_JOB_TIMEOUT} s" in proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["failed", "complete", "complete"]
    assert list(df["error"]) == [f"timeout after {HUNG_JOB_TIMEOUT} s", "", ""]
    assert re.fullmatch(
        rf"the job ran longer than hydra\.launcher\.timeout={HUNG_JOB_TIMEOUT} s; "
        r"its worker (tcp|tls)://\S+ was restarted",
        df["traceback"].iloc[0],
    )
    assert list(df["attempts"]) == [1, 1, 1]
    assert list(df["path"]) == ["0/results.h5", "1/results.h5", "2/results.h5"]
    # the hung run's file is as its killed process left it; the others are whole
    assert not (sweep_dir / "0" / "results.h5").exists()
    assert _status(sweep_dir / "0" / "results.h5.partial") == "running"
    for job in ("1", "2"):
        assert _status(sweep_dir / job / "results.h5") == "complete"
    assert not (sweep_dir / LOCK_FILE).exists()


def _index_statuses(sweep_dir: Path) -> list[str]:
    try:
        return list(load_sweep(sweep_dir)["status"])
    except (OSError, ValueError, KeyError):  # not there yet
        return []


@pytest.mark.parametrize(
    ("signum", "code", "reason"),
    [(signal.SIGINT, 130, "interrupted by the user"), (signal.SIGTERM, 143, "terminated by SIGTERM")],
    ids=["SIGINT", "SIGTERM"],
)
def test_the_index_is_rewritten_while_a_job_hangs_and_an_interrupt_leaves_it_whole(
    start_cosimrun, with_crash: list[str], tmp_path: Path, signum: int, code: int, reason: str
) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = start_cosimrun(
        "-m",
        *with_crash,
        *DASK,
        "components.bomb.params.hang_at=0.1,100",  # job 0 hangs, job 1 finishes at once
        "hydra.launcher.n_workers=2",
        f"hydra.sweep.dir={sweep_dir}",
    )
    _wait_for(lambda: _index_statuses(sweep_dir) == ["pending", "complete"], what="job 1 complete in the index")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "sweep: 2 jobs, 1 complete, 0 failed, 1 interrupted" in err
    assert f"to finish it, run the same command with hydra.sweep.dir={sweep_dir} hydra.launcher.resume=true" in err
    assert _lines(err) == [f"cosimrun: {reason}"]
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["interrupted", "complete"]
    assert list(df["error"]) == [f"the sweep was {reason}", ""]
    assert _status(sweep_dir / "1" / "results.h5") == "complete"
    assert _status(sweep_dir / "0" / "results.h5.partial") == "running"  # its worker was stopped with the cluster
    assert not (sweep_dir / LOCK_FILE).exists()


def test_sigterm_ends_a_sweep_on_the_basic_launcher_with_the_job_interrupted(
    start_cosimrun, with_crash: list[str], tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = start_cosimrun(
        "-m",
        *with_crash,
        *QUICK,
        "components.bomb.params.hang_at=0.1,100",  # job 0 hangs in the driver; job 1 never starts
        "hydra/launcher=basic",
        f"hydra.sweep.dir={sweep_dir}",
    )
    _wait_for(lambda: (sweep_dir / "0" / "results.h5.partial").exists(), what="job 0 running")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "sweep: 1 jobs, 0 complete, 0 failed, 1 interrupted" in err
    assert _lines(err) == ["cosimrun: terminated by SIGTERM"]
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["interrupted"] and list(df["error"]) == ["terminated by SIGTERM"]
    assert _status(sweep_dir / "0" / "results.h5") == "interrupted"
    assert not (sweep_dir / "1").exists() and not (sweep_dir / LOCK_FILE).exists()


# ---------------------------------------------------------------------- refused settings
NATURAL = "an integer >= 1, or null: one per core"


@pytest.mark.parametrize(
    ("setting", "valid"),
    [
        ("n_workers=-1", NATURAL),
        ("n_workers=0", NATURAL),
        ("retries=-1", "an integer >= 0"),
        ("timeout=0", "a number of seconds > 0, or null: none"),
    ],
)
def test_launcher_settings_that_cannot_work_are_refused(cosimrun, tmp_path: Path, setting: str, valid: str) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun("-m", *DASK, "components.ball.params.e=0.5,0.6", f"hydra.launcher.{setting}",
                    f"hydra.sweep.dir={sweep_dir}", timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"cosimrun: error: hydra.launcher.{setting} cannot work: give {valid}\n"
    assert not sweep_dir.exists()  # nothing started


# ---------------------------------------------------------------------- complete on disk is complete
LINGER_MODULE = '''
import time

from cosimrun.components.sources import Constant
from cosimrun.parameters import Parameter


class Linger(Constant):
    """A constant whose ``free`` (after its run closed the results file) sleeps ``linger`` seconds."""

    PARAMETERS = {"linger": Parameter(float, default=0.0, doc="seconds free() sleeps after a run")}

    def free(self):
        if self.t > 0:  # after a run, not the sweeper's trial build
            time.sleep(self.parameters["linger"])
'''


@pytest.fixture
def linger_env(sweep_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """:func:`sweep_env` plus a test distribution registering the component type ``linger``."""
    root = tmp_path / "lingerdist"
    (root / "cosimrun_linger_testing").mkdir(parents=True)
    (root / "cosimrun_linger_testing" / "__init__.py").write_text(LINGER_MODULE)
    info = root / "cosimrun_linger_testing-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cosimrun-linger-testing\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cosimrun.components]\nlinger = cosimrun_linger_testing:Linger\n")
    return {**sweep_env, "PYTHONPATH": f"{root}{os.pathsep}{sweep_env['PYTHONPATH']}"}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_jobs_complete_on_disk_when_the_sweep_is_interrupted_are_complete_in_the_summary_and_index(
    linger_env: dict[str, str], tmp_path: Path, signum: int, code: int
) -> None:
    """Both jobs closed their files complete and linger in ``free``: the driver has not heard of them yet."""
    sweep_dir = tmp_path / "sweep"
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "-m", *DASK, "+components.slow={type: linger, params: {linger: 600}}",
         "components.ball.params.e=0.5,0.6", "hydra.launcher.n_workers=2", f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path, env=linger_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        def both_complete() -> bool:
            assert proc.poll() is None, proc.communicate()
            files = [sweep_dir / job / "results.h5" for job in ("0", "1")]
            return all(f.exists() and _status(f) == "complete" for f in files)

        _wait_for(both_complete, what="both jobs' files complete")
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    assert "sweep: 2 jobs, 2 complete, 0 failed" in out + err and "interrupted" not in out.split("index:")[0]
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete"] and list(df["error"]) == ["", ""]
    assert list(df["attempts"]) == [1, 1] and list(df["reused"]) == [False, False]
    assert df["final.ball.h"].notna().all()
    for job in ("0", "1"):
        assert _status(sweep_dir / job / "results.h5") == "complete"
        assert verify_results(sweep_dir / job / "results.h5") == []
    assert not (sweep_dir / LOCK_FILE).exists()


# ---------------------------------------------------------------------- workers that keep dying
def test_a_sweep_whose_jobs_kill_half_the_workers_ends_every_job_and_fails_only_those(
    cosimrun, with_crash: list[str], tmp_path: Path
) -> None:
    """20 jobs, every other one ending its worker with os._exit, two workers, no retry: every job ends, the
    crashing ones failed, the healthy ones complete (none failed or killed because another job's worker died)."""
    sweep_dir = tmp_path / "sweep"
    e = [round(0.5 + 0.01 * i, 2) for i in range(10)]
    proc = cosimrun(
        "-m", *with_crash, *DASK,
        f"components.ball.params.e={','.join(map(str, e))}",
        "components.bomb.params.crash_at=0.1,100",  # jobs 0, 2, 4, ... crash at t=0.1
        "hydra.launcher.n_workers=2", "hydra.launcher.retries=0", f"hydra.sweep.dir={sweep_dir}",
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "NoneType" not in proc.stderr
    assert "sweep: 20 jobs, 10 complete, 10 failed" in proc.stderr
    df = load_sweep(sweep_dir)
    crashing = [num % 2 == 0 for num in range(20)]
    assert list(df["status"]) == ["failed" if c else "complete" for c in crashing]
    for num, row in df.iterrows():
        job = sweep_dir / str(num)
        if crashing[num]:
            assert row["error"].startswith("WorkerDied: the worker process running this job died once"), row["error"]
            assert row["attempts"] == 1
            assert not (job / "results.h5").exists() and _status(job / "results.h5.partial") == "running"
        else:
            assert row["error"] == "" and row["attempts"] == 1
            assert _status(job / "results.h5") == "complete" and verify_results(job / "results.h5") == []
            assert not (job / "results.h5.partial").exists()
            assert row["components.ball.params.e"] == e[num // 2] and np.isfinite(row["final.ball.h"])
    assert not (sweep_dir / LOCK_FILE).exists()


def test_a_cluster_without_a_worker_fails_the_sweep_in_one_line(
    cosimrun, sweep_env: dict[str, str], tmp_path: Path
) -> None:
    """A scheduler whose workers are all gone (here: it never had one): the jobs fail after no_worker_timeout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        cwd=tmp_path, env=sweep_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        sweep_dir = tmp_path / "sweep"
        address = f"tcp://127.0.0.1:{port}"
        proc = cosimrun("-m", *DASK, "components.ball.params.e=0.5,0.6", f"hydra.launcher.address={address}",
                        "hydra.launcher.no_worker_timeout=2", f"hydra.sweep.dir={sweep_dir}", timeout=120)
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=30)
    reason = f"{address} has had no worker for 2 s (hydra.launcher.no_worker_timeout)"
    assert proc.returncode == 1, proc.stderr
    assert _lines(proc.stderr) == [
        f"cosimrun: error: {reason}; the jobs not finished are failed (hydra.launcher.resume=true runs them again)"
    ]
    assert "sweep: 2 jobs, 0 complete, 2 failed" in proc.stderr and "Traceback" not in proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["failed", "failed"] and list(df["error"]) == [f"not run: {reason}"] * 2
    assert not list(sweep_dir.glob("*/results.h5*")) and not (sweep_dir / LOCK_FILE).exists()
