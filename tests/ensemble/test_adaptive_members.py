"""Ensembles of components integrated by scipy's explicit Runge-Kutta pairs: a step size per member.

Each member's reference is ``System.run`` of a freshly built system with its parameters, computed here. The
members are chosen so that their integrators take very different numbers of steps (stiffness over two decades).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from scipy import integrate

from cosimrun.config.build import build_experiment
from cosimrun.core.ode import OdeComponent
from cosimrun.core.ode.scipy_adaptive import ADAPTIVE_METHODS
from cosimrun.ensemble import COMPLETE, FAILED, run_ensemble
from cosimrun.ensemble import members as ensemble_members
from cosimrun.ensemble.adaptive import VectorAdaptive
from cosimrun.errors import ConfigError, SimulationError
from cosimrun.masters import Jacobi
from cosimrun.system import System

T0, TF, DT = 0.0, 0.1, 0.01
RTOL = 1e-12
"""Each member's histories against its scalar run: relative, and absolute to this times the history's largest
value (a value crossing zero)."""

TWO_MASS: dict[str, Any] = {
    "name": "two_mass",
    "components": {
        "mass1": {"type": "mass_spring_damper", "params": {"mass": 1.0, "stiffness": 10.0, "x0": 1.0}},
        "mass2": {"type": "mass_spring_damper_force",
                  "params": {"mass": 1.0, "stiffness": 10.0, "coupling_stiffness": 100.0, "damping": 0.5}},
    },
    "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"],
}
PARAMS = {"mass1.stiffness": np.array([1.0, 1e4, 100.0]), "mass2.coupling_stiffness": np.array([10.0, 300.0, 1e3])}
"""Soft, stiff and in between: their integrators take very different numbers of steps."""
MASTERS = {
    "jacobi": {"name": "jacobi"},
    "jacobi_extrapolation_1": {"name": "jacobi", "extrapolation": 1},
    "gauss_seidel": {"name": "gauss_seidel"},
    "gauss_seidel_extrapolation_1": {"name": "gauss_seidel", "extrapolation": 1},
    "gauss_seidel_extrapolation_2": {"name": "gauss_seidel", "extrapolation": 2},
    "ijcsa": {"name": "ijcsa"},
    "ijcsa_iterated": {"name": "ijcsa", "iterate_steps": True},
}


def two_mass(method: str, master: str, settings: dict[str, Any] | None = None) -> Any:
    """The two-mass system under *master*, both masses integrated by *method* with the solver *settings*."""
    cfg = copy.deepcopy(TWO_MASS)
    cfg["master"] = dict(MASTERS[master])
    for comp in cfg["components"].values():
        comp["params"].update(integrator=method, **(settings or {}))
    return build_experiment(cfg)


@pytest.fixture
def integrators(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[VectorAdaptive]]:
    """The ensemble's adaptive integrators, as they are made."""
    made: list[VectorAdaptive] = []

    class Recorded(VectorAdaptive):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(ensemble_members, "VectorAdaptive", Recorded)
    yield made


def counted_scalar_run(method: str, master: str, settings: dict[str, Any], params: dict[str, float],
                       monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, np.ndarray], int]:
    """``System.run`` of one member: its recorded outputs and the steps its scipy solvers took."""
    solver = getattr(integrate, ADAPTIVE_METHODS[method])
    steps = [0]
    step = solver.step

    def counting(self: Any) -> Any:
        steps[0] += 1
        return step(self)

    exp = two_mass(method, master, settings)
    for key, value in params.items():
        comp, _, name = key.partition(".")
        exp.system.components[comp].set_parameters(**{name: value})
    with monkeypatch.context() as patch:
        patch.setattr(solver, "step", counting)
        exp.system.run(T0, TF, DT, exp.master)
    out = {}
    for name, comp in exp.system.components.items():
        for port, values in comp.get_history_arrays()[1].items():
            out[f"{name}.{port}"] = np.asarray(values, dtype=float)
    return out, steps[0]


CASES = [("rk45", "jacobi", {}), ("rk23", "jacobi", {}), ("dop853", "jacobi", {}),
         ("rk45", "gauss_seidel", {"max_substep": 0.002}), ("rk23", "jacobi_extrapolation_1", {}),
         ("dop853", "gauss_seidel_extrapolation_1", {}), ("rk45", "gauss_seidel_extrapolation_2", {}),
         ("rk23", "ijcsa", {})]
"""Every method under each fixed-step master: held inputs, inputs interpolated over the step (extrapolation 1), the
start-up step rolled back (extrapolation 2: the step sizes are restored with the states), ``max_substep``."""


@pytest.mark.parametrize(("method", "master", "settings"), CASES, ids=[f"{m}-{s}" for m, s, _ in CASES])
def test_each_member_takes_its_own_steps_and_equals_its_scalar_run(method: str, master: str, settings: dict[str, Any],
                                                                   integrators: list[VectorAdaptive],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    exp = two_mass(method, master, settings)
    result = run_ensemble(exp.system, exp.master, PARAMS, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * 3
    assert len(integrators) == 2
    steps = sum(integ.accepted for integ in integrators)
    for m in range(3):
        reference, scalar_steps = counted_scalar_run(method, master, settings,
                                                     {k: float(v[m]) for k, v in PARAMS.items()}, monkeypatch)
        assert set(reference) == set(result.history)
        for key, expected in reference.items():
            # observed: at most 1.4e-14 of the history's largest value (scipy's np.dot against sums in stage order)
            np.testing.assert_allclose(result.history[key][:, m], expected, rtol=RTOL,
                                       atol=RTOL * np.max(np.abs(expected)), err_msg=f"member {m}, {key}")
        # the member took every step its scalar run's scipy solvers took, and no other
        assert steps[m] == scalar_steps, m
    # each member its own steps: the stiff member is not held to the soft one's, nor the reverse
    assert len(set(steps.tolist())) == 3
    if method != "dop853" and not settings:  # dop853's steps span a macro step, max_substep bounds them all
        assert steps[1] > 3 * steps[0]


class Growth(OdeComponent):
    """``x' = rate * x**2``: it grows without bound at ``t = 1 / (rate * x0)``."""

    vectorizable = True

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.parameters.update(rate=1.0, integrator="rk45")
        self.add_state("x", initial=1.0)

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([self.parameters["rate"] * x[0] * x[0]])


def growth() -> System:
    system = System("growth")
    system.add_component(Growth("g"))
    return system


def test_a_member_whose_integrator_fails_fails_alone_with_the_scalar_runs_cause() -> None:
    """Member 1 grows without bound at t=0.025, member 2's derivative overflows at once: each fails where its
    scalar run stops with the integrator's error (its step size below the spacing of the numbers), with that cause;
    the others complete as their scalar runs."""
    params = {"g.rate": np.array([1.0, 40.0, 2.0, 1.0]), "g.x0": np.array([1.0, 1.0, 1e200, 0.5])}
    result = run_ensemble(growth(), Jacobi(), params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE, FAILED, FAILED, COMPLETE]
    for m in range(4):
        system = growth()
        system.components["g"].set_parameters(**{k[2:]: float(v[m]) for k, v in params.items()})
        if result.status[m] == COMPLETE:
            system.run(T0, TF, DT, Jacobi())
            expected = np.asarray(system.components["g"].get_history_arrays()[1]["x"])
            np.testing.assert_allclose(result.history["g.x"][:, m], expected, rtol=RTOL)
            continue
        with pytest.raises(SimulationError) as info, np.errstate(all="ignore"):
            system.run(T0, TF, DT, Jacobi())
        failure = result.failures[m]
        assert (failure.component, failure.variable) == ("g", "x")
        assert failure.cause == (f"integrator 'rk45' failed at t={info.value.time!r}: Required step size is less "
                                 "than spacing between numbers.")
        assert failure.last_time <= info.value.time < failure.time == pytest.approx(failure.last_time + DT)
        assert np.isnan(result.history["g.x"][-1, m]) and np.isfinite(result.final["g.x"][m])


@pytest.mark.parametrize("method", ["radau", "bdf", "lsoda", "cvode"])
def test_implicit_integrators_are_refused_naming_those_supported(method: str) -> None:
    exp = two_mass(method, "jacobi")
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, PARAMS, t0=T0, tf=TF, dt=DT)
    assert info.value.key == "components.mass1.params.integrator"
    assert str(info.value) == (f"components.mass1.params.integrator: {method!r}: ensembles integrate with 'rk4', "
                               "'rk45', 'rk23', 'dop853' only (the implicit methods are not vectorized)")


def test_adaptive_integrators_are_refused_under_the_hybrid_master_and_iterated_steps() -> None:
    """The hybrid master's event hints and trial steps, and ijcsa's iterated steps, are not reproduced per member
    with a step size each: refused in one keyed line (an integrator given in the config, or for all members)."""
    ball = {"name": "ball", "master": {"name": "hybrid"},
            "components": {"ball": {"type": "bouncing_ball", "params": {"integrator": "rk45"}}}}
    text = "'rk45': ensembles under the hybrid master integrate with 'rk4' only"
    for cfg, given in ((ball, {}), ({**ball, "components": {"ball": {"type": "bouncing_ball"}}},
                                    {"ball.integrator": "rk45"})):
        exp = build_experiment(copy.deepcopy(cfg))
        with pytest.raises(ConfigError) as info:
            run_ensemble(exp.system, exp.master, {**given, "ball.e": [0.5, 0.6]}, t0=T0, tf=TF, dt=DT)
        assert info.value.key == "components.ball.params.integrator" and text in str(info.value)
    exp = two_mass("rk45", "ijcsa_iterated")
    with pytest.raises(ConfigError) as info:
        run_ensemble(exp.system, exp.master, PARAMS, t0=T0, tf=TF, dt=DT)
    assert info.value.key == "master.iterate_steps"
    assert "mass1, mass2 integrate adaptively" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.filterwarnings("ignore:events are handled:UserWarning")
def test_members_whose_state_event_fires_handle_it_at_the_scalar_runs_point() -> None:
    """End stops seen by each member's own steps: the members that reach theirs handle the event at the point
    their scalar run handles it at (departure probes by the adaptive integrator); all equal their scalar runs."""
    cfg = {"name": "pendulum", "master": {"name": "gauss_seidel"},
           "components": {"p": {"type": "pendulum", "params": {"q_max": 0.6, "integrator": "dop853"}}}}
    params = {"p.q0": np.array([0.1, 0.59, 0.2, 0.5]), "p.omega0": np.array([0.0, 1.0, 0.5, 2.0]),
              "p.length": np.array([1.0, 0.5, 2.0, 0.3])}
    exp = build_experiment(copy.deepcopy(cfg))
    result = run_ensemble(exp.system, exp.master, params, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * 4
    for m in range(4):
        exp = build_experiment(copy.deepcopy(cfg))
        exp.system.components["p"].set_parameters(**{k[2:]: float(v[m]) for k, v in params.items()})
        run = exp.system.run(T0, TF, DT, exp.master)
        events = [when.t for when, comp, event in run.events if event == "end_stop"]
        assert bool(events) == (m in (1, 3))
        np.testing.assert_array_equal(result.member_events(m)["time"], events)
        histories = exp.system.components["p"].history.get_all_histories()
        for port in ("q", "omega"):  # every sample, those after the events at their instants too
            time, micro, values = result.member_history(m, f"p.{port}")
            np.testing.assert_array_equal(time, histories[port].time)
            np.testing.assert_array_equal(micro, histories[port].micro)
            np.testing.assert_allclose(values, histories[port].values, rtol=RTOL)
