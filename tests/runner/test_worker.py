"""The worker's job runner: the same job directory, files, logging and task view as Hydra's ``run_job``."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any

import h5py
import pytest
from support.hydra_sweep import RecordingCallback, sweep_context

from cosimrun.runner import compose, resume, sweep, worker

log = logging.getLogger(__name__)

SWEEP_JOB = ["+experiment=pendulum_switch", "run.tf=0.05", "components.ctrl.params.kp=41"]
"""A job of cosimrun's own sweep task (whose configs are checked key by key)."""
JOB = [*SWEEP_JOB, "+extra.out=${hydra:runtime.output_dir}"]
"""A job of the test's own task, with a key of its own."""


def _spec(tmp_path: Path, *hydra_overrides: str, job: list[str] = JOB) -> compose.JobSpec:
    ctx, master = sweep_context([*job, f"hydra.sweep.dir={tmp_path / 'sweep'}", *hydra_overrides])
    return compose.compose_job(ctx, master, job, 3)


def _task(cfg: Any) -> dict[str, Any]:
    """Notes what a task sees; logs one line (into the job's log file)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    log.info("task ran")
    hydra = HydraConfig.get()
    if cfg.extra.get("fail"):
        raise ValueError("the task failed")
    return {
        "cfg": OmegaConf.to_container(cfg, resolve=True),
        "keys": sorted(cfg),
        "output_dir": hydra.runtime.output_dir,
        "num": hydra.job.num,
        "cwd": os.getcwd(),
        "env": os.environ.get("COSIMRUN_TEST_ENV"),
    }


def _callbacks(spec: compose.JobSpec) -> Any:
    """The callbacks of the job's config, as Hydra makes them from the sweep's config."""
    from hydra._internal.callbacks import Callbacks

    return Callbacks(spec.payload().to_config())


def _hydra_run_job(spec: compose.JobSpec) -> Any:
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    config = spec.payload().to_config()
    return run_job(
        hydra_context=HydraContext(config_loader=None, callbacks=_callbacks(spec)),  # type: ignore[arg-type]
        task_function=_task,
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def _files(job_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((job_dir / ".hydra").iterdir())}


@pytest.mark.parametrize("chdir", [False, True])
def test_run_composed_job_does_what_hydras_run_job_does(tmp_path: Path, chdir: bool) -> None:
    spec = _spec(
        tmp_path,
        f"hydra.job.chdir={str(chdir).lower()}",
        "+hydra.job.env_set.COSIMRUN_TEST_ENV=hello",
        "+hydra.callbacks.rec._target_=support.hydra_sweep.RecordingCallback",
    )
    cwd = os.getcwd()
    RecordingCallback.calls.clear()
    theirs = _hydra_run_job(spec)
    their_files = _files(spec.job_dir)
    their_log = (spec.job_dir / "cosimrun.log").read_text()
    ours = worker.run_composed_job(spec.payload(), _task, _callbacks(spec))
    assert os.getcwd() == cwd and "COSIMRUN_TEST_ENV" not in os.environ

    assert ours.status == theirs.status and ours.return_value == theirs.return_value
    value = ours.return_value
    assert value["output_dir"] == str(spec.job_dir) == value["cfg"]["extra"]["out"]
    assert value["num"] == 3 and value["env"] == "hello" and "hydra" not in value["keys"]
    assert value["cwd"] == (str(spec.job_dir) if chdir else cwd)
    assert ours.working_dir == theirs.working_dir and ours.task_name == theirs.task_name
    assert ours.overrides == theirs.overrides == JOB
    assert _files(spec.job_dir) == their_files  # the same three files, byte for byte
    assert (spec.job_dir / "cosimrun.log").read_text().count("task ran") == their_log.count("task ran") + 1
    assert RecordingCallback.calls == [("start", 3, None), ("end", 3, "COMPLETED")] * 2


def test_a_failing_task_fails_the_same_way(tmp_path: Path) -> None:
    spec = _spec(tmp_path, job=[*JOB, "+extra.fail=true"])
    theirs = _hydra_run_job(spec)
    ours = worker.run_composed_job(spec.payload(), _task, _callbacks(spec))
    assert ours.status == theirs.status and ours.status.name == "FAILED"
    assert repr(ours._return_value) == repr(theirs._return_value) == "ValueError('the task failed')"


def test_run_hydra_job_runs_a_sweep_job_that_a_resume_can_reuse(tmp_path: Path) -> None:
    spec = _spec(tmp_path, job=SWEEP_JOB)
    state = worker.worker_state(_callbacks(spec))
    outcome = worker.run_hydra_job(spec.payload(), sweep.sweep_job, state, uuid.uuid4().hex)
    assert outcome.status == "complete", outcome.error
    assert outcome.path == str(spec.results_path) and outcome.job_time_s >= outcome.wall_time_s > 0
    assert set(outcome.summaries) >= {"pendulum.q", "ctrl.u"}
    with h5py.File(spec.results_path, "r") as f:
        assert f.attrs["status"] == "complete"
    assert resume.check_reuse(spec) == resume.Reuse(True)  # the stored config is the one the driver expects
    assert worker.written_since_start(spec.job_dir, spec.results_path)

    changed = _spec(tmp_path, job=[*SWEEP_JOB, "components.ctrl.params.kd=7"])
    assert changed.results_path == spec.results_path
    assert resume.check_reuse(changed) == resume.Reuse(False, "rerun: configuration changed")
    worker.mark_started(spec.job_dir, "next", 1)  # a later attempt starts: the file is older than it
    os.utime(spec.results_path, ns=(0, 0))
    assert not worker.written_since_start(spec.job_dir, spec.results_path)
    spec.results_path.write_bytes(b"not HDF5")
    reuse = resume.check_reuse(spec)
    assert not reuse.ok and reuse.note.startswith("rerun: results file damaged (unreadable: ")
    spec.results_path.unlink()
    assert resume.check_reuse(spec) == resume.Reuse(False)  # never finished: an ordinary rerun, no note


def test_mark_started_says_whether_it_made_the_job_folder(tmp_path: Path) -> None:
    """A job whose start mark made its folder does not make it again; a later attempt's mark is noted once."""
    job_dir = tmp_path / "1k" / "1001"
    assert worker.mark_started(job_dir, "tok", 1) is True  # its shard's folder too
    assert worker.mark_started(job_dir, "tok", 2) is False
    assert worker.mark_started(job_dir, "tok", 2) is False
    assert (job_dir / worker.STARTED_FILE).read_text() == "tok 1\ntok 2\n"


def test_a_job_in_the_folder_its_mark_made_writes_every_file_of_its_folder(tmp_path: Path) -> None:
    spec = _spec(tmp_path, job=SWEEP_JOB)
    outcome = worker.run_hydra_job(spec.payload(), sweep.sweep_job, worker.worker_state(_callbacks(spec)), "tok")
    assert outcome.status == "complete", outcome.error
    assert sorted(p.name for p in spec.job_dir.iterdir()) == [".cosimrun-started", ".hydra", "cosimrun.log",
                                                               spec.results_path.name]
    assert sorted(_files(spec.job_dir)) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert ": complete in " in (spec.job_dir / "cosimrun.log").read_text()


def test_run_hydra_job_reports_hydra_failing_as_a_failed_outcome(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    state = worker.worker_state(_callbacks(spec))
    payload = spec.payload()
    payload.config = b"not a pickle"
    outcome = worker.run_hydra_job(payload, sweep.sweep_job, state, "t", attempt=2)
    assert outcome.status == "failed" and outcome.attempts == 2
    assert outcome.error.startswith("UnpicklingError") and "Traceback" in outcome.traceback
    assert worker.started(spec.job_dir, "t", 2)


def test_warm_up_loads_builtin_components_and_freezes_the_heap() -> None:
    import subprocess
    import sys

    code = (
        "import gc, sys; from cosimrun.runner.worker import warm_up; warm_up(); "
        "print('cosimrun.components.mechanics' in sys.modules, gc.get_freeze_count() > 1000)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


def test_a_later_warm_up_releases_what_an_earlier_one_froze() -> None:
    """On a long-lived worker, a new sweep's warm-up lets the previous sweep's (cyclic) objects go."""
    import subprocess
    import sys

    code = (
        "import gc, weakref; from cosimrun.runner.worker import warm_up\n"
        "class Box: pass\n"
        "a = Box(); a.me = a; r = weakref.ref(a)\n"
        "warm_up(); del a; gc.collect(); kept = r() is not None\n"
        "warm_up(); still = r() is not None\n"
        "warm_up(release_frozen=True); print(kept, still, r() is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "True"]


def test_run_hydra_job_reports_a_failing_task_as_a_failed_outcome(tmp_path: Path) -> None:
    spec = _spec(tmp_path, job=[*JOB, "+extra.fail=true"])
    outcome = worker.run_hydra_job(spec.payload(), _task, worker.worker_state(_callbacks(spec)), "failing")
    assert outcome.status == "failed" and outcome.error == "ValueError: the task failed"
    assert outcome.traceback.startswith("Traceback") and "in _task" in outcome.traceback


class _ClearedByAnotherThread(dict):
    """A cache that a job in another thread clears right after each entry is set."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        self.clear()


def test_a_kept_entry_is_returned_as_made_when_another_thread_clears_the_cache() -> None:
    cache = _ClearedByAnotherThread()
    assert worker._kept(cache, b"composition", lambda: None) is None  # a composition OmegaConf resolves per job
    assert worker._kept(cache, b"composition", lambda: 7) == 7 and cache == {}
    kept = {b"composition": 3}
    assert worker._kept(kept, b"composition", lambda: 4) == 3  # made once per composition
