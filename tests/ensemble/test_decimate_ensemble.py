"""``storage.decimate`` in ensembles: a member's thinned histories equal the scalar run's with the same setting,
bit for bit, in the ensemble result, its file and a dask sweep that groups jobs into ensembles."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
import yaml

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import run_ensemble, run_members
from cosimrun.runner.load import load_run, load_sweep
from cosimrun.runner.run import run_experiment
from cosimrun.storage.ensemble import EnsembleMember, write_ensemble
from cosimrun.storage.results import Results

ROOT = Path(__file__).resolve().parents[2]
STIFFNESS = (5.0, 10.0, 15.0)


def config(tf: float, dt: float, decimate: int, stiffness: float | None = None) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "experiments" / "coupled_oscillators.yaml").read_text())
    cfg.pop("defaults")
    cfg["master"] = {"name": "jacobi", "extrapolation": 1}
    cfg["run"].update(tf=tf, dt=dt)
    cfg["storage"] = {"decimate": decimate}
    if stiffness is not None:
        cfg["components"]["mass1"]["params"]["stiffness"] = stiffness
    return cfg


def scalar(cfg: dict[str, Any], out: Path) -> dict[str, dict[str, np.ndarray]]:
    """The scalar run's recorded histories: ``{component: {dataset: values}}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = run_experiment(cfg, out)
    assert outcome.ok, outcome.error
    with h5py.File(outcome.path, "r") as f:
        return {name: {key: group[key][()] for key in group} for name, group in f["components"].items()}


@pytest.mark.parametrize(("tf", "decimate"), [(0.5, 7), (0.5, 1), (0.5035, 10)])
def test_members_equal_scalar_runs_with_the_same_decimate(tmp_path: Path, tf: float, decimate: int) -> None:
    dt = 0.001
    exp = build_experiment(config(tf, dt, decimate))
    result = run_members(exp.system, exp.master, [{"mass1.stiffness": k} for k in STIFFNESS], t0=0.0, tf=tf, dt=dt,
                         record_every=exp.storage.decimate)
    points = 500 if tf == 0.5 else 504  # communication points after t0 (0.5035: the last step is half a step)
    expected = -(-points // decimate) + 1  # every decimate-th from t0, and the last
    assert len(result.time) == expected
    for m, k in enumerate(STIFFNESS):
        reference = scalar(config(tf, dt, decimate, k), tmp_path / str(m))
        for comp, data in reference.items():
            np.testing.assert_array_equal(result.time, data["time"], err_msg=comp)
            assert not data["micro"].any()
            for port, values in data.items():
                if port in ("time", "micro"):
                    continue
                np.testing.assert_array_equal(result.history[f"{comp}.{port}"][:, m], values, err_msg=port)
                assert result.final[f"{comp}.{port}"][m] == values[-1]
    path = write_ensemble(tmp_path / "ensemble.h5", result)
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
        assert ds.sizes["time"] == expected and ds.attrs["decimate"] == decimate
        np.testing.assert_array_equal(ds["time"].values, result.time)


BALL = {"name": "bouncing_ball", "components": {"ball": {"type": "bouncing_ball", "params": {"h0": 1.0}}}}
EVENT_MEMBERS = {"ball.e": np.array([0.5, 0.7, 0.8]), "ball.h0": np.array([1.0, 0.3, 0.05])}
"""Balls that bounce at their own instants (the last one many times)."""


@pytest.mark.filterwarnings("ignore:events are handled:UserWarning")
@pytest.mark.parametrize("master", ["hybrid", "jacobi"])
def test_members_with_events_keep_what_the_thinning_recorder_keeps(master: str) -> None:
    """With events each member keeps what its scalar run's recorder keeps under ``decimate``: every N-th of its
    accepted instants counted from t0, both samples at each event instant, the last; its event port too."""
    from cosimrun.system.recorder import MemorySink, Recorder

    cfg = {**BALL, "master": {"name": master}}
    exp = build_experiment(copy.deepcopy(cfg))
    result = run_ensemble(exp.system, exp.master, EVENT_MEMBERS, t0=0.0, tf=1.0, dt=0.01, record_every=4,
                          record=["ball.h", "ball.v", "ball.bounce"])
    assert result.kinds == {"ball.bounce": "event"}
    for m in range(3):
        one = build_experiment(copy.deepcopy(cfg))
        one.system.components["ball"].set_parameters(**{k[5:]: float(v[m]) for k, v in EVENT_MEMBERS.items()})
        one.system.run(0.0, 1.0, 0.01, one.master, recorder=Recorder(MemorySink(one.system.history), decimate=4))
        histories = one.system.history.get_component_history("ball").get_all_histories()
        micro = histories["h"].micro
        assert micro.any() and np.count_nonzero(micro == 0) < 101  # thinned, with the events' samples kept
        for port, series in histories.items():  # every sample to the bit (observed difference: 0)
            time, micro, values = result.member_history(m, f"ball.{port}")
            np.testing.assert_array_equal(time, series.time)
            np.testing.assert_array_equal(micro, series.micro)
            np.testing.assert_array_equal(values, np.asarray(series.values, dtype=float), err_msg=port)


SWEEP = ["-m", "+experiment=coupled_oscillators", "run.tf=0.2", "master=jacobi", "master.extrapolation=1",
         "components.mass1.params.stiffness=5,10,15", "storage.decimate=1,3"]
LAUNCHER = ["hydra/launcher=dask", "hydra.launcher.n_workers=1", "hydra.launcher.progress=false"]


@pytest.mark.slow
def test_a_sweep_over_decimate_groups_each_value_apart_and_equals_one_job_per_member(tmp_path: Path,
                                                                                      cosimrun) -> None:
    for name, size in (("jobs", 0), ("ens", 8)):
        proc = cosimrun(*SWEEP, *LAUNCHER, f"hydra.launcher.ensemble_size={size}", f"hydra.sweep.dir={tmp_path / name}")
        assert proc.returncode == 0, proc.stderr
    jobs, ens = load_sweep(tmp_path / "jobs"), load_sweep(tmp_path / "ens")
    assert list(ens["status"]) == list(jobs["status"]) == ["complete"] * 6
    # six jobs, room for eight per ensemble: still two ensembles, one per decimate value
    files = sorted((tmp_path / "ens" / "ensembles").iterdir())
    assert len(files) == 2
    seen = set()
    for path in files:
        with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
            decimate = int(ds.attrs["decimate"])
            assert all(f"storage.decimate={decimate}" in o for o in ds["overrides"].values.tolist())
            # 200 steps: 0, 3, ..., 198, 200; the three connections' coupling-error estimates
            assert ds.sizes == {"member": 3, "time": 201 if decimate == 1 else 68, "connection": 3}
            seen.add(decimate)
    assert seen == {1, 3}
    for run in range(6):
        member, job = load_run(tmp_path / "ens", run), load_run(tmp_path / "jobs", run)
        assert isinstance(member, EnsembleMember) and isinstance(job, Results)
        assert float(jobs.loc[run, "final.mass1.x"]) == float(ens.loc[run, "final.mass1.x"])
        for comp in ("mass1", "mass2"):
            mine, theirs = member.history(comp), job.history(comp)
            assert sorted(mine) == sorted(theirs)
            for port, series in theirs.items():
                assert np.array_equal(mine[port].time, series.time), (run, comp, port)
                assert np.array_equal(mine[port].values, series.values), (run, comp, port)
