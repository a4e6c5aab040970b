"""Error-controlled communication steps (``step_control: error``) of the explicit masters.

The systems are two masses split as in ``coupled_oscillators`` (mass 1 takes
the coupling force; mass 2 carries the coupling spring and returns it),
checked against the monolithic four-state system from ``solve_ivp`` (DOP853,
rtol 1e-12). The global error is the largest position error relative to the
position's range; the target is at most 10 x rtol.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr
from helpers import replay_master, two_mass_rhs, two_mass_split
from scipy.integrate import solve_ivp

from cosimrun.components.mechanics import MassSpringDamper, MassSpringDamperForce
from cosimrun.components.sources import Step
from cosimrun.config.build import build_master, unknown_key
from cosimrun.errors import ConfigError
from cosimrun.masters import IJCSA, GaussSeidel, Jacobi, Master
from cosimrun.runner.run import prepare
from cosimrun.storage import load_results
from cosimrun.system import System

T_END = 2.0
SYSTEMS = {"coupled_oscillators": (10.0, 10.0, 100.0), "two_mass": (10.0, 20.0, 15.0)}


def split(k1: float, k2: float, kc: float, mass1: type | None = None) -> System:
    return two_mass_split(k1, k2, kc, substeps=10, mass1=mass1)


class Jump(MassSpringDamper):
    """Mass 1 whose position output jumps by 1 m at t = 0.5 s without a time event (a discontinuity)."""

    def _update_output_states(self, t=None, event_names=()):
        super()._update_output_states(t, event_names)
        if self.t >= 0.5:
            self.outputs["x"].value += 1.0


class NoRollbackJump(Jump):
    """:class:`Jump` as a component that cannot roll back."""

    @property
    def supports_rollback(self) -> bool:  # type: ignore[override]
        return False


def relative_error(system: System, k1: float, k2: float, kc: float) -> float:
    rhs = two_mass_rhs({"m1": 1.0, "m2": 1.0, "k1": k1, "k2": k2, "kc": kc, "dc": 0.0})
    ref = solve_ivp(rhs, (0.0, T_END), (1.0, 0.0, 0.0, 0.0), method="DOP853", rtol=1e-12, atol=1e-14,
                    dense_output=True).sol
    worst = 0.0
    for comp, row in (("mass1", 0), ("mass2", 2)):
        t, x = (np.asarray(a) for a in system.history.get_port_trajectory(comp, "x"))
        worst = max(worst, float(np.max(np.abs(x - ref(t)[row])) / np.ptp(x)))
    return worst


@pytest.mark.parametrize("name", SYSTEMS)
@pytest.mark.parametrize("make", [lambda **kw: Jacobi(extrapolation=2, **kw),
                                  lambda **kw: GaussSeidel(extrapolation=1, **kw)], ids=["jacobi p=2", "gs p=1"])
def test_error_control_meets_rtol(name: str, make) -> None:
    k = SYSTEMS[name]
    system = split(*k)
    master = make(step_control="error", rtol=1e-4)
    result = system.run(0.0, T_END, 1e-2, master=master)
    error = relative_error(system, *k)
    assert error <= 10 * 1e-4, error
    steps = result.steps
    accepted = steps["step"][steps["accepted"] == 1]
    assert len(accepted) == result.stats.macro_steps
    assert math.isclose(float(accepted.sum()), T_END, rel_tol=1e-12)
    assert math.isclose(accepted[0], 1e-4 * 1e-2, rel_tol=1e-6) and np.isnan(steps["error"][0])  # rtol * run.dt
    assert np.nanmax(steps["error"][steps["accepted"] == 1]) <= 1.0
    assert 0.1 < np.nanmedian(steps["error"][steps["accepted"] == 1]) <= 1.0  # steps as long as the tolerance allows
    assert result.stats.step_control == "error" and result.stats.step_rejection == "rollback"
    assert result.stats.smallest_step == accepted.min() and result.stats.largest_step == accepted.max()


def test_a_tighter_tolerance_gives_a_proportionally_smaller_error() -> None:
    k = SYSTEMS["two_mass"]
    errors = []
    for rtol in (1e-4, 1e-6):
        system = split(*k)
        system.run(0.0, T_END, 1e-3, master=Jacobi(extrapolation=2, step_control="error", rtol=rtol))
        errors.append(relative_error(system, *k))
    assert errors[1] <= 10 * 1e-6
    assert 30 < errors[0] / errors[1] < 300, errors  # about rtol's ratio, 100


def test_a_step_at_min_step_is_taken_once_and_says_the_tolerance_is_unreachable_there() -> None:
    # held inputs (Gauss-Seidel, extrapolation 0) at rtol 1e-6: mass 2's velocity input starts from 0, so its
    # tolerance is atol, and even a step of min_step holds it off by |v'| h = (k1 + kc) x0 h = 110 * 1e-9 = 11 atol
    system = split(*SYSTEMS["coupled_oscillators"])
    master = GaussSeidel(step_control="error", rtol=1e-6)  # min_step 1e-6 * run.dt: not a whole number of ticks
    with pytest.warns(UserWarning) as caught:
        result = system.run(0.0, 2e-8, 1e-3, master=master)
    log, stats = result.steps, result.stats
    assert len(log["time"]) == stats.macro_steps == 20  # every step taken once
    assert bool(log["accepted"].all()) and stats.rejected_steps == 0
    assert np.allclose(log["step"][:-1], 1e-9, rtol=1e-6)  # min_step to its tick; the last ends at tf
    assert math.isclose(log["time"][-1] + log["step"][-1], 2e-8, rel_tol=1e-12)
    assert np.allclose(log["error"][1:], 11.0, rtol=1e-3)
    assert stats.steps_at_min_step == stats.steps_over_tolerance == 19
    assert [str(w.message) for w in caught] == [
        "step control: the tolerance (rtol=1e-06, atol=1e-08) is unreachable at min_step=1e-09 s at "
        "t=1.00000034e-09 (error norm 11 on input mass2.v_in) (the input has been near 0 so far, so its tolerance "
        "is atol); such steps are taken once, over the tolerance, "
        "and counted in stats.steps_at_min_step"]


def test_rejected_steps_are_rolled_back_bit_for_bit() -> None:
    k = SYSTEMS["coupled_oscillators"]
    controlled = split(*k, mass1=Jump)
    master = Jacobi(extrapolation=2, step_control="error", rtol=1e-5)
    result = controlled.run(0.0, 1.0, 1e-2, master=master)
    assert result.stats.rejected_steps >= 3  # at the jump
    ends = sorted(set(controlled.history.get_port_trajectory("mass1", "x")[0]))[1:]
    replayed = split(*k, mass1=Jump)
    replayed.run(0.0, 1.0, 1e-2, master=replay_master(tuple(ends), extrapolation=2))
    for comp in ("mass1", "mass2"):
        for port in ("x", "v"):
            t_c, x_c = controlled.history.get_port_trajectory(comp, port)
            t_r, x_r = replayed.history.get_port_trajectory(comp, port)
            assert np.array_equal(t_c, t_r) and np.array_equal(x_c, x_r)


def test_without_rollback_the_estimate_only_shapes_the_next_step() -> None:
    k = SYSTEMS["two_mass"]
    system = split(*k, mass1=NoRollbackJump)
    master = Jacobi(extrapolation=2, step_control="error", rtol=1e-4)
    result = system.run(0.0, T_END, 1e-2, master=master)
    log = result.steps
    assert result.stats.step_rejection == "none"
    assert result.stats.rejected_steps == 0 and bool(log["accepted"].all())
    over = np.flatnonzero(log["error"] > 1.0)
    assert result.stats.steps_over_tolerance == len(over) >= 1  # the step over the jump stands
    assert log["step"][over[0] + 1] < 0.5 * log["step"][over[0]]  # and shortens the next one


def test_steps_stop_at_time_events_and_respect_max_step() -> None:
    system = split(*SYSTEMS["two_mass"])
    source = Step("kick")
    source.set_parameters(unit="m", step_time=0.3337, initial=0.0, final=1.0)
    system.add_component(source)
    sink = MassSpringDamperForce("extra")
    sink.set_parameters(mass=1.0, stiffness=1.0, coupling_stiffness=1.0, x0=0.0, v0=0.0)
    system.add_component(sink)
    system.connect("kick.y -> extra.x_in")
    master = GaussSeidel(extrapolation=1, step_control="error", rtol=1e-4, max_step=0.02)
    result = system.run(0.0, 1.0, 1e-3, master=master)
    log = result.steps
    starts = log["time"][log["accepted"] == 1]
    assert 0.3337 in starts  # a step ended exactly at the time event
    assert log["step"].max() <= 0.02 * (1 + 1e-12)


def test_a_discontinuity_is_stepped_over_at_min_step_and_counted() -> None:
    system = split(*SYSTEMS["two_mass"], mass1=Jump)
    master = Jacobi(extrapolation=1, step_control="error", rtol=1e-4, min_step=1e-7)
    with pytest.warns(UserWarning) as caught:
        result = system.run(0.0, 1.0, 1e-2, master=master)
    # a jump of an input of magnitude 1 m: its tolerance is rtol's, the notice says nothing of atol
    assert [str(w.message)[:60] for w in caught] == ["step control: the tolerance (rtol=0.0001, atol=1e-08) is unr"]
    assert "near 0" not in str(caught[0].message) and "on input mass1.force" in str(caught[0].message)
    log = result.steps
    over = (log["accepted"] == 1) & (log["error"] > 1.0)
    assert result.stats.steps_over_tolerance == int(over.sum()) >= 1
    assert np.all(np.isclose(log["step"][over], 1e-7, rtol=1e-6))  # stood only at min_step
    assert math.isclose(float(log["time"][over][-1]) + 1e-7, 0.5, abs_tol=2e-7)


@pytest.mark.parametrize(("settings", "key", "words"), [
    ({"name": "jacobi", "step_control": "eror"}, "step_control", "did you mean 'error'"),
    ({"name": "jacobi", "rtol": -1.0}, "rtol", "must be >= 0"),
    ({"name": "gauss_seidel", "min_step": 0.1, "max_step": 0.01}, "min_step", "must not exceed max_step"),
    ({"name": "ijcsa", "iterate_steps": True, "sweeps": 2}, "sweeps", "iterate_steps"),
])
def test_bad_step_control_settings_name_the_key(settings, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_master(settings)
    assert err.value.key == f"master.{key}" and words in str(err.value)


def test_the_hybrid_master_says_why_it_has_no_step_control() -> None:
    err = unknown_key("master", "step_control", {"name": "hybrid"})
    assert err.key == "master.step_control"
    assert "jacobi, gauss_seidel and ijcsa" in str(err)


@pytest.fixture(scope="module")
def fixed_step_fmu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fmus.builders import discard

    return discard(tmp_path_factory.mktemp("fixed"), variable_step=False)


def test_step_control_is_refused_with_a_fixed_step_fmu(fixed_step_fmu: Path) -> None:
    from cosimrun.components.fmu import FMUComponent

    fmu = FMUComponent("f")
    fmu.set_parameters(path=str(fixed_step_fmu))
    system = System("fixed_step")
    system.add_component(fmu)
    with pytest.raises(ConfigError, match="cannot handle variable communication step sizes") as err:
        system.run(0.0, 1.0, 0.1, master=Jacobi(step_control="error"))
    assert err.value.key == "step_control"


@pytest.mark.parametrize(("master", "tf", "key", "words"), [
    ({"name": "jacobi", "step_control": "error"}, 1.0, "master.step_control", "use step_control=fixed"),
    ({"name": "gauss_seidel"}, 1.05, None, "but tf=1.05 is not on the grid"),
])
def test_runs_a_fixed_step_fmu_cannot_take_are_refused_before_they_start(fixed_step_fmu: Path, master, tf: float,
                                                                         key: str | None, words: str) -> None:
    cfg = {"name": "fixed", "run": {"t0": 0.0, "tf": tf, "dt": 0.1}, "master": master,
           "components": {"f": {"type": "fmu", "params": {"path": str(fixed_step_fmu)}}}}
    with pytest.raises(ConfigError, match=words) as err:
        prepare(cfg)
    assert err.value.key == key


def test_a_cli_run_stores_its_steps_for_xarray(tmp_path: Path, cosimrun) -> None:
    proc = cosimrun("+experiment=coupled_oscillators", "run.tf=1.0", "run.dt=0.01", "master=jacobi",
                    "master.extrapolation=2", "master.step_control=error", "master.rtol=1e-5",
                    f"hydra.run.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"\| steps 1e-07 to \S+ s, \d+ rejected \|", proc.stdout), proc.stdout
    results = load_results(tmp_path / "results.h5")
    steps = results.steps
    assert list(steps.columns) == ["time", "step", "error", "accepted"]
    assert steps["accepted"].sum() == results.stats["macro_steps"]
    assert results.stats["step_control"] == "error" and results.stats["step_rejection"] == "rollback"
    assert results.stats["rejected_steps"] == int((~steps["accepted"]).sum())
    with xr.open_dataset(tmp_path / "results.h5", group="steps", engine="h5netcdf") as ds:
        assert ds.sizes["attempt"] == len(steps)
        assert ds["time"].attrs["units"] == "s" and ds["step"].attrs["units"] == "s"
    with h5py.File(tmp_path / "results.h5") as f:
        assert f.attrs["status"] == "complete"


def test_fixed_steps_store_no_steps_table() -> None:
    system = split(*SYSTEMS["two_mass"])
    master: Master = IJCSA()
    result = system.run(0.0, 0.1, 1e-2, master=master)
    assert result.steps is None and result.stats.step_control == "fixed"
    assert math.isnan(result.stats.smallest_step)


def test_the_cli_at_min_step_takes_each_step_once_and_says_so_in_one_line(tmp_path: Path, cosimrun) -> None:
    # the issue's case: Gauss-Seidel with held inputs at rtol 1e-6 on coupled_oscillators sits at min_step (1e-9 s)
    # while mass 2's velocity input is near 0; 2000 steps to tf = 2e-6 s, each taken once
    proc = cosimrun("+experiment=coupled_oscillators", "run.tf=2e-6", "master=gauss_seidel",
                    "master.extrapolation=0", "master.step_control=error", "master.rtol=1e-6",
                    f"hydra.run.dir={tmp_path}", timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "unreachable" in line]
    assert len(lines) == 1 and "is unreachable at min_step=1e-09 s" in lines[0], proc.stderr
    assert "on input mass2.v_in) (the input has been near 0 so far, so its tolerance is atol)" in lines[0]
    stats = load_results(tmp_path / "results.h5").stats
    assert stats["rejected_steps"] == 0 and stats["macro_steps"] == 2000
    assert stats["steps_at_min_step"] == stats["steps_over_tolerance"] == 1999  # the first step is not estimated
