"""Sweeps: the index, ``load_sweep``/``load_sweep_dataset``, and ``cosimrun -m`` end to end on dask.

The end-to-end tests run the command in a subprocess on a ``LocalCluster``
(two single-threaded workers); the tests against a separately started
scheduler are in ``test_dask_cluster.py``.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from support.hydra_sweep import sweep_context

from cosimrun.runner import compose, resume, worker
from cosimrun.runner import index as sweep_index
from cosimrun.runner.index import write_index
from cosimrun.runner.ledger import finish, ledger_for
from cosimrun.runner.load import load_sweep, load_sweep_dataset
from cosimrun.runner.outcome import JobOutcome, objective_value
from cosimrun.storage import HDF5Writer
from cosimrun.storage.sweep_index import INDEX_FILE


def _results(path: Path, times: list[float], h: list[float], status: str = "complete") -> Path:
    """A small results file: component ``ball`` with a real port ``h`` and a string port ``mode``."""
    with HDF5Writer(path, experiment="t", compression=None) as w:
        w.add_component("ball", {"h": ("m", "real"), "mode": (None, "string")})
        micro = [0] + [1 if times[i] == times[i - 1] else 0 for i in range(1, len(times))]
        w.append("ball", times, micro, {"h": h, "mode": ["up" if x > 0.5 else "down" for x in h]})
        if status != "complete":
            w.close(status, error="boom")
    return path


def _outcome(num: int, status: str, overrides: list[str], path: str = "", **kw: object) -> JobOutcome:
    return JobOutcome(num=num, status=status, overrides=overrides, path=path, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- index
def test_index_round_trip_typed_columns_and_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f0 = _results(tmp_path / "0" / "results.h5", [0.0, 1.0], [1.0, 0.25])
    f1 = _results(tmp_path / "1" / "results.h5", [0.0, 2.0], [1.0, 0.5], status="failed")
    outcomes = [
        _outcome(
            1,
            "failed",
            ["+experiment=ball", "components.ball.params.e=1", "master=jacobi", "status=x", "hydra.verbose=true"],
            str(f1),
            error="ValueError: boom",
            traceback="Traceback ...",
            wall_time_s=0.5,
            summaries={"ball.h": 0.5, "ball.mode": "down"},
        ),
        _outcome(
            0,
            "complete",
            ["+experiment=ball", "components.ball.params.e=0.5", "master=gauss_seidel", "status=y"],
            str(f0),
            wall_time_s=0.25,
            summaries={"ball.h": 0.25, "ball.mode": "down", "ball.ok": True},
        ),
        _outcome(2, "pending", ["+experiment=ball", "components.ball.params.e=0.75", "master=jacobi", "status=z"]),
    ]
    write_index(tmp_path / INDEX_FILE, outcomes, {"experiment": "ball"})
    df = load_sweep(tmp_path)
    assert list(df.index) == [0, 1, 2] and df.index.name == "run"
    assert list(df["status"]) == ["complete", "failed", "pending"]
    assert df["components.ball.params.e"].dtype == np.float64  # 0.5 and 1 (an int) and 0.75
    assert list(df["components.ball.params.e"]) == [0.5, 1.0, 0.75]
    assert list(df["master"]) == ["gauss_seidel", "jacobi", "jacobi"]
    assert list(df["param.status"]) == ["y", "x", "z"]  # a swept key named like a column keeps both
    assert "hydra.verbose" not in df.columns
    assert df["final.ball.h"].iloc[0] == 0.25 and math.isnan(df["final.ball.h"].iloc[2])
    assert list(df["path"]) == ["0/results.h5", "1/results.h5", ""]
    assert df["error"].iloc[1] == "ValueError: boom" and df["traceback"].iloc[1] == "Traceback ..."
    assert df["reused"].dtype == bool
    assert df.attrs["params"] == ["experiment", "components.ball.params.e", "master", "param.status"]
    assert df.attrs["summaries"] == ["final.ball.h", "final.ball.mode", "final.ball.ok"]
    assert Path(df.attrs["sweep_dir"]) == tmp_path

    # external links, resolved relative to the index file from anywhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with h5py.File(tmp_path / INDEX_FILE, "r") as f:
        assert sorted(f["runs"]) == ["0", "1"]
        assert f["runs/0"].attrs["status"] == "complete"
        assert f["runs/1"].attrs["status"] == "failed"
        assert list(f["runs/0/components/ball/h"][...]) == [1.0, 0.25]
        assert f.attrs["n_jobs"] == 3 and f.attrs["n_failed"] == 1 and f.attrs["n_pending"] == 1


def test_index_reads_with_xarray_even_with_a_dangling_link(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    f0 = _results(tmp_path / "0" / "results.h5", [0.0, 1.0], [1.0, 0.25])
    write_index(tmp_path / INDEX_FILE, [_outcome(0, "complete", ["a=1"], str(f0), summaries={"ball.h": 0.25})], {})
    f0.unlink()
    with xr.open_dataset(tmp_path / INDEX_FILE, engine="h5netcdf") as ds:
        assert list(ds["run"].values) == [0]
        assert ds["status"].values[0] == "complete"
        assert float(ds["final.ball.h"][0]) == 0.25


def test_index_links_a_partial_file(tmp_path: Path) -> None:
    writer = HDF5Writer(tmp_path / "0" / "results.h5", experiment="t")
    try:
        write_index(tmp_path / INDEX_FILE, [_outcome(0, "failed", ["a=1"], str(writer.path))], {})
        with h5py.File(tmp_path / INDEX_FILE, "r") as f:
            link = f["runs"].get("0", getlink=True)
            assert link.filename == "0/results.h5.partial"
    finally:
        writer.close()


def test_override_items_are_typed_and_skip_hydra_and_deletions() -> None:
    items = sweep_index._override_items(
        ["+experiment=x", "a.b=0.5", "c=3", "d=true", "e=[1,2]", "~f", "hydra.job.chdir=true", "++g=hi"]
    )
    assert items == {"experiment": "x", "a.b": 0.5, "c": 3, "d": True, "e": "[1,2]", "g": "hi"}


def test_load_sweep_dataset_pads_runs_or_puts_them_on_a_grid(tmp_path: Path) -> None:
    pytest.importorskip("xarray")
    f0 = _results(tmp_path / "0" / "results.h5", [0.0, 1.0, 1.0, 2.0], [1.0, 0.0, 1.0, 0.5])
    f1 = _results(tmp_path / "1" / "results.h5", [0.0, 2.0], [0.0, 1.0])
    outcomes = [
        _outcome(0, "complete", ["k=1"], str(f0)),
        _outcome(1, "complete", ["k=2"], str(f1)),
        _outcome(2, "failed", ["k=3"], error="no file"),
    ]
    write_index(tmp_path / INDEX_FILE, outcomes, {})
    ds = load_sweep_dataset(tmp_path, "ball")
    assert ds.sizes == {"run": 3, "sample": 4}
    assert list(ds["n_samples"].values) == [4, 2, 0]
    np.testing.assert_array_equal(ds["h"].sel(run=0), [1.0, 0.0, 1.0, 0.5])
    np.testing.assert_array_equal(ds["h"].sel(run=1)[:2], [0.0, 1.0])
    assert np.isnan(ds["h"].sel(run=1)[2:]).all() and np.isnan(ds["h"].sel(run=2)).all()
    assert list(ds["micro"].sel(run=0).values) == [0, 0, 1, 0]
    assert ds["h"].attrs["units"] == "m"
    assert list(ds["k"].values) == [1, 2, 3] and list(ds["status"].values) == ["complete", "complete", "failed"]

    grid = load_sweep_dataset(load_sweep(tmp_path), "ball", ["h", "mode"], time=[0.0, 0.5, 1.0, 1.5, 3.0])
    assert grid.sizes == {"run": 3, "time": 5}
    # at the event instant t=1 the value after it (1.0) counts; outside a run's interval NaN
    np.testing.assert_allclose(grid["h"].sel(run=0).values[:4], [1.0, 0.5, 1.0, 0.75])
    np.testing.assert_allclose(grid["h"].sel(run=1).values[:4], [0.0, 0.25, 0.5, 0.75])
    assert np.isnan(grid["h"].values[:, 4]).all()
    assert list(grid["mode"].sel(run=0).values) == ["up", "up", "up", "up", ""]  # held; "down" only at t=1-

    # a filtered frame selects runs
    df = load_sweep(tmp_path)
    assert list(load_sweep_dataset(df[df.status == "complete"], "ball")["run"].values) == [0, 1]


def test_objective_for_optimizing_sweepers() -> None:
    done = _outcome(0, "complete", [], wall_time_s=0.5, summaries={"ball.h": 0.25, "ball.mode": "up"})
    assert objective_value(done, "final.ball.h") == 0.25
    assert objective_value(done, "wall_time_s") == 0.5
    assert math.isnan(objective_value(done, "final.ball.mode"))
    assert math.isnan(objective_value(_outcome(1, "failed", [], summaries={"ball.h": 1.0}), "final.ball.h"))
    with pytest.raises(TypeError, match="hydra.launcher.objective"):
        float(done)
    done.objective = 0.25
    assert float(done) == 0.25


def test_started_marks_tell_a_lost_job_that_ran_from_one_that_waited(tmp_path: Path) -> None:
    job_dir = tmp_path / "3"
    assert not worker.started(job_dir, "tok", 1)
    worker.mark_started(job_dir, "tok", 1)
    worker.mark_started(job_dir, "tok", 2)
    assert worker.started(job_dir, "tok", 1) and worker.started(job_dir, "tok", 2)
    assert not worker.started(job_dir, "tok", 3) and not worker.started(job_dir, "other", 1)


def test_a_lost_result_is_a_worker_death_never_nonetype(tmp_path: Path) -> None:
    from hydra_plugins.cosimrun_dask_launcher._returns import failed_outcome, timed_out

    spec = compose.JobSpec(4, ["a=1"], None, tmp_path / "4", tmp_path / "4" / "results.h5")
    lost = failed_outcome(spec, 2, None)
    assert lost.status == "failed" and lost.attempts == 2
    assert lost.error.startswith("WorkerDied: the worker process running this job died 2 times")
    assert "NoneType" not in lost.error + lost.traceback
    late = timed_out(spec, 1, 2.5, "tcp://w:1", "restarted")
    assert (late.status, late.error, late.worker) == ("failed", "timeout after 2.5 s", "tcp://w:1")
    assert late.path == str(spec.results_path)


def test_ledger_notes_and_interruptions_in_the_summary(tmp_path: Path) -> None:
    ledger = ledger_for(tmp_path)
    ledger.add_pending(0, ["a=1"])
    ledger.add_pending(1, ["a=2"])
    ledger.enter(_outcome(0, "complete", ["a=1"], note="rerun: results file damaged (x)", job_time_s=0.1))
    ledger.interrupt_pending("terminated by SIGTERM")
    out = io.StringIO()
    assert finish(out) == 1
    text = out.getvalue()
    assert "2 jobs, 1 complete, 0 failed, 1 interrupted" in text and "  #0 rerun: results file damaged (x)" in text
    assert f"hydra.sweep.dir={tmp_path} hydra.launcher.resume=true" in text
    df = load_sweep(tmp_path)
    assert list(df["status"]) == ["complete", "interrupted"]
    assert list(df["error"]) == ["", "the sweep was terminated by SIGTERM"]
    assert list(df["note"]) == ["rerun: results file damaged (x)", ""]


def test_ledger_summary_and_exit_code(tmp_path: Path) -> None:
    ledger = ledger_for(tmp_path)
    ledger.add_pending(0, ["a=1"])
    ledger.add_pending(1, ["a=2"])
    ledger.enter(_outcome(0, "complete", ["a=1"], job_time_s=0.1))
    ledger.enter(_outcome(1, "failed", ["a=2"], error="ValueError: no", job_time_s=0.1))
    out = io.StringIO()
    assert finish(out) == 1
    text = out.getvalue()
    assert "2 jobs, 1 complete, 1 failed" in text and "#1 failed: a=2: ValueError: no" in text
    assert str(tmp_path / INDEX_FILE) in text
    assert list(load_sweep(tmp_path)["status"]) == ["complete", "failed"]
    assert finish(io.StringIO()) == 0  # nothing left to report


def test_ledger_rewrites_the_index_at_most_a_tenth_of_the_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the ledger's clock (a fake one here, so that a loaded machine sees the same): a rewrite that takes 50 ms
    is followed by 500 ms without one (it takes a tenth of the time), and the next comes with the first outcome
    entered after that."""
    from types import SimpleNamespace

    from cosimrun.runner import ledger as ledger_module
    from cosimrun.runner.ledger import SweepLedger

    now = [100.0]
    writes: list[float] = []

    def slow_write(path, generation, seq, outcomes):  # a slow disk: 50 ms per write of the new rows
        writes.append(now[0])
        now[0] += 0.05

    monkeypatch.setattr(ledger_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(ledger_module, "write_index", lambda *args, **kwargs: None)  # the first, whole write
    monkeypatch.setattr(ledger_module, "write_index_rows", slow_write)
    ledger = SweepLedger(tmp_path, min_interval=0.0)
    num = 0
    while now[0] < 101.2:  # an outcome every 10 ms
        ledger.enter(_outcome(num, "complete", [f"a={num}"], job_time_s=0.01))
        num += 1
        now[0] += 0.01
    gaps = [b - a for a, b in zip(writes, writes[1:], strict=False)]
    assert len(writes) == 3 and all(0.55 - 1e-9 <= gap <= 0.56 + 1e-9 for gap in gaps), writes
    before = len(writes)
    ledger.enter(_outcome(num, "complete", [f"a={num}"], job_time_s=0.01))
    ledger.flush()
    assert len(writes) == before + 1  # what is new is written once, by the record or by the flush


# ---------------------------------------------------------------------- end to end
def _statuses(sweep_dir: Path) -> list[str]:
    return list(load_sweep(sweep_dir)["status"])


def test_dask_sweep_records_failures_and_resumes(tmp_path: Path, cosimrun) -> None:
    sweep_dir = tmp_path / "sweep"
    args = [
        "-m",
        "+experiment=bouncing_ball",
        "run.tf=1",
        "components.ball.params.e=0.5,0.9,-1",
        "hydra/launcher=dask",
        "hydra.launcher.n_workers=2",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    proc = cosimrun(*args)
    assert proc.returncode == 1, proc.stderr
    assert "3 jobs, 2 complete, 1 failed" in proc.stderr
    assert "#2 failed" in proc.stderr and "components.ball.params.e" in proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete", "failed"]
    assert list(df["components.ball.params.e"]) == [0.5, 0.9, -1.0]
    assert df["error"].iloc[2].startswith("ConfigError: components.ball.params.e")
    assert "Traceback" in df["traceback"].iloc[2]
    assert list(df["path"])[:2] == ["0/results.h5", "1/results.h5"]
    assert (df["wall_time_s"].iloc[:2] > 0).all() and {"final.ball.h", "final.ball.v"} <= set(df.columns)
    assert list(df["reused"]) == [False] * 3
    first_mtime = (sweep_dir / "0" / "results.h5").stat().st_mtime_ns
    (sweep_dir / "1" / "results.h5").unlink()

    proc = cosimrun(*args, "hydra.launcher.resume=true")
    assert proc.returncode == 1, proc.stderr
    assert "3 jobs, 2 complete (1 reused), 1 failed" in proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete", "failed"]
    assert list(df["reused"]) == [True, False, False]
    assert list(df["attempts"]) == [0, 1, 1]
    assert (sweep_dir / "0" / "results.h5").stat().st_mtime_ns == first_mtime
    assert (sweep_dir / "1" / "results.h5").exists()


def _histories(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with h5py.File(path, "r") as f:
        f["components"].visititems(
            lambda name, obj: out.__setitem__(name, obj[...].tobytes()) if isinstance(obj, h5py.Dataset) else None
        )
        for table in ("events", "mode_switches"):
            for name, ds in f[table].items():
                out[f"{table}/{name}"] = repr(ds[...].tolist()).encode()
    return out


def test_histories_are_identical_serial_on_one_and_on_two_workers(tmp_path: Path, cosimrun) -> None:
    args = [
        "-m",
        "+experiment=pendulum_switch",
        "run.tf=2",
        "components.pendulum.modes.nonlinear.params.length=0.5",
        "master=hybrid,gauss_seidel",  # events located by rollback; plain stepping
    ]
    runs = {
        "serial": ["hydra/launcher=basic"],
        "one": ["hydra/launcher=dask", "hydra.launcher.n_workers=1"],
        "two": ["hydra/launcher=dask", "hydra.launcher.n_workers=2"],
    }
    for name, launcher in runs.items():
        proc = cosimrun(*args, *launcher, f"hydra.sweep.dir={tmp_path / name}")
        assert proc.returncode == 0, proc.stderr
        assert _statuses(tmp_path / name) == ["complete"] * 2
    for job in range(2):
        reference = _histories(tmp_path / "serial" / str(job) / "results.h5")
        assert len(reference) > 10
        for name in ("one", "two"):
            assert _histories(tmp_path / name / str(job) / "results.h5") == reference, (name, job)


def test_fmu_components_run_inside_dask_workers(tmp_path: Path, cosimrun) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        "+experiment=pendulum_switch_fmu",
        "run.tf=1",
        "components.pendulum.modes.nonlinear.params.length=0.8,1.2",
        "hydra.launcher.n_workers=2",
        f"hydra.sweep.dir={sweep_dir}",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert _statuses(sweep_dir) == ["complete"] * 2
    index = load_sweep(sweep_dir)
    assert sorted(index["components.pendulum.modes.nonlinear.params.length"]) == [0.8, 1.2]
    assert set(index["worker"]) != {""}


def test_basic_launcher_goes_on_after_a_failed_job(tmp_path: Path, cosimrun) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        *[
            "-m",
            "+experiment=bouncing_ball",
            "run.tf=0.5",
            "components.ball.params.e=-1,0.5",
            "hydra/launcher=basic",
            f"hydra.sweep.dir={sweep_dir}",
        ]
    )
    assert proc.returncode == 1, proc.stderr
    assert _statuses(sweep_dir) == ["failed", "complete"]
    assert "2 jobs, 1 complete, 1 failed" in proc.stderr


def test_the_default_sweeper_checks_every_job_before_any_runs(tmp_path: Path, cosimrun) -> None:
    sweep_dir = tmp_path / "sweep"
    args = ["-m", "+experiment=pendulum_switch", "run.tf=0.1", f"hydra.sweep.dir={sweep_dir}", "hydra/launcher=basic"]
    bad = cosimrun(*args, "components.ctrl.params.kp=1,2", "+x=1", "components.ctrl.params.nope=3,4")
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.splitlines() == [
        "cosimrun: error: components.ctrl.params.nope: not in the config; "
        "add it with '+components.ctrl.params.nope=VALUE' (the builder checks it)"
    ]
    assert not sweep_dir.exists()  # nothing ran, nothing left
    good = cosimrun(*args, "components.ctrl.params.kp=1,2")
    assert good.returncode == 0, good.stderr
    assert "hydra_plugins.cosimrun_sweeper.sweeper.CosimrunSweeper" in (sweep_dir / "multirun.yaml").read_text()
    assert _statuses(sweep_dir) == ["complete", "complete"]


def test_sweeper_params_and_a_cluster_from_config_files(tmp_path: Path, cosimrun) -> None:
    """``hydra.sweeper.params`` in a config file, and a launcher config whose ``cluster`` is a ``_target_``."""
    conf = tmp_path / "conf"
    (conf / "sweeps").mkdir(parents=True)
    (conf / "sweeps" / "ball.yaml").write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      components.ball.params.e: 0.6,0.7\n"
    )
    (conf / "hydra" / "launcher").mkdir(parents=True)
    (conf / "hydra" / "launcher" / "mycluster.yaml").write_text(
        "defaults:\n  - dask\n  - _self_\n"
        "cluster:\n  _target_: distributed.LocalCluster\n  n_workers: 1\n  threads_per_worker: 1\n"
        "  dashboard_address: null\n"
    )
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        f"--config-dir={conf}",
        "+experiment=bouncing_ball",
        "+sweeps=ball",
        "run.tf=0.5",
        "hydra/launcher=mycluster",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr
    assert "dask: LocalCluster" in proc.stdout
    df = load_sweep(sweep_dir)
    assert list(df["components.ball.params.e"]) == [0.6, 0.7]
    assert list(df["status"]) == ["complete", "complete"]


def test_the_plugin_modules_hydra_scans_import_neither_dask_nor_the_engine() -> None:
    import subprocess
    import sys

    code = (
        "import sys, hydra_plugins.cosimrun_dask_launcher.dask_launcher, hydra_plugins.cosimrun_sweeper.sweeper; "
        "print(any(k in ('distributed', 'pint', 'cosimrun.runner.sweep') or k.startswith('dask') for k in sys.modules))"
    )
    env = dict(os.environ)
    shim = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_optuna_sweeper_optimizes_an_index_column(tmp_path: Path, cosimrun) -> None:
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        "+experiment=bouncing_ball",
        "run.tf=1",
        "components.ball.params.e=interval(0.3, 0.95)",
        "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=4",
        "hydra.sweeper.n_jobs=2",
        "hydra.sweeper.direction=maximize",
        "hydra.launcher.n_workers=2",
        "hydra.launcher.objective=final.ball.h",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr
    assert "Best value" in proc.stdout
    df = load_sweep(sweep_dir)
    assert list(df.index) == [0, 1, 2, 3] and list(df["status"]) == ["complete"] * 4  # two batches, one index


# ---------------------------------------------------------------------- shared compositions
def test_shared_compositions_equal_full_compositions(tmp_path: Path) -> None:
    import itertools

    from omegaconf import OmegaConf

    values = [
        ("run.tf=2", "components.ctrl.params.kp=40"),
        ("run.tf=2.5", "components.ctrl.params.kp=41"),
        ("run.tf=3", "components.ctrl.params.kp=42.5"),
    ]
    masters = ["master=gauss_seidel", "master=jacobi"]
    cli = [
        "+experiment=pendulum_switch",
        "run.tf=2,2.5,3",
        "components.ctrl.params.kp=40,41,42.5",
        "master=gauss_seidel,jacobi",
        "+extra.note='a b=c, d'",
        'description="quoted: x=1"',
        "hydra.launcher.n_workers=2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    ctx, master = sweep_context(cli)
    jobs = [
        ["+experiment=pendulum_switch", tf, kp, m, "+extra.note='a b=c, d'", 'description="quoted: x=1"']
        for (tf, kp), m in itertools.product(values, masters)
    ]
    jobs.append(["+experiment=pendulum_switch", "run.tf=2", "components.ctrl.params.kp=40"])  # a base of its own
    jobs.append(["+experiment=pendulum_switch", "master=jacobi"])  # no value overrides: a composition of its own
    jobs.append(["+experiment=pendulum_switch", "+extra.note=1", "extra.note=2"])  # overlapping keys: in full
    composer = compose.JobComposer(ctx, master)
    for num, overrides in enumerate(jobs):
        shared = composer.compose(overrides, num)
        full = compose.compose_job(ctx, master, overrides, num)
        assert OmegaConf.to_yaml(shared.config, resolve=False) == OmegaConf.to_yaml(full.config, resolve=False)
        assert (shared.job_dir, shared.results_path) == (full.job_dir, full.results_path)
        for node in ("", "hydra", "components"):
            a = OmegaConf.select(shared.config, node) if node else shared.config
            b = OmegaConf.select(full.config, node) if node else full.config
            flags = (OmegaConf.is_struct(a), OmegaConf.is_readonly(a))
            assert flags == (OmegaConf.is_struct(b), OmegaConf.is_readonly(b))
        assert resume.expected_config_yaml(shared) == resume.expected_config_yaml(full) != ""
        assert shared.config is None  # let go once pickled
        shared_back, full_back = shared.payload().to_config(), full.payload().to_config()
        assert OmegaConf.to_yaml(shared_back) == OmegaConf.to_yaml(full_back)
    assert composer.shared == len(jobs) - 1
    last = composer.compose(jobs[0], 99).config
    assert list(last.hydra.overrides.task) == jobs[0]
    assert last.hydra.job.num == 99 and last.hydra.job.id == "cosimrun_99"
    assert "master=gauss_seidel" in last.hydra.job.override_dirname
    assert last.run.tf == 2 and last.components.ctrl.params.kp == 40 and last.extra.note == "a b=c, d"


def test_job_returns_read_their_configs_from_the_payload_when_asked(tmp_path: Path) -> None:
    from hydra_plugins.cosimrun_dask_launcher._returns import SweepJobReturn

    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    spec = compose.JobComposer(ctx, master).compose(["+experiment=pendulum_switch", "run.tf=3"], 5)
    outcome = _outcome(5, "failed", spec.overrides, error="boom")
    ret = SweepJobReturn.of(spec, outcome)
    assert ret.status.name == "COMPLETED" and ret.return_value is outcome  # a failed job does not stop Hydra
    assert ret._configs is None  # nothing unpickled yet
    assert "hydra" not in ret.cfg and ret.cfg.run.tf == 3
    assert ret.hydra_cfg.hydra.job.num == 5 and ret.hydra_cfg.run.tf == 3
    assert ret.task_name == "cosimrun" and ret.working_dir == os.getcwd()
    assert ret.overrides == ["+experiment=pendulum_switch", "run.tf=3"]


def test_shared_compositions_raise_hydras_errors(tmp_path: Path) -> None:
    from hydra.errors import ConfigCompositionException

    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    composer = compose.JobComposer(ctx, master)
    for overrides in (["+experiment=pendulum_switch", "no.such.key=1"], ["+experiment=nope", "run.tf=1"]):
        with pytest.raises(ConfigCompositionException) as shared:
            composer.compose(overrides, 0)
        with pytest.raises(ConfigCompositionException) as full:
            compose.compose_job(ctx, master, overrides, 0)
        assert str(shared.value) == str(full.value)
    assert composer.shared == 0


def test_the_fork_server_starts_early_only_for_a_sweep_on_a_local_cluster() -> None:
    from hydra_plugins.cosimrun_dask_launcher import _forkserver

    assert not _forkserver.prestart(["+experiment=pendulum_switch"])
    assert not _forkserver.prestart(["-m", "+experiment=pendulum_switch", "hydra/launcher=basic"])
    assert not _forkserver.prestart(["-m", "a=1,2", "hydra.launcher.address=tcp://10.0.0.1:8786"])
    assert not _forkserver._other_launch("hydra/launcher=dask")
    if not _forkserver.available():
        pytest.skip("no fork server on this platform")
    assert _forkserver.prestart(["--multirun", "+experiment=pendulum_switch", "run.tf=1,2"])
    from multiprocessing import forkserver

    assert forkserver._forkserver._forkserver_pid is not None  # running, with cosimrun's preload
    assert forkserver._forkserver._preload_modules == _forkserver.preload()
    assert "cosimrun.components.mechanics" in _forkserver.preload()


def test_a_fork_server_that_cannot_start_early_does_not_stop_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra_plugins.cosimrun_dask_launcher import _forkserver

    def broken() -> None:
        raise OSError("no space left for the socket")

    monkeypatch.setattr(_forkserver, "start", broken)
    assert _forkserver.prestart(["-m", "+experiment=pendulum_switch", "run.tf=1,2"]) is False
