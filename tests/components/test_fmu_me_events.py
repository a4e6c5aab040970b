"""Model-exchange FMUs: inputs set in the modes FMI allows, and each event handled once.

``tests/fmus/me_feedthrough.c`` has discrete inputs as the Reference-FMUs'
Feedthrough and refuses them outside initialization and event mode, as the
Reference FMUs do; ``me_bouncing_ball.c`` leaves the floor from ``DBL_MIN``
after an impact, as the Reference-FMUs' ball, so its event moves its indicator
back across zero.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

from cosimrun.components.fmu.me import ModelExchangeFMU
from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi
from cosimrun.system import System

G = 9.81
MASTERS = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel, "ijcsa": IJCSA, "hybrid": Hybrid}


@pytest.fixture(scope="session")
def feedthrough2(fmu_dir: Path) -> Path:
    return builders.me_feedthrough(fmu_dir)


@pytest.fixture(scope="session")
def feedthrough3(fmu_dir: Path) -> Path:
    return builders.me_feedthrough(fmu_dir, fmi3=True)


@pytest.fixture(params=["2.0", "3.0"])
def feedthrough(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("feedthrough3" if request.param == "3.0" else "feedthrough2")


def me(name: str, path: Path, **params: Any) -> ModelExchangeFMU:
    return builders.component(name, path, ModelExchangeFMU, **params)


def schedule(k: int) -> dict[str, Any]:
    """The inputs of step *k*: u changes every step (continuous), ud, k and on now and then (discrete)."""
    return {"u": 0.1 * k, "ud": 0.5 * (k // 3), "k": k // 5, "on": (k // 4) % 2 == 1}


def test_discrete_inputs_are_set_in_event_mode_and_taken_at_an_event(feedthrough: Path) -> None:
    """Each change of a discrete input is one event at the step's start (the FMU counts them in ``updates``);
    x' = ud + k is the integral of the inputs taken there (RK4 is exact for a constant derivative). Setting a
    discrete input in continuous-time mode is an error of this FMU (as of the Reference Feedthrough)."""
    comp = me("ft", feedthrough)
    comp.initialize(0.0)
    dt, x, changes, previous = 0.1, 0.0, 0, schedule(0) | {"ud": 0.0, "k": 0, "on": False}
    for k in range(20):
        inputs = schedule(k)
        changes += any(inputs[n] != previous[n] for n in ("ud", "k", "on"))
        comp.set_inputs(inputs)
        comp.do_step(k * dt, dt)
        x += dt * (inputs["ud"] + inputs["k"])
        out = comp.get_outputs()
        assert (out["yd"], out["k_out"], out["on_out"]) == (inputs["ud"], inputs["k"], inputs["on"])
        assert out["y"] == inputs["u"] and out["updates"] == changes
        assert out["x"] == pytest.approx(x, rel=0, abs=1e-12)
        previous = inputs
    assert changes == 11


def test_outputs_read_after_a_discrete_input_changed_show_it(feedthrough: Path) -> None:
    """Reading outputs (a master's loop at a communication point) after a discrete input changed is that event:
    the FMU takes the input once, and stepping on takes no second event for it."""
    comp = me("ft", feedthrough)
    comp.initialize(0.0)
    out = comp.evaluate_outputs({"k": 3, "on": True})
    assert (out["k_out"], out["on_out"], out["updates"]) == (3, True, 1)
    comp.do_step(0.0, 0.5)
    out = comp.get_outputs()
    assert (out["updates"], out["x"]) == (1, pytest.approx(1.5, rel=0, abs=1e-12))


class Stairs(CoSimComponent):
    """A source of the feedthrough's inputs: ud = 0.5 from t = 0.2 on, k = 1 from t = 0.6 on, on from 0.6 on."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.output_specs = {"ud": PortSpec("ud", PortType.REAL, "out"), "k": PortSpec("k", PortType.INT, "out"),
                             "on": PortSpec("on", PortType.BOOL, "out")}

    def _initialize_component(self, t0: float) -> None:
        pass

    def _do_step_internal(self, t: float, dt: float) -> None:
        pass

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        t = self.t if t is None else t
        self.outputs["ud"].value = 0.5 if t >= 0.2 - 1e-12 else 0.0
        self.outputs["k"].value = 1 if t >= 0.6 - 1e-12 else 0
        self.outputs["on"].value = t >= 0.6 - 1e-12

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any], t: float) -> None:
        self.t = t


@pytest.mark.parametrize("master", list(MASTERS))
def test_discrete_inputs_from_another_component_under_every_master(feedthrough: Path, master: str) -> None:
    """Driven by a source with discrete outputs the run completes (the Reference Feedthrough failed at t = 0 as
    model exchange), the FMU takes two input changes, one event each, and x - level crosses zero once: one state
    event in the run's log. x' = ud + k reaches level 1 at 0.6 + 0.8 / 1.5 s when ud jumps at 0.2 s and k at
    0.6 s: located to 1e-9 s by the hybrid master, within a step by the others (Gauss-Seidel and IJCSA hand the
    FMU the source's value at the step's end). x(2) is the integral of the inputs the FMU took."""
    s = System("s")
    s.add_component(Stairs("src"))
    ft = s.add_component(me("ft", feedthrough))
    for port in ("ud", "k", "on"):
        s.connect(f"src.{port}", f"ft.{port}")
    result = s.run(0.0, 2.0, 0.1, master=MASTERS[master]())
    out = ft.get_outputs()
    assert (out["yd"], out["k_out"], out["on_out"], out["updates"], out["crossings"]) == (0.5, 1, True, 2, 1)
    assert [ev[1:] for ev in result.events] == [("ft", "z" if ft.is_fmi3 else "z1")]
    t_cross = result.events[0][0].t
    assert abs(t_cross - (0.6 + 0.8 / 1.5)) <= (1e-9 if master == "hybrid" else 0.1 + 1e-9)
    early = master in ("gauss_seidel", "ijcsa")  # the jumps reach the FMU one step (0.1 s) earlier
    assert out["x"] == pytest.approx(0.5 * (2.0 - 0.2) + 1.0 * (2.0 - 0.6) + (0.15 if early else 0.0), abs=1e-12)


# ---------------------------------------------------------------------------- one event per impact
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


@pytest.fixture(scope="session")
def balls(fmu_dir: Path) -> dict[str, Path]:
    return {version: builders.me_bouncing_ball(fmu_dir, fmi3=version == "3.0") for version in ("2.0", "3.0")}


@pytest.mark.parametrize("version", ["2.0", "3.0"])
@pytest.mark.parametrize("master", list(MASTERS))
def test_each_impact_is_one_event_under_every_master(balls: dict[str, Path], version: str, master: str) -> None:
    """The ball's event sets h = DBL_MIN, moving its indicator back across zero within the FMU's own event
    iteration: that is the impact's effect, not a second event. One logged event per impact (the FMU counts
    them); under the hybrid master exactly the analytic impacts, each to 1e-9 s, under the others the grid points
    where the ball is first found below the floor."""
    s = System("s")
    ball = s.add_component(me("ball", balls[version]))
    result = s.run(0.0, 3.0, 0.01, master=MASTERS[master]())
    times = np.array([ev[0].t for ev in result.events])
    assert len(times) == ball.get_outputs()["impacts"] and len(np.unique(times)) == len(times)
    if master == "hybrid":
        np.testing.assert_allclose(times, impact_times(3.0), rtol=0, atol=1e-9)
    else:  # at the first communication point after each impact: the exact parabola on the grid, bounced there
        dt, h, v, expected = 0.01, 1.0, 0.0, []
        for k in range(1, 301):
            h, v = h + v * dt - 0.5 * G * dt * dt, v - G * dt
            if h < 0.0:
                h, v = 0.0, -0.8 * v
                expected.append(k * dt)
        np.testing.assert_allclose(times, expected, rtol=0, atol=1e-12)
