"""FMI 2.0 co-simulation FMUs as components (``type: fmu``).

The FMUs are built here, offline: small C models compiled with gcc against the
FMI headers FMPy ships (``tests/fmus``, plus the example pendulum shipped in
``cosimrun.components.fmu``) and pythonfmu models.
"""

from __future__ import annotations

import gc
import math
import os
import shutil
import subprocess
import sys
import threading
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu

from cosimrun.components._base import set_port_unit
from cosimrun.components.blocks import Gain, Sum
from cosimrun.components.fmu import (
    FMUComponent,
    FMUError,
    extracted_directories,
    main,
    modelica_unit_to_pint,
    read_fmu,
)
from cosimrun.components.mechanics import BouncingBall, Pendulum
from cosimrun.components.sources import Ramp, Sine
from cosimrun.config.build import ConfigError, build_experiment
from cosimrun.core.units import compile_conversion
from cosimrun.errors import StepDiscarded
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results
from cosimrun.system import System

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------- FMUs (built once per session)
@pytest.fixture(scope="session")
def pendulum_fmu(fmu_dir: Path) -> Path:
    return builders.pendulum(fmu_dir)


@pytest.fixture(scope="session")
def feedthrough_fmu(fmu_dir: Path) -> Path:
    return builders.feedthrough(fmu_dir)


@pytest.fixture(scope="session")
def norollback_fmu(fmu_dir: Path) -> Path:
    return builders.feedthrough(fmu_dir, rollback=False)


@pytest.fixture(scope="session")
def ball_fmu(fmu_dir: Path) -> Path:
    return builders.bouncing_ball(fmu_dir)


@pytest.fixture(scope="session")
def discard_fmu(fmu_dir: Path) -> Path:
    return builders.discard(fmu_dir)


@pytest.fixture(scope="session")
def pygain_fmu(fmu_dir: Path) -> Path:
    return builders.pythonfmu_gain(fmu_dir, handle_state=True)


@pytest.fixture(scope="session")
def pygain_nostate_fmu(fmu_dir: Path) -> Path:
    return builders.pythonfmu_gain(fmu_dir, handle_state=False)


def at_grid(t: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The last sample at each grid time (histories hold extra samples at events)."""
    return np.array([values[np.flatnonzero(np.isclose(t, g, rtol=0, atol=1e-9))[-1]] for g in grid])


# ---------------------------------------------------------------------------- units
@pytest.mark.parametrize(
    ("modelica", "pint_unit", "reference"),
    [
        ("m/s2", "m/s**2", "m/s^2"),
        ("N.m", "N*m", "J"),
        ("rad/s", "rad/s", "rad/s"),
        ("kg.m2", "kg*m**2", "kg*m^2"),
        ("s-1", "s**-1", "Hz"),
        ("W/(m2.K)", "W/(m**2*K)", "W/m^2/K"),
        ("N.m.s/rad", "N*m*s/rad", "J*s/rad"),
        ("mm", "mm", "m"),
        ("Ohm", "ohm", "V/A"),
        ("1/s", "1/s", "Hz"),
    ],
)
def test_modelica_units_translate_to_pint(modelica: str, pint_unit: str, reference: str) -> None:
    assert modelica_unit_to_pint(modelica) == pint_unit
    compile_conversion(pint_unit, reference)  # same dimension


def test_special_units() -> None:
    assert modelica_unit_to_pint("1") == "dimensionless"
    assert modelica_unit_to_pint("") is None and modelica_unit_to_pint(None) is None
    assert compile_conversion(modelica_unit_to_pint("deg"), "rad").scale == pytest.approx(math.pi / 180)
    assert compile_conversion(modelica_unit_to_pint("degC"), "K").offset == pytest.approx(273.15)
    assert compile_conversion(modelica_unit_to_pint("%"), "dimensionless").scale == pytest.approx(0.01)
    with pytest.raises(ValueError, match="FMU unit 'furlongz.s'"):
        modelica_unit_to_pint("furlongz.s")


# ---------------------------------------------------------------------------- the model description
def test_ports_parameters_units_feedthrough_and_states_come_from_the_model_description(pendulum_fmu: Path) -> None:
    p = fmu("p", pendulum_fmu)
    assert {n: s.unit_name for n, s in p.input_specs.items()} == {"torque": "N*m"}  # from the declared type
    assert {n: s.unit_name for n, s in p.output_specs.items()} == {"q": "rad", "omega": "rad/s"}
    params = p.get_parameters()
    assert params["g"] == 9.81 and params["substeps"] == 10 and params["path"] == str(pendulum_fmu)
    assert p.direct_feedthrough == {"q": set(), "omega": set()}
    assert p.state_names == ("q", "omega")
    assert p.supports_rollback
    assert read_fmu(pendulum_fmu).variables["g"].unit == "m/s**2"


def test_feedthrough_and_port_types(feedthrough_fmu: Path) -> None:
    f = fmu("f", feedthrough_fmu)
    assert f.direct_feedthrough == {"y": {"u"}, "steps": set(), "positive": {"u"}}
    assert {n: s.type.value for n, s in f.output_specs.items()} == {"y": "real", "steps": "int", "positive": "bool"}
    f.initialize(0.0)
    assert f._detected_feedthrough is None  # declared, never detected by perturbation
    out = f.evaluate_outputs({"u": 1.5})
    assert out == {"y": 3.0, "steps": 0, "positive": True}
    f.do_step(0.0, 0.1)
    f.do_step(0.1, 0.1)
    assert f.get_outputs()["steps"] == 2
    f.free()


def test_parameters_quantities_ranges_and_tunable_changes(pendulum_fmu: Path) -> None:
    p = fmu("p", pendulum_fmu, length="80 cm", mass=2)
    assert p.get_parameters("length", "mass") == {"length": pytest.approx(0.8), "mass": 2.0}
    with pytest.raises(ValueError, match="restitution.*must be <= 1"):
        p.set_parameters(restitution=1.5)
    with pytest.raises(ValueError, match=r"parameter 'length' \[m\].*dimensionality|length"):
        p.set_parameters(length="3 s")
    with pytest.raises(ValueError, match="must be an integer"):
        p.set_parameters(substeps=2.5)
    p.initialize(0.0)
    p.set_parameters(g=0.0)  # tunable: takes effect in the running FMU
    p.do_step(0.0, 0.1)
    assert p.get_outputs() == {"q": 0.0, "omega": 0.0}
    with pytest.raises(ValueError, match="'substeps' is fixed; it can only change before initialize"):
        p.set_parameters(substeps=4)
    p.free()


def test_parameters_may_come_before_path(pendulum_fmu: Path) -> None:
    p = FMUComponent("p")
    p.set_parameters(mass=3.0)
    p.set_parameters(aliases={"q": "angle"})
    p.set_parameters(path=str(pendulum_fmu))
    assert p.get_parameters("mass") == {"mass": 3.0} and "angle" in p.output_specs
    late = FMUComponent("late")
    late.set_parameters(mas=3.0)
    with pytest.raises(KeyError, match=r"unknown parameter 'mas'.*\(set before 'path'\); did you mean 'mass'"):
        late.set_parameters(path=str(pendulum_fmu))


def test_aliases_and_dotted_port_names(pygain_fmu: Path) -> None:
    g = fmu("g", pygain_fmu, aliases={"y": "gain.out"})
    assert set(g.output_specs) == {"gain.out", "stats.count", "tag"}
    s = System("s")
    r = s.add_component(Ramp("r"))
    s.add_component(g)
    s.connect("r.y -> g.u")
    s.run(0.0, 0.3, 0.1, master=GaussSeidel())
    t, values = g.get_history_arrays(["gain.out", "stats.count", "tag"])
    assert values["gain.out"] == pytest.approx(3.0 * t)  # y = k u, u = t (read after the step)
    assert values["stats.count"].tolist() == [0, 1, 2, 3]
    assert list(values["tag"]) == ["gain:0", "gain:1", "gain:2", "gain:3"]
    assert r.get_outputs()["y"] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="'aliases' can only change before initialize"):
        g.set_parameters(aliases={"y": "out"})
    s.free()
    with pytest.raises(ValueError, match="would both be port 'u'"):
        fmu("h", pygain_fmu, aliases={"y": "u"})


def test_string_and_boolean_parameters_and_inputs(pygain_fmu: Path) -> None:
    g = fmu("g", pygain_fmu, label="amp", k=2.0)
    g.initialize(0.0)
    assert g.evaluate_outputs({"u": 2.0, "enable": True})["y"] == 4.0
    assert g.evaluate_outputs({"enable": False})["y"] == 0.0
    g.do_step(0.0, 0.5)
    assert g.get_outputs()["tag"] == "amp:1"
    g.free()


# ---------------------------------------------------------------------------- same model, FMU vs native
def pendulum_system(kind: str, path: Path, **params: float) -> tuple[System, Any]:
    s = System(kind)
    src = s.add_component(Sine("src"))
    src.set_parameters(amplitude=2.0, frequency=0.5, unit="N*m")
    if kind == "fmu":
        p = fmu("p", path, damping=0.2, start={"q": 0.5, "omega": 3.0}, **params)
    else:
        p = Pendulum("p")
        p.set_parameters(damping=0.2, q0=0.5, omega0=3.0, **params)
    s.add_component(p)
    s.connect("src.y -> p.torque")
    return s, p


# the notice of a master that handles events at communication points is expected here
@pytest.mark.filterwarnings("ignore:events are handled at communication points")
def test_pendulum_fmu_matches_the_native_pendulum(pendulum_fmu: Path) -> None:
    runs = {}
    for kind in ("fmu", "native"):
        s, p = pendulum_system(kind, pendulum_fmu)
        s.run(0.0, 5.0, 0.01, master=GaussSeidel())
        runs[kind] = p.get_history_arrays(["q", "omega"])
        s.free()
    (t_f, fmu_values), (t_n, native) = runs["fmu"], runs["native"]
    np.testing.assert_array_equal(t_f, t_n)
    # same RK4 sub-steps in the same operation order: equal to rounding
    np.testing.assert_allclose(fmu_values["q"], native["q"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(fmu_values["omega"], native["omega"], rtol=0, atol=1e-12)


def test_pendulum_end_stop_inside_the_fmu_matches_the_native_event(pendulum_fmu: Path) -> None:
    grid = np.arange(0.0, 3.0 + 1e-9, 0.01)
    q = {}
    for kind in ("fmu", "native"):
        s, p = pendulum_system(kind, pendulum_fmu, q_max=0.75, restitution=0.6)
        result = s.run(0.0, 3.0, 0.01, master=Hybrid())
        t, values = p.get_history_arrays(["q"])
        q[kind] = at_grid(t, values["q"], grid)
        s.free()
    assert result.stats.events >= 1  # the native pendulum hit the stop
    assert np.max(np.abs(q["fmu"])) <= 0.75 + 1e-12
    np.testing.assert_allclose(q["fmu"], q["native"], rtol=0, atol=1e-4)


# ---------------------------------------------------------------------------- rollback
def test_rollback_restores_bit_for_bit(pendulum_fmu: Path) -> None:
    p = fmu("p", pendulum_fmu, start={"q": 1.0})
    p.initialize(0.0)
    p.set_inputs({"torque": 0.3})
    for i in range(5):
        p.do_step(i * 0.1, 0.1)
    snap = p.snapshot_state()
    before = p.get_outputs()

    def trajectory() -> list[tuple[float, float]]:
        out = []
        for i in range(5, 10):
            p.do_step(i * 0.1, 0.1)
            out.append((p.outputs["q"].value, p.outputs["omega"].value))
        return out

    first = trajectory()
    p.set_inputs({"torque": -5.0})
    p.restore_state(snap, 0.5)
    assert p.t == 0.5 and p.get_outputs() == before and p.inputs["torque"].value == 0.3
    assert trajectory() == first  # exactly the same numbers
    p.restore_state(snap, 0.5)  # a snapshot can be restored more than once
    assert trajectory() == first
    del snap
    gc.collect()
    p.reset()
    p.initialize(0.0)
    stale = p.snapshot_state()
    p.set_state(p.get_state(), 0.0)  # re-instantiates: older snapshots are refused
    with pytest.raises(ValueError, match="belongs to another FMU instance"):
        p.restore_state(stale, 0.0)
    p.free()


def test_rollback_with_pythonfmu_state_handling(pygain_fmu: Path) -> None:
    g = fmu("g", pygain_fmu)
    g.initialize(0.0)
    g.set_inputs({"u": 1.0})
    g.do_step(0.0, 0.1)
    snap = g.snapshot_state()
    g.do_step(0.1, 0.1)
    g.do_step(0.2, 0.1)
    assert g.get_outputs()["stats.count"] == 3
    g.restore_state(snap, 0.1)
    g._update_output_states()
    assert g.get_outputs()["stats.count"] == 1
    g.free()


def test_fmu_without_rollback(norollback_fmu: Path, pygain_nostate_fmu: Path) -> None:
    for path in (norollback_fmu, pygain_nostate_fmu):
        f = fmu("f", path)
        assert not f.supports_rollback
        with pytest.raises(ValueError, match="cannot be an event source .*canGetAndSetFMUstate=\"false\""):
            f.set_parameters(events={"up": {"port": "y", "direction": 1}})
        f.initialize(0.0)
        with pytest.raises(NotImplementedError, match="does not support rollback"):
            f.snapshot_state()
        with pytest.raises(RuntimeError, match="cannot be an event source"):
            f.add_event_indicator("up", lambda c: c.outputs["y"].value)
        f.free()


# ---------------------------------------------------------------------------- loops
def test_algebraic_loop_through_a_feedthrough_fmu_is_detected_and_solved(feedthrough_fmu: Path) -> None:
    """u = r + y / 4 and y = 2 u (in the FMU): y = 4 r."""
    s = System("loop")
    f = s.add_component(fmu("f", feedthrough_fmu, k=2.0))
    g = s.add_component(Gain("g"))
    g.set_parameters(k=0.25, input_unit="N", output_unit="N")
    add = s.add_component(Sum("add"))
    add.set_parameters(unit="N")
    r = s.add_component(Ramp("r"))
    r.set_parameters(slope=1.0, unit="N")
    for conn in ("r.y -> add.u1", "g.y -> add.u2", "add.y -> f.u", "f.y -> g.u"):
        s.connect(conn)
    s.set_initial_value("f.u", 0.0)
    result = s.run(0.0, 1.0, 0.1, master=IJCSA())
    [loop] = s.analysis.loops
    assert set(loop.components) == {"f", "g", "add"}
    assert f._detected_feedthrough is None
    t, values = f.get_history_arrays(["y", "steps"])
    np.testing.assert_allclose(values["y"], 4.0 * t, rtol=0, atol=1e-9)
    assert values["steps"][-1] == 10  # one fmi2DoStep per macro step, never a zero step
    assert result.stats.loop_solves == 11
    s.free()


# ---------------------------------------------------------------------------- events and the hybrid master
def test_fmu_as_event_source_is_located_by_rollback(ball_fmu: Path) -> None:
    """Impacts happen inside the FMU; the indicator v (rising through 0) makes them cosimrun events."""
    runs = {}
    for kind in ("fmu", "native"):
        s = System(kind)
        if kind == "fmu":
            ball = fmu("ball", ball_fmu, events={"bounce": {"port": "v", "direction": 1}})
        else:
            ball = BouncingBall("ball")
        s.add_component(ball)
        result = s.run(0.0, 2.0, 0.01, master=Hybrid())
        t, values = ball.get_history_arrays(["h"])
        runs[kind] = ([e[0].t for e in result.events], at_grid(t, values["h"], np.arange(0.0, 2.0 + 1e-9, 0.01)))
        s.free()
    (events_fmu, h_fmu), (events_native, h_native) = runs["fmu"], runs["native"]
    assert len(events_fmu) == len(events_native) >= 3
    assert events_fmu[0] == pytest.approx(math.sqrt(2.0 / 9.81), abs=1e-9)
    np.testing.assert_allclose(events_fmu, events_native, rtol=0, atol=1e-9)
    np.testing.assert_allclose(h_fmu, h_native, rtol=0, atol=1e-9)


def test_fmu_without_rollback_runs_passive_under_hybrid(pygain_nostate_fmu: Path) -> None:
    s = System("passive")
    ball = s.add_component(BouncingBall("ball"))
    g = s.add_component(fmu("g", pygain_nostate_fmu))
    set_port_unit(g, "u", "m")  # what a config's `units: {u: m}` does for a unit-less FMU port
    s.connect("ball.h -> g.u")
    result = s.run(0.0, 1.0, 0.01, master=Hybrid())
    assert result.stats.events >= 1
    t, values = g.get_history_arrays(["y"])
    tb, hb = ball.get_history_arrays(["h"])
    np.testing.assert_array_equal(t, tb)
    np.testing.assert_allclose(values["y"], 3.0 * hb["h"], rtol=1e-12, atol=1e-12)
    s.free()


def test_fmu_without_rollback_as_event_source_is_refused_in_a_config(norollback_fmu: Path) -> None:
    cfg = {
        "components": {
            "f": {"type": "fmu", "params": {"path": str(norollback_fmu), "events": {"up": "y"}}},
        },
        "master": {"name": "hybrid"},
    }
    with pytest.raises(ConfigError, match=r"components\.f\.params\.events: .*cannot be an event source"):
        build_experiment(cfg)


# ---------------------------------------------------------------------------- errors
def test_missing_file_wrong_kind_and_missing_binary(tmp_path: Path, fmu_dir: Path, pendulum_fmu: Path) -> None:
    with pytest.raises(ValueError, match=r"parameter 'path': FMU file not found: .*did you mean 'pendulum.fmu'"):
        FMUComponent("x").set_parameters(path=str(fmu_dir / "pendulumm.fmu"))
    with pytest.raises(ValueError, match="model-exchange-only FMU"):
        FMUComponent("x").set_parameters(path=str(builders.model_exchange_only(tmp_path)))
    other_platform, platform = builders.without_binary(tmp_path)
    with pytest.raises(ValueError, match=rf"has no binary for this platform .*binaries for: {platform}"):
        FMUComponent("x").set_parameters(path=str(other_platform))
    with pytest.raises(ValueError, match="is an FMI 1.0 FMU; cosimrun runs FMI 2.0 and 3.0 FMUs only"):
        FMUComponent("x").set_parameters(path=str(builders.fmi1(tmp_path)))
    (tmp_path / "text.fmu").write_text("not a zip")
    with pytest.raises(ValueError, match="is not an FMU"):
        FMUComponent("x").set_parameters(path=str(tmp_path / "text.fmu"))
    with pytest.raises(KeyError, match=r"unknown parameter 'masss' of FMU component 'x' \(pendulum.fmu\); "
                                       r"did you mean 'mass'"):
        fmu("x", pendulum_fmu, masss=1.0)
    with pytest.raises(ValueError, match="parameter 'path' is not set"):
        FMUComponent("x").initialize(0.0)


def test_errors_in_a_config_name_the_key(tmp_path: Path, pendulum_fmu: Path) -> None:
    def build(params: dict[str, Any]) -> None:
        build_experiment({"components": {"p": {"type": "fmu", "params": params}}})

    with pytest.raises(ConfigError, match=r"components\.p\.params\.path: .*FMU file not found"):
        build({"path": str(tmp_path / "nothing.fmu")})
    with pytest.raises(ConfigError, match=r"components\.p\.params\.lenght: unknown parameter 'lenght'.*'length'"):
        build({"path": str(pendulum_fmu), "lenght": 2.0})
    with pytest.raises(ConfigError, match=r"components\.p\.params\.interface: 'cs': model_exchange_only.fmu offers "
                                          r"model exchange only \(valid: me\)"):
        build({"path": str(builders.model_exchange_only(tmp_path)), "interface": "cs"})


def test_discard_names_the_fmu_the_time_and_the_status(feedthrough_fmu: Path) -> None:
    s = System("s")
    r = s.add_component(Ramp("r"))
    r.set_parameters(slope=10.0, unit="N")
    s.add_component(fmu("f", feedthrough_fmu, u_max=5.0))
    s.connect("r.y -> f.u")
    with pytest.raises(FMUError) as info:
        s.run(0.0, 1.0, 0.1, master=GaussSeidel())
    text = str(info.value)
    assert "FMU component 'f' (feedthrough.fmu)" in text
    # Gauss-Seidel: the ramp steps first, so the step from 0.5 sees u = 6
    assert "fmi2DoStep from t=0.5 with step 0.1 returned fmi2Discard" in text
    assert "last successful time 0.5" in text and "input u=6 exceeds u_max=5" in text
    assert not isinstance(info.value, StepDiscarded)  # it reached no further than the step's start
    s.free()


def test_a_step_ended_early_leaves_the_fmu_at_its_last_successful_time(discard_fmu: Path) -> None:
    f = fmu("f", discard_fmu, t_discard=0.25)
    f.initialize(0.0)
    f.inputs["u"].value = 2.0
    f.do_step(0.0, 0.1)
    f.do_step(0.1, 0.1)
    with pytest.raises(StepDiscarded) as info:
        f.do_step(0.2, 0.1)
    exc = info.value
    assert (exc.component, exc.time, exc.last_successful_time) == ("f", 0.2, 0.25)
    assert str(exc).startswith("FMU component 'f' (discard.fmu): fmi2DoStep from t=0.2 with step 0.1 returned "
                               "fmi2Discard (last successful time 0.25); FMU log: [Discard] the step from t=0.2")
    assert f.t == 0.25 and f.outputs["x"].value == pytest.approx(1.5)  # x = 1 + 2 * 0.25, read there
    t, _ = f.get_history_arrays()
    assert t.tolist() == [0.0, 0.1, 0.2]  # nothing recorded at a time no master accepted
    f.do_step(0.25, 0.05)  # on from there
    assert f.outputs["x"].value == pytest.approx(1.6) and f.outputs["discards"].value == 1
    f.free()


def test_a_fixed_step_fmu_takes_the_size_of_its_first_step_only(fmu_dir: Path) -> None:
    f = fmu("f", builders.discard(fmu_dir, variable_step=False))
    assert f.fixed_step_only and not f.may_discard and f.fixed_step is None
    f.initialize(0.0)
    f.do_step(0.0, 0.1)
    f.do_step(0.1, 0.30000000000000004 - 0.2)  # the same step, to rounding
    assert f.fixed_step == 0.1
    with pytest.raises(FMUError) as info:
        f.do_step(0.2, 0.05)
    assert str(info.value) == (
        "FMU component 'f' (discard_fixed.fmu): the FMU cannot handle variable communication step sizes "
        "(canHandleVariableCommunicationStepSize=false), so every step must be 0.1 like its first, but it was asked "
        "to step from t=0.2 with 0.05")
    f.reset()
    f.initialize(0.0)
    f.do_step(0.0, 0.05)  # a new instance learns its step afresh
    assert f.fixed_step == 0.05
    f.free()


# ---------------------------------------------------------------------------- resources
@pytest.fixture(autouse=True)
def fmu_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The extraction cache of these tests (one per session, never the user's)."""
    root = tmp_path_factory.getbasetemp() / "fmu-cache"
    monkeypatch.setenv("COSIMRUN_FMU_CACHE", str(root))
    return root


def test_extraction_is_shared_cached_and_read_only(feedthrough_fmu: Path, fmu_cache: Path) -> None:
    a, b = fmu("a", feedthrough_fmu), fmu("b", feedthrough_fmu)
    before = set(extracted_directories())
    a.initialize(0.0)
    b.initialize(0.0)
    [directory] = set(extracted_directories()) - before
    assert directory.parent == fmu_cache and len(directory.name) == 64  # keyed by the file's SHA-256
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert files and all(p.stat().st_mode & 0o222 == 0 for p in [directory, *files])  # read-only
    a.free()
    b.free()
    assert directory.is_dir() and directory not in extracted_directories()  # kept for the next run
    b.initialize(0.0)  # usable again after free, from the same entry
    assert set(extracted_directories()) - before == {directory}
    assert b.evaluate_outputs({"u": 1.0})["y"] == 2.0
    b.free()
    assert not [p for p in fmu_cache.iterdir() if p.name.startswith((".tmp-", ".private-"))]


def test_an_fmu_finalized_while_its_thread_acquires_an_extraction_does_not_deadlock(
        feedthrough_fmu: Path, fmu_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The garbage collector may finalize an FMU component (its ``__del__`` releases its extraction) on a thread
    that is inside ``acquire_extraction``: the release must not wait for the lock that thread holds. Here the
    last reference to a private-copy component is dropped inside the acquisition of another; its private copy is
    removed when the acquisition ends."""
    from cosimrun.fmi import extraction

    doomed = [fmu("doomed", feedthrough_fmu, private_copy=True)]
    doomed[0].initialize(0.0)
    [private] = [d for d in extracted_directories() if d.name.startswith(".private-")]
    cached = extraction.cached_extraction

    def finalize_inside(path: Path) -> Path:
        doomed.clear()  # the last reference: __del__ runs here, with the extraction lock held
        gc.collect()
        return cached(path)

    monkeypatch.setattr(extraction, "cached_extraction", finalize_inside)
    other = fmu("other", feedthrough_fmu)
    done: list[BaseException | None] = []

    def initialize() -> None:
        try:
            other.initialize(0.0)
            done.append(None)
        except BaseException as exc:  # reported below
            done.append(exc)

    thread = threading.Thread(target=initialize, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "deadlock: the finalizer waited for the lock its own thread held"
    assert done == [None]
    assert not private.exists() and private not in extracted_directories()
    assert other.evaluate_outputs({"u": 1.0})["y"] == 2.0
    other.free()


def test_private_copy_is_writable_and_removed_by_free(feedthrough_fmu: Path, fmu_cache: Path) -> None:
    f = fmu("f", feedthrough_fmu, private_copy=True)
    before = set(extracted_directories())
    f.initialize(0.0)
    [directory] = set(extracted_directories()) - before
    assert directory.parent == fmu_cache and directory.name.startswith(".private-")
    (directory / "resources").mkdir(exist_ok=True)
    (directory / "resources" / "written.txt").write_text("an FMU may write here")
    assert f.evaluate_outputs({"u": 1.0})["y"] == 2.0
    f.free()
    assert not directory.exists()
    with pytest.raises(ValueError, match="parameter 'private_copy' must be true or false"):
        f.set_parameters(private_copy="yes")


@pytest.mark.slow
def test_private_copies_are_removed_at_exit_without_free(feedthrough_fmu: Path, fmu_cache: Path) -> None:
    code = (
        "from cosimrun.components.fmu import FMUComponent, extracted_directories\n"
        f"f = FMUComponent('f'); f.set_parameters(path={str(feedthrough_fmu)!r}, private_copy=True)\n"
        "f.initialize(0.0)\n"
        "print(extracted_directories()[0])\n"
    )
    env = {**os.environ, "COSIMRUN_FMU_CACHE": str(fmu_cache)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    directory = Path(proc.stdout.strip())
    assert directory.name.startswith(".private-") and not directory.exists()
    assert [p.name for p in fmu_cache.iterdir() if p.name.startswith(".")] == [".lock"]


def test_physical_state_transfer_re_initializes_the_fmu(pendulum_fmu: Path) -> None:
    p = fmu("p", pendulum_fmu)
    assert p.get_state() == {"q": {"value": 0.0, "unit": "rad"}, "omega": {"value": 0.0, "unit": "rad/s"}}
    p.initialize(0.0)
    p.do_step(0.0, 0.1)
    p.set_state({"q": {"value": 30.0, "unit": "deg"}, "omega": 0.0}, 0.1)
    assert p.get_state()["q"]["value"] == pytest.approx(math.pi / 6)
    assert p.outputs["q"].value == pytest.approx(math.pi / 6)
    p.do_step(0.1, 0.1)  # continues from t = 0.1
    assert p.outputs["q"].value < math.pi / 6
    with pytest.raises(KeyError, match="missing state"):
        p.set_state({"q": 0.0}, 0.2)
    p.free()


# ---------------------------------------------------------------------------- the shipped experiment
def experiment_config(path: Path, tf: float = 10.0) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "experiments" / "pendulum_switch_fmu.yaml").read_text())
    cfg.pop("defaults")
    cfg["master"] = yaml.safe_load((ROOT / "conf" / "master" / "hybrid.yaml").read_text())
    cfg["components"]["pendulum"]["modes"]["nonlinear"]["params"]["path"] = str(path)
    cfg["run"]["tf"] = tf
    return cfg


@pytest.mark.slow
def test_pendulum_switch_fmu_experiment(tmp_path: Path, pendulum_fmu: Path) -> None:
    cfg = experiment_config(pendulum_fmu)
    exp = prepare(cfg)
    assert type(exp.system.components["pendulum"].models["nonlinear"]) is FMUComponent
    outcome = run_experiment(cfg, tmp_path, experiment=exp)
    exp.system.free()
    assert outcome.ok, outcome.error
    result = outcome.result
    modes = {s.to_mode for s in result.mode_switches} | {s.from_mode for s in result.mode_switches}
    assert modes == {"linear", "nonlinear"} and len(result.mode_switches) >= 4
    t, q_all = load_results(outcome.path).history("pendulum")["q"]
    assert np.all(np.abs(q_all) <= 0.75 + 1e-9)  # the end stop (inside the FMU) holds
    for switch in result.mode_switches:
        if switch.time > 0:  # switches where |q| crosses the band edges, located by rolling the FMU back
            q = q_all[np.flatnonzero(np.isclose(t, switch.time, rtol=0, atol=1e-12))[0]]
            assert abs(q) == pytest.approx(0.35 if switch.to_mode == "nonlinear" else 0.25, abs=1e-6)
    # the native experiment behaves the same (the end stop is located differently: inside the FMU)
    native = yaml.safe_load((ROOT / "experiments" / "pendulum_switch.yaml").read_text())
    native.pop("defaults")
    native["master"] = cfg["master"]
    reference = run_experiment(native, tmp_path / "native")
    assert reference.ok, reference.error
    assert [s.to_mode for s in reference.result.mode_switches] == [s.to_mode for s in result.mode_switches]
    np.testing.assert_allclose([s.time for s in result.mode_switches],
                               [s.time for s in reference.result.mode_switches], rtol=0, atol=5e-3)
    t_ref, q_ref = load_results(reference.path).history("pendulum")["q"]
    grid = np.arange(0.0, 10.0 + 1e-9, 0.01)
    np.testing.assert_allclose(at_grid(t, q_all, grid), at_grid(t_ref, q_ref, grid), rtol=0, atol=1e-2)


@pytest.mark.slow
def test_pendulum_switch_fmu_from_the_command_line_builds_the_example(tmp_path: Path) -> None:
    exe = shutil.which("cosimrun", path=str(Path(sys.executable).parent))
    assert exe is not None
    env = {**os.environ, "COSIMRUN_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([exe, "+experiment=pendulum_switch_fmu", "run.tf=2.0", "hydra.run.dir=run"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "pendulum_switch_fmu: complete" in proc.stdout
    assert len(list((tmp_path / "cache" / "fmus").glob("pendulum-*.fmu"))) == 1


def test_example_path_and_command_line_helpers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COSIMRUN_CACHE_DIR", str(tmp_path / "cache"))
    p = FMUComponent("p")
    p.set_parameters(path="example:pendulum")
    assert p.model is not None and p.model.path.parent == tmp_path / "cache" / "fmus"
    with pytest.raises(ValueError, match="unknown example FMU 'pendulumm'; did you mean 'pendulum'"):
        p.set_parameters(path="example:pendulumm")
    assert main(["build-example", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "pendulum.fmu").is_file()
    assert main(["info", str(tmp_path / "out" / "pendulum.fmu")]) == 0
    text = capsys.readouterr().out
    assert "in  torque: real [N*m]  (FMU unit 'N.m')" in text and "state: q, omega" in text
    assert main(["info", str(tmp_path / "missing.fmu")]) == 2


def test_the_component_reference_of_an_fmu_file(pendulum_fmu: Path) -> None:
    from cosimrun.reference import component_reference, describe_component

    doc = describe_component(str(pendulum_fmu))
    params = {p.name: p for p in doc.parameters}
    assert params["path"].default == str(pendulum_fmu)
    ports = {p.name: p for p in doc.ports}
    assert (ports["torque"].direction, ports["torque"].type, ports["torque"].unit) == ("in", "real", "N*m")
    assert ports["q"].direction == "out" and "state: q, omega" in doc.notes
    assert (params["mass"].type, params["mass"].unit, params["mass"].doc) == ("float", "kg", "(tunable)")
    assert component_reference(str(pendulum_fmu)).startswith(f"{doc.name}  ({pendulum_fmu}")


def test_python_dash_m_runs_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "cosimrun.components.fmu", "info", str(tmp_path / "missing.fmu")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "FMU file not found" in proc.stderr, proc.stderr


def test_c_sources_are_package_data() -> None:
    """The framework header and the example sources are files that a regular install ships."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "cosimrun.components.fmu.c" in setuptools["packages"]
    patterns = setuptools["package-data"]["cosimrun.components.fmu.c"]
    files = [p.name for p in (ROOT / "cosimrun" / "components" / "fmu" / "c").iterdir() if p.is_file()]
    assert {"cosimrun_fmi2cs.h", "pendulum.c", "pendulum.xml"} <= set(files)
    assert [f for f in files if not any(fnmatch(f, pattern) for pattern in patterns)] == []
