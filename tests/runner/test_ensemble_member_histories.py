"""A sweep whose system has state events or switches modes runs as an ensemble, and each member keeps the histories
its job's scalar run records: the samples before and after each event at its instant (micro steps) and the event
ports, under the hybrid master and under the fixed-step ones alike.

In process: the plan as the dask launcher makes it, the ensemble's task as a worker runs it (no cluster); the
reference of each member is ``System.run`` of its job's experiment, computed here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support.hydra_sweep import sweep_context

from cosimrun.runner import compose, ensembles
from cosimrun.runner.load import load_sweep_dataset
from cosimrun.runner.run import prepare
from cosimrun.storage.ensemble import load_member, unreadable
from cosimrun.storage.results import load_results

pytestmark = pytest.mark.filterwarnings("ignore:events are handled:UserWarning")

CASES = {
    "bouncing_ball-hybrid": (["+experiment=bouncing_ball", "run.tf=0.6"], "components.ball.params.e", (0.5, 0.7),
                             "ball"),
    "bouncing_ball-jacobi": (["+experiment=bouncing_ball", "run.tf=0.6", "master=jacobi"],
                             "components.ball.params.e", (0.5, 0.7), "ball"),
    "pendulum_switch-hybrid": (["+experiment=pendulum_switch", "run.tf=0.6"], "components.ctrl.params.kp",
                               (60.0, 40.0), "pendulum"),
}
GRID = 61
"""The communication points of the 0.6 s runs (dt 0.01)."""


@pytest.mark.parametrize("case", list(CASES))
def test_a_sweep_with_events_runs_as_an_ensemble_whose_members_keep_their_scalar_runs_histories(
        case: str, tmp_path: Path) -> None:
    job, key, values, source = CASES[case]
    ctx, master = sweep_context([*job, f"{key}={values[0]}", f"hydra.sweep.dir={tmp_path}"])
    composer = compose.JobComposer(ctx, master)
    overrides = [[*job, f"{key}={v}"] for v in values]
    plan = ensembles.plan([(pos, pos, o) for pos, o in enumerate(overrides)], composer, 1000, 1, tmp_path)
    assert plan.reasons == {} and [e.positions for e in plan.ensembles] == [[0, 1]]

    specs = [compose.compose_job(ctx, master, o, num) for num, o in enumerate(overrides)]
    path = tmp_path / "e.h5"
    outcomes = ensembles._run([s.payload() for s in specs], (key,), [(v,) for v in values], path, "key")
    assert [o.status for o in outcomes if o is not None] == ["complete", "complete"]

    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:  # the ragged layout, read without cosimrun
        histories = [name for name in ds.data_vars if name.startswith(f"{source}.")]
        assert histories and {ds[name].dims for name in ["time", "micro", *histories]} == {("sample", "member")}
        file_time, file_micro = ds["time"].values, ds["micro"].values
    references = []
    for m, spec in enumerate(specs):
        exp = prepare(ensembles._resolved(spec))
        exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master)
        member, stored = load_member(path, m), load_results(path, member=m)
        assert sorted(member.components) == sorted(stored.components) == sorted(exp.recorded)
        events = 0
        for comp, ports in exp.recorded.items():
            theirs = exp.system.components[comp].history.get_all_histories()
            for ours in (member.history(comp), stored.history(comp)):
                assert sorted(ours) == sorted(ports) == sorted(theirs), comp
                for port, series in theirs.items():  # every sample, event instants and event ports, to the bit
                    mine = ours[port]
                    assert mine.port_type == series.port_type.value and mine.unit == series.unit, (comp, port)
                    assert mine.values.dtype == series.values.dtype, (comp, port)
                    assert np.array_equal(mine.time, series.time), (comp, port)
                    assert np.array_equal(mine.micro, series.micro), (comp, port)
                    assert np.array_equal(mine.values, series.values), (comp, port)
            first = theirs[ports[0]]
            events = max(events, int(np.count_nonzero(first.micro)))
            n = len(first.time)
            assert np.array_equal(file_time[:n, m], first.time) and np.isnan(file_time[n:, m]).all()
            assert np.array_equal(file_micro[:n, m], first.micro) and (file_micro[n:, m] == -1).all()
        assert events > 0 and member.history(source)[exp.recorded[source][0]].time.size > GRID
        frame = member.to_dataframe(source)
        assert np.array_equal(frame["micro"].to_numpy(), member.history(source)[exp.recorded[source][0]].micro)
        references.append(exp.system.components[source].history.get_all_histories())

    # a sweep's readers take each member's samples from its column of the file, as they take a job's
    runs = load_sweep_dataset(pd.DataFrame({"path": [path.name] * 2, "member": [0, 1]}), source, sweep_dir=tmp_path)
    for m, theirs in enumerate(references):
        n = int(runs["n_samples"][m])
        for port, series in theirs.items():
            assert np.array_equal(runs["time"].values[m, :n], series.time)
            assert np.array_equal(runs["micro"].values[m, :n], series.micro)
            assert np.array_equal(runs[port].values[m, :n], series.values), port
    # a resume takes over both members of the file
    done = ensembles.complete_members(path, [(num, o, 1) for num, o in enumerate(overrides)])
    assert sorted((num, o.member, o.status) for num, o in done.items()) == [(0, 0, "complete"), (1, 1, "complete")]
    assert unreadable(path) is None
