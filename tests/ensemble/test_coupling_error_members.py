"""Coupling-error estimates per ensemble member: each member's table equals the ``/coupling_error`` table of the
scalar run of its parameters, in the ensemble's result, its file (read by xarray and as a member) and a sweep.

The references are the results files of ``run_experiment`` of each sampled member, written here; the ensembles
are run with the estimate's default buffer and with a buffer of a few points (many folds), in chunks of members
and with ``storage.decimate``: none of these may change a number.
"""

from __future__ import annotations

import copy
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml
from test_ensemble import CONTROL_LOOP

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import COMPLETE, FAILED, run_ensemble
from cosimrun.ensemble import coupling as members_coupling
from cosimrun.ensemble import events as located
from cosimrun.errors import ConfigError
from cosimrun.masters import coupling_error
from cosimrun.masters.coupling_error import CouplingError, largest_relative
from cosimrun.runner.load import load_run, load_sweep
from cosimrun.runner.run import run_experiment
from cosimrun.storage.ensemble import EnsembleMember, read_summary, write_ensemble
from cosimrun.storage.results import Results, load_results

ROOT = Path(__file__).resolve().parents[2]
TF, DT = 0.15, 0.001
RTOL = 1e-12
NUMBERS = ["max", "rms", "range", "relative"]


def oscillators() -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "experiments" / "coupled_oscillators.yaml").read_text())
    cfg.pop("defaults")
    return cfg


def control_loop() -> dict[str, Any]:
    """Sources, blocks, a PID and two ODEs (``test_ensemble``'s control loop): with extrapolation every kind of
    link (held, taylor, mean, line), a time event (the step) and, with ``wave`` in mm into ``total`` in m, a unit
    conversion."""
    cfg = copy.deepcopy({key: value for key, value in CONTROL_LOOP.items() if key != "run"})
    cfg["components"]["wave"]["params"].update(amplitude=100.0, unit="mm")
    return cfg


EXPERIMENTS = {
    # experiment -> (config, {parameter: (low, high)} drawn per member)
    "coupled_oscillators": (oscillators, {"mass1.stiffness": (5.0, 20.0), "mass2.coupling_stiffness": (50.0, 150.0)}),
    "control_loop": (control_loop, {"pid.kp": (5.0, 40.0), "plant.mass": (0.5, 2.0)}),
}
MASTERS = {
    "jacobi-0": {"name": "jacobi", "extrapolation": 0},
    "jacobi-2": {"name": "jacobi", "extrapolation": 2},
    "gauss_seidel-0": {"name": "gauss_seidel", "extrapolation": 0},
    "gauss_seidel-1": {"name": "gauss_seidel", "extrapolation": 1},
    "gauss_seidel-2": {"name": "gauss_seidel", "extrapolation": 2},
    "ijcsa": {"name": "ijcsa"},
    "ijcsa-iterate": {"name": "ijcsa", "iterate_steps": True},
}


def config(experiment: str, master: dict[str, Any], params: dict[str, float] | None = None,
           **storage: Any) -> dict[str, Any]:
    cfg = EXPERIMENTS[experiment][0]()
    cfg["run"] = {"t0": 0.0, "tf": TF, "dt": DT}
    cfg["master"] = dict(master)
    cfg["storage"] = dict(storage)
    for key, value in (params or {}).items():
        comp, _, name = key.partition(".")
        cfg["components"][comp]["params"][name] = value
    return cfg


def draw(experiment: str, members: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {key: rng.uniform(lo, hi, members) for key, (lo, hi) in EXPERIMENTS[experiment][1].items()}


def ensemble(cfg: dict[str, Any], params: dict[str, np.ndarray], **options: Any) -> Any:
    exp = build_experiment(copy.deepcopy(cfg))
    record = [f"{c}.{p}" for c, ports in exp.recorded.items() for p in ports] if "record" in cfg["storage"] else None
    return run_ensemble(exp.system, exp.master, params, t0=0.0, tf=TF, dt=DT, record=record, **options)


def scalar_table(cfg: dict[str, Any], out: Path) -> pd.DataFrame:
    """The ``/coupling_error`` table of the scalar run of *cfg*, from its results file."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = run_experiment(cfg, out)
    assert outcome.ok, outcome.error
    return load_results(outcome.path).coupling_error


def assert_tables_equal(got: pd.DataFrame, expected: pd.DataFrame, what: str) -> None:
    """The same connections in the same order (largest relative first), units, times of the largest estimate
    exactly, the figures to :data:`RTOL`."""
    assert len(expected) > 0, what
    assert list(got.columns) == list(expected.columns), what
    assert list(got["connection"]) == list(expected["connection"]), what
    assert list(got["unit"]) == list(expected["unit"]), what
    np.testing.assert_array_equal(got["time_of_max"].to_numpy(), expected["time_of_max"].to_numpy(), err_msg=what)
    for name in NUMBERS:
        np.testing.assert_allclose(got[name].to_numpy(), expected[name].to_numpy(), rtol=RTOL, atol=0.0,
                                   err_msg=f"{what}: {name}")


def table_of(result: Any, m: int) -> pd.DataFrame:
    """Member *m*'s estimates in the ensemble's result, as a run's table (largest relative first)."""
    return table(result.coupling_error.member(m))


def table(errors: list[CouplingError]) -> pd.DataFrame:
    """The estimates *errors* as a run's table (largest relative first)."""
    rows = sorted(errors, key=lambda e: -e.relative)
    return pd.DataFrame({"connection": [e.connection for e in rows], "unit": [e.unit or "" for e in rows],
                         **{name: [float(getattr(e, name)) for e in rows]
                            for name in ("max", "rms", "time_of_max", "range", "relative")}})


CASES = [pytest.param(experiment, master, id=f"{experiment}-{master}",
                      marks=[pytest.mark.slow] if master == "ijcsa-iterate" else [])
         for experiment in EXPERIMENTS for master in MASTERS
         if experiment == "coupled_oscillators" or master in ("jacobi-2", "gauss_seidel-0", "gauss_seidel-1", "ijcsa")]
"""Every master on the oscillators; on the control loop, those that give its links every kind of estimate (taylor
and mean: ``jacobi`` with extrapolation 2; held: ``gauss_seidel`` with 0; line: with 1) and ``ijcsa``."""


@pytest.mark.parametrize(("experiment", "master"), CASES)
def test_each_members_estimates_equal_its_scalar_runs_table(tmp_path: Path, experiment: str, master: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    members = 9
    params = draw(experiment, members, seed=len(experiment) + len(master))
    cfg = config(experiment, MASTERS[master])
    result = ensemble(cfg, params)
    path = write_ensemble(tmp_path / "ensemble.h5", result)
    monkeypatch.setattr(coupling_error, "MEMBER_BUFFER", 1)  # folds every point, moved to the front each time
    folded = ensemble(cfg, params, chunk=4)  # and three chunks of members
    monkeypatch.setattr(coupling_error, "MEMBER_BUFFER", 1 << 9)  # folds a few points, moved now and then
    monkeypatch.setattr(coupling_error, "MEMBER_BATCH", 1 << 6)
    batched = ensemble(cfg, params, chunk=4)
    assert folded.coupling_error.connections == batched.coupling_error.connections == result.coupling_error.connections
    sample = sorted(np.random.default_rng(members).choice(members, size=2, replace=False).tolist())
    for m in sample:
        expected = scalar_table(config(experiment, MASTERS[master], {k: float(v[m]) for k, v in params.items()}),
                                tmp_path / str(m))
        assert_tables_equal(table_of(result, m), expected, f"member {m}")
        assert_tables_equal(table_of(folded, m), expected, f"member {m}, folded point by point, in chunks")
        assert_tables_equal(table_of(batched, m), expected, f"member {m}, folded in batches, in chunks")
        assert_tables_equal(EnsembleMember(path, m).coupling_error, expected, f"member {m} read from its file")
        assert result.coupling_error.largest_relative()[m] == pytest.approx(expected["relative"].max(), rel=RTOL)


def test_a_decimated_ensemble_estimates_from_every_point(tmp_path: Path) -> None:
    params = draw("control_loop", 4, seed=3)
    master = MASTERS["gauss_seidel-2"]
    thinned = ensemble(config("control_loop", master), params, record_every=7)
    whole = ensemble(config("control_loop", master), params)
    assert len(thinned.time) == 23 and len(whole.time) == 151  # 150 steps: every 7th from t0, and the last
    for m in (0, 3):
        values = {k: float(v[m]) for k, v in params.items()}
        expected = scalar_table(config("control_loop", master, values), tmp_path / f"{m}-whole")
        decimated = scalar_table(config("control_loop", master, values, decimate=7), tmp_path / f"{m}-thinned")
        pd.testing.assert_frame_equal(decimated, expected, check_exact=True)  # the scalar run's does not change
        assert_tables_equal(table_of(thinned, m), expected, f"member {m}, decimated")
        for name in ("max", "rms", "time_of_max", "range"):
            np.testing.assert_array_equal(getattr(thinned.coupling_error, name)[:, m],
                                          getattr(whole.coupling_error, name)[:, m])


def test_a_link_whose_producer_is_not_recorded_is_not_estimated_as_in_a_run(tmp_path: Path) -> None:
    params = draw("coupled_oscillators", 3, seed=5)
    cfg = config("coupled_oscillators", MASTERS["jacobi-2"], record=["mass1"])
    result = ensemble(cfg, params)
    assert result.coupling_error.connections == ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in"]
    expected = scalar_table(config("coupled_oscillators", MASTERS["jacobi-2"],
                                   {k: float(v[1]) for k, v in params.items()}, record=["mass1"]), tmp_path)
    assert sorted(expected["connection"]) == sorted(result.coupling_error.connections)
    assert_tables_equal(table_of(result, 1), expected, "member 1")


def test_a_failed_member_has_no_estimates_and_the_others_keep_theirs(tmp_path: Path) -> None:
    params = {"mass1.stiffness": np.array([10.0, 1e12, 12.0])}
    cfg = config("coupled_oscillators", MASTERS["gauss_seidel-1"])
    result = ensemble(cfg, params)
    assert list(result.status) == ["complete", "failed", "complete"]
    errors = result.coupling_error
    assert np.isnan(errors.max[:, 1]).all() and errors.member(1) == []
    largest = errors.largest_relative()
    assert math.isnan(largest[1]) and np.isfinite(largest[[0, 2]]).all()
    path = write_ensemble(tmp_path / "ensemble.h5", result)
    failed = EnsembleMember(path, 1).coupling_error
    assert failed.empty
    assert list(failed.columns) == ["connection", "unit", "max", "rms", "time_of_max", "range", "relative"]
    summary = read_summary(write_ensemble(tmp_path / "jobs.h5", result, jobs=[7, 8, 9]))
    assert summary is not None
    np.testing.assert_array_equal(summary.coupling_error_max, largest)  # what a resume gives each member's row
    expected = scalar_table(config("coupled_oscillators", MASTERS["gauss_seidel-1"], {"mass1.stiffness": 12.0}),
                            tmp_path / "2")
    assert_tables_equal(EnsembleMember(path, 2).coupling_error, expected, "member 2 beside a failed one")


def test_the_estimates_are_read_by_xarray_over_connection_and_member(tmp_path: Path) -> None:
    params = draw("coupled_oscillators", 5, seed=7)
    result = ensemble(config("coupled_oscillators", MASTERS["gauss_seidel-1"]), params)
    path = write_ensemble(tmp_path / "ensemble.h5", result)
    errors = result.coupling_error
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
        assert list(ds["connection"].values) == errors.connections == [
            "mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"]
        assert list(ds["coupling_error.unit"].values) == ["m", "m/s", "N"]
        assert ds["coupling_error.max"].dims == ("connection", "member")
        assert ds["coupling_error.time_of_max"].attrs["units"] == "s"
        for name in ("max", "rms", "time_of_max", "range", "relative"):
            np.testing.assert_array_equal(ds[f"coupling_error.{name}"].values, getattr(errors, name))
        force = ds["coupling_error.relative"].sel(connection="mass2.force -> mass1.force").values
        np.testing.assert_array_equal(force, errors.relative[2])
    member = EnsembleMember(path, 3)
    assert member.components == ["mass1", "mass2"]  # the estimates are not read as a component's histories
    rows = errors.member(3)
    assert largest_relative(rows) == errors.largest_relative()[3] == member.coupling_error["relative"].iloc[0]


BALL = {"name": "ball_lag", "master": {"name": "hybrid", "time_tolerance": 1e-10},
        "components": {"ball": {"type": "bouncing_ball", "params": {"h0": 1.0, "e": 0.8, "g": 9.81}},
                       "lag": {"type": "first_order_lag", "params": {"unit": "mm/s"}},
                       "area": {"type": "integrator", "params": {"input_unit": "m"}}},
        "connections": ["ball.v -> lag.u", "ball.h -> area.u"]}
"""A bouncing ball whose speed (in m/s) a lag takes in mm/s and whose height an integrator takes."""


def test_under_the_hybrid_master_each_member_estimates_on_its_own_clock_as_its_scalar_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each member's points are its own: its grid points, its bounces (the sample before a bounce ends the step,
    the one after it starts the next: the jump of the speed counts towards its range, not its estimates). Run in
    chunks of two members, each shrinking its arrays to the members still stepping, a point of one of the two
    folded on its column alone; a member whose lag overflows in its first step fails alone, without estimates."""
    monkeypatch.setattr(located, "COMPACT", 2)
    monkeypatch.setattr(members_coupling, "SPARSE", 1)
    tf, dt, g = 1.5, 0.01, 9.81
    params = {"ball.e": np.array([0.8, 0.5, 0.3, 0.5]), "ball.h0": np.array([1.0, 0.4, 0.0, 1.0]),
              "ball.v0": np.array([0.0, 1.0, 2.0, 0.0]), "lag.time_constant": np.array([0.05, 0.1, 0.02, 1e-300])}
    exp = build_experiment(copy.deepcopy(BALL))
    result = run_ensemble(exp.system, exp.master, params, t0=0.0, tf=tf, dt=dt, chunk=2)
    assert list(result.status) == [COMPLETE] * 3 + [FAILED]
    assert result.member_stats["events"][:3].tolist() == [2, 12, 7]  # bounces at instants of their own
    path = write_ensemble(tmp_path / "ensemble.h5", result)
    for m in range(3):
        single = build_experiment(copy.deepcopy(BALL))
        for key, values in params.items():
            comp, _, name = key.partition(".")
            single.system.components[comp].set_parameters(**{name: float(values[m])})
        expected = table(single.system.run(0.0, tf, dt, single.master).coupling_errors)
        assert_tables_equal(table_of(result, m), expected, f"member {m}")
        assert_tables_equal(EnsembleMember(path, m).coupling_error, expected, f"member {m} read from its file")
    speed = result.coupling_error.connections.index("ball.v -> lag.u")
    # member 0 falls from 1 m at rest: the speed held over a step changes by g dt in flight, less over a step that
    # ends or starts at a bounce; it ranges from the impact speed down to e times it up (to time_tolerance)
    assert result.coupling_error.max[speed, 0] == pytest.approx(1e3 * g * dt, rel=1e-12)
    assert result.coupling_error.range[speed, 0] == pytest.approx(1e3 * 1.8 * math.sqrt(2 * g), rel=1e-8)
    assert result.failures[3].time == dt and result.failures[3].cause == "non-finite value"
    assert np.isnan(result.coupling_error.max[:, 3]).all() and result.coupling_error.member(3) == []


def test_an_estimate_on_members_own_clocks_refuses_links_not_held_in_one_keyed_line() -> None:
    """The hybrid master holds every input over a step; an estimate of members on their own clocks is refused
    links that another master extrapolates, rather than estimating them as held."""
    with pytest.raises(ConfigError) as info:
        members_coupling.OwnClockEstimate([], ["held", "taylor", "line"], 3, set())
    assert info.value.key == "master" and str(info.value).endswith("for links held over a step only, not line, taylor")
    assert "\n" not in str(info.value)


SWEEP = ["-m", "+experiment=coupled_oscillators", "run.tf=0.2", "master=gauss_seidel", "master.extrapolation=2",
         "components.mass1.params.stiffness=5,10,15", "components.mass2.params.coupling_stiffness=50,100"]
LAUNCHER = ["hydra/launcher=dask", "hydra.launcher.n_workers=1", "hydra.launcher.progress=false"]


@pytest.mark.slow
def test_a_sweeps_members_have_the_coupling_error_of_their_jobs(tmp_path: Path, cosimrun) -> None:
    for name, launcher in (("jobs", ["hydra/launcher=basic"]), ("ens", [*LAUNCHER, "storage.decimate=9"])):
        proc = cosimrun(*SWEEP, *launcher, f"hydra.sweep.dir={tmp_path / name}")
        assert proc.returncode == 0, proc.stderr
    jobs, ens = (load_sweep(tmp_path / name) for name in ("jobs", "ens"))
    assert (ens["member"] >= 0).all()  # the default ensemble_size groups them
    assert jobs["coupling_error_max"].notna().all()
    # decimated, the estimate is the undecimated run's
    np.testing.assert_allclose(ens["coupling_error_max"], jobs["coupling_error_max"], rtol=RTOL, atol=0.0)
    for run in range(6):
        member, job = load_run(tmp_path / "ens", run), load_run(tmp_path / "jobs", run)
        assert isinstance(member, EnsembleMember) and isinstance(job, Results)
        assert_tables_equal(member.coupling_error, job.coupling_error, f"run {run}")
    # a resume takes the members over with their estimate
    proc = cosimrun(*SWEEP, *LAUNCHER, "storage.decimate=9", "hydra.launcher.resume=true",
                    f"hydra.sweep.dir={tmp_path / 'ens'}")
    assert proc.returncode == 0, proc.stderr
    again = load_sweep(tmp_path / "ens")
    assert again["reused"].all()
    np.testing.assert_array_equal(again["coupling_error_max"], ens["coupling_error_max"])
