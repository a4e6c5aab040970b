"""FMI 2.0 and 3.0 model-exchange FMUs as components (``type: fmu`` with a model-exchange FMU), integrated by cosimrun.

The FMUs are compiled here from ``tests/fmus/me_*.c`` on the small model-exchange
frameworks ``tests/fmus/cosimrun_fmi2me.h`` and ``cosimrun_fmi3me.h`` (one model
source, either version); the references are analytic.
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

from cosimrun.components.fmu.me import ModelExchangeFMU
from cosimrun.config.build import ConfigError, build_experiment
from cosimrun.errors import FMUError
from cosimrun.masters import GaussSeidel, Hybrid, Jacobi
from cosimrun.storage import load_results
from cosimrun.system import System

G = 9.81


# ---------------------------------------------------------------------------- FMUs (built once per session)
@pytest.fixture(scope="session")
def ball_fmu(fmu_dir: Path) -> Path:
    return builders.me_bouncing_ball(fmu_dir)


@pytest.fixture(scope="session")
def ball_norollback_fmu(fmu_dir: Path) -> Path:
    return builders.me_bouncing_ball(fmu_dir, rollback=False)


@pytest.fixture(scope="session")
def linear_fmu(fmu_dir: Path) -> Path:
    return builders.me_linear(fmu_dir)


@pytest.fixture(scope="session")
def ball3_fmu(fmu_dir: Path) -> Path:
    return builders.me_bouncing_ball(fmu_dir, fmi3=True)


@pytest.fixture(scope="session")
def linear3_fmu(fmu_dir: Path) -> Path:
    return builders.me_linear(fmu_dir, fmi3=True)


@pytest.fixture(params=["2.0", "3.0"])
def fmi_version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ball_any(fmi_version: str, request: pytest.FixtureRequest) -> Path:
    """The bouncing ball in each FMI version."""
    return request.getfixturevalue("ball3_fmu" if fmi_version == "3.0" else "ball_fmu")


@pytest.fixture
def linear_any(fmi_version: str, request: pytest.FixtureRequest) -> Path:
    """The linear model in each FMI version."""
    return request.getfixturevalue("linear3_fmu" if fmi_version == "3.0" else "linear_fmu")


def me(name: str, path: Path, **params: Any) -> ModelExchangeFMU:
    return builders.component(name, path, ModelExchangeFMU, **params)


def impact_times(tf: float, e: float = 0.8, h0: float = 1.0) -> np.ndarray:
    """Analytic impacts of a ball dropped from *h0* at rest, up to *tf*."""
    t = math.sqrt(2.0 * h0 / G)
    v = G * t
    times = []
    while t <= tf:
        times.append(t)
        v *= e
        t += 2.0 * v / G
    return np.array(times)


# ---------------------------------------------------------------------------- the component
def test_a_multi_component_hands_the_crash_record_to_its_fmu_models(ball_fmu: Path, tmp_path: Path) -> None:
    """An FMU inside a multi-model component writes its steps under the multi component's name."""
    from cosimrun.core import crashsite
    from cosimrun.core.multi import MultiComponent

    low, high = me("low", ball_fmu), me("high", ball_fmu)
    multi = MultiComponent("ball", {"low": low, "high": high}, "low")
    crashsite.begin(tmp_path / "r.h5", {"ball": multi})
    try:
        assert low._site is not None and high._site is not None
        low._site[0] = 0.25
        assert crashsite.read(tmp_path / "r.h5.steps") == {"ball": 0.25}
    finally:
        crashsite.end()
    assert low._site is None and high._site is None


def test_the_time_of_a_step_in_progress_is_kept_for_a_crash_in_the_fmu(ball_fmu: Path, tmp_path: Path) -> None:
    """While a model-exchange FMU integrates a step (its C code called throughout), the crash record names it
    with the step's start; once the step returned it names nothing."""
    from cosimrun.core import crashsite

    ball = me("ball", ball_fmu)
    ball.initialize(0.0)
    record = tmp_path / "r.h5.steps"
    seen: list[dict[str, float]] = []
    integrate = ball._integrate_step

    def watched(t: float, dt: float) -> None:
        seen.append(crashsite.read(record))
        integrate(t, dt)

    ball._integrate_step = watched  # type: ignore[method-assign]
    crashsite.begin(tmp_path / "r.h5", {"ball": ball})
    try:
        ball.do_step(0.0, 0.1)
        ball.do_step(0.1, 0.1)
        assert seen == [{"ball": 0.0}, {"ball": 0.1}]
        assert crashsite.read(record) == {}
    finally:
        crashsite.end()
    assert ball._site is None and not record.exists()


def test_fmi3_indicators_are_named_by_their_variables(ball3_fmu: Path) -> None:
    ball = me("ball", ball3_fmu, e=0.7)
    assert ball.model is not None and ball.model.fmi_version == "3.0"
    assert set(ball.event_indicators) == {"z"} and ball.state_names == ("h", "v")
    assert set(ball.output_specs) == {"h", "v", "impacts"} and ball.output_specs["h"].unit_name == "m"
    ball.initialize(0.0)
    assert ball.get_outputs()["impacts"] == 0 and ball.evaluate_event_indicators() == {"z": 1.0}


def test_ports_parameters_and_states_come_from_the_model_description(ball_fmu: Path) -> None:
    ball = me("ball", ball_fmu, e=0.7, integrator="cvode", rtol=1e-9)
    assert set(ball.output_specs) == {"h", "v", "impacts"} and set(ball.input_specs) == set()
    assert ball.output_specs["h"].unit_name == "m" and ball.output_specs["v"].unit_name == "m/s"
    assert ball.state_names == ("h", "v") and set(ball.event_indicators) == {"z1"}
    assert (ball.parameters["e"], ball.parameters["integrator"], ball.parameters["rtol"]) == (0.7, "cvode", 1e-9)
    assert ball.supports_rollback and ball.interpolates_inputs
    assert ball.get_state() == {"h": {"value": 1.0, "unit": "m"}, "v": {"value": 0.0, "unit": "m/s"}}
    ball.set_state({"h": "50 cm", "v": {"value": 0.0, "unit": "m/s"}}, 0.0)  # before initialize: start values
    ball.initialize(0.0)
    assert ball.outputs["h"].value == 0.5 and ball.get_state()["h"]["value"] == 0.5
    assert set(ball.outputs) == {"h", "v", "impacts", "z1"}  # z1: the event port of indicator 1


@pytest.mark.parametrize(("version", "integrator", "tol"), [("2.0", "rk4", 1e-9), ("2.0", "cvode", 2e-9),
                                                            ("3.0", "rk4", 1e-9)])
def test_bouncing_ball_impacts_at_the_analytic_times_under_the_hybrid_master(
        ball_fmu: Path, ball3_fmu: Path, version: str, integrator: str, tol: float) -> None:
    """Each impact located to the master's time_tolerance (1e-10 s); RK4 integrates the parabola exactly,
    CVODE to rtol 1e-10, so the errors add up over the 6 impacts to well under *tol*. FMI 2.0 indicators are
    unnamed (``z1``), FMI 3.0 ones are variables (``z``)."""
    s = System("s")
    ball = s.add_component(me("ball", ball3_fmu if version == "3.0" else ball_fmu, integrator=integrator,
                              rtol=1e-10, atol=1e-12))
    result = s.run(0.0, 3.0, 0.01, master=Hybrid(time_tolerance=1e-10))
    event = "z" if version == "3.0" else "z1"
    times = np.array([ev[0].t for ev in result.events if ev[1:] == ("ball", event)])
    expected = impact_times(3.0)
    assert len(times) == len(expected) == 6
    np.testing.assert_allclose(times, expected, rtol=0, atol=tol)
    _, out = ball.get_history_arrays()
    assert out["impacts"][-1] == 6 and out["h"].min() > -1e-9


def test_bouncing_ball_under_jacobi_bounces_at_communication_points(ball_fmu: Path) -> None:
    """Without localization each impact is handled at the first communication point after it, the ball then
    below the floor: the FMU's event sets h = 0, v -> -e v. Reference: the exact parabola between grid points
    with that update at the first grid point where h < 0 (RK4 integrates the parabola exactly)."""
    dt, e = 0.01, 0.8
    s = System("s")
    ball = s.add_component(me("ball", ball_fmu))
    with pytest.warns(UserWarning, match="events are handled at communication points"):
        result = s.run(0.0, 3.0, dt, master=Jacobi())
    times = [ev[0].t for ev in result.events if ev[1:] == ("ball", "z1")]
    h, v, expected = 1.0, 0.0, []
    for k in range(1, 301):
        h, v = h + v * dt - 0.5 * G * dt * dt, v - G * dt
        if h < 0.0:
            h, v = 0.0, -e * v
            expected.append(k * dt)
    np.testing.assert_allclose(times, expected, rtol=0, atol=1e-12)
    assert all(0.0 < t - t_a <= dt for t, t_a in zip(times[:1], impact_times(3.0), strict=False))
    assert ball.get_outputs()["h"] == pytest.approx(h, abs=1e-9)
    assert ball.get_outputs()["v"] == pytest.approx(v, abs=1e-9)


def test_time_event_jumps_the_state_at_its_time(linear_any: Path) -> None:
    """x' = -x, x(0) = 1, x += 1 at t = 0.55 (off the 0.1 grid): sample at 0.55 after the jump, exact to 1e-12."""
    for master in (Jacobi(), Hybrid()):
        s = System("s")
        lin = s.add_component(me("lin", linear_any, t_jump=0.55, jump=1.0, integrator="dop853", rtol=1e-12,
                                 atol=1e-14))
        s.run(0.0, 2.0, 0.1, master=master)
        t, out = lin.get_history_arrays()
        at = int(np.flatnonzero(t == 0.55)[0])
        assert out["jumps"][at - 1] == 0 and out["jumps"][at] == 1
        assert out["x"][at] == pytest.approx(math.exp(-0.55) + 1.0, rel=1e-12)
        exact = np.where(t < 0.55, np.exp(-t), (math.exp(-0.55) + 1.0) * np.exp(-(t - 0.55)))
        np.testing.assert_allclose(out["x"], exact, rtol=1e-12)


def test_step_event_clamps_the_state_at_the_end_of_the_step(linear_fmu: Path) -> None:
    """x' = x from 1 exceeds x_max = 2 at ln 2; fmi2CompletedIntegratorStep asks for an event at the end of
    that step (t = 0.70), whose iteration clamps x, and so after every later step."""
    s = System("s")
    lin = s.add_component(me("lin", linear_fmu, a=1.0, x_max=2.0))
    s.run(0.0, 1.0, 0.01, master=Jacobi())
    t, out = lin.get_history_arrays()
    first = int(np.argmax(out["clamps"] > 0))
    assert t[first] == pytest.approx(0.70, abs=1e-12) and t[first - 1] < math.log(2.0) < t[first]
    assert out["x"].max() == 2.0 and np.all(out["x"][first:] == 2.0)
    np.testing.assert_allclose(out["x"][:first], np.exp(t[:first]), rtol=1e-8)  # RK4, 10 substeps of 1 ms


def test_two_fmus_in_a_feedback_loop_match_the_analytic_solution(linear_fmu: Path, linear3_fmu: Path) -> None:
    """p' = -p + 2 q, q' = -3 p - 0.5 q as two FMUs coupled both ways (p FMI 3.0, q FMI 2.0), against expm(A t) x0.

    Gauss-Seidel with linear extrapolation at dt = 0.01: the coupling error is 3e-4 at most (of an amplitude
    of 1), from the first steps, where the extrapolation has one sample only.
    """
    from scipy.linalg import expm

    a = np.array([[-1.0, 2.0], [-3.0, -0.5]])
    s = System("loop")
    p = s.add_component(me("p", linear3_fmu, a=a[0, 0], b=a[0, 1], start={"x": 1.0}, integrator="rk4"))
    q = s.add_component(me("q", linear_fmu, a=a[1, 1], b=a[1, 0], start={"x": 0.0}, integrator="rk4"))
    s.connect("p.x", "q.u")
    s.connect("q.x", "p.u")
    s.run(0.0, 2.0, 0.01, master=GaussSeidel(extrapolation=1))
    t, out_p = p.get_history_arrays()
    _, out_q = q.get_history_arrays()
    step = expm(a * 0.01)
    exact = np.array([np.linalg.matrix_power(step, k) @ [1.0, 0.0] for k in range(len(t))])
    np.testing.assert_allclose(t, np.arange(len(t)) * 0.01, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out_p["x"], exact[:, 0], rtol=0, atol=5e-4)
    np.testing.assert_allclose(out_q["x"], exact[:, 1], rtol=0, atol=5e-4)


# ---------------------------------------------------------------------------- rollback
def test_rollback_restores_the_fmu_state_across_a_time_event(linear_any: Path) -> None:
    lin = me("lin", linear_any, t_jump=0.5, jump=1.0)
    lin.initialize(0.0)
    lin.do_step(0.0, 0.3)
    snap = lin.snapshot_state()
    before = (lin.t, lin.get_outputs())
    lin.do_step(0.3, 0.2)  # ends at the time event: the jump happens
    after = dict(lin.get_outputs())
    assert after["jumps"] == 1
    lin.restore_state(snap, 0.3)
    assert (lin.t, lin.get_outputs()) == before and lin.next_time_event(0.3) == 0.5
    lin.do_step(0.3, 0.2)
    assert lin.get_outputs() == after  # the FMU's discrete state was restored too: the jump happens again


def test_an_fmu_without_fmu_state_handles_its_events_at_step_ends(ball_norollback_fmu: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    ball = me("ball", ball_norollback_fmu)
    assert not ball.supports_rollback and ball.event_indicators == {}
    with pytest.raises(NotImplementedError, match="does not support rollback"):
        ball.snapshot_state()
    s = System("s")
    s.add_component(ball)
    with caplog.at_level(logging.WARNING, logger="cosimrun.fmu"):
        s.run(0.0, 1.5, 0.01, master=Hybrid())
    assert "up to one step late" in caplog.text and "canGetAndSetFMUstate is false" in caplog.text
    t, out = ball.get_history_arrays()
    first = t[int(np.argmax(out["impacts"] > 0))]
    assert 0.0 < first - impact_times(1.5)[0] <= 0.01
    assert out["impacts"][-1] == 2


# ---------------------------------------------------------------------------- configs and bad input
def test_type_fmu_builds_the_model_exchange_component(ball_fmu: Path) -> None:
    for params in ({"integrator": "rk45"}, {"interface": "me", "integrator": "rk45"}):
        exp = build_experiment({"run": {"tf": 0.5, "dt": 0.01},
                                "components": {"b": {"type": "fmu", "params": {"path": str(ball_fmu), **params}}}})
        comp = exp.system.components["b"]
        assert isinstance(comp, ModelExchangeFMU) and comp.parameters["integrator"] == "rk45"


def test_an_fmu_with_both_interfaces_runs_model_exchange_only_when_asked(tmp_path: Path) -> None:
    """Co-simulation by default; with interface: me the model-exchange library (its own identifier) runs."""
    from cosimrun.components.fmu import FMUComponent

    path = builders.me_bouncing_ball_with_cs(tmp_path)

    def component(**params: Any) -> Any:
        exp = build_experiment({"components": {"b": {"type": "fmu", "params": {"path": str(path), **params}}}})
        return exp.system.components["b"]

    assert type(component()) is FMUComponent
    ball = component(interface="me")
    assert isinstance(ball, ModelExchangeFMU)
    s = System("s")
    s.add_component(ball)
    result = s.run(0.0, 1.0, 0.01, master=Hybrid())
    np.testing.assert_allclose([ev[0].t for ev in result.events], impact_times(1.0), rtol=0, atol=1e-9)


def test_output_events_and_subscriptions_work_as_for_co_simulation_fmus(ball_fmu: Path) -> None:
    """``events`` turns an output's zero crossings into events (here v falling through 0: the top of each
    flight); a subscriber's handle_event runs the FMU's event iteration, which changes nothing at the top."""
    s = System("s")
    ball = s.add_component(me("ball", ball_fmu, events={"top": {"port": "v", "direction": -1}}))
    other = s.add_component(me("other", ball_fmu))
    s.connect_event("ball.top", "other")
    assert set(ball.event_indicators) == {"top", "z1"}
    result = s.run(0.0, 2.0, 0.01, master=Hybrid())
    impacts = impact_times(2.0)
    tops = [ev[0].t for ev in result.events if ev[1:] == ("ball", "top")]
    expected = impacts + 0.8 ** np.arange(1, len(impacts) + 1) * impacts[0]  # rebound speed e^k g t1, over g
    np.testing.assert_allclose(tops, expected[expected <= 2.0], rtol=0, atol=1e-9)
    _, out = other.get_history_arrays()
    np.testing.assert_allclose(other.get_state()["v"]["value"], ball.get_state()["v"]["value"], rtol=0, atol=1e-12)
    assert out["impacts"][-1] == len(impacts)


@pytest.mark.parametrize(("params", "expected"), [
    ({"integrator": "rk5"}, r"components\.b\.params\.integrator: .*unknown integrator 'rk5'; did you mean "
                            r"'rk45' or 'rk4'\? \(valid: rk4, rk45, rk23, dop853, radau, bdf, lsoda, cvode\)"),
    ({"substeps": 0}, r"components\.b\.params\.substeps: .*substeps must be an integer >= 1, got 0"),
    ({"rtol": -1.0}, r"components\.b\.params\.rtol: .*rtol must be a finite number > 0, got -1\.0"),
    ({"states": ["h"]}, r"components\.b\.params\.states: .*'states' is for co-simulation FMUs; the physical "
                        r"state of a model-exchange FMU is its continuous states"),
    ({"interface": "cs"}, r"components\.b\.params\.interface: 'cs': me_bouncing_ball\.fmu offers model exchange "
                          r"only \(valid: me\)"),
    ({"ee": 0.5}, r"components\.b\.params\.ee: unknown parameter 'ee'.*did you mean 'e'"),
    ({"e": 1.5}, r"components\.b\.params\.e: .*must be <= 1 \(the FMU's max\), got 1\.5"),
], ids=["integrator", "substeps", "rtol", "states", "interface", "unknown", "range"])
def test_bad_parameters_name_the_key_the_value_and_what_is_valid(ball_fmu: Path, params: dict[str, Any],
                                                                 expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        build_experiment({"components": {"b": {"type": "fmu", "params": {"path": str(ball_fmu), **params}}}})


def test_model_exchange_calls_before_initialize_say_so(ball_fmu: Path) -> None:
    ball = me("ball", ball_fmu)
    with pytest.raises(RuntimeError, match=r"the FMU is not instantiated; call initialize\(t0\) first"):
        ball.derivatives(0.0, np.zeros(2), np.zeros(0))
    with pytest.raises(ValueError, match="parameter 'path' is not set"):
        ModelExchangeFMU("x").initialize(0.0)


def test_an_fmu_error_names_the_component_the_call_and_the_time(ball_any: Path, fmi_version: str) -> None:
    ball = me("ball", ball_any)
    ball.initialize(0.0)
    call = "fmi3GetContinuousStateDerivatives returned fmi3Error" if fmi_version == "3.0" \
        else "fmi2GetDerivatives returned fmi2Error"
    with pytest.raises(FMUError, match=rf"FMU component 'ball' \({ball_any.name}\): {call} at t=0\.25; FMU log: "
                                       r"\[Error\] state 0 is not finite") as info:
        ball.derivatives(0.25, np.array([math.nan, 0.0]), np.zeros(0))
    assert (info.value.component, info.value.time) == ("ball", 0.25)


@pytest.mark.slow
def test_an_experiment_from_yaml_runs_from_the_command_line(tmp_path: Path, ball_fmu: Path, ball3_fmu: Path,
                                                             cosimrun) -> None:
    """Two balls, FMI 2.0 and 3.0, from the YAML beside their FMUs; then a bad integrator: one line, exit 2."""
    command = cosimrun
    experiments = tmp_path / "conf" / "experiment"
    experiments.mkdir(parents=True)
    shutil.copy(ball_fmu, experiments / "ball.fmu")
    shutil.copy(ball3_fmu, experiments / "ball3.fmu")
    (experiments / "me_ball.yaml").write_text(
        "# @package _global_\n"
        "defaults:\n  - override /master: hybrid\n"
        "name: me_ball\n"
        "run: {t0: 0.0, tf: 2.0, dt: 0.01}\n"
        "components:\n"
        "  ball: {type: fmu, params: {path: ball.fmu, integrator: rk4, e: 0.7}}\n"
        "  ball3: {type: fmu, params: {path: ball3.fmu, interface: me, integrator: cvode, rtol: 1.0e-10,\n"
        "                              atol: 1.0e-12, e: 0.7}}\n"
    )

    def cosimrun(*args: str) -> subprocess.CompletedProcess[str]:
        return command("--config-dir", "conf", "+experiment=me_ball", *args, timeout=300)

    proc = cosimrun("hydra.run.dir=run")
    assert proc.returncode == 0, proc.stderr
    assert "me_ball: complete" in proc.stdout
    results = load_results(tmp_path / "run")
    assert results.status == "complete"
    events = results.events
    np.testing.assert_allclose(events["time"][events["event"] == "z1"], impact_times(2.0, e=0.7), rtol=0,
                               atol=1e-9)
    np.testing.assert_allclose(events["time"][events["event"] == "z"], impact_times(2.0, e=0.7), rtol=0,
                               atol=2e-9)
    proc = cosimrun("hydra.run.dir=bad", "components.ball.params.integrator=rk5")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "cosimrun: error: components.ball.params.integrator: 'rk5' is invalid: component 'ball': unknown integrator "
        "'rk5'; did you mean 'rk45' or 'rk4'? (valid: rk4, rk45, rk23, dop853, radau, bdf, lsoda, cvode)"]
    assert not (tmp_path / "bad").exists()
