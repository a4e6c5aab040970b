"""Ensembles: every member equals the scalar run of its parameters; failures stay with their member; refusals.

The reference for each member is ``System.run`` of a freshly built system with that member's parameters,
computed here; members are compared on a random sample.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import COMPLETE, FAILED, run_ensemble, run_members
from cosimrun.errors import ConfigError, LoopConvergenceError, NonFiniteValueError, UnknownNameError

pytestmark = pytest.mark.filterwarnings("ignore:events are handled:UserWarning")

T0, TF, DT = 0.0, 0.2, 0.001

TWO_MASS: dict[str, Any] = {
    "name": "two_mass",
    "run": {"t0": T0, "tf": TF, "dt": DT},
    "components": {
        "mass1": {"type": "mass_spring_damper", "params": {"mass": 1.0, "stiffness": 10.0, "x0": 1.0}},
        "mass2": {"type": "mass_spring_damper_force",
                  "params": {"mass": 1.0, "stiffness": 10.0, "coupling_stiffness": 100.0}},
    },
    "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"],
}

CONTROL_LOOP: dict[str, Any] = {
    "name": "control_loop",
    "run": {"t0": T0, "tf": TF, "dt": DT},
    "components": {
        "ref": {"type": "step", "params": {"initial": 0.0, "final": 1.0, "step_time": 0.05, "unit": "m"}},
        "wave": {"type": "sine", "params": {"amplitude": 0.1, "frequency": 5.0, "unit": "m"}},
        "total": {"type": "sum", "params": {"signs": "++", "unit": "m"}},
        "pid": {"type": "pid", "params": {"kp": 20.0, "ki": 5.0, "kd": 1.0, "u_max": 30.0, "u_min": -30.0,
                                          "input_unit": "m"}},
        "amp": {"type": "gain", "params": {"k": 2.0, "output_unit": "N"}},
        "limit": {"type": "saturation", "params": {"lower": -40.0, "upper": 40.0, "unit": "N"}},
        "plant": {"type": "mass_spring_damper", "params": {"mass": 1.0, "stiffness": 4.0, "damping": 0.5}},
        "sensor": {"type": "first_order_lag", "params": {"time_constant": 0.01, "unit": "m"}},
        "meter": {"type": "integrator", "params": {"k": 1.0, "input_unit": "m"}},
    },
    "connections": ["ref.y -> total.u1", "wave.y -> total.u2", "total.y -> pid.r", "sensor.y -> pid.y",
                    "pid.u -> amp.u", "amp.y -> limit.u", "limit.y -> plant.force", "plant.x -> sensor.u",
                    "plant.x -> meter.u"],
}

PENDULUM: dict[str, Any] = {
    "name": "pendulum",
    "run": {"t0": T0, "tf": TF, "dt": DT},
    "components": {
        "torque": {"type": "sine", "params": {"amplitude": 0.5, "frequency": 1.0, "unit": "N*m"}},
        "p": {"type": "pendulum", "params": {"length": 1.0, "q0": 0.5, "damping": 0.1}},
    },
    "connections": ["torque.y -> p.torque"],
}


def build(base: Mapping[str, Any], master: Mapping[str, Any]) -> Any:
    cfg = copy.deepcopy(dict(base))
    cfg["master"] = dict(master)
    return build_experiment(cfg)


def scalar_run(base: Mapping[str, Any], master: Mapping[str, Any], params: Mapping[str, float]) -> dict[str, Any]:
    """``System.run`` of one member: ``component.port`` -> recorded values."""
    out = scalar_system(base, master, params)[1]
    del out["stats"]
    return out


def scalar_system(base: Mapping[str, Any], master: Mapping[str, Any], params: Mapping[str, float],
                  tf: float = TF) -> tuple[Exception | None, dict[str, Any]]:
    """``System.run`` of one member: the error it stopped with (or ``None``) and what it recorded (with its
    statistics under ``"stats"``)."""
    exp = build(base, master)
    for key, value in params.items():
        comp, _, name = key.partition(".")
        exp.system.components[comp].set_parameters(**{name: value})
    error, stats = None, None
    try:
        stats = exp.system.run(T0, tf, DT, exp.master).stats
    except (NonFiniteValueError, LoopConvergenceError) as exc:
        error = exc
    out = {}
    for name, comp in exp.system.components.items():
        _, values = comp.get_history_arrays()
        for port, v in values.items():
            if comp.outputs[port].spec.type.value == "real":
                out[f"{name}.{port}"] = np.asarray(v, dtype=float)
    out["stats"] = stats
    return error, out


def assert_members_equal(result: Any, base: Mapping[str, Any], master: Mapping[str, Any],
                         params: Mapping[str, np.ndarray], sample: list[int], rtol: float = 0.0) -> None:
    """Every sampled member's histories equal its scalar run's (bitwise with *rtol* 0)."""
    for m in sample:
        reference = scalar_run(base, master, {k: float(v[m]) for k, v in params.items()})
        assert set(reference) == set(result.history)
        for key, expected in reference.items():
            got = result.history[key][:, m]
            assert got.shape == expected.shape, key
            if rtol == 0.0:
                np.testing.assert_array_equal(got, expected, err_msg=f"member {m}, {key}")
            else:
                np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-300, err_msg=f"member {m}, {key}")
            assert result.final[key][m] == expected[-1]


MASTERS = {
    "jacobi": {"name": "jacobi"},
    "jacobi_extrapolation_1": {"name": "jacobi", "extrapolation": 1},
    "jacobi_extrapolation_2": {"name": "jacobi", "extrapolation": 2},
    "gauss_seidel": {"name": "gauss_seidel"},
    "gauss_seidel_extrapolation_1": {"name": "gauss_seidel", "extrapolation": 1},
    "gauss_seidel_extrapolation_2": {"name": "gauss_seidel", "extrapolation": 2},
}


@pytest.mark.parametrize("master", list(MASTERS))
def test_two_mass_members_equal_their_scalar_runs_bitwise(master: str) -> None:
    rng = np.random.default_rng(25)
    m = 7
    params = {"mass1.stiffness": rng.uniform(5.0, 20.0, m), "mass1.x0": rng.uniform(0.5, 1.5, m),
              "mass2.coupling_stiffness": rng.uniform(50.0, 150.0, m), "mass2.mass": rng.uniform(0.5, 2.0, m),
              "mass2.damping": rng.uniform(0.0, 0.5, m)}
    exp = build(TWO_MASS, MASTERS[master])
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * m
    assert result.stats.macro_steps == round(TF / DT)
    assert_members_equal(result, TWO_MASS, MASTERS[master], params, sorted(rng.choice(m, 3, replace=False)))


@pytest.mark.parametrize("master", ["jacobi_extrapolation_1", "gauss_seidel"])
def test_control_loop_of_every_block_kind_equals_scalar_runs(master: str) -> None:
    """Sources, sum, PID (limits, anti-windup), gain, saturation, an ODE plant, lag and integrator."""
    rng = np.random.default_rng(7)
    m = 5
    params = {"pid.kp": rng.uniform(5.0, 40.0, m), "pid.ki": rng.uniform(0.0, 10.0, m),
              "pid.kd": rng.uniform(0.5, 2.0, m), "pid.u_max": rng.uniform(5.0, 30.0, m),
              "amp.k": rng.uniform(1.0, 3.0, m), "limit.upper": rng.uniform(10.0, 40.0, m),
              "wave.amplitude": rng.uniform(0.0, 0.2, m), "ref.final": rng.uniform(0.5, 1.5, m),
              "plant.stiffness": rng.uniform(1.0, 8.0, m), "sensor.time_constant": rng.uniform(0.005, 0.02, m)}
    exp = build(CONTROL_LOOP, MASTERS[master])
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * m
    # the limits bite for some members: the saturation and the PID clamp are exercised
    assert np.any(np.abs(result.history["pid.u"]) >= params["pid.u_max"] * (1 - 1e-12))
    assert_members_equal(result, CONTROL_LOOP, MASTERS[master], params, [0, 2, 4])


def test_pendulum_members_equal_scalar_runs() -> None:
    """``sin`` of an array is numpy's, of a member's float the math library's: equal to 1e-12 relative."""
    m = 6
    params = {"p.length": np.linspace(0.5, 2.0, m), "p.q0": np.linspace(-1.0, 1.0, m),
              "torque.phase": np.linspace(0.0, 1.0, m)}
    exp = build(PENDULUM, MASTERS["gauss_seidel"])
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert_members_equal(result, PENDULUM, MASTERS["gauss_seidel"], params, [0, 3, 5], rtol=1e-12)


IJCSA = {"name": "ijcsa", "iterate_steps": True}


def test_ijcsa_implicit_steps_equal_scalar_runs_with_their_iteration_counts() -> None:
    """Newton per member, batched: each member iterates as long as its own scalar run does."""
    rng = np.random.default_rng(3)
    m = 5
    params = {"mass1.stiffness": rng.uniform(5.0, 20.0, m), "mass2.coupling_stiffness": rng.uniform(50.0, 2000.0, m),
              "mass1.x0": rng.uniform(0.1, 2.0, m)}
    exp = build(TWO_MASS, IJCSA)
    tf = 0.05
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=tf, dt=DT)
    assert list(result.status) == [COMPLETE] * m
    for i in sorted(rng.choice(m, 3, replace=False)):
        _, reference = scalar_system(TWO_MASS, IJCSA, {k: float(v[i]) for k, v in params.items()}, tf)
        stats = reference.pop("stats")
        assert result.member(i)["stats"] == {"step_iterations": stats.step_iterations,
                                             "newton_iterations": stats.newton_iterations, "unconverged_steps": 0}
        assert set(reference) == set(result.history)
        for key, expected in reference.items():
            np.testing.assert_array_equal(result.history[key][:, i], expected, err_msg=f"member {i}, {key}")


def test_a_member_whose_implicit_step_does_not_converge_fails_alone() -> None:
    """One Newton iteration at most: members barely moving converge at once, the moving one does not."""
    master = {**IJCSA, "max_step_iterations": 1}
    params = {"mass1.x0": np.array([1e-12, 1.0, 2e-12])}
    exp = build(TWO_MASS, master)
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, COMPLETE]
    failure = result.failures[1]
    assert "did not converge in 1 iterations" in failure.cause and failure.time == pytest.approx(DT)
    error, _ = scalar_system(TWO_MASS, master, {"mass1.x0": 1.0})
    assert isinstance(error, LoopConvergenceError)
    assert_members_equal(result, TWO_MASS, master, params, [0, 2])
    # under on_nonconvergence: warn every member goes on from its best iterate, as its scalar run does
    warn = {**master, "on_nonconvergence": "warn"}
    exp = build(TWO_MASS, warn)
    with pytest.warns(UserWarning, match="did not converge"):
        result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * 3
    with pytest.warns(UserWarning, match="did not converge"):
        _, reference = scalar_system(TWO_MASS, warn, {"mass1.x0": 1.0})
    assert result.member_stats["unconverged_steps"][1] == reference["stats"].unconverged_loop_solves > 0
    assert result.member_stats["unconverged_steps"][0] == 0
    with pytest.warns(UserWarning, match="did not converge"):
        assert_members_equal(result, TWO_MASS, warn, params, [1])


def test_a_diverging_member_fails_alone_and_is_frozen() -> None:
    """Member 2's stiff spring makes RK4 unstable: its state overflows; the others complete as scalar runs."""
    stiffness = np.array([10.0, 12.0, 1e12, 8.0])
    params = {"mass1.stiffness": stiffness}
    master = MASTERS["jacobi"]
    exp = build(TWO_MASS, master)
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE, COMPLETE, FAILED, COMPLETE]
    assert result.stats.failed == 1 and result.stats.complete == 3
    failure = result.failures[2]
    assert failure.component == "mass1" and failure.variable in ("x", "v")
    assert failure.cause == "non-finite value"
    assert T0 < failure.time < TF and failure.last_time == pytest.approx(failure.time - DT, abs=1e-12)
    # the scalar run of member 2 stops at the same instant; up to its last sound point the member is that run,
    # after it the member's history is NaN and its final values are those of the last sound point
    with np.errstate(all="ignore"):
        error, reference = scalar_system(TWO_MASS, master, {"mass1.stiffness": 1e12})
    assert isinstance(error, NonFiniteValueError) and error.time == failure.time
    sound = result.time <= failure.last_time
    kept = int(sound.sum())
    np.testing.assert_array_equal(result.history["mass1.x"][sound, 2], reference["mass1.x"][:kept])
    assert np.all(np.isnan(result.history["mass1.x"][~sound, 2]))
    assert result.final["mass1.x"][2] == reference["mass1.x"][kept - 1]
    assert np.isfinite(result.final["mass1.x"][2])
    row = result.member(2)
    assert row["status"] == FAILED and "non-finite value" in row["failure"] and "mass1." in row["failure"]
    assert_members_equal(result, TWO_MASS, master, params, [0, 3])


def test_run_members_takes_one_parameter_dict_per_member() -> None:
    rows = [{"mass1.stiffness": 10.0, "mass2.coupling_stiffness": 80.0},
            {"mass1.stiffness": 15.0, "mass2.coupling_stiffness": 80.0},
            {"mass1.stiffness": 20.0, "mass2.coupling_stiffness": 120.0}]
    master = MASTERS["gauss_seidel"]
    exp = build(TWO_MASS, master)
    result = run_members(exp.system, exp.master, rows, t0=T0, tf=TF, dt=DT, record_every=50)
    assert result.members == 3
    assert result.time.tolist() == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2], abs=1e-12)
    for i, row in enumerate(rows):
        got = result.member(i)
        assert got["status"] == COMPLETE and got["failure"] is None
        assert got["parameters"] == row
        reference = scalar_run(TWO_MASS, master, row)
        assert got["final"]["mass1.x"] == reference["mass1.x"][-1]
        np.testing.assert_array_equal(result.history["mass2.force"][:, i], reference["mass2.force"][::50])
    # the system is left with its own parameters: a scalar run afterwards is the configured one
    exp.system.run(T0, TF, DT, exp.master)
    _, values = exp.system.components["mass1"].get_history_arrays()
    assert values["x"][-1] == scalar_run(TWO_MASS, master, {})["mass1.x"][-1]


def test_record_every_thins_histories_but_keeps_the_last_point() -> None:
    exp = build(TWO_MASS, MASTERS["jacobi"])
    result = run_ensemble(exp.system, exp.master, {"mass1.x0": [0.5, 1.0]}, t0=T0, tf=0.0105, dt=DT,
                          record_every=4, record=["mass1.x"])
    assert list(result.history) == ["mass1.x"]
    assert result.time.tolist() == pytest.approx([0.0, 0.004, 0.008, 0.0105], abs=1e-15)
    assert result.history["mass1.x"].shape == (4, 2)
    assert result.history["mass1.x"][0].tolist() == [0.5, 1.0]


def test_members_without_varying_parameters() -> None:
    exp = build(TWO_MASS, MASTERS["jacobi"])
    result = run_ensemble(exp.system, exp.master, members=3, t0=T0, tf=TF, dt=DT)
    reference = scalar_run(TWO_MASS, MASTERS["jacobi"], {})
    for m in range(3):
        np.testing.assert_array_equal(result.history["mass1.v"][:, m], reference["mass1.v"])


# ---------------------------------------------------------------------------- refusals
def test_a_component_that_is_not_vectorizable_is_refused_by_name() -> None:
    cfg = copy.deepcopy(TWO_MASS)
    cfg["components"]["dae"] = {"type": "pendulum_dae"}
    exp = build(cfg, MASTERS["jacobi"])
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"mass1.stiffness": [1.0, 2.0]}, t0=T0, tf=TF, dt=DT)
    message = str(info.value)
    assert info.value.key == "components.dae"
    assert "'dae' (CartesianPendulum) is not vectorizable" in message and "\n" not in message


@pytest.mark.parametrize(("master", "params", "key", "text"), [
    ({"name": "ijcsa", "step_control": "error"}, {}, "master.step_control", "fixed steps"),
    ({"name": "jacobi", "sweeps": 2}, {}, "master.sweeps", "sweeps=1"),
    ({"name": "jacobi"}, {"mass1.substeps": [5, 10]}, "mass1.substeps", "solver setting"),
    ({"name": "jacobi"}, {"mass1.max_substep": [None, 1e-4]}, "mass1.max_substep", "solver setting"),
    ({"name": "jacobi"}, {"mass1.stiffness": [1.0, -2.0]}, "mass1.stiffness", "member 1:"),
    ({"name": "jacobi"}, {"mass1.stiffness": [1.0, 2.0], "mass1.x0": [1.0, 2.0, 3.0]}, "mass1.stiffness",
     "differ in length"),
])
def test_bad_ensembles_are_refused_with_a_keyed_line(master: dict[str, Any], params: dict[str, Any], key: str,
                                                     text: str) -> None:
    exp = build(TWO_MASS, master)
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert info.value.key == key and text in str(info.value) and "\n" not in str(info.value)


def test_unknown_parameter_suggests_the_close_name() -> None:
    exp = build(TWO_MASS, MASTERS["jacobi"])
    with pytest.raises(UnknownNameError) as info:
        run_ensemble(exp.system, exp.master, {"mass1.stifness": [1.0, 2.0]}, t0=T0, tf=TF, dt=DT)
    assert info.value.suggestion == "stiffness" and info.value.key == "mass1.stifness"


def test_a_time_event_parameter_must_be_shared() -> None:
    exp = build(CONTROL_LOOP, MASTERS["jacobi"])
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"ref.step_time": [0.05, 0.1]}, t0=T0, tf=TF, dt=DT)
    assert info.value.key == "ref.step_time" and "same for all members" in str(info.value)


def test_a_member_failing_a_cross_parameter_check_is_named() -> None:
    exp = build(CONTROL_LOOP, MASTERS["jacobi"])
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"limit.lower": [-1.0, 50.0]}, t0=T0, tf=TF, dt=DT)
    assert "member 1:" in str(info.value) and "must be <= upper" in str(info.value)
    assert math.isfinite(exp.system.components["limit"].parameters["lower"])


def test_a_shared_unit_parameter_is_applied_and_put_back() -> None:
    """A parameter the same for all members may be any kind: here the saturation's unit, kN for the ensemble."""
    cfg = copy.deepcopy(CONTROL_LOOP)
    cfg["components"]["amp"]["params"]["output_unit"] = "kN"
    exp = build(cfg, MASTERS["jacobi"])
    limit = exp.system.components["limit"]
    result = run_ensemble(exp.system, exp.master, {"limit.unit": "kN", "limit.upper": [0.01, 0.02]},
                          t0=T0, tf=TF, dt=DT)
    assert result.units["limit.y"] == "kN" and float(np.max(result.history["limit.y"][:, 0])) <= 0.01
    assert limit.outputs["y"].spec.unit_name == "N" and limit.parameters["upper"] == 40.0
    reference = scalar_run(cfg, MASTERS["jacobi"], {"limit.unit": "kN", "limit.upper": 0.02})
    np.testing.assert_array_equal(result.history["plant.x"][:, 1], reference["plant.x"])


def test_members_whose_state_event_fires_handle_it_at_the_scalar_runs_point() -> None:
    """End stops: the members that reach theirs handle the event at the communication point their scalar run
    handles it at; the others (the stop out of reach) have none. All equal their scalar runs."""
    cfg = copy.deepcopy(PENDULUM)
    cfg["components"]["p"]["params"].update(q_max=0.6, damping=0.0)
    master = MASTERS["gauss_seidel"]
    params = {"p.q0": np.array([0.1, 0.59, 0.2, 0.5]), "p.omega0": np.array([0.0, 1.0, 0.5, 2.0]),
              "p.length": np.array([1.0, 0.5, 2.0, 0.3])}
    exp = build(cfg, master)
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * 4
    hit = 0
    for m in range(4):
        exp = build(cfg, master)
        exp.system.components["p"].set_parameters(**{k.split(".")[1]: float(v[m]) for k, v in params.items()})
        run = exp.system.run(T0, TF, DT, exp.master)
        events = [when.t for when, comp, event in run.events if comp == "p" and event == "end_stop"]
        np.testing.assert_array_equal(result.member_events(m)["time"], events)
        hit += bool(events)
        for port, series in exp.system.components["p"].history.get_all_histories().items():
            if f"p.{port}" not in result.history:  # an event port, not asked for: the events table
                continue
            time, micro, values = result.member_history(m, f"p.{port}")  # its samples after the events too
            np.testing.assert_array_equal(time, series.time)
            np.testing.assert_array_equal(micro, series.micro)
            np.testing.assert_allclose(values, series.values, rtol=1e-12, atol=1e-300, err_msg=f"member {m}, p.{port}")
    assert 0 < hit < 4


def test_an_integrator_given_for_all_members_and_an_algebraic_loop_are_refused() -> None:
    exp = build(TWO_MASS, MASTERS["jacobi"])
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"mass1.integrator": "radau", "mass1.x0": [1.0, 2.0]}, t0=T0, tf=TF,
                     dt=DT)
    assert info.value.key == "components.mass1.params.integrator" and "'radau'" in str(info.value)
    loop = {"name": "loop", "components": {"a": {"type": "gain", "params": {"k": 0.5}},
                                           "b": {"type": "gain", "params": {"k": 0.5}}},
            "connections": ["a.y -> b.u", "b.y -> a.u"]}
    loop["components"]["a"]["initial"] = {"u": 1.0}
    exp = build(loop, MASTERS["jacobi"])
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"a.k": [0.5, 0.25]}, t0=T0, tf=TF, dt=DT)
    assert info.value.key == "connections" and "algebraic loop" in str(info.value)


def test_only_real_parameters_may_differ_between_members() -> None:
    exp = build(CONTROL_LOOP, MASTERS["jacobi"])
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"pid.anti_windup": ["clamping", "none"]}, t0=T0, tf=TF, dt=DT)
    assert info.value.key == "pid.anti_windup" and "type choice" in str(info.value)
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, {"pid.u_max": [None, 10.0]}, t0=T0, tf=TF, dt=DT)
    assert info.value.key == "pid.u_max" and "member 0: None cannot differ" in str(info.value)


def test_chunks_give_the_ensemble_run_at_once() -> None:
    """Members run in chunks of 3: the same histories, finals, failures (indices in the whole ensemble) and
    statuses as all 7 at once; a bad value in the third chunk names its member."""
    stiffness = np.array([10.0, 12.0, 8.0, 9.0, 1e12, 11.0, 7.0])
    exp = build(TWO_MASS, MASTERS["gauss_seidel"])
    whole = run_ensemble(exp.system, exp.master, {"mass1.stiffness": stiffness, "mass2.mass": 2.0}, t0=T0, tf=TF,
                         dt=DT, record_every=7)
    parts = run_ensemble(exp.system, exp.master, {"mass1.stiffness": stiffness, "mass2.mass": 2.0}, t0=T0, tf=TF,
                         dt=DT, record_every=7, chunk=3)
    assert parts.members == 7 and list(parts.status) == list(whole.status)
    assert list(parts.failures) == [4] and parts.failures == whole.failures
    np.testing.assert_array_equal(parts.time, whole.time)
    for key in whole.history:
        np.testing.assert_array_equal(parts.history[key], whole.history[key])
        np.testing.assert_array_equal(parts.final[key], whole.final[key])
    np.testing.assert_array_equal(parts.parameters["mass1.stiffness"], stiffness)
    assert parts.parameters["mass2.mass"].tolist() == [2.0] * 7
    assert parts.stats.complete == 6 and parts.stats.macro_steps == whole.stats.macro_steps
    with pytest.raises(ConfigError, match="member 6: "):
        run_ensemble(exp.system, exp.master, {"mass1.stiffness": [*stiffness[:6], -1.0]}, t0=T0, tf=TF, dt=DT,
                     chunk=3)


def test_a_model_that_declares_vectorizable_but_is_not_is_named() -> None:
    from cosimrun.core.ode import OdeComponent
    from cosimrun.errors import ComponentContractError
    from cosimrun.masters import Jacobi
    from cosimrun.system import System

    class Scalar(OdeComponent):
        vectorizable = True

        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.parameters["rate"] = 1.0
            self.add_state("x", initial=1.0)

        def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
            return np.array([-self.parameters["rate"] * math.exp(x[0])])

    system = System("s")
    system.add_component(Scalar("decay"))
    with pytest.raises(ComponentContractError) as info:
        run_ensemble(system, Jacobi(), {"decay.rate": [1.0, 2.0]}, t0=0.0, tf=0.1, dt=0.01)
    assert "component 'decay' (Scalar) declares vectorizable, but its derivatives" in str(info.value)
    system.run(0.0, 0.1, 0.01, Jacobi())  # the scalar run is untouched


def test_parameters_may_be_named_by_their_config_path() -> None:
    """A sweep names a parameter ``components.<name>.params.<parameter>``: the same member as ``<name>.<parameter>``."""
    rows = [{"components.mass1.params.stiffness": 9.0}, {"components.mass1.params.stiffness": 14.0}]
    exp = build(TWO_MASS, MASTERS["jacobi"])
    result = run_members(exp.system, exp.master, rows, t0=T0, tf=TF, dt=DT)
    reference = scalar_run(TWO_MASS, MASTERS["jacobi"], {"mass1.stiffness": 14.0})
    np.testing.assert_array_equal(result.history["mass1.x"][:, 1], reference["mass1.x"])
    assert result.member(1)["parameters"] == {"components.mass1.params.stiffness": 14.0}
    with pytest.raises(UnknownNameError) as info:
        run_members(exp.system, exp.master, [{"components.mass3.params.mass": 1.0}], t0=T0, tf=TF, dt=DT)
    assert info.value.key == "components.mass3.params.mass" and info.value.suggestion in ("mass1", "mass2")
