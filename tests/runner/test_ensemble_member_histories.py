"""A sweep job keeps the histories its scalar run records: with state events or mode switches (the samples before
and after each event at its instant, and the event ports), which an ensemble does not record, its group runs as
ordinary jobs, under the hybrid master and under the fixed-step ones alike.

In process: the plan as the dask launcher makes it, the ensemble's task as a worker runs it, the job as a warm
worker runs it (no cluster)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.hydra_sweep import sweep_context

from cosimrun.errors import ConfigError
from cosimrun.runner import compose, ensembles, sweep, worker
from cosimrun.runner.run import prepare
from cosimrun.storage.results import load_results

pytestmark = pytest.mark.filterwarnings("ignore:events are handled:UserWarning")

CASES = {
    "bouncing_ball-hybrid": (["+experiment=bouncing_ball", "run.tf=0.6"], "components.ball.params.e", (0.5, 0.7),
                             "components.ball"),
    "bouncing_ball-jacobi": (["+experiment=bouncing_ball", "run.tf=0.6", "master=jacobi"],
                             "components.ball.params.e", (0.5, 0.7), "components.ball"),
    "pendulum_switch-hybrid": (["+experiment=pendulum_switch", "run.tf=0.6"], "components.ctrl.params.kp",
                               (60.0, 40.0), "components.pendulum"),
}
GRID = 61
"""The communication points of the 0.6 s runs (dt 0.01)."""


@pytest.mark.parametrize("case", list(CASES))
def test_a_sweep_with_events_runs_as_jobs_that_keep_their_scalar_runs_histories(case: str, tmp_path: Path) -> None:
    from hydra._internal.callbacks import Callbacks

    job, key, values, culprit = CASES[case]
    ctx, master = sweep_context([*job, f"{key}={values[0]}", f"hydra.sweep.dir={tmp_path}"])
    composer = compose.JobComposer(ctx, master)
    overrides = [[*job, f"{key}={v}"] for v in values]
    plan = ensembles.plan([(pos, pos, o) for pos, o in enumerate(overrides)], composer, 1000, 1, tmp_path)
    assert plan.ensembles == [] and len(plan.reasons) == 1
    why = next(iter(plan.reasons))
    assert why.startswith(f"{culprit}: ") and "state events or switches modes" in why, why
    assert plan.notices() == [f"2 sweep jobs run as separate jobs, not as ensembles: {why}"]

    specs = [compose.compose_job(ctx, master, o, num) for num, o in enumerate(overrides)]
    with pytest.raises(ConfigError) as refused:  # an ensemble's task given them runs each as its own job
        ensembles._run([s.payload() for s in specs], (key,), [(v,) for v in values], tmp_path / "e.h5", "key")
    assert str(refused.value) == why and not (tmp_path / "e.h5").exists()

    alone = specs[1].payload()
    with sweep.managed_job():
        ret = worker.run_composed_job(alone, sweep.sweep_job, Callbacks(alone.to_config()))
    assert ret.return_value.status == "complete"
    stored = load_results(specs[1].results_path)
    exp = prepare(ensembles._resolved(specs[1]))
    exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master)
    assert sorted(stored.components) == sorted(exp.recorded)
    events = 0
    for comp, ports in exp.recorded.items():
        theirs = exp.system.components[comp].history.get_all_histories()
        ours = stored.history(comp)
        assert sorted(ours) == sorted(ports) == sorted(theirs), comp
        for port, series in theirs.items():  # every sample, event instants and event ports included, to the bit
            assert np.array_equal(ours[port].time, series.time), (comp, port)
            assert np.array_equal(ours[port].micro, series.micro), (comp, port)
            assert np.array_equal(ours[port].values, series.values), (comp, port)
        events = max(events, int(np.count_nonzero(ours[ports[0]].micro)))
    assert events > 0 and stored.history(culprit.split(".")[1])[ports[0]].time.size > GRID
