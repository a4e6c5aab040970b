"""Which jobs of a sweep the dask launcher groups into ensembles (:func:`cosimrun.runner.ensembles.plan`), in
process: no cluster runs."""

from __future__ import annotations

from pathlib import Path

from hydra._internal.callbacks import Callbacks
from support.hydra_sweep import sweep_context

from cosimrun.runner import compose, ensembles

K1 = "components.mass1.params.stiffness"
K2 = "components.mass2.params.coupling_stiffness"


def _plan(tmp_path: Path, jobs: list[list[str]], size: int = 1000, workers: int = 1) -> ensembles.Plan:
    ctx, master = sweep_context(["+experiment=coupled_oscillators", f"hydra.sweep.dir={tmp_path}"])
    composer = compose.JobComposer(ctx, master)
    return ensembles.plan([(pos, pos, job) for pos, job in enumerate(jobs)], composer, size, workers, tmp_path)


def test_jobs_group_by_their_other_overrides_and_split_by_size(tmp_path: Path) -> None:
    jobs = [["+experiment=coupled_oscillators", f"run.tf={tf}", f"{K1}={k}", f"{K2}=50"]
            for tf in (0.1, 0.2) for k in (5, 10, 15, 20, 25)]
    jobs.append(["+experiment=coupled_oscillators", "run.tf=0.3", f"{K1}=5"])  # alone in its group: a job
    jobs.append(["+experiment=coupled_oscillators", "run.tf=0.1", "master=jacobi"])  # no swept number: a job
    plan = _plan(tmp_path, jobs, size=3)
    # two groups of 5 (run.tf differs), each split into ensembles of at most 3: 3 + 2 (balanced: 2 + 3)
    assert [e.positions for e in plan.ensembles] == [[0, 1], [2, 3, 4], [5, 6], [7, 8, 9]]
    assert set(plan.of) == set(range(10)) and not plan.reasons
    first = plan.ensembles[0]
    assert first.group.keys == (K1, K2) and first.group.values[1] == (10, 50)
    assert first.path.parent == tmp_path / "ensembles" and first.path.name.startswith("0-1.")
    assert plan.ensembles[0].group.config_key != plan.ensembles[2].group.config_key  # run.tf is in the config
    assert plan.ensembles[0].group.config_key == plan.ensembles[1].group.config_key
    assert _plan(tmp_path, jobs, size=0).ensembles == []  # ensemble_size=0: no ensembles


def test_a_group_is_split_so_that_every_worker_gets_an_ensemble(tmp_path: Path) -> None:
    jobs = [["+experiment=coupled_oscillators", "run.tf=0.1", f"{K1}={5 + k}"] for k in range(130)]
    assert [len(e.positions) for e in _plan(tmp_path, jobs, workers=2).ensembles] == [65, 65]
    assert [len(e.positions) for e in _plan(tmp_path, jobs, workers=4).ensembles] == [65, 65]  # 64 members at least
    assert [len(e.positions) for e in _plan(tmp_path, jobs, workers=1).ensembles] == [130]


def _group(*others: str, values: tuple[float, ...] = (5, 10)) -> list[list[str]]:
    return [["+experiment=coupled_oscillators", "run.tf=0.1", *others, f"{K1}={k}"] for k in values]


def test_the_notice_counts_the_jobs_that_run_in_ensembles(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _group("+components.mass1.params.integrator=radau", values=(5, 6, 7, 8, 9)), size=2)
    # three parts of at most two: the one of a single member runs as an ordinary job
    assert [e.positions for e in plan.ensembles] == [[0, 1], [3, 4]] and set(plan.of) == {0, 1, 3, 4}
    assert plan.notices()[0].startswith("4 sweep jobs run as ensembles of members one after the other")


def test_groups_the_vectorized_engine_does_not_step_run_one_member_after_the_other(tmp_path: Path) -> None:
    plan = _plan(tmp_path, [*_group("master=hybrid", "+components.mass1.params.max_substep=0.001"),
                            *_group("+components.mass1.params.integrator=radau"), *_group(values=(5, 10, 15))])
    assert [e.positions for e in plan.ensembles] == [[0, 1], [2, 3], [4, 5, 6]] and not plan.reasons
    hybrid, integrator, arrays = (e.group.serial for e in plan.ensembles)
    assert hybrid.startswith("components.mass1.params.max_substep: ensembles under the hybrid master take the "
                             "configured substeps")
    assert integrator.startswith("components.mass1.params.integrator: 'radau': ensembles integrate with 'rk4', "
                                 "'rk45', 'rk23', 'dop853' only")
    assert arrays == ""  # stepped as arrays
    assert plan.serial == {hybrid: 2, integrator: 2}
    assert plan.notices() == [f"2 sweep jobs run as ensembles of members one after the other (not as arrays: {why})"
                              for why in (hybrid, integrator)]


def test_a_group_run_one_member_after_the_other_is_split_into_more_ensembles(tmp_path: Path) -> None:
    jobs = _group("+components.mass1.params.integrator=radau", values=tuple(range(1, 301)))
    assert [len(e.positions) for e in _plan(tmp_path, jobs, workers=1).ensembles] == [75] * 4  # four per worker
    assert [len(e.positions) for e in _plan(tmp_path, jobs, workers=2).ensembles] == [38, 37, 37, 38] * 2
    assert [len(e.positions) for e in _plan(tmp_path, jobs[:20], workers=2).ensembles] == [10, 10]  # 8 at least


def test_groups_that_cannot_run_as_ensembles_are_jobs_with_their_reason(tmp_path: Path) -> None:
    reads = f"components.mass2.params.stiffness=${{{K1}}}"  # another parameter is computed from the swept one
    estimate = ("+components.mass1.params.integrator=radau", "master=jacobi", "master.step_control=error",
                "master.global_error=estimate")
    plan = _plan(tmp_path, [*_group(*estimate), *_group(reads), *_group(reads, "run.dt=0.002", values=(5, 10, 5)),
                            *_group("storage.allow_nonfinite=true"), *_group("storage.record=[mass1.x]")])
    assert [e.positions for e in plan.ensembles] == [[9, 10]]  # recording fewer ports is fine
    assert list(plan.reasons.values()) == [2, 2, 3, 2]
    global_error, differs, interpolated, nonfinite = plan.reasons
    assert global_error == "master.global_error: 'estimate': ensembles do not estimate the global error"
    assert differs == "their configs differ in more than the swept parameter values"  # the first and the last job
    assert interpolated == f"{K1}: another value of the config is computed from it"  # the first and the last agree
    assert nonfinite == "storage.allow_nonfinite: ensembles stop a member at its first non-finite value"
    assert plan.notices()[0] == f"2 sweep jobs run as separate jobs, not as ensembles: {global_error}"


def test_jobs_run_as_jobs_when_a_callback_acts_on_each_job(tmp_path: Path) -> None:
    ctx, master = sweep_context(["+experiment=coupled_oscillators", f"hydra.sweep.dir={tmp_path}",
                                 "+hydra.callbacks.rec._target_=support.hydra_sweep.RecordingCallback"])
    ctx.callbacks = Callbacks(master)
    plan = ensembles.plan([(pos, pos, job) for pos, job in enumerate(_group())], compose.JobComposer(ctx, master),
                          1000, 1, tmp_path)
    assert plan.ensembles == [] and plan.notices() == [
        "2 sweep jobs run as separate jobs, not as ensembles: hydra.callbacks: a callback defines on_job_start and "
        "on_job_end, which Hydra calls for each job"]
    assert len(_plan(tmp_path, _group()).ensembles) == 1  # without the callback: an ensemble


def test_the_sweeper_checks_one_composition_per_group(tmp_path: Path) -> None:
    batch = [["+experiment=coupled_oscillators", f"{K1}={k}"] for k in (5, 10, 15)]
    batch += [["+experiment=coupled_oscillators", "master=jacobi", f"{K1}={k}"] for k in (5, 10)]
    batch += [["+experiment=coupled_oscillators", "master=jacobi"], ["+experiment=coupled_oscillators", "a.b=x"]]
    assert ensembles.representatives(batch) == [batch[0], batch[3], batch[5], batch[6]]


def test_an_ensemble_size_below_zero_is_refused_before_anything_runs(tmp_path: Path, cosimrun) -> None:
    proc = cosimrun("-m", "+experiment=coupled_oscillators", f"{K1}=5,10", "hydra.launcher.ensemble_size=-1",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "cosimrun: error: hydra.launcher.ensemble_size=-1 cannot work: give an integer >= 0 (0: no " \
                          "ensembles)\n"
    assert not (tmp_path / "sweep").exists()
