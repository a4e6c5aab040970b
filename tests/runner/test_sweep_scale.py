"""Sweep bookkeeping that scales: the index grows by parts, job folders are sharded, the driver keeps overrides."""

from __future__ import annotations

import math
import os
from pathlib import Path

import h5py
import pandas as pd
import pytest

from cosimrun.runner.index import write_index
from cosimrun.runner.ledger import SweepLedger
from cosimrun.runner.load import load_sweep
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage.sweep_index import INDEX_FILE, PARTS_DIR, PARTS_PER_LEVEL


def _done(num: int, **kw: object) -> JobOutcome:
    """A finished job with typed parameters (float, int, string) and summaries (float, bool, string)."""
    overrides = ["+experiment=x", f"a.k={num * 0.5}", f"b.n={num}", f"master={'jacobi' if num % 2 else 'hybrid'}"]
    fields = dict(status="complete", overrides=overrides, wall_time_s=0.25 * num, job_time_s=0.5,
                  summaries={"y.v": 0.1 * num, "y.ok": num % 3 == 0, "y.mode": f"m{num}"}, worker="w", attempts=1)
    fields.update(kw)
    return JobOutcome(num=num, **fields)  # type: ignore[arg-type]


def _overrides(num: int) -> list[str]:
    return _done(num).overrides


def _parts(sweep: Path) -> list[str]:
    return sorted(p.name for p in (sweep / PARTS_DIR).iterdir()) if (sweep / PARTS_DIR).exists() else []


def test_the_index_is_written_whole_once_then_grows_by_parts_readable_at_any_moment(tmp_path: Path) -> None:
    ledger = SweepLedger(tmp_path, min_interval=0.0)
    for num in range(40):
        ledger.add_pending(num, _overrides(num))
    ledger.flush()
    index = tmp_path / INDEX_FILE
    first = os.stat(index)
    failed = JobOutcome(7, "failed", _overrides(7), error="ValueError: x", traceback="tb", job_time_s=0.1)
    for num in range(40):
        ledger.enter(failed if num == 7 else _done(num))
        ledger.flush()
        if num == 20:  # mid-sweep: the rows come from the parts, typed as the whole file will have them
            live = load_sweep(tmp_path)
            assert list(live["status"][:21]) == ["complete"] * 7 + ["failed"] + ["complete"] * 13
            assert set(live["status"][21:]) == {"pending"}
    assert os.stat(index).st_ino == first.st_ino and os.stat(index).st_mtime_ns == first.st_mtime_ns  # not rewritten
    assert 0 < len(_parts(tmp_path)) < 2 * PARTS_PER_LEVEL  # 41 parts written, merged as they grew
    live = load_sweep(tmp_path)
    ledger.close()
    assert not (tmp_path / PARTS_DIR).exists()
    whole = load_sweep(tmp_path)
    pd.testing.assert_frame_equal(live, whole)  # same columns, order, dtypes and values
    assert list(whole.columns[:6]) == ["status", "overrides", "experiment", "a.k", "b.n", "master"]
    assert whole["b.n"].dtype == "int64" and whole["a.k"].dtype == "float64"
    # the failed job has no summaries: NaN, and so its boolean column holds floats
    assert whole["final.y.ok"].dtype == "float64" and (whole.loc[3, "final.y.ok"], whole.loc[4, "final.y.ok"]) == (1, 0)
    assert math.isnan(whole.loc[7, "final.y.v"]) and math.isnan(whole.loc[7, "final.y.ok"])
    assert whole.loc[8, "final.y.mode"] == "m8" and whole.loc[7, "error"] == "ValueError: x"
    with h5py.File(tmp_path / INDEX_FILE, "r") as f:
        assert "parts_generation" not in f.attrs and f.attrs["n_complete"] == 39 and f.attrs["n_failed"] == 1


def test_the_parts_equal_the_whole_index_for_every_kind_of_column(tmp_path: Path) -> None:
    """Missing values, a column whose type widens, ints that meet a float, bools with a gap: as write_index makes
    them."""
    outcomes = [
        JobOutcome(0, "complete", ["x=1", "s=a"], summaries={"c.i": 1, "c.b": True, "c.f": 1.5}),
        JobOutcome(1, "complete", ["x=2.5", "s=3"], summaries={"c.i": 2, "c.b": False, "c.f": math.nan}),
        JobOutcome(2, "pending", ["x=3", "t=true"]),
        JobOutcome(3, "complete", ["x=4", "s=b"], summaries={"c.i": 4, "c.b": True, "c.f": -math.inf, "c.s": "z"},
                   reused=True, attempts=0, note="kept"),
    ]
    ledger = SweepLedger(tmp_path / "live", min_interval=0.0)
    ledger.add_pending(0, ["x=1"])
    ledger.flush()
    for o in outcomes:
        ledger.enter(o)
        ledger.flush()
    live = load_sweep(tmp_path / "live")
    (tmp_path / "whole").mkdir()
    write_index(tmp_path / "whole" / INDEX_FILE, outcomes)
    whole = load_sweep(tmp_path / "whole")
    pd.testing.assert_frame_equal(live.drop(columns="path"), whole.drop(columns="path"))
    assert whole["final.c.b"].dtype == "float64" and whole["s"].tolist() == ["a", "3", "", "b"]


def test_a_new_launch_into_a_directory_ignores_the_parts_of_an_earlier_one(tmp_path: Path) -> None:
    old = SweepLedger(tmp_path, min_interval=0.0)
    for num in range(5):
        old.enter(_done(num))
        old.flush()  # the driver was killed here: parts left behind, never written whole
    assert _parts(tmp_path) and list(load_sweep(tmp_path).index) == [0, 1, 2, 3, 4]
    new = SweepLedger(tmp_path, min_interval=0.0)  # a resume runs jobs 0 and 1 only
    new.enter(_done(0, reused=True, attempts=0))
    new.enter(_done(1, status="failed", summaries={}))
    new.flush()
    df = load_sweep(tmp_path)
    assert list(df.index) == [0, 1] and list(df["status"]) == ["complete", "failed"] and bool(df["reused"][0])
    new.close()
    assert list(load_sweep(tmp_path)["status"]) == ["complete", "failed"]


def test_an_index_written_whole_before_parts_existed_reads_as_before(tmp_path: Path) -> None:
    n = 3
    write_index(tmp_path / INDEX_FILE, [_done(num) for num in range(n)])
    (tmp_path / PARTS_DIR).mkdir()
    (tmp_path / PARTS_DIR / "junk-000000000-0.jsonl").write_text('{"num": 9}\n')  # not this index's
    df = load_sweep(tmp_path)
    assert list(df.index) == list(range(n)) and list(df["b.n"]) == list(range(n))


# ---------------------------------------------------------------------- job folders
def test_job_folders_are_sharded_by_thousands_from_job_1000(tmp_path: Path) -> None:
    from cosimrun.runner.layout import job_subdir

    assert [job_subdir(tmp_path, n) for n in (0, 999, 1000, 1234, 99_999, 100_000)] == [
        "0", "999", "1k/1000", "1k/1234", "99k/99999", "100k/100000"]
    (tmp_path / "1000").mkdir()  # a sweep directory from before sharding: its layout stays flat
    assert [job_subdir(tmp_path, n) for n in (5, 1234, 100_000)] == ["5", "1234", "100000"]


def test_composed_jobs_take_the_sharded_folder_or_the_flat_one_of_an_older_sweep(tmp_path: Path) -> None:
    from support.hydra_sweep import sweep_context

    from cosimrun.runner.compose import JobComposer

    new, old = tmp_path / "new", tmp_path / "old"
    (old / "1000").mkdir(parents=True)
    for sweep, expected in ((new, new / "1k" / "1500"), (old, old / "1500")):
        ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={sweep}"])
        composer = JobComposer(ctx, master)
        for overrides in (["+experiment=pendulum_switch", "run.tf=3"], ["+experiment=pendulum_switch"]):
            spec = composer.compose(overrides, 1500)  # shared and full compositions alike
            assert spec.job_dir == expected and spec.results_path == expected / "results.h5"
        assert composer.compose(["+experiment=pendulum_switch", "run.tf=3"], 7).job_dir == sweep / "7"


def test_load_sweep_dataset_finds_jobs_in_shards(tmp_path: Path) -> None:
    from cosimrun.runner.load import load_sweep_dataset
    from cosimrun.storage import HDF5Writer

    paths = []
    for num, rel in ((999, "999"), (1000, "1k/1000")):
        path = tmp_path / rel / "results.h5"
        with HDF5Writer(path, experiment="t", compression=None) as w:
            w.add_component("ball", {"h": ("m", "real")})
            w.append("ball", [0.0, 1.0], [0, 0], {"h": [1.0, float(num)]})
        paths.append(JobOutcome(num, "complete", [f"a={num}"], path=str(path)))
    ledger = SweepLedger(tmp_path)
    for o in paths:
        ledger.enter(o)
    ledger.close()
    df = load_sweep(tmp_path)
    assert list(df["path"]) == ["999/results.h5", "1k/1000/results.h5"]
    ds = load_sweep_dataset(tmp_path, "ball")
    assert ds["h"].values[:, 1].tolist() == [999.0, 1000.0]


# ---------------------------------------------------------------------- the driver's memory
def test_a_job_return_keeps_overrides_and_composes_its_config_when_read(tmp_path: Path) -> None:
    import pickle

    from omegaconf import OmegaConf
    from support.hydra_sweep import sweep_context

    from cosimrun.runner.compose import JobComposer
    from hydra_plugins.cosimrun_dask_launcher._returns import SweepJobReturn

    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    composer = JobComposer(ctx, master)
    overrides = ["+experiment=pendulum_switch", "run.tf=3"]
    spec = composer.compose(overrides, 1500)
    reference = OmegaConf.to_container(pickle.loads(spec.payload().config))  # unresolved: ${now:...} stays
    ret = SweepJobReturn.of(spec, JobOutcome(1500, "complete", overrides), composer)
    assert ret._payload is None and ret._configs is None  # no config held for a finished job
    assert OmegaConf.to_container(ret.hydra_cfg) == reference and ret.cfg.run.tf == 3 and "hydra" not in ret.cfg
    assert ret.hydra_cfg.hydra.job.num == 1500 and ret._payload is None


# ---------------------------------------------------------------------- a driver killed mid-sweep
@pytest.mark.slow
def test_a_sweep_whose_driver_was_killed_has_an_index_and_resumes_from_it(
    sweep_env: dict[str, str], with_crash: list[str], tmp_path: Path
) -> None:
    """SIGKILL to the whole sweep (driver, cluster) while job 2 hangs: the index read from its parts shows jobs 0
    and 1 complete; a resume reuses them, runs job 2 and writes the index whole."""
    import signal
    import subprocess
    import sys
    import time

    sweep = tmp_path / "sweep"
    cli = "from cosimrun.cli import main; main()"
    args = ["-m", *with_crash, "+experiment=bouncing_ball", "run.tf=0.5", "hydra.launcher.progress=false",
            "hydra.launcher.n_workers=2", f"hydra.sweep.dir={sweep}",
            "hydra.launcher.ensemble_size=0"]  # jobs: one that hangs does not hold the others back
    proc = subprocess.Popen([sys.executable, "-c", cli, *args, "components.bomb.params.hang_at=100,101,0.1"],
                            cwd=tmp_path, env=sweep_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        statuses: list[str] = []
        while statuses[:2] != ["complete", "complete"]:
            assert time.monotonic() < deadline and proc.poll() is None, f"jobs 0 and 1 did not finish: {statuses}"
            time.sleep(0.2)
            if (sweep / PARTS_DIR).exists():
                statuses = list(load_sweep(sweep)["status"])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert statuses == ["complete", "complete", "pending"] and _parts(sweep)
    again = subprocess.run([sys.executable, "-c", cli, *args, "hydra.launcher.resume=true",
                            "components.bomb.params.hang_at=100,101,102"],
                           cwd=tmp_path, env=sweep_env, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stderr
    df = load_sweep(sweep)
    assert list(df["status"]) == ["complete"] * 3 and list(df["reused"]) == [True, True, False]
    assert not (sweep / PARTS_DIR).exists()
    with h5py.File(sweep / INDEX_FILE, "r") as f:
        assert "parts_generation" not in f.attrs and f.attrs["n_reused"] == 2


# ---------------------------------------------------------------------- jobs in chunks
def _tasks(stdout: str) -> int:
    """How many dask tasks the sweep's jobs ran in (the launcher's log line)."""
    import re

    found = re.findall(r"dask: the jobs ran in (\d+) tasks?\b", stdout)
    assert len(found) == 1, stdout
    return int(found[0])


@pytest.mark.slow
def test_jobs_in_chunks_give_the_results_of_one_job_per_task_bit_for_bit(tmp_path: Path, cosimrun) -> None:
    from cosimrun.storage.results import load_results

    sweep = ["-m", "+experiment=pendulum_switch", "run.tf=0.3", "components.ctrl.params.kp=" + ",".join(
        str(30 + k) for k in range(10)), "hydra.launcher.progress=false", "hydra.launcher.n_workers=2",
        "hydra.launcher.ensemble_size=0"]  # jobs, not the members of an ensemble
    chunked = cosimrun(*sweep, "hydra.launcher.chunk_seconds=600", f"hydra.sweep.dir={tmp_path / 'chunked'}",
                       timeout=300)
    single = cosimrun(*sweep, "hydra.launcher.chunk_seconds=0", f"hydra.sweep.dir={tmp_path / 'single'}",
                      timeout=300)
    assert chunked.returncode == 0 and single.returncode == 0, chunked.stderr + single.stderr
    assert _tasks(single.stdout) == 10 and _tasks(chunked.stdout) < 10
    a, b = load_sweep(tmp_path / "chunked"), load_sweep(tmp_path / "single")
    assert list(a["status"]) == ["complete"] * 10 and list(a["attempts"]) == [1] * 10
    pd.testing.assert_series_equal(a["final.pendulum.q"], b["final.pendulum.q"])
    for rel_a, rel_b in zip(a["path"], b["path"], strict=True):
        ra, rb = load_results(tmp_path / "chunked" / rel_a), load_results(tmp_path / "single" / rel_b)
        for comp in ra.components:
            for port, series in ra.history(comp).items():
                other = rb.history(comp)[port]
                assert series.time.tobytes() == other.time.tobytes() and series.values.tobytes() == \
                    other.values.tobytes(), (rel_a, comp, port)


@pytest.mark.slow
def test_in_a_chunk_a_failing_job_fails_alone_and_a_dying_worker_reruns_only_what_had_not_finished(
    tmp_path: Path, cosimrun, with_crash: list[str]
) -> None:
    """Job 1 fails to build, job 6 kills its worker twice (retries=1): the others complete once each."""
    crash = ",".join("abc" if k == 1 else "0.1" if k == 6 else str(100 + k) for k in range(12))
    proc = cosimrun("-m", *with_crash, "+experiment=bouncing_ball", "run.tf=0.3", "hydra.launcher.progress=false",
                    "hydra.launcher.n_workers=2", "hydra.launcher.chunk_seconds=600",
                    f"components.bomb.params.crash_at={crash}", f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=400)
    assert proc.returncode == 1, proc.stderr
    assert _tasks(proc.stdout) < 13  # 12 jobs and a retry, some of them in chunks
    df = load_sweep(tmp_path / "sweep")
    assert df.loc[1, "status"] == "failed" and "abc" in df.loc[1, "error"] and df.loc[1, "attempts"] == 1
    assert df.loc[6, "status"] == "failed" and df.loc[6, "error"].startswith("WorkerDied:")
    assert df.loc[6, "attempts"] == 2
    others = df.drop(index=[1, 6])
    assert list(others["status"]) == ["complete"] * 10 and set(others["attempts"]) == {1}
    from cosimrun.storage.verify import verify_results

    assert all(not verify_results(tmp_path / "sweep" / rel) for rel in others["path"])


def test_a_job_made_on_its_worker_has_the_config_the_driver_composes(tmp_path: Path) -> None:
    """The payload of a job left to its worker (the shared composition and the job's overrides) makes the config
    Hydra's full composition makes, and says the same job folder and results file."""
    import pickle

    from omegaconf import OmegaConf
    from support.hydra_sweep import sweep_context

    from cosimrun.runner.compose import JobComposer, compose_job

    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    composer = JobComposer(ctx, master)
    jobs = [
        (["+experiment=pendulum_switch", "run.tf=2.5", "components.ctrl.params.kp=41", "master=jacobi"], 3),
        (["+experiment=pendulum_switch", "components.ctrl.params.kp=7", "+extra.note='a b=c, d'"], 1500),
        (["+experiment=pendulum_switch", "storage.file=other.h5"], 4),  # its results file: composed on the driver
    ]
    for overrides, num in jobs:
        lazy, eager = composer.compose(overrides, num, on_worker=True), compose_job(ctx, master, overrides, num)
        assert (lazy.job_dir, lazy.results_path, lazy.task_name, lazy.chdir) == (
            eager.job_dir, eager.results_path, eager.task_name, eager.chdir)
        made = lazy.payload().to_config()
        assert OmegaConf.to_container(made) == OmegaConf.to_container(pickle.loads(eager.payload().config))
        assert (lazy.payload().values is not None) == (num != 4)
    assert composer.compose(*jobs[1]).job_dir == tmp_path / "1k" / "1500"
    assert composer.compose(*jobs[2]).results_path == tmp_path / "4" / "other.h5"


@pytest.mark.slow
def test_in_a_chunk_a_job_past_the_timeout_fails_alone(tmp_path: Path, cosimrun, with_crash: list[str]) -> None:
    """Job 7 hangs inside a chunk: it fails after hydra.launcher.timeout, the others complete once each."""
    hang = ",".join("0.1" if k == 7 else str(100 + k) for k in range(12))
    proc = cosimrun("-m", *with_crash, "+experiment=bouncing_ball", "run.tf=0.3", "hydra.launcher.progress=false",
                    "hydra.launcher.n_workers=2", "hydra.launcher.chunk_seconds=600", "hydra.launcher.timeout=5",
                    f"components.bomb.params.hang_at={hang}", f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=400)
    assert proc.returncode == 1, proc.stderr
    df = load_sweep(tmp_path / "sweep")
    assert df.loc[7, "status"] == "failed" and df.loc[7, "error"] == "timeout after 5 s"
    others = df.drop(index=7)
    assert list(others["status"]) == ["complete"] * 11 and set(others["attempts"]) == {1}
