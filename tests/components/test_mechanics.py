"""Mechanics: pendulum (period, energy, end stop), linear pendulum, bouncing ball, mass-spring-dampers."""

import math

import numpy as np
import pytest
from component_testing import simulate, step_with_events
from scipy.integrate import solve_ivp

from cosimrun.components.mechanics import (
    BouncingBall,
    LinearPendulum,
    MassSpringDamper,
    MassSpringDamperForce,
    Pendulum,
)
from cosimrun.errors import ConfigError, NonFiniteValueError
from cosimrun.masters import GaussSeidel, Hybrid
from cosimrun.plugins import create_component
from cosimrun.system import System

G = 9.81
TIGHT = {"integrator": "rk45", "rtol": 1e-11, "atol": 1e-12}


def upward_zero_crossings(t, q):
    i = np.nonzero((q[:-1] < 0) & (q[1:] >= 0))[0]
    return t[i] - q[i] * (t[i + 1] - t[i]) / (q[i + 1] - q[i])


def test_pendulum_ports_units_and_state_format():
    p = Pendulum("p")
    assert {n: s.unit_name for n, s in p.input_specs.items()} == {"torque": "N*m"}
    assert p.output_specs["q"].unit_name == "rad" and p.output_specs["omega"].unit_name == "rad/s"
    assert set(p.event_indicators) == {"end_stop"}
    p.set_parameters(q0="30 deg")
    assert p.get_state() == {"q": {"value": pytest.approx(math.pi / 6), "unit": "rad"},
                             "omega": {"value": 0.0, "unit": "rad/s"}}
    assert LinearPendulum("l").get_state().keys() == p.get_state().keys()


def test_pendulum_small_angle_period():
    length = 0.7
    p = create_component("pendulum", "p", {"length": length, "q0": 0.02})
    t, out = simulate(p, 6.0, 0.002)
    period = np.mean(np.diff(upward_zero_crossings(t, out["q"])))
    assert period == pytest.approx(2 * math.pi * math.sqrt(length / G), rel=1e-3)


def test_pendulum_conserves_energy_without_damping():
    p = create_component("pendulum", "p", {"q0": 2.0, "mass": 2.0, "length": 1.5, **TIGHT})
    p.initialize(0.0)
    e0 = p.energy()
    energies = []
    for k in range(50):
        p.do_step(0.1 * k, 0.1)
        energies.append(p.energy())
    assert np.max(np.abs(np.array(energies) - e0)) < 1e-8 * e0


def test_pendulum_damping_and_torque():
    p = create_component("pendulum", "p", {"damping": 0.5, "q0": 0.5, **TIGHT})
    p.initialize(0.0)
    e0 = p.energy()
    p.do_step(0.0, 2.0)
    assert p.energy() < 0.5 * e0
    # static balance: torque = m g L sin(q)
    hold = create_component("pendulum", "h", {"q0": 0.3, "mass": 2.0})
    _, out = simulate(hold, 1.0, 0.1, inputs={"torque": 2.0 * G * math.sin(0.3)})
    assert out["q"] == pytest.approx(0.3, abs=1e-12)


def test_linear_pendulum_matches_cosine():
    p = create_component("pendulum_linear", "p", {"length": 2.0, "q0": 0.4, **TIGHT})
    t, out = simulate(p, 5.0, 0.05)
    w0 = math.sqrt(G / 2.0)
    assert out["q"] == pytest.approx(0.4 * np.cos(w0 * t), abs=1e-8)
    assert out["omega"] == pytest.approx(-0.4 * w0 * np.sin(w0 * t), abs=1e-8)


def test_end_stop_reverses_velocity_with_restitution():
    p = create_component("pendulum", "p", {"omega0": 3.0, "q_max": 0.2, "restitution": 0.5, **TIGHT})
    p.initialize(0.0)
    events, qs = [], []
    for k in range(20):
        events += step_with_events(p, 0.01 * k, 0.01)
        qs.append(p.x[0])
    assert len(events) == 1
    ev = events[0]
    assert ev["names"] == ["end_stop"]
    w_hit = math.sqrt(9.0 - 2 * G * (1 - math.cos(0.2)))  # energy balance up to the stop
    assert ev["before"]["omega"] == pytest.approx(w_hit, rel=1e-6)
    assert ev["after"] == {"q": 0.2, "omega": pytest.approx(-0.5 * ev["before"]["omega"], rel=1e-12)}
    assert max(qs) <= 0.2
    assert p.outputs["end_stop"].value is False and p.x[1] < 0


def test_end_stop_under_hybrid_master():
    sys_ = System("stop")
    sys_.add_component(create_component("pendulum", "p", {"q0": 0.3, "q_max": 0.3, "omega0": -2.0,
                                                          "restitution": 0.9}))
    result = sys_.run(0.0, 3.0, 0.01, master=Hybrid())
    times = [ev[0].t for ev in result.events if ev[2] == "end_stop"]
    assert len(times) >= 3
    _, out = sys_.components["p"].get_history_arrays()
    assert np.max(np.abs(out["q"])) <= 0.3 + 1e-6


def test_end_stop_off_by_default_and_q0_check():
    p = Pendulum("p")
    p.initialize(0.0)
    assert p.evaluate_event_indicators() == {"end_stop": -1.0}
    with pytest.raises(ValueError, match=r"parameter 'q0' must lie within the end stop"):
        create_component("pendulum", "p", {"q0": 0.5, "q_max": 0.3})


def test_bouncing_ball_first_bounce_standalone():
    ball = create_component("bouncing_ball", "b", {"h0": 2.0, "e": 0.7})
    assert ball.output_specs["h"].unit_name == "m" and ball.output_specs["v"].unit_name == "m/s"
    ball.initialize(0.0)
    events = []
    for k in range(100):
        events += step_with_events(ball, 0.01 * k, 0.01)
        if events:
            break
    t1 = math.sqrt(2 * 2.0 / G)
    assert events[0]["t"] == pytest.approx(t1, abs=1e-9)
    # handled a little after the impact, at t: the rebound's state at t, just above the floor
    late = events[0]["t"] - t1
    assert 0.0 <= late <= 1e-9
    assert events[0]["after"]["v"] == pytest.approx(0.7 * G * t1 - G * late, rel=1e-9)
    assert events[0]["after"]["h"] == pytest.approx(0.7 * G * t1 * late, rel=1e-2)  # late is ~1e-13 s: a few ulp of t


def test_bouncing_ball_under_hybrid_master():
    sys_ = System("ball")
    sys_.add_component(create_component("bouncing_ball", "b", {"h0": 1.0, "e": 0.8}))
    result = sys_.run(0.0, 1.5, 0.01, master=Hybrid())
    times = [ev[0].t for ev in result.events if ev[2] == "bounce"]
    t1 = math.sqrt(2.0 / G)
    assert times[0] == pytest.approx(t1, abs=1e-8)
    assert times[1] == pytest.approx(t1 + 2 * 0.8 * G * t1 / G, abs=1e-8)
    _, out = sys_.components["b"].get_history_arrays()
    assert np.min(out["h"]) > -1e-8



@pytest.mark.timeout(30)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_bounce_from_an_overflowed_state_stops_the_run_at_the_event_instead_of_hanging():
    """Thrown down at -1e308 m/s, the ball's height overflows to -inf within the bracket of its first bounce; the
    rebound of that state is not computed (it looped forever), the run stops at the event with the overflowed
    value, and the member form of the update leaves such a column as it is."""
    sys_ = System("ball")
    ball = create_component("bouncing_ball", "b", {"h0": 1.0, "v0": -1e308})
    sys_.add_component(ball)
    with pytest.raises(NonFiniteValueError, match=r"output b\.h is -inf at t=6\.1027094489e-11") as info:
        sys_.run(0.0, 1.0, 0.01, master=Hybrid(time_tolerance=1e-10))
    assert 0.0 < info.value.time < 1e-10
    x = np.array([[-np.inf, 0.0], [-1e308, -3.0]])
    ball.resting = np.zeros(2, dtype=bool)
    after = ball._bounce(0.0, x, np.zeros(0))
    assert after[0, 0] == -np.inf and after[1, 0] == -1e308
    assert after[1, 1] == pytest.approx(0.8 * 3.0) and not ball.resting[1]


@pytest.mark.timeout(60)
def test_a_ball_without_a_rest_speed_rests_once_its_bounces_accumulate_within_a_step():
    """``v_rest = 0`` under a master that handles the bounce at the step's end: the rebound loop went on for ever
    once the rebound speed was the smallest subnormal number (``0.8 * 5e-324`` rounds back to it). The bounces
    accumulate at ``t1 (1 + e) / (1 - e)`` (t1 the first impact); the ball rests from the first step end after it,
    in the scalar run and in an ensemble's member form alike."""
    e, dt = 0.8, 0.01
    sys_ = System("ball")
    ball = create_component("bouncing_ball", "b", {"h0": 1.0, "e": e, "v_rest": 0.0})
    sys_.add_component(ball)
    sys_.run(0.0, 5.0, dt, master=GaussSeidel())
    t, out = ball.get_history_arrays()
    accumulation = math.sqrt(2.0 / G) * (1.0 + e) / (1.0 - e)
    at_rest = (out["h"] == 0.0) & (out["v"] == 0.0)
    assert ball.resting and at_rest[-1] and accumulation < t[np.argmax(at_rest)] <= accumulation + dt
    assert not at_rest[t < accumulation].any()
    ball.resting = np.zeros(2, dtype=bool)
    late = np.array([[-1e-9, -0.458], [-1e-3, -3.0]])  # a last bounce, and one 0.29 s past its impact
    after = ball._bounce(0.0, late, np.zeros(0))
    assert after[1, 0] > 0.0 and not ball.resting[0]
    assert (after[:, 1] == 0.0).all() and ball.resting[1]

def test_bouncing_ball_comes_to_rest():
    ball = create_component("bouncing_ball", "b", {"h0": 0.01, "e": 0.5, "v_rest": 0.2})
    ball.initialize(0.0)
    events = []
    for k in range(50):
        events += step_with_events(ball, 0.01 * k, 0.01)
    assert ball.resting and ball.get_outputs()["h"] == 0.0 and ball.get_outputs()["v"] == 0.0
    assert len(events) == 2  # rebound 0.22 m/s, then 0.11 m/s < v_rest
    with pytest.raises(ValueError, match=r"parameter 'h0' must be >= 0"):
        create_component("bouncing_ball", "b", {"h0": -1.0})


def test_mass_spring_damper_matches_analytic():
    m, k, d, x0, v0 = 2.0, 8.0, 0.8, 0.5, 0.3
    msd = create_component("mass_spring_damper", "m", {"mass": m, "stiffness": k, "damping": d, "x0": x0,
                                                       "v0": v0})
    assert msd.input_specs["force"].unit_name == "N"
    t, out = simulate(msd, 4.0, 0.01)
    w0 = math.sqrt(k / m)
    zeta = d / (2 * math.sqrt(k * m))
    wd = w0 * math.sqrt(1 - zeta**2)
    x = np.exp(-zeta * w0 * t) * (x0 * np.cos(wd * t) + (v0 + zeta * w0 * x0) / wd * np.sin(wd * t))
    assert out["x"] == pytest.approx(x, abs=1e-9)
    # a constant force shifts the rest position to F / k
    msd2 = create_component("mass_spring_damper", "m2", {"stiffness": 4.0, "damping": 4.0})
    _, out2 = simulate(msd2, 20.0, 0.1, inputs={"force": 2.0})
    assert out2["x"][-1] == pytest.approx(0.5, abs=1e-6)


def test_force_form_declares_feedthrough_and_units():
    f = MassSpringDamperForce("f")
    assert {n: s.unit_name for n, s in f.input_specs.items()} == {"x_in": "m", "v_in": "m/s"}
    assert f.output_specs["force"].unit_name == "N"
    f.set_parameters(coupling_stiffness=10.0, coupling_damping=2.0, x0=0.1)
    f.initialize(0.0)
    assert f.direct_feedthrough["force"] == {"x_in", "v_in"}
    assert f.direct_feedthrough["x"] == set()
    assert f.evaluate_outputs({"x_in": 0.3, "v_in": 1.0})["force"] == pytest.approx(10.0 * (0.1 - 0.3) - 2.0)


def test_two_mass_cosimulation_converges_to_monolithic():
    m1, k1, d1 = 1.0, 10.0, 0.5
    m2, k2, d2, kc, dc = 2.0, 20.0, 0.2, 50.0, 1.0
    x10, x20 = 0.1, -0.05

    def rhs(t, s):
        x1, v1, x2, v2 = s
        f = kc * (x2 - x1) + dc * (v2 - v1)
        return [v1, (-k1 * x1 - d1 * v1 + f) / m1, v2, (-k2 * x2 - d2 * v2 - f) / m2]

    def errors(dt):
        sys_ = System("two_masses")
        sys_.add_component(create_component("mass_spring_damper", "a", {
            "mass": m1, "stiffness": k1, "damping": d1, "x0": x10, "substeps": 2}))
        sys_.add_component(create_component("mass_spring_damper_force", "b", {
            "mass": m2, "stiffness": k2, "damping": d2, "coupling_stiffness": kc, "coupling_damping": dc,
            "x0": x20, "substeps": 2}))
        for c in ("a.x -> b.x_in", "a.v -> b.v_in", "b.force -> a.force"):
            sys_.connect(c)
        sys_.run(0.0, 2.0, dt, master=GaussSeidel())
        t, a = sys_.components["a"].get_history_arrays()
        _, b = sys_.components["b"].get_history_arrays()
        ref = solve_ivp(rhs, (0.0, 2.0), [x10, 0.0, x20, 0.0], t_eval=t, rtol=1e-10, atol=1e-12).y
        force = kc * (ref[2] - ref[0]) + dc * (ref[3] - ref[1])
        return (np.max(np.abs(a["x"] - ref[0])), np.max(np.abs(b["x"] - ref[2])),
                np.max(np.abs(b["force"] - force)))

    coarse, fine = errors(2e-3), errors(1e-3)
    assert fine[0] < 0.02 * x10 and fine[1] < 0.02 * x10 and fine[2] < 0.02 * kc * x10
    for e_coarse, e_fine in zip(coarse, fine, strict=True):
        assert 1.6 < e_coarse / e_fine < 2.4  # Gauss-Seidel coupling: first order in dt


@pytest.mark.parametrize(
    ("cls", "params", "message"),
    [
        (Pendulum, {"length": 0.0}, r"^length: must be a finite number > 0 \(in m\), got 0.0$"),
        (Pendulum, {"mass": -1}, r"^mass: must be a finite number > 0 \(in kg\), got -1$"),
        (Pendulum, {"mass": "-5 g"}, r"^mass: must be a finite number > 0 \(in kg\), got '-5 g' = -0.005 kg$"),
        (Pendulum, {"length": "2 s"}, r"^length: '2 s' has units of time, not of length \(m\)$"),
        (Pendulum, {"restitution": 1.5}, r"^restitution: must be a finite number >= 0 and <= 1, got 1.5$"),
        (Pendulum, {"q_max": 0}, r"^q_max: must be a finite number > 0 \(in rad, or null\), got 0$"),
        (LinearPendulum, {"damping": -0.1}, r"^damping: must be a finite number >= 0"),
        (BouncingBall, {"e": -0.1}, r"^e: must be a finite number >= 0 and <= 1"),
        (MassSpringDamper, {"stiffness": math.nan}, r"^stiffness: must be a finite number >= 0 \(in N/m\).*got nan"),
        (MassSpringDamperForce, {"coupling_damping": True}, r"^coupling_damping: must be a finite number >= 0"),
    ],
)
def test_parameter_validation(cls, params, message):
    with pytest.raises(ConfigError, match=message) as info:
        cls("x").set_parameters(**params)
    assert info.value.key == next(iter(params))


def test_quantities_are_converted_to_the_declared_unit_when_set():
    p = create_component("pendulum", "p", {"length": "80 cm", "mass": "500 g", "q_max": "45 deg"})
    assert p.parameters["length"] == pytest.approx(0.8)
    assert p.parameters["mass"] == pytest.approx(0.5)
    assert p.parameters["q_max"] == pytest.approx(math.pi / 4)


def test_unknown_parameter_lists_known_ones():
    with pytest.raises(KeyError, match=r"unknown parameter 'lenght'.*did you mean 'length'"):
        create_component("pendulum", "p", {"lenght": 1.0})


# ---------------------------------------------------------------------------- the pendulum as a DAE
DAE_TIGHT = {"rtol": 1e-10, "atol": 1e-12}
SWING = {"mass": 1.5, "length": 0.8, "damping": 0.2, "q0": 0.5, "omega0": 3.0}


def swing(comp, steps: int, dt: float, torque: float) -> np.ndarray:
    """``(q, omega)`` after each of *steps* steps of *dt* under a held *torque*."""
    comp.initialize(0.0)
    comp.set_inputs({"torque": torque})
    out = []
    for k in range(steps):
        comp.do_step(k * dt, dt)
        out.append((comp.outputs["q"].value, comp.outputs["omega"].value))
    return np.array(out)


def test_cartesian_pendulum_has_the_ports_parameters_and_state_of_pendulum():
    from cosimrun.components.mechanics import CartesianPendulum

    dae, ode = create_component("pendulum_dae", "d", {"q0": "30 deg"}), Pendulum("p")
    assert isinstance(dae, CartesianPendulum)
    for attr in ("input_specs", "output_specs"):
        assert {n: s.unit_name for n, s in getattr(dae, attr).items()} == \
               {n: s.unit_name for n, s in getattr(ode, attr).items()}
    assert set(dae.event_indicators) == {"end_stop"}
    assert set(Pendulum.PARAMETERS) | {"q0", "omega0", "rtol", "atol", "max_substep"} == set(dae.parameters)
    assert dae.get_state() == {"q": {"value": pytest.approx(math.pi / 6), "unit": "rad"},
                               "omega": {"value": 0.0, "unit": "rad/s"}}
    dae.set_state({"q": {"value": 10.0, "unit": "deg"}, "omega": 1.0}, 0.0)  # before initialize: q0, omega0
    assert dae.parameters["q0"] == pytest.approx(math.radians(10.0)) and dae.parameters["omega0"] == 1.0
    dae.initialize(0.0)
    assert dae.outputs["q"].value == pytest.approx(math.radians(10.0), abs=1e-15)
    assert dae.constraint_residuals() == pytest.approx((0.0, 0.0), abs=1e-15)
    assert dae.x[4] == pytest.approx(1.0 * (1.0 * 1.0 + G * math.cos(math.radians(10.0))))  # rod tension
    with pytest.raises(ValueError, match=r"parameter 'q0' must lie within the end stop"):
        create_component("pendulum_dae", "d", {"q0": 0.5, "q_max": 0.3})


def test_cartesian_pendulum_matches_the_angle_form_over_10_s():
    """rtol 1e-10: the errors are ~1000 rtol, as a BDF method's global error on an oscillator (cf. cvode)."""
    ode = swing(create_component("pendulum", "p", {**SWING, **TIGHT}), 1000, 0.01, 0.5)
    dae = create_component("pendulum_dae", "d", {**SWING, **DAE_TIGHT})
    out = swing(dae, 1000, 0.01, 0.5)
    error = np.max(np.abs(out - ode), axis=0)
    assert error[0] < 2e-7 and error[1] < 6e-7  # measured: 8.8e-8 rad, 3.0e-7 rad/s
    position, velocity = dae.constraint_residuals()
    assert abs(position) < 1e-7 and abs(velocity) < 1e-8  # drift of the index-1 form; measured 4.9e-8 m^2, 3.2e-9


def test_cartesian_pendulum_angle_continues_over_full_turns():
    spin = {**SWING, "omega0": 9.0, "damping": 0.0}
    ode = swing(create_component("pendulum", "p", {**spin, **TIGHT}), 200, 0.01, 0.0)
    dae = swing(create_component("pendulum_dae", "d", {**spin, **DAE_TIGHT}), 200, 0.01, 0.0)
    assert ode[-1, 0] > 4 * math.pi  # two turns and more
    assert np.max(np.abs(dae - ode), axis=0) == pytest.approx([0.0, 0.0], abs=2e-6)  # measured 5.9e-7, 1.1e-6


def test_cartesian_pendulum_end_stop_located_by_the_hybrid_master():
    def end_stops(kind: str, params: dict) -> tuple[np.ndarray, list[int]]:
        system = System("stop")
        system.add_component(create_component(kind, "p", {"q0": 0.3, "q_max": 0.3, "omega0": -2.0,
                                                          "restitution": 0.9, **params}))
        result = system.run(0.0, 3.0, 0.01, master=Hybrid())
        return np.array([ev[0].t for ev in result.events if ev[2] == "end_stop"]), result.stats.event_trial_steps

    ode, _ = end_stops("pendulum", TIGHT)
    dae, trials = end_stops("pendulum_dae", DAE_TIGHT)
    assert len(ode) == len(dae) == 7
    assert dae == pytest.approx(ode, abs=1e-8)  # measured: 1.8e-9
    assert max(trials) <= 7  # the IDA root's hint: measured 4 to 6 trial steps per event


@pytest.mark.filterwarnings("ignore:events are handled at communication points")
@pytest.mark.parametrize("master", ["jacobi", "gauss_seidel", "ijcsa", "hybrid"])
def test_cartesian_pendulum_under_every_master_matches_the_angle_form(master):
    from cosimrun.masters import IJCSA, Jacobi

    masters = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel, "ijcsa": IJCSA, "hybrid": Hybrid}

    def closed_loop(kind: str, params: dict) -> np.ndarray:
        system = System("loop")
        system.add_component(create_component("sine", "ref", {"amplitude": 40.0, "unit": "deg", "frequency": 0.25}))
        system.add_component(create_component("pid", "ctrl", {"kp": 60.0, "ki": 20.0, "kd": 8.0, "N": 50.0,
                                                              "input_unit": "rad", "output_unit": "N*m"}))
        system.add_component(create_component(kind, "p", {**SWING, **params}))
        for connection in ("ref.y -> ctrl.r", "p.q -> ctrl.y", "ctrl.u -> p.torque"):
            system.connect(connection)
        system.run(0.0, 1.0, 0.01, master=masters[master]())
        return system.components["p"].get_history_arrays()[1]["q"]

    ode = closed_loop("pendulum", TIGHT)
    dae = closed_loop("pendulum_dae", {"rtol": 1e-8, "atol": 1e-10})
    assert len(dae) == len(ode) == 101
    # the torque changes every step, so IDA restarts each step; measured 3.0e-8 (jacobi), 2.9e-6 (the others)
    assert np.max(np.abs(dae - ode)) < 2e-5


def test_cartesian_pendulum_as_a_mode_of_pendulum_switch(tmp_path):
    """experiments/pendulum_dae_switch.yaml against the all-angle-form pendulum_switch.yaml."""
    import warnings
    from pathlib import Path

    import yaml

    from cosimrun import load_results
    from cosimrun.runner.run import run_experiment

    root = Path(__file__).resolve().parents[2] / "experiments"

    def run(name: str):
        cfg = yaml.safe_load((root / f"{name}.yaml").read_text())
        cfg.pop("defaults")
        cfg["master"] = {"name": "hybrid"}
        cfg["run"]["tf"] = 5.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = run_experiment(cfg, tmp_path / name)
        assert outcome.ok, outcome.error
        return load_results(outcome.path)

    angle, dae = run("pendulum_switch"), run("pendulum_dae_switch")
    assert list(dae.mode_switches["to_mode"]) == list(angle.mode_switches["to_mode"])
    assert len(dae.mode_switches) >= 6
    # measured: switch times within 1.6e-7 s, q within 8.7e-7 rad over 5 s (7 switches, 2 end stops)
    assert dae.mode_switches["time"].to_numpy() == pytest.approx(angle.mode_switches["time"].to_numpy(), abs=1e-5)
    assert list(dae.events["event"]).count("end_stop") == list(angle.events["event"]).count("end_stop") == 2
    (t_dae, q_dae), (t_angle, q_angle) = dae.history("pendulum")["q"], angle.history("pendulum")["q"]
    assert t_dae == pytest.approx(t_angle, abs=1e-5)
    assert np.max(np.abs(q_dae - q_angle)) < 1e-5
