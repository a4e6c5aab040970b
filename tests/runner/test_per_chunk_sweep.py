"""A sweep's chunk of jobs under ``storage.layout=per_chunk``: one file per chunk, found and reused job by job."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from support.hydra_sweep import sweep_context

from cosimrun.runner import compose, resume, sweep, worker
from cosimrun.runner.index import write_index
from cosimrun.runner.load import job_results, load_run, load_sweep, load_sweep_dataset
from cosimrun.storage.chunkfile import REF_FILE, split_address
from cosimrun.storage.results import load_results
from cosimrun.storage.sweep_index import INDEX_FILE

JOB = ["+experiment=pendulum_switch", "run.tf=0.05"]


def _specs(sweep_dir: Path, layout: str, gains: list[str]) -> list[compose.JobSpec]:
    ctx, master = sweep_context([*JOB, f"hydra.sweep.dir={sweep_dir}"])
    composer = compose.JobComposer(ctx, master)
    return [composer.compose([*JOB, f"components.ctrl.params.kp={kp}", f"storage.layout={layout}"], num,
                             on_worker=True) for num, kp in enumerate(gains)]


def _run_chunk(specs: list[compose.JobSpec], token: str) -> list:
    state = worker.worker_state(_callbacks(specs[0]))
    return worker.run_hydra_chunk([s.payload() for s in specs], sweep.sweep_job, state, token, [1] * len(specs))


def _callbacks(spec: compose.JobSpec):
    from hydra._internal.callbacks import Callbacks

    return Callbacks(spec.payload().to_config())


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[compose.JobSpec], list, Path]:
    """Jobs 0 to 3 as one chunk under per_chunk (job 2 fails to build), and the same jobs one file each."""
    root = tmp_path_factory.mktemp("per_chunk")
    gains = ["40", "41", "abc", "43"]
    specs = _specs(root / "chunked", "per_chunk", gains)
    outcomes = _run_chunk(specs, "t1")
    write_index(root / "chunked" / INDEX_FILE, outcomes)
    singles = _specs(root / "single", "per_job", gains)
    write_index(root / "single" / INDEX_FILE, _run_chunk(singles, "t1"))
    return root / "chunked", specs, outcomes, root / "single"


def test_a_chunk_writes_one_file_a_group_per_job_and_a_failing_job_fails_alone(chunked) -> None:
    sweep_dir, specs, outcomes, _ = chunked
    assert [o.status for o in outcomes] == ["complete", "complete", "failed", "complete"]
    assert "abc" in outcomes[2].error and not outcomes[2].path
    files = sorted((sweep_dir / "chunks").rglob("*.h5"))
    assert files == [sweep_dir / "chunks" / "0k" / "chunk-0-t1-1.h5"]
    for num in (0, 1, 3):
        assert split_address(outcomes[num].path) == (files[0], f"/runs/{num}")
        assert (Path(specs[num].job_dir) / REF_FILE).is_file() and not specs[num].results_path.exists()
        assert load_results(specs[num].job_dir).status == "complete"


def test_chunked_jobs_read_as_jobs_of_their_own_files_do(chunked) -> None:
    sweep_dir, _, _, single = chunked
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete", "complete", "failed", "complete"]
    assert df.loc[1, "path"] == "chunks/0k/chunk-0-t1-1.h5::/runs/1"
    path, member = job_results(sweep_dir, 1)
    assert member is None and split_address(path)[1] == "/runs/1"
    for num in (0, 1, 3):
        ours, theirs = load_run(sweep_dir, num), load_run(single, num)
        for comp in theirs.components:
            for port, series in theirs.history(comp).items():
                other = ours.history(comp)[port]
                assert series.time.tobytes() == other.time.tobytes() and series.values.tobytes() == \
                    other.values.tobytes(), (num, comp, port)
        assert load_results(sweep_dir / str(num)).address == ours.address  # the job's folder finds it too
    a, b = load_sweep_dataset(sweep_dir, "pendulum"), load_sweep_dataset(single, "pendulum")
    for name in ("time", "q", "n_samples"):
        np.testing.assert_array_equal(a[name].values, b[name].values)


def test_a_resume_reuses_the_complete_groups_by_their_config_and_checksums(chunked) -> None:
    sweep_dir, specs, _, _ = chunked
    previous = resume.PreviousIndex(sweep_dir / INDEX_FILE)
    for num in (0, 1, 3):
        reuse, outcome = resume.take_over(specs[num], previous)
        assert reuse.ok and outcome is not None and outcome.reused and outcome.status == "complete"
        assert split_address(outcome.path)[1] == f"/runs/{num}"
    assert resume.take_over(specs[2], previous) == (resume.Reuse(False), None)
    changed = _specs(sweep_dir, "per_chunk", ["40", "99", "abc", "43"])[1]
    assert resume.check_reuse(changed) == resume.Reuse(False, "rerun: configuration changed")


def test_a_job_run_again_lands_in_another_chunk_file_and_its_folder_follows(chunked, tmp_path: Path) -> None:
    sweep_dir, specs, _, _ = chunked
    again = _run_chunk([specs[1]], uuid.uuid4().hex[:8])
    assert again[0].status == "complete"
    file, group = split_address(again[0].path)
    assert file.name.startswith("chunk-1-") and group == "/runs/1"
    assert len(list((sweep_dir / "chunks" / "0k").glob("*.h5"))) == 2
    assert load_results(specs[1].job_dir).path == file
    assert resume.results_location(specs[1]).results == again[0].path


@pytest.mark.slow
def test_a_per_chunk_sweep_whose_worker_dies_keeps_the_finished_jobs_and_a_resume_reuses_them(
    tmp_path: Path, cosimrun, with_crash: list[str]
) -> None:
    """Job 3 kills its worker in the middle of its chunk (twice: retries=1): the jobs it had finished keep their
    groups, its own group is never complete, and a resume without the crash reuses the others and runs it."""
    from cosimrun.storage.verify import verify_results

    sweep_dir = tmp_path / "sweep"
    crash = ",".join("0.1" if k == 3 else str(100 + k) for k in range(6))
    common = ["-m", *with_crash, "+experiment=bouncing_ball", "run.tf=0.3", "storage.layout=per_chunk",
              "hydra.launcher.progress=false", "hydra.launcher.n_workers=1", "hydra.launcher.chunk_seconds=600",
              "hydra.launcher.ensemble_size=0", f"hydra.sweep.dir={sweep_dir}"]
    proc = cosimrun(*common, f"components.bomb.params.crash_at={crash}", timeout=400)
    assert proc.returncode == 1, proc.stderr
    df = load_sweep(sweep_dir)
    assert df.loc[3, "status"] == "failed" and df.loc[3, "error"].startswith("WorkerDied:")
    others = df.drop(index=3)
    assert list(others["status"]) == ["complete"] * 5 and set(others["attempts"]) == {1}
    assert all("::/runs/" in rel and not verify_results(sweep_dir / rel) for rel in others["path"])
    try:  # its last attempt's group: never closed, or not even on disk when its worker died
        killed = load_results(sweep_dir / "3").status
    except FileNotFoundError:
        killed = "missing"
    assert killed in ("running", "missing")

    again = cosimrun(*common, "components.bomb.params.crash_at=" + ",".join(str(100 + k) for k in range(6)),
                     "hydra.launcher.resume=true", timeout=400)
    assert again.returncode == 0, again.stderr
    df = load_sweep(sweep_dir)
    assert list(df["status"]) == ["complete"] * 6
    assert list(df["reused"]) == [True, True, True, False, True, True]
    assert load_results(sweep_dir / "3").status == "complete"
