"""FMI 3.0 co-simulation FMUs as components (``type: fmu``), and the choice between co-simulation and model exchange.

The FMU (``tests/fmus/bouncing_ball3.c``) is built here with gcc against the
FMI 3 headers FMPy ships: a bouncing ball whose impacts are found exactly (the
parabola's root) inside ``fmi3DoStep``; with event mode it returns early at
each impact, without it bounces inside the step. Truth is the analytic
trajectory (impact times ``t1 = sqrt(2 h0 / g)``, ``t_{k+1} = t_k + 2 e^k v1 / g``)
and the same FMU run by FMPy's ``simulate_fmu``.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu

from cosimrun.components.fmu import FMUComponent, main, read_fmu
from cosimrun.components.sources import Ramp
from cosimrun.config.build import build_experiment
from cosimrun.core.ports import PortType
from cosimrun.errors import ConfigError, StepDiscarded
from cosimrun.masters import GaussSeidel, Hybrid, Jacobi
from cosimrun.plugins import create_component
from cosimrun.storage import load_results
from cosimrun.system import System

G, E, H0 = 9.81, 0.7, 1.0
TF, DT = 2.0, 0.1
TIME_TOL = 1e-12
"""Impact instants and trajectories agree to rounding: the FMU and the test solve the same parabolas."""


def impacts(tf: float = TF) -> list[float]:
    """The analytic impact instants up to *tf* (before ``t = 2.56``, where the impacts accumulate)."""
    t, v, out = math.sqrt(2.0 * H0 / G), math.sqrt(2.0 * G * H0), []
    while t <= min(tf, 2.5):
        out.append(t)
        v *= E
        t += 2.0 * v / G
    return out


def analytic(t: float, before: bool = False) -> tuple[float, float, int]:
    """``(h, v, bounces)`` at *t*, after the bounce at an impact instant (to ``TIME_TOL``), or *before* it."""
    times = impacts(t + 1.0)
    k = sum(1 for ti in times if ti <= t + TIME_TOL) - (1 if before else 0)
    if k == 0:
        return H0 - 0.5 * G * t * t, -G * t, 0
    tau, v_up = t - times[k - 1], math.sqrt(2.0 * G * H0) * E**k
    return v_up * tau - 0.5 * G * tau * tau, v_up - G * tau, k


# ---------------------------------------------------------------------------- FMUs (built once per session)
@pytest.fixture(scope="session")
def ball3(fmu_dir: Path) -> Path:
    return builders.bouncing_ball3(fmu_dir)


@pytest.fixture(scope="session")
def ball3_norollback(fmu_dir: Path) -> Path:
    return builders.bouncing_ball3(fmu_dir, rollback=False)


@pytest.fixture(scope="session")
def ball3_internal(fmu_dir: Path) -> Path:
    return builders.bouncing_ball3(fmu_dir, event_mode=False)


def run_ball(path: Path, master: Any, **params: Any) -> tuple[Any, FMUComponent]:
    system = System("s")
    ramp = system.add_component(Ramp("ramp"))
    ramp.set_parameters(slope=2.0)
    ball = system.add_component(fmu("ball", path, **params))
    system.connect("ramp.y", "ball.gain[2]")
    result = system.run(0.0, TF, DT, master=master)
    system.free()
    return result, ball


# ---------------------------------------------------------------------------- model description
def test_the_model_description_maps_types_arrays_units_and_structure(ball3: Path) -> None:
    model = read_fmu(ball3)
    assert model.fmi_version == "3.0" and set(model.interfaces) == {"cs"}
    cs = model.interfaces["cs"]
    assert cs.has_event_mode and cs.might_return_early and cs.can_rollback and cs.has_binary
    import fmpy

    assert cs.binary == f"binaries/{fmpy.platform_tuple}/bouncing_ball3{fmpy.sharedLibraryExtension}"
    comp = fmu("b", ball3)
    specs = {**comp.input_specs, **comp.output_specs}
    assert list(comp.input_specs) == ["gain[1]", "gain[2]", "gain[3]"]
    expected = {"h": PortType.REAL, "h32": PortType.REAL, "scaled[3]": PortType.REAL, "bounces": PortType.INT,
                "falling": PortType.BOOL, "phase": PortType.STRING}
    assert {name: specs[name].type for name in expected} == expected
    assert specs["v"].unit == "m/s" and specs["scaled[1]"].unit == "m" and specs["gain[1]"].unit is None
    assert comp.direct_feedthrough["scaled[2]"] == {"gain[1]", "gain[2]", "gain[3]"}
    assert comp.direct_feedthrough["h"] == set()
    assert comp.state_names == ("h", "v")
    assert [model.variables[f"gain[{i}]"].start for i in (1, 2, 3)] == [1.0, 2.0, 3.0]
    assert (model.variables["offset"].minimum, model.variables["offset"].maximum) == (-32768, 32767)
    with pytest.raises(ValueError, match=r"parameter 'offset' must be <= 32767"):
        comp.set_parameters(offset=40000)
    comp.set_parameters(g="981 cm/s**2")
    assert comp.parameters["g"] == pytest.approx(9.81, rel=1e-15)


# ---------------------------------------------------------------------------- early return and event mode
@pytest.mark.parametrize("master", [Hybrid, GaussSeidel, Jacobi])
def test_early_return_makes_each_impact_a_communication_point(ball3: Path, master: type) -> None:
    result, ball = run_ball(ball3, master(), offset=2)
    t, h = result.history.get_port_trajectory("ball", "h")
    _, v = result.history.get_port_trajectory("ball", "v")
    _, bounces = result.history.get_port_trajectory("ball", "bounces")
    expected = impacts()
    assert {(e[1], e[2]) for e in result.events} == {("ball", "early_return")}
    np.testing.assert_allclose([e[0].t for e in result.events], expected, rtol=0, atol=TIME_TOL)
    assert result.stats.discards == len(expected) == 4
    for ti in expected:  # each impact: a sample before the bounce, one after (handled in the FMU's event mode)
        k = np.flatnonzero(np.abs(t - ti) <= TIME_TOL)
        assert len(k) == 2 and t[k[0]] == t[k[1]] and v[k[0]] < 0.0 < v[k[1]]
        assert h[k[0]] == pytest.approx(0.0, abs=1e-12) and h[k[1]] == 0.0
    before = np.r_[t[1:] == t[:-1], False]
    for ti, hi, vi, ni, first in zip(t, h, v, bounces, before, strict=True):
        ha, va, na = analytic(ti, before=first)
        assert (hi, vi, ni) == (pytest.approx(ha, abs=1e-12), pytest.approx(va, abs=1e-12), na)
    _, scaled = result.history.get_port_trajectory("ball", "scaled[3]")
    np.testing.assert_array_equal(scaled, 3.0 * h + 2)  # array input gain[3] at its start value, Int16 offset


def test_same_run_as_fmpy_simulate_fmu(ball3: Path) -> None:
    import fmpy

    reference = fmpy.simulate_fmu(str(ball3), stop_time=TF, output_interval=DT, use_event_mode=True,
                                  early_return_allowed=True, output=["h", "v", "bounces"])
    result, _ = run_ball(ball3, Hybrid())
    t, h = result.history.get_port_trajectory("ball", "h")
    _, v = result.history.get_port_trajectory("ball", "v")
    _, n = result.history.get_port_trajectory("ball", "bounces")
    # both sample an impact twice: before the event and after it
    np.testing.assert_allclose(t, reference["time"], rtol=0, atol=TIME_TOL)
    np.testing.assert_allclose(h, reference["h"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, reference["v"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(n, reference["bounces"])
    # no search: one trial per communication point (20 grid steps and the 4 impacts), none to locate an event
    assert result.stats.trial_steps == result.stats.macro_steps == 24 and result.stats.event_trial_steps == []


def test_array_input_from_a_connection(ball3: Path) -> None:
    result, _ = run_ball(ball3, GaussSeidel(), offset=-1, start={"gain[1]": 5.0, "h": 0.5})
    t, h = result.history.get_port_trajectory("ball", "h")
    _, scaled = result.history.get_port_trajectory("ball", "scaled[2]")
    _, ramp = result.history.get_port_trajectory("ramp", "y")
    np.testing.assert_allclose(ramp, 2.0 * t, rtol=0, atol=1e-15)
    np.testing.assert_allclose(scaled, ramp * h - 1, rtol=0, atol=1e-15)
    # a start value of one element (the array is set whole, the others at their start values), and of a state
    _, scaled1 = result.history.get_port_trajectory("ball", "scaled[1]")
    _, scaled3 = result.history.get_port_trajectory("ball", "scaled[3]")
    np.testing.assert_array_equal(scaled1, 5.0 * h - 1)
    np.testing.assert_array_equal(scaled3, 3.0 * h - 1)
    assert h[0] == 0.5 and h[1] == pytest.approx(0.5 - 0.5 * G * DT**2, abs=1e-15)


def test_without_event_mode_the_fmu_bounces_inside_its_steps(ball3_internal: Path) -> None:
    result, _ = run_ball(ball3_internal, Hybrid())
    t, h = result.history.get_port_trajectory("ball", "h")
    _, n = result.history.get_port_trajectory("ball", "bounces")
    np.testing.assert_allclose(t, np.linspace(0.0, TF, 21), rtol=0, atol=1e-15)  # no extra communication point
    assert result.stats.discards == 0 and not result.events
    np.testing.assert_allclose(h, [analytic(ti)[0] for ti in t], rtol=0, atol=1e-12)
    assert n[-1] == len(impacts())


def test_passive_fmu_without_rollback_is_cut_at_its_impacts_too(ball3_norollback: Path) -> None:
    result, ball = run_ball(ball3_norollback, Hybrid())
    assert not ball.supports_rollback
    np.testing.assert_allclose([e[0].t for e in result.events], impacts(), rtol=0, atol=TIME_TOL)
    t, h = result.history.get_port_trajectory("ball", "h")
    np.testing.assert_allclose(h, [analytic(ti)[0] for ti in t], rtol=0, atol=1e-12)
    with pytest.raises(NotImplementedError, match="does not support rollback"):
        fmu("b", ball3_norollback).snapshot_state()


def test_an_event_at_a_step_end_is_recorded_with_the_samples_before_and_after_it(ball3: Path) -> None:
    from cosimrun.components.sources import Step

    system = System("s")
    ball = system.add_component(fmu("ball", ball3))
    cut = system.add_component(Step("cut"))
    t1 = impacts()[0]
    cut.set_parameters(step_time=t1)  # a time event: a communication point at the first impact
    result = system.run(0.0, 0.5, DT, master=Jacobi())
    events = [(e[0].t, e[1], e[2]) for e in result.events]
    assert events == [(t1, "ball", "event")] and result.stats.discards == 0
    t, v = result.history.get_port_trajectory("ball", "v")
    k = np.flatnonzero(t == t1)
    assert len(k) == 2 and v[k[0]] < 0.0 < v[k[1]] and ball.pending_event is None


# ---------------------------------------------------------------------------- rollback
def test_rollback_through_fmu_states_also_across_an_event(ball3: Path) -> None:
    ball = fmu("b", ball3)
    ball.initialize(0.0)
    ball.do_step(0.0, 0.4)
    snap = ball.snapshot_state()
    with pytest.raises(StepDiscarded) as caught:
        ball.do_step(0.4, 0.1)
    assert caught.value.last_successful_time == pytest.approx(impacts()[0], abs=TIME_TOL)
    assert ball.t == caught.value.last_successful_time
    assert ball.pending_event == "early_return" and ball.outputs["bounces"].value == 0  # before the event
    assert ball.outputs["v"].value < 0.0
    ball.handle_event([ball.pending_event], ball.t)
    after = {name: port.value for name, port in ball.outputs.items()}
    assert after["h"] == 0.0 and after["bounces"] == 1 and after["phase"] == "rising" and after["falling"] is False
    assert ball.pending_event is None
    ball.restore_state(snap, 0.4)
    assert ball.outputs["bounces"].value == 0 and ball.outputs["v"].value == pytest.approx(-G * 0.4, abs=1e-12)
    with pytest.raises(StepDiscarded):
        ball.do_step(0.4, 0.1)
    ball.handle_event([ball.pending_event], ball.t)
    assert {name: port.value for name, port in ball.outputs.items()} == after
    ball.do_step(ball.t, 0.5 - ball.t)
    assert ball.outputs["h"].value == pytest.approx(analytic(0.5)[0], abs=1e-12)
    ball.free()


# ---------------------------------------------------------------------------- bad inputs and the interface choice
def test_interface_choice_and_refusals_name_the_key(tmp_path: Path, ball3: Path) -> None:
    def build(params: dict[str, Any]) -> None:
        build_experiment({"components": {"ball": {"type": "fmu", "params": params}}})

    with pytest.raises(ConfigError, match=r"^components\.ball\.params\.interface: 'me': bouncing_ball3.fmu offers "
                                          r"co-simulation only \(valid: cs\)$"):
        build({"path": str(ball3), "interface": "me"})
    with pytest.raises(ConfigError, match=r"^components\.ball\.params\.interface: 'xx' is not an FMU interface; "
                                          r"valid: cs \(co-simulation\), me \(model exchange\)$"):
        build({"path": str(ball3), "interface": "xx"})
    with pytest.raises(ConfigError, match=r"^components\.ball\.params\.integrator: an integrator applies to model "
                                          r"exchange only"):
        build({"path": str(ball3), "integrator": "rk4"})
    clocked = builders.fmi3_clocked(tmp_path)
    with pytest.raises(ConfigError, match=r"^components\.ball\.params\.path: .*clocked.fmu declares clocks \(tick\); "
                                          r"cosimrun does not run FMI 3 clocks"):
        build({"path": str(clocked)})
    with pytest.raises(ValueError, match=r"parameter 'interface' is 'me', but FMUComponent runs co-simulation"):
        fmu("b", ball3, interface="me")


def test_type_fmu_picks_the_class_from_the_file(tmp_path: Path, ball3: Path) -> None:
    me_only = builders.model_exchange_only(tmp_path)
    from cosimrun.components.fmu.me import ModelExchangeFMU

    assert FMUComponent.resolve_class({"path": str(ball3)}) is FMUComponent
    assert FMUComponent.resolve_class({"path": str(me_only)}) is ModelExchangeFMU
    assert FMUComponent.resolve_class({"path": str(ball3), "interface": "cs"}) is FMUComponent
    assert FMUComponent.resolve_class({"path": str(tmp_path / "missing.fmu")}) is FMUComponent  # reported on path
    assert type(create_component("fmu", "b", {"path": str(ball3)})) is FMUComponent
    with pytest.raises(ConfigError, match=r"^params\.interface: 'cs': model_exchange_only.fmu offers model exchange "
                                          r"only \(valid: me\)$"):
        create_component("fmu", "m", {"path": str(me_only), "interface": "cs"})
    with pytest.raises(ValueError, match=r"model_exchange_only.fmu is a model-exchange-only FMU \(no co-simulation "
                                         r"interface in its modelDescription.xml\); type: fmu runs it as model "
                                         r"exchange"):
        fmu("m", me_only)


def test_info_shows_fmi3_and_model_exchange_fmus(tmp_path: Path, ball3: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(ball3)]) == 0
    out = capsys.readouterr().out
    assert "bouncing_ball3: FMI 3.0 co-simulation FMU" in out
    assert "in  gain[2]: real" in out and "out phase: string" in out and "out h32: real [m]" in out
    assert "event mode: yes (early return from fmi3DoStep" in out and "rollback: yes" in out
    assert main(["info", str(builders.me_bouncing_ball(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "me_bouncing_ball: FMI 2.0 model exchange FMU" in out and "interfaces: model exchange" in out


# ---------------------------------------------------------------------------- from YAML on the command line
EXPERIMENT = """\
# @package _global_
defaults:
  - override /master: hybrid
name: ball3
run: {t0: 0.0, tf: 2.0, dt: 0.1}
components:
  ramp: {type: ramp, params: {slope: 2.0}}
  ball: {type: fmu, params: {path: ball3.fmu, offset: 2}}
connections:
  - ramp.y -> ball.gain[2]
"""


@pytest.mark.slow
def test_an_fmi3_experiment_from_the_command_line(tmp_path: Path, ball3: Path, cosimrun) -> None:
    config = tmp_path / "conf"
    (config / "experiment").mkdir(parents=True)
    shutil.copy(ball3, config / "experiment" / "ball3.fmu")  # a relative path is resolved beside the YAML
    (config / "experiment" / "ball3.yaml").write_text(EXPERIMENT)
    proc = cosimrun("--config-dir", str(config), "+experiment=ball3", "hydra.run.dir=run", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "ball3: complete" in proc.stdout
    (path,) = list((tmp_path / "run").rglob("*.h5"))
    res = load_results(path)
    np.testing.assert_allclose(res.events["time"], impacts(), rtol=0, atol=TIME_TOL)
    assert set(res.events["event"]) == {"early_return"}
    t, h = res.history("ball")["h"]
    np.testing.assert_allclose(h, [analytic(ti)[0] for ti in t], rtol=0, atol=1e-12)
    bad = cosimrun("--config-dir", str(config), "+experiment=ball3", "hydra.run.dir=bad",
                   "+components.ball.params.interface=me", timeout=300)
    assert bad.returncode == 2
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert lines == ["cosimrun: error: components.ball.params.interface: 'me': ball3.fmu offers co-simulation "
                     "only (valid: cs)"]
