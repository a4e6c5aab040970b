"""Ensembles under ``step_control: error``: every member on its own clock equals the scalar run of its parameters
(the same accepted instants, histories and step statistics), rejects steps alone, runs in chunks, is written to
and read back from the ensemble file with its own times, fails alone; what is not supported is refused.

The reference for each member is ``System.run`` of a freshly built system with that member's parameters,
computed here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_coupling_error_members import assert_tables_equal, table, table_of

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import COMPLETE, FAILED, run_ensemble
from cosimrun.ensemble import coupling as members_coupling
from cosimrun.errors import ConfigError, NonFiniteValueError
from cosimrun.storage.ensemble import EnsembleMember, write_ensemble

TWO_MASS: dict[str, Any] = {
    "name": "two_mass",
    "run": {"t0": 0.0, "tf": 0.25, "dt": 0.05},
    "components": {
        "mass1": {"type": "mass_spring_damper", "params": {"mass": 1.0, "stiffness": 10.0, "x0": 1.0}},
        "mass2": {"type": "mass_spring_damper_force",
                  "params": {"mass": 1.0, "stiffness": 10.0, "coupling_stiffness": 100.0}},
    },
    "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"],
}
STIFFNESS = np.array([10.0, 40.0, 160.0])
"""Coupling stiffness over more than a decade: the members' steps differ by about 4 from one to the next."""
STATS = ("macro_steps", "rejected_steps", "steps_over_tolerance", "steps_at_min_step", "steps_without_estimate",
         "smallest_step", "largest_step")


def controlled(name: str, extrapolation: int, **settings: Any) -> dict[str, Any]:
    """A master with ``step_control: error``: held inputs at ``rtol=0.1``, extrapolated ones at ``rtol=0.01``."""
    rtol = 0.1 if extrapolation == 0 else 0.01
    return {"name": name, "extrapolation": extrapolation, "step_control": "error", "rtol": rtol, "atol": 1e-3,
            **settings}


def build(master: Mapping[str, Any], base: Mapping[str, Any] = TWO_MASS) -> Any:
    cfg = copy.deepcopy(dict(base))
    cfg["master"] = dict(master)
    return build_experiment(cfg)


def ensemble(master: Mapping[str, Any], params: Mapping[str, np.ndarray], tf: float, dt: float, **kw: Any) -> Any:
    exp = build(master)
    return run_ensemble(exp.system, exp.master, params, t0=0.0, tf=tf, dt=dt, **kw)


def scalar_run(master: Mapping[str, Any], params: Mapping[str, float], tf: float,
               dt: float) -> tuple[Any, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``System.run`` of one member: its statistics (or the error it stopped with) and ``component.port`` ->
    (times, values) recorded."""
    exp = build(master)
    for key, value in params.items():
        comp, _, name = key.partition(".")
        exp.system.components[comp].set_parameters(**{name: value})
    try:
        outcome: Any = exp.system.run(0.0, tf, dt, exp.master).stats
    except NonFiniteValueError as exc:
        outcome = exc
    out = {}
    for name, comp in exp.system.components.items():
        times, values = comp.get_history_arrays()
        real = [port for port in values if comp.outputs[port].spec.type.value == "real"]
        out.update({f"{name}.{port}": (np.asarray(times, dtype=float), np.asarray(values[port], dtype=float))
                    for port in real})
    return outcome, out


def own_times(result: Any, m: int) -> np.ndarray:
    """Member *m*'s sample times (the NaN padding after its last one dropped)."""
    t = result.time[:, m]
    return t[~np.isnan(t)]


def assert_members_equal(result: Any, master: Mapping[str, Any], params: Mapping[str, np.ndarray], tf: float,
                         dt: float) -> None:
    """Each member's accepted instants, histories, final values and step statistics are its scalar run's
    (bitwise)."""
    for m in range(result.members):
        stats, reference = scalar_run(master, {k: float(v[m]) for k, v in params.items()}, tf, dt)
        times = own_times(result, m)
        assert set(reference) == set(result.history)
        for key, (t, expected) in reference.items():
            np.testing.assert_array_equal(times, t, err_msg=f"member {m}, {key}: times")
            np.testing.assert_array_equal(result.history[key][:len(t), m], expected, err_msg=f"member {m}, {key}")
            assert np.isnan(result.history[key][len(t):, m]).all()
            assert result.final[key][m] == expected[-1]
        for name in STATS:
            assert result.member_stats[name][m] == getattr(stats, name), (m, name)


@pytest.mark.parametrize(("name", "extrapolation", "tf", "dt"), [
    ("jacobi", 0, 0.25, 0.05), ("gauss_seidel", 0, 0.25, 0.05), ("jacobi", 2, 0.4, 0.008),
    ("gauss_seidel", 2, 0.4, 0.008)])
def test_members_equal_their_scalar_runs_on_their_own_clocks(name: str, extrapolation: int, tf: float,
                                                             dt: float) -> None:
    """Stiffness over a decade: each member takes its own steps (more for the stiffer), equal to its scalar run's;
    with extrapolation the steps grow past ``dt``, where ``rk4`` takes more substeps per member, as its run."""
    master = controlled(name, extrapolation)
    params = {"mass2.coupling_stiffness": STIFFNESS}
    result = ensemble(master, params, tf, dt)
    steps = result.member_stats["macro_steps"]
    assert list(result.status) == [COMPLETE] * 3 and steps[0] < steps[1] < steps[2]
    assert result.time.shape == (int(steps.max()) + 1, 3)
    if extrapolation:
        assert (result.member_stats["largest_step"] > dt).all()
    assert_members_equal(result, master, params, tf, dt)


AMPLIFIED: dict[str, Any] = {**TWO_MASS, "name": "two_mass_amplified",
                              "components": {**TWO_MASS["components"],
                                             "amp": {"type": "gain", "params": {"k": 2.0, "input_unit": "kN"}}},
                              "connections": [*TWO_MASS["connections"], "mass2.force -> amp.u"]}
"""The two masses with a gain that holds its input (in kN, of a force in N): under jacobi with extrapolation its link
is estimated as ``mean``, the masses' as ``taylor``; under gauss_seidel the fresh links as ``line``, the gain's as
``held``."""


@pytest.mark.parametrize(("name", "extrapolation", "kinds"), [
    ("jacobi", 1, {"taylor", "mean"}), ("jacobi", 2, {"taylor", "mean"}),
    ("gauss_seidel", 1, {"line", "taylor", "held"}), ("gauss_seidel", 2, {"line", "taylor", "held"})])
def test_each_members_extrapolated_coupling_errors_are_its_scalar_runs(
        name: str, extrapolation: int, kinds: set[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Extrapolated, interpolated and held links estimated per member on its own clock, from the points it
    accepts: each member's table is its scalar run's (1e-12 relative; observed: equal to the bit). Under
    extrapolation 2, a point of one member is folded on its column alone."""
    if extrapolation == 2:
        monkeypatch.setattr(members_coupling, "SPARSE", 1)
    estimated: list[str] = []
    monkeypatch.setattr(members_coupling.ExtrapolatedOwnClockEstimate, "_accept",
                        lambda self, given: estimated.extend(given))
    master = controlled(name, extrapolation)
    params = {"mass2.coupling_stiffness": STIFFNESS}
    exp = build(master, AMPLIFIED)
    result = run_ensemble(exp.system, exp.master, params, t0=0.0, tf=0.4, dt=0.008)
    assert list(result.status) == [COMPLETE] * 3 and len(set(result.member_stats["macro_steps"].tolist())) == 3
    assert set(estimated) == kinds
    for m in range(3):
        single = build(master, AMPLIFIED)
        single.system.components["mass2"].set_parameters(coupling_stiffness=float(STIFFNESS[m]))
        expected = table(single.system.run(0.0, 0.4, 0.008, single.master).coupling_errors)
        assert len(expected) == 4
        assert_tables_equal(table_of(result, m), expected, f"member {m}")


def test_a_member_rejects_steps_alone() -> None:
    """One member's steps are rejected and taken again shorter; the others' are not, and none waits on another
    member's step (their step counts differ): each is its scalar run."""
    master = controlled("gauss_seidel", 2)
    params = {"mass2.coupling_stiffness": np.geomspace(5.0, 500.0, 12)[[0, 5, 10]],
              "mass1.x0": np.array([-0.34053656700181567, -0.19377402710574154, -0.029618051136729884])}
    result = ensemble(master, params, 0.5, 0.004)
    rejected = result.member_stats["rejected_steps"]
    assert rejected[2] > 0 and rejected[0] == rejected[1] == 0
    assert len(set(result.member_stats["macro_steps"].tolist())) == 3
    assert_members_equal(result, master, params, 0.5, 0.004)


def test_chunks_record_every_and_the_file_give_each_member_its_own_times(tmp_path: Path) -> None:
    """Chunks of 2 equal one run; ``record_every`` keeps every 3rd accepted step and the last of each member; the
    file read back (xarray, and as one member's results) gives each member its own times and statistics."""
    master = controlled("jacobi", 0)
    params = {"mass2.coupling_stiffness": STIFFNESS}
    whole = ensemble(master, params, 0.25, 0.05, record_every=3)
    parts = ensemble(master, params, 0.25, 0.05, record_every=3, chunk=2)
    np.testing.assert_array_equal(parts.time, whole.time)
    for key in whole.history:
        np.testing.assert_array_equal(parts.history[key], whole.history[key])
        np.testing.assert_array_equal(parts.final[key], whole.final[key])
    for key in whole.member_stats:
        np.testing.assert_array_equal(parts.member_stats[key], whole.member_stats[key])
    every = ensemble(master, params, 0.25, 0.05)
    for m in range(3):
        all_times, kept = own_times(every, m), own_times(whole, m)
        steps = len(all_times) - 1
        np.testing.assert_array_equal(kept, all_times[sorted({*range(0, steps + 1, 3), steps})])

    import xarray as xr

    path = write_ensemble(tmp_path / "e.h5", whole)
    with xr.open_dataset(path, engine="h5netcdf", group="ensemble") as ds:
        assert ds["time"].dims == ("sample", "member") and ds["mass1.x"].dims == ("sample", "member")
        np.testing.assert_array_equal(ds["time"].values, whole.time)
        np.testing.assert_array_equal(ds["stats.rejected_steps"].values, whole.member_stats["rejected_steps"])
        np.testing.assert_array_equal(ds["stats.smallest_step"].values, whole.member_stats["smallest_step"])
    for m in range(3):
        member = EnsembleMember(path, m)
        assert member.components == ["mass1", "mass2"]
        series = member.history("mass1")["x"]
        np.testing.assert_array_equal(series.time, own_times(whole, m))
        np.testing.assert_array_equal(series.values, whole.history["mass1.x"][:len(series.time), m])
        assert member.stats["macro_steps"] == whole.member_stats["macro_steps"][m]
        assert member.stats["largest_step"] == whole.member_stats["largest_step"][m]
        assert member.to_dataframe("mass1").index.size == len(series.time)


def test_a_diverging_member_fails_alone_with_its_cause_and_time() -> None:
    """Member 1's stiff spring overflows in its first step (which stands unestimated, as in every run): it fails
    at that step's end, where its scalar run stops, its values those of its start; the others complete as their
    scalar runs."""
    master = controlled("jacobi", 0)
    params = {"mass1.stiffness": np.array([10.0, 1e200, 12.0])}
    result = ensemble(master, params, 0.25, 0.05)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE] and result.stats.failed == 1
    failure = result.failures[1]
    assert failure.cause == "non-finite value" and failure.component == "mass1" and failure.variable in ("x", "v")
    assert failure.last_time == 0.0 and failure.time == pytest.approx(0.1 * 0.05)
    with np.errstate(all="ignore"), pytest.warns(UserWarning, match="unreachable at min_step"):
        error, reference = scalar_run(master, {"mass1.stiffness": 1e200}, 0.25, 0.05)
    assert isinstance(error, NonFiniteValueError) and error.time == failure.time
    assert own_times(result, 1).tolist() == reference["mass1.x"][0].tolist() == [0.0]
    assert result.final["mass1.x"][1] == reference["mass1.x"][1][0]
    assert result.member_stats["macro_steps"][1] == 1 and np.isnan(result.history["mass1.x"][1:, 1]).all()
    sound = {"mass1.stiffness": params["mass1.stiffness"][[0, 2]]}
    alone = ensemble(master, sound, 0.25, 0.05)
    for key in alone.history:
        np.testing.assert_array_equal(result.history[key][:len(alone.time)][:, [0, 2]], alone.history[key])
    assert_members_equal(alone, master, sound, 0.25, 0.05)


PENDULUM: dict[str, Any] = {
    "name": "pendulum",
    "run": {"t0": 0.0, "tf": 0.2, "dt": 0.01},
    "components": {
        "torque": {"type": "constant", "params": {"value": 0.5, "unit": "N*m"}},
        "p": {"type": "pendulum", "params": {"length": 1.0, "q0": 0.5, "damping": 0.1}},
    },
    "connections": ["torque.y -> p.torque"],
}
TIMED: dict[str, Any] = {
    "name": "timed",
    "run": {"t0": 0.0, "tf": 0.2, "dt": 0.01},
    "components": {
        "ref": {"type": "step", "params": {"initial": 0.0, "final": 1.0, "step_time": 0.05, "unit": "N"}},
        "plant": {"type": "mass_spring_damper", "params": {"mass": 1.0, "stiffness": 4.0}},
    },
    "connections": ["ref.y -> plant.force"],
}


@pytest.mark.parametrize(("base", "master", "key", "message"), [
    (TWO_MASS, controlled("jacobi", 0, step_control="richardson"), "master.step_control", "step doubling"),
    (TWO_MASS, controlled("jacobi", 0, global_error="estimate"), "master.global_error", "global error"),
    (PENDULUM, controlled("jacobi", 0), "components.p", "event indicators"),
    (TIMED, controlled("gauss_seidel", 0), "components.ref", "time events"),
])
def test_what_step_control_does_not_run_is_refused(base: dict[str, Any], master: dict[str, Any], key: str,
                                                   message: str) -> None:
    exp = build(master, base)
    with pytest.raises(ConfigError, match=message) as info:
        run_ensemble(exp.system, exp.master, {}, t0=0.0, tf=0.1, dt=0.01, members=2)
    assert info.value.key == key


@pytest.mark.slow
def test_a_sweep_under_step_control_runs_as_one_ensemble_of_its_members(tmp_path: Path, cosimrun: Any) -> None:
    """A dask sweep of an experiment under ``step_control: error`` groups its members into one ensemble: its index
    rows and every member read back (``load_run``, ``load_sweep_dataset``) are each member's scalar run, on its own
    times, with its run's coupling-error estimate (``coupling_error_max``, 1e-12 relative)."""
    from cosimrun.masters.coupling_error import largest_relative
    from cosimrun.runner.load import load_run, load_sweep, load_sweep_dataset

    master = controlled("gauss_seidel", 2)
    proc = cosimrun("-m", "+experiment=coupled_oscillators", "run.tf=0.2", "run.dt=0.008", "master=gauss_seidel",
                    *(f"master.{key}={value}" for key, value in master.items() if key != "name"),
                    "components.mass2.params.coupling_stiffness=10,40,160", "hydra/launcher=dask",
                    "hydra.launcher.n_workers=1", "hydra.launcher.progress=false", f"hydra.sweep.dir={tmp_path}")
    assert proc.returncode == 0, proc.stderr
    index = load_sweep(tmp_path)
    assert list(index["status"]) == ["complete"] * 3 and list(index["member"]) == [0, 1, 2]
    assert index["path"].nunique() == 1 and index["path"].iloc[0].startswith("ensembles/")
    dataset = load_sweep_dataset(tmp_path, "mass1")
    for run, stiffness in enumerate(STIFFNESS):
        stats, reference = scalar_run(master, {"mass2.coupling_stiffness": float(stiffness)}, 0.2, 0.008)
        member = load_run(tmp_path, run)
        assert isinstance(member, EnsembleMember) and member.stats["macro_steps"] == stats.macro_steps
        single = build(master)
        single.system.components["mass2"].set_parameters(coupling_stiffness=float(stiffness))
        expected = largest_relative(single.system.run(0.0, 0.2, 0.008, single.master).coupling_errors)
        assert index["coupling_error_max"].iloc[run] == pytest.approx(expected, rel=1e-12, abs=0.0)
        for key, (times, values) in reference.items():
            comp, _, port = key.partition(".")
            series = member.history(comp)[port]
            np.testing.assert_array_equal(series.time, times)
            np.testing.assert_array_equal(series.values, values)
            assert index[f"final.{key}"].iloc[run] == values[-1]
        kept = int(dataset["n_samples"].values[run])
        assert kept == stats.macro_steps + 1
        np.testing.assert_array_equal(dataset["time"].values[run, :kept], reference["mass1.x"][0])
