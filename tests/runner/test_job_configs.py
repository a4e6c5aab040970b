"""A job's task config, made on its worker from the shared composition without its ``hydra`` node, is the config
Hydra's full composition gives without that node."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from support.hydra_sweep import sweep_context

from cosimrun.runner import worker
from cosimrun.runner.compose import JobComposer, compose_job
from cosimrun.runner.configtext import resolved

JOBS = [
    (["+experiment=pendulum_switch", "run.tf=2.5", "components.ctrl.params.kp=41", "master=jacobi"], 3),
    (["+experiment=pendulum_switch", "components.ctrl.params.kp=7", "+extra.note='a b=c, d'"], 1500),
    (["+experiment=pendulum_switch", "components.ctrl.params.kp=8", "+extra.out=${hydra:runtime.output_dir}"], 5),
    (["+experiment=pendulum_switch", "storage.file=other.h5"], 4),  # composed on the driver: no shared base
]


def test_the_task_config_made_on_the_worker_is_the_full_compositions_without_hydra(tmp_path: Path) -> None:
    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    composer = JobComposer(ctx, master)
    worker._TASK_BASES.clear()
    for overrides, num in JOBS * 2:  # the second round takes the kept base without the hydra node
        payload = composer.compose(overrides, num, on_worker=True).payload()
        expected = pickle.loads(compose_job(ctx, master, overrides, num).payload().config)
        with worker.hydra_config(expected):  # as on a worker, where the driver's Hydra state is installed
            task_cfg, config = payload.configs()
        assert "hydra" not in task_cfg and "hydra" in config
        expected_task = OmegaConf.to_container(expected)
        del expected_task["hydra"]
        assert OmegaConf.to_container(task_cfg) == expected_task
        assert OmegaConf.to_container(config) == OmegaConf.to_container(expected)
        assert OmegaConf.is_struct(task_cfg) == OmegaConf.is_struct(expected)
        assert OmegaConf.is_readonly(task_cfg) == OmegaConf.is_readonly(expected)
        assert OmegaConf.get_cache(task_cfg) == OmegaConf.get_cache(config)
        with worker.hydra_config(config):  # resolved as the job resolves it: ${hydra:...} and ${now:...} alike
            text = resolved(task_cfg)[1]
        with worker.hydra_config(expected):
            assert text == resolved(worker._without_hydra(pickle.loads(pickle.dumps(expected))))[1]
    assert len(worker._TASK_BASES) == 3  # one per shared composition (job 4 has none), made in the first round


def test_the_full_config_a_worker_reuses_between_jobs_equals_a_new_copy_for_each(tmp_path: Path) -> None:
    """Jobs of one composition with the same keys reuse one full config; each equals the new copy Hydra's own
    composition gives, flags and resolver cache included, also after a job whose config could not be made."""
    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    composer = JobComposer(ctx, master)
    worker.kept_configs.cache_clear()
    jobs = [["+experiment=pendulum_switch", f"components.ctrl.params.kp={kp}", f"run.tf={tf}"]
            for tf, kp in ((2, 40), (2.5, 41.5), (3, 42))]
    jobs.insert(1, ["+experiment=pendulum_switch", "run.tf=2.5"])  # other keys: a config of its own
    jobs.insert(2, ["+experiment=pendulum_switch", "components.ctrl.params.kp=1", "run.tf=late"])  # half made
    seen = []
    for num, overrides in enumerate(jobs):
        payload = composer.compose(overrides, num, on_worker=True).payload()
        try:
            task_cfg, config = payload.job_configs()
        except Exception as exc:
            assert "run.tf=late" in str(exc)
            continue
        expected = payload.to_config()
        seen.append(config)
        assert OmegaConf.to_container(config) == OmegaConf.to_container(expected)
        assert OmegaConf.to_container(task_cfg) == OmegaConf.to_container(worker._without_hydra(payload.to_config()))
        assert OmegaConf.get_cache(config) == OmegaConf.get_cache(expected)
        for node, twin in ((config, expected), (config.hydra, expected.hydra), (config.hydra.job, expected.hydra.job),
                           (config.run, expected.run)):
            assert (OmegaConf.is_readonly(node), OmegaConf.is_struct(node)) == (
                OmegaConf.is_readonly(twin), OmegaConf.is_struct(twin))
        OmegaConf.set_readonly(config.hydra, True)  # what run_composed_job does to it
    assert seen[0] is seen[-1] and seen[1] is not seen[0]  # the keys' config reused, after the failed job too


def test_the_sweepers_check_of_many_jobs_remakes_one_config_and_raises_hydras_error(tmp_path: Path) -> None:
    from hydra.errors import ConfigCompositionException

    ctx, master = sweep_context(["+experiment=pendulum_switch", f"hydra.sweep.dir={tmp_path}"])
    composer = JobComposer(ctx, master)
    job = ["+experiment=pendulum_switch", "components.ctrl.params.kp={}", "run.tf={}"]
    for k in range(5):
        composer.validate([job[0], job[1].format(40 + k), job[2].format(2 + k)])
    assert len(composer._checked._kept) == 1  # one config, remade for each job
    bad = [job[0], job[1].format(1), job[2].format("late")]
    with pytest.raises(ConfigCompositionException) as checked:
        composer.validate(bad)
    with pytest.raises(ConfigCompositionException) as full:
        compose_job(ctx, master, bad, 0)
    assert str(checked.value) == str(full.value)
    assert len(composer._checked._kept) == 0  # the half-made config is not kept
    composer.validate([job[0], job[1].format(3), job[2].format(4)])
