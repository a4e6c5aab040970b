"""A worker's job config resolved from its shared composition's (:mod:`cosimrun.runner.plainjob`) is what OmegaConf's
resolution of the job's task config gives, or is left to OmegaConf."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import h5py
import pytest
from hydra.experimental.callback import Callback
from support.hydra_sweep import sweep_context

from cosimrun.runner import configtext, sweep, worker
from cosimrun.runner.compose import JobComposer, compose_job
from cosimrun.runner.outcome import describe_exception

EXPERIMENTS = sorted(p.stem for p in (Path(configtext.__file__).parents[2] / "conf" / "experiment").glob("*.yaml"))


def _composer(tmp_path: Path, experiment: str) -> JobComposer:
    ctx, master = sweep_context([f"+experiment={experiment}", f"hydra.sweep.dir={tmp_path / experiment}"])
    return JobComposer(ctx, master)


def _both(composer: JobComposer, overrides: list[str], num: int) -> tuple[Any, tuple[dict[str, Any], str], bool]:
    """``(payload, (plain, text) as OmegaConf resolves the job's task config, whether the composition's resolution
    made it)``, after checking that the worker's resolution is the same."""
    payload = composer.compose(overrides, num, on_worker=True).payload()
    assert payload.values is not None  # made on the worker
    config = worker._job_config(payload)
    keys = [line.partition("=")[0] for line in payload.values]
    with worker.hydra_config(config):
        ours = worker._resolved_job(payload, config)
        theirs = configtext.resolved(payload.task_config())
        made = worker._COMPOSITIONS.get(payload.config)
        fast = made is not None and made[0].job(config, keys) is not None
    assert ours == theirs and list(ours[0]) == list(theirs[0])  # the same keys in the same order, the same text
    return payload, theirs, fast


def _numbers(plain: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(dotted key, value)`` of the numeric parameters of the components of a plain config."""
    return [(f"components.{name}.params.{key}", value) for name, comp in plain["components"].items()
            for key, value in (comp.get("params") or {}).items()
            if isinstance(value, int | float) and not isinstance(value, bool)]


def test_the_shipped_experiments_resolve_as_omegaconf_resolves_them_over_their_parameters(tmp_path: Path) -> None:
    worker._COMPOSITIONS.clear()
    for experiment in EXPERIMENTS:
        composer = _composer(tmp_path, experiment)
        base = [f"+experiment={experiment}"]
        _, (plain, _), _ = _both(composer, [*base, "run.tf=2"], 0)
        assert plain["run"]["tf"] == 2.0 and isinstance(plain["run"]["tf"], float)  # the schema's float
        for num, (key, value) in enumerate(_numbers(plain)[:2], 1):
            for scale in (2, 3):
                _, (job, text), fast = _both(composer, [*base, f"{key}={value * scale}", "run.tf=1.5"], num)
                assert fast, (experiment, key)
                assert f"{key.rpartition('.')[2]}: {value * scale}" in text


def test_relative_file_paths_are_made_absolute_in_the_plain_config_and_its_text(tmp_path: Path) -> None:
    composer = _composer(tmp_path, "pendulum_switch")
    table = ["+experiment=pendulum_switch", "+components.t.type=table", "+components.t.params.path=data.csv"]
    for num, tf in enumerate((1, 2)):
        _, (plain, text), fast = _both(composer, [*table, f"run.tf={tf}"], num)
        path = plain["components"]["t"]["params"]["path"]
        assert fast and Path(path).is_absolute() and f"path: {path}" in text


def test_an_interpolation_that_reads_an_overridden_key_is_resolved_by_omegaconf(tmp_path: Path) -> None:
    composer = _composer(tmp_path, "pendulum_switch")
    reads = ["+experiment=pendulum_switch", "+extra.gain=${components.ctrl.params.kp}", "+extra.twice=${extra.gain}"]
    _, (plain, _), fast = _both(composer, [*reads, "components.ctrl.params.kp=7"], 0)
    assert not fast and plain["extra"] == {"gain": 7, "twice": 7}
    _, (plain, _), fast = _both(composer, [*reads, "components.ctrl.params.kd=7"], 1)  # reads no overridden key
    assert fast and plain["extra"]["twice"] == plain["components"]["ctrl"]["params"]["kp"]


def test_resolvers_are_resolved_again_for_each_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    composer = _composer(tmp_path, "pendulum_switch")
    calls = ["+experiment=pendulum_switch", "+extra.env=${oc.env:COSIMRUN_PLAIN_JOB,unset}",
             "+extra.num=${hydra:job.num}", "+extra.label=job-${extra.num}-${extra.env}"]
    seen = []
    for num, env in enumerate(("a", "b", None)):
        if env is None:
            monkeypatch.delenv("COSIMRUN_PLAIN_JOB", raising=False)
        else:
            monkeypatch.setenv("COSIMRUN_PLAIN_JOB", env)
        _, (plain, _), fast = _both(composer, [*calls, f"components.ctrl.params.kp={num + 1}"], num)
        assert fast
        seen.append(plain["extra"])
    assert [s["label"] for s in seen] == ["job-0-a", "job-1-b", "job-2-unset"]


@pytest.mark.parametrize("extra", [["+extra.x=1", "+extra.r=${.x}"], ["+extra.v=${oc.decode:'[1, 2]'}"]])
def test_interpolations_it_does_not_read_leave_the_composition_to_omegaconf(tmp_path: Path, extra: list[str]) -> None:
    composer = _composer(tmp_path, "pendulum_switch")
    payload, _, fast = _both(composer, ["+experiment=pendulum_switch", *extra, "components.ctrl.params.kp=3"], 0)
    assert not fast and worker._COMPOSITIONS[payload.config] is None


def test_a_reference_to_the_hydra_node_fails_as_omegaconf_fails_it(tmp_path: Path) -> None:
    composer = _composer(tmp_path, "pendulum_switch")
    payload = composer.compose(["+experiment=pendulum_switch", "+extra.n=${hydra.job.name}", "run.tf=1"], 0,
                               on_worker=True).payload()
    config = worker._job_config(payload)
    with worker.hydra_config(config):
        with pytest.raises(Exception) as ours:
            worker._resolved_job(payload, config)
        with pytest.raises(Exception) as theirs:
            configtext.resolved(payload.task_config())
    assert str(ours.value) == str(theirs.value) and "hydra" in str(ours.value)


def test_a_wrong_value_fails_the_job_with_the_error_of_its_task_config(tmp_path: Path) -> None:
    composer = _composer(tmp_path, "pendulum_switch")
    spec = composer.compose(["+experiment=pendulum_switch", "run.tf=late"], 0, on_worker=True)
    payload = spec.payload()
    payload.sweep_files = True
    with pytest.raises(Exception) as theirs:
        payload.task_config()
    outcome = worker.run_hydra_job(payload, sweep.sweep_job, worker.worker_state(_no_callbacks()), "t")
    assert outcome.status == "failed" and outcome.error == describe_exception(theirs.value)[0]
    assert "run.tf" in outcome.error


def _no_callbacks() -> Any:
    from hydra._internal.callbacks import Callbacks

    return Callbacks()


def _job_files(job_dir: Path, sweep_dir: Path) -> dict[str, Any]:
    """The files of a job folder by relative path: texts with the sweep folder, times and durations masked, the
    results file's config and status."""
    files: dict[str, Any] = {}
    for path in sorted(p for p in job_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(job_dir))
        if path.suffix == ".h5":
            with h5py.File(path, "r") as f:
                files[name] = (f.attrs["config_yaml"], f.attrs["status"], sorted(f))
        else:
            text = path.read_text().replace(str(sweep_dir), "<sweep>")
            files[name] = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+|\d+\.\d+ s", "<t>", text)
    return files


def test_a_job_folder_holds_the_same_files_whichever_way_its_config_was_resolved(tmp_path: Path) -> None:
    """cosimrun's task on the config resolved from the composition's, a task that makes the task config and calls
    it (OmegaConf's resolution), and jobs composed in full on the driver (nothing of the composition kept): the
    same files with the same content in each job folder."""

    def through_task_config(cfg: Any) -> Any:
        return sweep.sweep_job(cfg)

    folders = []
    for name, task in (("plain", sweep.sweep_job), ("omegaconf", through_task_config), ("driver", sweep.sweep_job)):
        ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path / name}"])
        composer = JobComposer(ctx, master)
        state = worker.worker_state(_no_callbacks())
        for num, kp in enumerate((40, 41)):
            overrides = ["+experiment=pendulum_switch", "run.tf=0.05", f"components.ctrl.params.kp={kp}"]
            spec = (compose_job(ctx, master, overrides, num) if name == "driver" else
                    composer.compose(overrides, num, on_worker=True))
            payload = spec.payload()
            assert (payload.values is None) == (name == "driver")
            payload.sweep_files = True
            outcome = worker.run_hydra_job(payload, task, state, "token")
            assert outcome.status == "complete", outcome.error
            folders.append(_job_files(spec.job_dir, tmp_path / name))
    assert folders[:2] == folders[2:4] == folders[4:]
    assert set(folders[0]) >= {".hydra/overrides.yaml", "cosimrun.log", "results.h5", worker.STARTED_FILE}


class _ReadsTheTaskConfig(Callback):
    """A Hydra callback that keeps the task config each job's return holds."""

    seen: list[Any] = []

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        _ReadsTheTaskConfig.seen.append(job_return.cfg)


def test_a_callback_that_reads_the_returned_task_config_gets_it(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    composer = _composer(tmp_path, "pendulum_switch")
    payloads = [composer.compose(["+experiment=pendulum_switch", "run.tf=0.05", f"components.ctrl.params.kp={kp}"],
                                 kp, on_worker=True).payload() for kp in (3, 4)]
    callbacks = _no_callbacks()
    callbacks.callbacks.append(_ReadsTheTaskConfig())
    for payload, hooks in zip(payloads, (callbacks, _no_callbacks()), strict=True):
        payload.sweep_files = True
        ret = worker.run_composed_job(payload, sweep.sweep_job, hooks)
        assert ret.return_value.status == "complete", ret.return_value.error
    assert len(_ReadsTheTaskConfig.seen) == 1 and ret.cfg is None  # made only for a callback that reads it
    assert OmegaConf.to_container(_ReadsTheTaskConfig.seen[0]) == OmegaConf.to_container(payloads[0].task_config())


def test_each_job_gets_its_own_output_subdir_and_env_set_when_they_are_interpolations(tmp_path: Path) -> None:
    """``hydra.output_subdir`` and ``hydra.job.env_set`` read per job (``${hydra:job.num}``), as Hydra's ``run_job``
    resolves them for each job: the second job of a warm worker writes to its own subdir and its task config reads
    its own environment value, not the first job's (or the interpolation's text)."""
    common = ["+experiment=bouncing_ball", "hydra.output_subdir=.hydra_${hydra.job.num}",
              "++hydra.job.env_set.COSIMRUN_PLAIN_JOB_ENV=job${hydra:job.num}",
              "++description=${oc.env:COSIMRUN_PLAIN_JOB_ENV,unset}"]
    ctx, master = sweep_context([*common, f"hydra.sweep.dir={tmp_path}"])
    composer = JobComposer(ctx, master)
    state = worker.worker_state(_no_callbacks())
    for num, tf in enumerate((0.02, 0.03)):
        spec = composer.compose([*common, f"run.tf={tf}"], num, on_worker=True)
        payload = spec.payload()
        assert payload.values is not None  # made on the worker from the shared composition
        payload.sweep_files = True
        outcome = worker.run_hydra_job(payload, sweep.sweep_job, state, "token")
        assert outcome.status == "complete", outcome.error
        assert sorted(p.name for p in spec.job_dir.glob(".hydra*")) == [f".hydra_{num}"]
        with h5py.File(spec.job_dir / "results.h5", "r") as f:
            assert f.attrs["status"] == "complete" and f"description: job{num}\n" in f.attrs["config_yaml"]
