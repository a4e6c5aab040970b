"""The dask launcher against a real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1.

The cluster (see ``conftest.py``) runs two single-threaded workers under
nannies and reports a task as failed at the first worker that dies running it;
the component type ``crash`` (a test-only distribution on the workers'
``PYTHONPATH``) ends its worker process with ``os._exit`` in the middle of a run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cosimrun.runner.load import load_sweep
from cosimrun.storage import load_results

pytestmark = pytest.mark.slow


def test_sweep_on_an_existing_cluster(dask_cluster, cosimrun, tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        "+experiment=bouncing_ball",
        "run.tf=1",
        "components.ball.params.e=0.5,0.7,0.9",
        "hydra/launcher=dask",
        f"hydra.launcher.address={dask_cluster.address}",
        "hydra.launcher.ensemble_size=0",  # one results file per job
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 0, proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete"] * 3
    assert all(w.startswith("tcp://127.0.0.1:") for w in df["worker"])
    for rel in df["path"]:
        res = load_results(sweep_dir / rel)
        assert res.status == "complete" and res.trajectory("ball", "h")[0][-1] == pytest.approx(1.0)
    # the launcher leaves a cluster it did not start running
    assert dask_cluster.scheduler.poll() is None and all(w.poll() is None for w in dask_cluster.workers)


def test_a_worker_dying_mid_job_is_retried_then_recorded_as_failed(
    dask_cluster, cosimrun, with_crash: list[str], tmp_path: Path
) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        *with_crash,
        "+experiment=bouncing_ball",
        "run.tf=1",
        "components.bomb.params.crash_at=5,0.3,7",  # only job 1 reaches its crash time
        "hydra/launcher=dask",
        f"hydra.launcher.address={dask_cluster.address}",
        "hydra.launcher.retries=1",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 1, proc.stderr
    assert "3 jobs, 2 complete, 1 failed" in proc.stderr
    assert "#1 failed" in proc.stderr and "died" in proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "failed", "complete"]
    assert list(df["attempts"]) == [1, 2, 1]
    assert df["error"].iloc[1].startswith("WorkerDied: the worker process running this job died 2 times")
    # what the crashed run computed before the crash is kept in its partial file
    partial = sweep_dir / "1" / "results.h5.partial"
    assert partial.exists() and load_results(partial).status == "running"


def test_a_worker_dying_on_a_local_cluster(cosimrun, with_crash: list[str], tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(
        "-m",
        *with_crash,
        "+experiment=bouncing_ball",
        "run.tf=1",
        "components.bomb.params.crash_at=0.3,5",
        "hydra/launcher=dask",
        "hydra.launcher.n_workers=2",
        "hydra.launcher.retries=0",
        f"hydra.sweep.dir={sweep_dir}",
    )
    assert proc.returncode == 1, proc.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["failed", "complete"]
    assert list(df["attempts"]) == [1, 1]
    assert df["error"].iloc[0].startswith("WorkerDied: the worker process running this job died once")


def _profiler_enabled() -> bool:
    import dask

    return bool(dask.config.get("distributed.worker.profile.enabled"))


@pytest.mark.parametrize("quiet", [True, False])
def test_a_local_cluster_has_quiet_workers_unless_asked_not_to(quiet: bool) -> None:
    import weakref

    import dask
    import distributed  # noqa: F401  (its config defaults, before the context below records the config)

    from hydra_plugins.cosimrun_dask_launcher import _cluster
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher

    launcher = DaskLauncher(n_workers=1, dashboard_address=":0", quiet_workers=quiet)
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):  # restored afterwards
        client = _cluster.connect(launcher)
        try:
            seen = client.run(_profiler_enabled)
            ticks = client.run(lambda: str(dask.config.get("distributed.admin.tick.interval")))
        finally:
            _cluster.close(weakref.ref(launcher))
    assert list(seen.values()) == [not quiet]
    assert list(ticks.values()) == (["1s"] if quiet else ["20ms"])
