"""FMU aliases: ports of the value they share, in co-simulation and model exchange, under every master.

The test FMUs are built with aliases added to their model descriptions
(``tests/fmus/builders.py``): FMI 3 ``<Alias name="h_ft" displayUnit="ft"/>``
on the balls' height, as the Reference-FMUs' BouncingBall, ``g_in`` on the
co-simulation ball's array input and ``u_ft`` on the linear model's input;
FMI 2 variables sharing a value reference (``height``, ``depth`` as a
``negatedAlias`` of h, input ``w`` of u). Every run is compared with the same
FMU without aliases.
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from helpers import Constant

from cosimrun.components.fmu import FMUComponent, read_fmu
from cosimrun.components.fmu.me import ModelExchangeFMU
from cosimrun.core.units import compile_conversion
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi
from cosimrun.system import System

MASTERS = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel, "ijcsa": IJCSA, "hybrid": Hybrid}
FT = compile_conversion("m", "ft")
"""pint's metres to feet (1 / 0.3048), the conversion of h_ft."""

BALLS = {  # (builder keyword arguments, component class)
    "cs3": (builders.bouncing_ball3, {}, FMUComponent),
    "me3": (builders.me_bouncing_ball, {"fmi3": True}, ModelExchangeFMU),
    "me2": (builders.me_bouncing_ball, {}, ModelExchangeFMU),
}


@pytest.fixture(scope="session")
def balls(fmu_dir: Path) -> dict[str, tuple[Path, Path, type[Any]]]:
    """Each ball with and without aliases, and its component class."""
    return {key: (build(fmu_dir, aliases=True, **kw), build(fmu_dir, **kw), cls)
            for key, (build, kw, cls) in BALLS.items()}


def run_ball(path: Path, cls: type[Any], master: str) -> tuple[Any, Any, np.ndarray, dict[str, np.ndarray]]:
    s = System("s")
    ball = s.add_component(builders.component("ball", path, cls))
    result = s.run(0.0, 2.0, 0.01, master=MASTERS[master]())
    t, out = ball.get_history_arrays()
    return ball, result, t, out


def test_an_fmi3_alias_is_a_port_in_its_display_unit(balls: dict[str, Any]) -> None:
    """h_ft is an output in ft of the value of h (pint's foot agrees with the FMU's DisplayUnit factor), with h's
    feedthrough; g_in[i] is an input of the value of gain[i], and scaled[i] depends on it as on gain."""
    model = read_fmu(balls["cs3"][0])
    h_ft = model.variables["h_ft"]
    assert (h_ft.alias_of, h_ft.vr, h_ft.unit, h_ft.fmu_unit) == ("h", model.variables["h"].vr, "ft", "m")
    assert (h_ft.scale, h_ft.offset, h_ft.start) == (FT.scale, 0.0, FT(1.0))
    assert model.variables["g_in[2]"].slot == model.variables["gain[2]"].slot
    assert "h_ft" not in {v.name for v in model.parameters}
    ball = builders.component("ball", balls["cs3"][0])
    assert ball.output_specs["h_ft"].unit_name == "ft" and ball.input_specs["g_in[1]"].unit_name is None
    assert ball.direct_feedthrough["h_ft"] == set()
    assert ball.direct_feedthrough["scaled[2]"] == {"gain[1]", "gain[2]", "gain[3]", "g_in[1]", "g_in[2]", "g_in[3]"}


@pytest.mark.parametrize("master", list(MASTERS))
@pytest.mark.parametrize("ball_kind", list(BALLS))
def test_alias_outputs_follow_their_value_under_every_master(balls: dict[str, Any], ball_kind: str,
                                                            master: str) -> None:
    """The run completes (FMI 3: it failed at t = 0 with "Expected nValues = 2 but was 3"); h, the event log and
    every other output are bitwise those of the FMU without aliases; h_ft is h in feet (pint's conversion, to
    1 ulp of h / 0.3048), FMI 2 height is h and depth -h."""
    with_aliases, without, cls = balls[ball_kind]
    ball, result, t, out = run_ball(with_aliases, cls, master)
    _, reference, t_ref, out_ref = run_ball(without, cls, master)
    assert np.array_equal(t, t_ref) and result.events == reference.events
    for name, values in out_ref.items():
        assert np.array_equal(out[name], values), name
    h = out["h"]
    if ball_kind == "me2":
        assert np.array_equal(out["height"], h) and np.array_equal(out["depth"], -h)
    else:
        assert np.array_equal(out["h_ft"], FT.scale * h)
        np.testing.assert_allclose(out["h_ft"], h / 0.3048, rtol=4e-16, atol=0)
    assert ball.get_outputs()["h"] == out_ref["h"][-1]


@pytest.fixture(scope="session")
def linears(fmu_dir: Path) -> dict[str, Path]:
    """The linear model, FMI 2 and 3, with and without aliases."""
    return {f"{version}{suffix}": builders.me_linear(fmu_dir, fmi3=version == "3", aliases=bool(suffix))
            for version in ("2", "3") for suffix in ("", "+aliases")}


def run_linear(path: Path, port: str, value: Any, master: str = "jacobi") -> tuple[Any, np.ndarray]:
    """The linear model x' = -x + u from x = 1 with *value* (a number or a quantity) on input *port*."""
    s = System("s")
    lin = s.add_component(builders.component("lin", path, ModelExchangeFMU))
    unit = lin.input_specs[port].unit_name
    s.add_component(Constant("src", value=value, unit=unit))
    s.connect("src.y", f"lin.{port}")
    s.run(0.0, 1.0, 0.1, master=MASTERS[master]())
    return lin, lin.get_history_arrays()[1]["x"]


@pytest.mark.parametrize("master", list(MASTERS))
def test_setting_an_input_alias_sets_the_input(linears: dict[str, Path], master: str) -> None:
    """An input driven through its alias: FMI 3 u_ft in feet sets u in metres (the port u shows it), FMI 2 w
    sets u. x is bitwise what the FMU without aliases computes with u driven directly by that value."""
    lin, x = run_linear(linears["3+aliases"], "u_ft", 2.0, master)
    u = lin.inputs["u"].value
    assert u == pytest.approx(2.0 * 0.3048, rel=2e-16) and lin.inputs["u_ft"].value == pytest.approx(2.0, rel=2e-16)
    _, x_ref = run_linear(linears["3"], "u", u, master)
    assert np.array_equal(x, x_ref) and x[-1] == pytest.approx(u + (1.0 - u) * np.exp(-1.0), abs=1e-6)
    lin, x = run_linear(linears["2+aliases"], "w", 0.5, master)
    assert lin.inputs["u"].value == 0.5
    assert np.array_equal(x, run_linear(linears["2"], "u", 0.5, master)[1])


def test_an_array_input_set_through_its_alias_in_co_simulation(balls: dict[str, Any]) -> None:
    """g_in[2] sets gain[2] of the co-simulation ball: scaled[2] = gain[2] * h + offset as with gain[2] itself."""
    results = []
    for path, port in ((balls["cs3"][0], "g_in[2]"), (balls["cs3"][1], "gain[2]")):
        s = System("s")
        ball = s.add_component(builders.component("ball", path))
        s.add_component(Constant("src", value=5.0))
        s.connect("src.y", f"ball.{port}")
        s.run(0.0, 1.0, 0.01, master=Jacobi())
        results.append(ball.get_history_arrays()[1])
    assert np.array_equal(results[0]["scaled[2]"], results[1]["scaled[2]"])
    assert np.array_equal(results[0]["scaled[2]"][1:], 5.0 * results[0]["h"][1:])


def test_a_start_value_in_another_unit_than_the_fmus_is_refused(balls: dict[str, Any]) -> None:
    """A start value on h_ft would reach the FMU unconverted: refused, naming the alias (h takes it)."""
    with pytest.raises(ValueError, match="the start value of 'h_ft' cannot be set"):
        builders.component("ball", balls["me3"][0], ModelExchangeFMU, start={"h_ft": 3.0})
    ball = builders.component("ball", balls["me3"][0], ModelExchangeFMU, start={"h": "3 ft"})
    ball.initialize(0.0)
    assert ball.get_outputs()["h_ft"] == pytest.approx(3.0, rel=1e-15)


def test_a_display_unit_the_fmu_defines_otherwise_than_pint_is_not_used(balls: dict[str, Any], fmu_dir: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """An FMU whose DisplayUnit ft is 3 * m (pint: 3.28084 * m): the alias keeps m, with a warning."""
    files = archive_files(balls["me3"][0])
    xml = files["modelDescription.xml"].decode().replace('factor="3.280839895013123"', 'factor="3"')
    path = builders._archive(fmu_dir / "bad_feet.fmu", {**files, "modelDescription.xml": xml})
    with caplog.at_level(logging.WARNING, logger="cosimrun.fmu"):
        h_ft = read_fmu(path).variables["h_ft"]
    assert (h_ft.unit, h_ft.scale, h_ft.converted) == ("m", 1.0, False)
    assert "display unit 'ft' not used (the FMU defines ft as 3 * m + 0, pint as 3.28084 * m + 0)" in caplog.text


def archive_files(path: Path) -> dict[str, bytes]:
    """The entries of the zip archive *path* (name -> content)."""
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}
