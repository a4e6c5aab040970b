"""FMU instances kept between the jobs of a warm worker: reset and reused, never leaking a job's values into the next,
and given up when the reset fails, the settings differ or a job failed."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu
from support.hydra_sweep import sweep_context

from cosimrun.fmi import instance
from cosimrun.fmi.instance import REUSE, ReuseCounts, drop_kept_instances, keep_instances
from cosimrun.runner import compose, sweep, worker

FMU_JOB = ["+experiment=pendulum_switch_fmu", "run.tf=0.5"]
LENGTH = "components.pendulum.modes.nonlinear.params.length"
START_Q = "components.pendulum.modes.nonlinear.params.start.q"


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reuse-fmus")


@pytest.fixture
def keeping() -> Iterator[None]:
    """Instances are kept (as on a warm worker) during the test, and nothing is kept after it."""
    keep_instances()
    try:
        yield
    finally:
        keep_instances(False)


def _counts() -> ReuseCounts:
    return dataclasses.replace(REUSE)


def _since(before: ReuseCounts) -> tuple[int, int, int]:
    """``(kept, reused, fresh)`` since *before*."""
    return REUSE.kept - before.kept, REUSE.reused - before.reused, REUSE.fresh - before.fresh


def _run(comp: Any, inputs: dict[str, float], steps: int, dt: float) -> list[dict[str, float]]:
    """Initialize *comp* at 0, take *steps* steps of *dt* with *inputs*, free it; the outputs after each step (and
    at the start)."""
    comp.initialize(0.0)
    rows = [{k: p.value for k, p in comp.outputs.items()}]
    t = 0.0
    for _ in range(steps):
        comp.set_inputs(inputs)
        comp.do_step(t, dt)
        t += dt
        rows.append({k: p.value for k, p in comp.outputs.items()})
    comp.free()
    return rows


# ------------------------------------------------------------------ the component's life cycle
def test_a_job_relying_on_a_default_gets_it_after_a_job_that_set_it(fmu_dir: Path, keeping: None) -> None:
    path = builders.feedthrough(fmu_dir)
    before = _counts()
    assert _run(fmu("gain", path, k=3.0), {"u": 0.5}, 2, 0.1)[-1]["y"] == 1.5  # y = k u
    kept = instance._KEPT[(str(path), "cs", "gain")].handle.c.value
    second = fmu("gain", path)
    second.initialize(0.0)
    assert second.fmu is not None and second.fmu.handle is not None
    assert second.fmu.handle.c.value == kept  # the same instance, reset
    second.set_inputs({"u": 0.5})
    second.do_step(0.0, 0.1)
    assert second.outputs["y"].value == 1.0  # the default k = 2, not the last job's 3
    assert second.outputs["steps"].value == 1  # the step counter started again
    second.free()
    assert _since(before) == (2, 1, 0)


def test_a_job_starting_from_the_default_state_after_one_that_set_it_equals_a_fresh_instance(
        fmu_dir: Path) -> None:
    path = builders.pendulum(fmu_dir)
    inputs = {"torque": 0.3}
    fresh = [_run(fmu("p", path, **params), inputs, 30, 0.01) for params in ({"start": {"q": 0.9}}, {})]
    keep_instances()
    try:
        before = _counts()
        warm = [_run(fmu("p", path, **params), inputs, 30, 0.01) for params in ({"start": {"q": 0.9}}, {})]
        assert _since(before) == (2, 1, 0)
    finally:
        keep_instances(False)
    assert warm == fresh  # bit for bit: the same floats
    assert fresh[1][0]["q"] == 0.0 and fresh[0][0]["q"] == 0.9  # the second starts at the model's start value
    assert fresh[1][-1]["q"] != fresh[0][-1]["q"]


def test_an_fmu_whose_reset_fails_gets_a_fresh_instance(fmu_dir: Path, keeping: None) -> None:
    path = builders.bouncing_ball3(fmu_dir, event_mode=False)  # its fmi3Reset returns fmi3Error
    before = _counts()
    first = _run(fmu("ball", path, e=0.5), {}, 80, 0.01)
    second = _run(fmu("ball", path), {}, 80, 0.01)
    assert _since(before) == (2, 0, 1)
    keep_instances(False)
    assert _run(fmu("ball", path), {}, 80, 0.01) == second
    assert first[-1]["v"] != second[-1]["v"]


def test_other_instantiation_settings_or_a_private_copy_get_a_fresh_instance(fmu_dir: Path, keeping: None) -> None:
    path = builders.feedthrough(fmu_dir)
    before = _counts()
    _run(fmu("gain", path), {"u": 1.0}, 1, 0.1)
    logged = fmu("gain", path, logging=True)
    assert _run(logged, {"u": 1.0}, 1, 0.1)[-1]["y"] == 2.0
    assert _since(before) == (2, 0, 1)  # FMU logging is an instantiation setting: a fresh instance
    kept = instance._KEPT[(str(path), "cs", "gain")]
    _run(fmu("gain", path, private_copy=True), {"u": 1.0}, 1, 0.1)
    assert _since(before) == (2, 0, 1)  # a private copy neither starts on a kept instance nor is kept
    assert instance._KEPT[(str(path), "cs", "gain")] is kept
    _run(fmu("other", path), {"u": 1.0}, 1, 0.1)
    assert _since(before) == (3, 0, 1)  # kept per component name: another name starts fresh
    assert _run(fmu("gain", path, logging=True), {"u": 1.0}, 1, 0.1)[-1]["y"] == 2.0
    assert _since(before) == (4, 1, 1)
    drop_kept_instances()
    assert not instance._KEPT


@pytest.mark.parametrize("fmi3", [False, True], ids=["fmi2", "fmi3"])
def test_a_model_exchange_fmu_is_reset_and_reused_with_the_results_of_a_fresh_instance(fmu_dir: Path,
                                                                                      fmi3: bool) -> None:
    """``x' = a x + b u`` with a time event at ``t_jump`` (``x += jump``): fixed parameters set by one run and left
    to their defaults by the next."""
    from cosimrun.components.fmu.me import ModelExchangeFMU

    path = builders.me_linear(fmu_dir, fmi3=fmi3)
    runs = ({"a": -2.0, "t_jump": 0.05, "jump": 0.5}, {})
    fresh = [_run(fmu("lin", path, ModelExchangeFMU, **params), {"u": 1.0}, 20, 0.01) for params in runs]
    keep_instances()
    try:
        before = _counts()
        warm = [_run(fmu("lin", path, ModelExchangeFMU, **params), {"u": 1.0}, 20, 0.01) for params in runs]
        assert _since(before) == (2, 1, 0)
    finally:
        keep_instances(False)
    assert warm == fresh
    assert fresh[0][-1]["jumps"] == 1 and fresh[1][-1]["jumps"] == 0  # the second run has no event of the first


# ------------------------------------------------------------------ sweep jobs on a warm worker
def _spec(sweep_dir: Path, job: list[str], num: int) -> compose.JobSpec:
    ctx, master = sweep_context([*job, f"hydra.sweep.dir={sweep_dir}"])
    return compose.compose_job(ctx, master, job, num)


def _datasets(path: Path) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: found.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return found


def _fresh(spec: compose.JobSpec) -> Any:
    """The job run with no instance kept, as in a process of its own."""
    from hydra._internal.callbacks import Callbacks

    keep_instances(False)
    with sweep.managed_job():
        ret = worker.run_composed_job(spec.payload(), sweep.sweep_job, Callbacks(spec.payload().to_config()))
    return ret.return_value


JOBS = [[f"{LENGTH}=0.8"], [f"{LENGTH}=1.2", f"{START_Q}=0.7"], [], [f"{LENGTH}=0.8"]]


@pytest.mark.slow
def test_warm_worker_jobs_of_an_fmu_experiment_equal_one_job_per_process_bit_for_bit(tmp_path: Path) -> None:
    """Four jobs on one worker process: the FMU is instantiated once and reset three times; every results file
    holds the same numbers as the job run alone."""
    from hydra._internal.callbacks import Callbacks

    specs = [_spec(tmp_path / "warm", [*FMU_JOB, *extra], num) for num, extra in enumerate(JOBS)]
    state = worker.worker_state(Callbacks(specs[0].payload().to_config()))
    token = uuid.uuid4().hex
    worker.keep_workers_fmus()  # as a dask worker does (its preload, or its first job)
    try:
        before = _counts()
        outcomes = [worker.run_hydra_job(spec.payload(), sweep.sweep_job, state, token) for spec in specs]
        assert [o.status for o in outcomes] == ["complete"] * 4, [o.error for o in outcomes]
        assert _since(before) == (4, 3, 0)
    finally:
        keep_instances(False)
    for num, extra in enumerate(JOBS):
        alone = _spec(tmp_path / "alone", [*FMU_JOB, *extra], num)
        assert _fresh(alone).status == "complete"
        warm, reference = _datasets(specs[num].results_path), _datasets(alone.results_path)
        assert sorted(warm) == sorted(reference) and any("pendulum" in k for k in warm)
        for name, values in reference.items():
            assert np.array_equal(warm[name], values, equal_nan=values.dtype.kind == "f"), (num, name)
    finals = [o.summaries["pendulum.q"] for o in outcomes]
    assert finals[0] == finals[3] and len({finals[0], finals[1], finals[2]}) == 3


@pytest.mark.slow
def test_the_instance_a_job_failed_in_is_not_reused(tmp_path: Path) -> None:
    """A job that fails after its FMU ran (a non-finite value) drops the kept instances: the next job makes a
    fresh one, and its results equal the job run alone."""
    from hydra._internal.callbacks import Callbacks

    jobs = [[f"{LENGTH}=0.8"], ["+components.pendulum.modes.nonlinear.params.g=1e308"], []]
    specs = [_spec(tmp_path / "warm", [*FMU_JOB, *extra], num) for num, extra in enumerate(jobs)]
    state = worker.worker_state(Callbacks(specs[0].payload().to_config()))
    token = uuid.uuid4().hex
    worker.keep_workers_fmus()  # as a dask worker does (its preload, or its first job)
    try:
        before = _counts()
        outcomes = [worker.run_hydra_job(specs[0].payload(), sweep.sweep_job, state, token)]
        outcomes.append(worker.run_hydra_job(specs[1].payload(), sweep.sweep_job, state, token))
        assert outcomes[1].status == "failed" and "NonFiniteValueError" in outcomes[1].error
        assert _since(before) == (2, 1, 0) and not instance._KEPT  # it ran on the kept instance, then let go
        outcomes.append(worker.run_hydra_job(specs[2].payload(), sweep.sweep_job, state, token))
        assert _since(before) == (3, 1, 0)  # the third made its own
    finally:
        keep_instances(False)
    assert outcomes[2].status == "complete"
    alone = _spec(tmp_path / "alone", [*FMU_JOB], 2)
    assert _fresh(alone).summaries == outcomes[2].summaries
