"""Coupled initialization: the components initialize together and algebraic loops start consistent.

The linear loop ``y1 = a*u1 + b``, ``y2 = c*u2 + d``, ``u1 = y2``, ``u2 = y1`` has the one consistent point
``y1 = (a*d + b) / (1 - a*c)``, ``y2 = c*y1 + d``; the nonlinear loop ``y1 = u1^2 + b``, ``y2 = u2``
(``x = x^2 + b``) has two, ``x = (1 +- sqrt(1 - 4b)) / 2``, where fixed-point iteration diverges
(``|2x| > 1``) and Newton converges. No ``initial:`` is needed; one given is a start guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fmus import builders
from helpers import Affine, Stateless, real_in, real_out

from cosimrun.errors import InitializationError
from cosimrun.fmi.instance import FMUInstance
from cosimrun.masters import IJCSA, GaussSeidel, Jacobi
from cosimrun.storage import load_results
from cosimrun.system import System

A, B, C, D = 0.5, 1.0, 0.8, 2.0
Y1 = (A * D + B) / (1.0 - A * C)  # 10/3
Y2 = C * Y1 + D  # 14/3
QB = -3.75  # x = x^2 - 3.75: x = 2.5 or x = -1.5
ROOTS = (2.5, -1.5)
TOL = 1e-9


@pytest.fixture(scope="module")
def affine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.affine(tmp_path_factory.mktemp("coupled_init"))


def fmu_loop(path: Path, first: dict[str, float], second: dict[str, float]) -> System:
    s = System("fmu_loop")
    s.add_component(builders.component("f1", path, **first))
    s.add_component(builders.component("f2", path, **second))
    s.connect("f1.y -> f2.u")
    s.connect("f2.y -> f1.u")
    return s


def first_sample(system: System, comp: str, port: str) -> float:
    return float(system.components[comp].get_history([port])[port]["values"][0])


# ---------------------------------------------------------------------- FMUs
@pytest.mark.parametrize("master", [GaussSeidel, Jacobi, IJCSA])
def test_a_loop_of_two_fmus_starts_at_its_consistent_point_without_initial_values(affine: Path, master) -> None:
    s = fmu_loop(affine, {"a": A, "b": B}, {"a": C, "b": D})
    try:
        s.run(0.0, 0.3, 0.1, master=master())
        for comp, exact in (("f1", Y1), ("f2", Y2)):
            values = s.components[comp].get_history(["y"])["y"]["values"]
            np.testing.assert_allclose(values, exact, rtol=TOL)
        # the state each FMU initialized from its input (u0) is the consistent input, not the start value 0
        assert first_sample(s, "f1", "u0") == pytest.approx(Y2, rel=TOL)
        assert first_sample(s, "f2", "u0") == pytest.approx(Y1, rel=TOL)
    finally:
        s.free()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The ``(instance, function)`` of every FMI call entering or leaving Initialization Mode, in order."""
    seen: list[tuple[str, str]] = []
    call = FMUInstance.call

    def logged(self: FMUInstance, name: str, t: float, *args: Any) -> None:
        if "InitializationMode" in name:
            seen.append((self.name, name))
        call(self, name, t, *args)

    monkeypatch.setattr(FMUInstance, "call", logged)
    return seen


def test_fmus_are_in_initialization_mode_together(affine: Path, calls: list[tuple[str, str]]) -> None:
    s = fmu_loop(affine, {"a": A, "b": B}, {"a": C, "b": D})
    try:
        s.initialize(0.0, GaussSeidel())
    finally:
        s.free()
    assert calls == [("f1", "fmi2EnterInitializationMode"), ("f2", "fmi2EnterInitializationMode"),
                     ("f1", "fmi2ExitInitializationMode"), ("f2", "fmi2ExitInitializationMode")]


def test_fmi3_and_fmi2_fmus_initialize_together_without_a_loop(affine: Path, tmp_path: Path,
                                                               calls: list[tuple[str, str]]) -> None:
    """A cycle through the FMI 3 state-space model (no feedthrough) is no algebraic loop: both FMUs are in
    Initialization Mode together, then leave it with the inputs they started with, and outputs are passed on."""
    s = System("fmi3_cycle")
    s.add_component(builders.component("ss", builders.state_space3(tmp_path)))
    s.add_component(builders.component("g", affine, a=-0.5, b=0.25))
    s.connect("ss.y[1]", "g.u", convert_units=False)
    s.connect("g.y -> ss.u")
    try:
        s.run(0.0, 0.3, 0.1, master=GaussSeidel())
        assert s.analysis.loops == []
        y1 = s.components["ss"].get_history(["y[1]"])["y[1]"]["values"]
        np.testing.assert_array_equal(s.components["g"].get_history(["y"])["y"]["values"], -0.5 * y1 + 0.25)
        assert y1[0] == 1.0  # x0
    finally:
        s.free()
    assert calls == [("ss", "fmi3EnterInitializationMode"), ("g", "fmi2EnterInitializationMode"),
                     ("ss", "fmi3ExitInitializationMode"), ("g", "fmi2ExitInitializationMode")]


def test_a_nonlinear_loop_fixed_point_diverges_on_is_solved_by_newton(affine: Path) -> None:
    x, diverged = 0.0, False  # the fixed-point iteration from the start value 0
    for _ in range(10):
        x = x * x + QB
        diverged = diverged or abs(x) > 1e6
    assert diverged
    s = fmu_loop(affine, {"a": 0.0, "b": QB, "q": 1.0}, {"a": 1.0})
    try:
        s.initialize(0.0, GaussSeidel())
        y1 = s.components["f1"].outputs["y"].value
        # Newton from 0 goes to -3.75 first, then to the root below
        assert y1 == pytest.approx(ROOTS[1], rel=TOL)
        assert y1 == pytest.approx(y1 * y1 + QB, rel=TOL)
    finally:
        s.free()


@pytest.mark.parametrize(("guess", "root"), [(3.0, ROOTS[0]), (-3.0, ROOTS[1]), (2.0, ROOTS[0])])
def test_the_initial_value_is_the_start_guess_that_picks_the_branch(affine: Path, guess: float, root: float) -> None:
    s = fmu_loop(affine, {"a": 0.0, "b": QB, "q": 1.0}, {"a": 1.0})
    for port in ("f1.u", "f2.u"):  # whichever the loop is torn at
        s.set_initial_value(port, guess)
    try:
        s.run(0.0, 0.2, 0.1, master=IJCSA())  # Newton in the run, too: fixed point diverges on rounding errors
        np.testing.assert_allclose(s.components["f1"].get_history(["y"])["y"]["values"], root, rtol=TOL)
        assert first_sample(s, "f1", "u0") == pytest.approx(root, rel=TOL)
    finally:
        s.free()


def test_an_fmu_loop_without_a_consistent_point_fails_naming_the_loop(affine: Path) -> None:
    s = fmu_loop(affine, {"a": 1.0, "b": 1.0}, {"a": 1.0})  # x = x + 1
    try:
        with pytest.raises(InitializationError) as info:
            s.initialize(0.0, GaussSeidel())
    finally:
        s.free()
    error = info.value
    assert sorted(error.loop) == ["f1.u", "f2.u"] and error.port in error.loop
    assert error.residual == pytest.approx(1.0, rel=1e-6) and error.time == 0.0
    assert "\n" not in str(error)
    assert str(error).startswith("no consistent initial point of algebraic loop ")
    assert "singular interface Jacobian" in str(error)


# ---------------------------------------------------------------------- Python components
class Remembering(Affine):
    """:class:`Affine` that keeps the input it ends its initialization with (the hook's contract)."""

    def exit_initialization(self, t0: float) -> None:
        self.u_start = self.inputs["u"].value


class Square(Stateless):
    """``y = u^2 + b``."""

    def __init__(self, name: str, b: float) -> None:
        super().__init__(name)
        self.input_specs = {"u": real_in("u")}
        self.output_specs = {"y": real_out("y")}
        self.b = b

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = self.inputs["u"].value ** 2 + self.b


def test_a_loop_of_python_components_starts_consistent_and_they_see_it_when_initialization_ends() -> None:
    s = System("py_loop")
    s.add_component(Remembering("p", A, B))
    s.add_component(Remembering("q", C, D))
    s.connect("p.y -> q.u")
    s.connect("q.y -> p.u")
    s.run(0.0, 0.2, 0.1, master=GaussSeidel())
    np.testing.assert_allclose(s.components["p"].get_history(["y"])["y"]["values"], Y1, rtol=TOL)
    np.testing.assert_allclose(s.components["q"].get_history(["y"])["y"]["values"], Y2, rtol=TOL)
    assert s.components["p"].u_start == pytest.approx(Y2, rel=TOL)
    assert s.components["q"].u_start == pytest.approx(Y1, rel=TOL)


@pytest.mark.parametrize(("guess", "root"), [(None, ROOTS[1]), (3.0, ROOTS[0]), (-3.0, ROOTS[1])])
def test_python_components_a_nonlinear_loop_from_a_guess(guess: float | None, root: float) -> None:
    s = System("py_square")
    s.add_component(Square("p", QB))
    s.add_component(Affine("q", 1.0))
    s.connect("p.y -> q.u")
    s.connect("q.y -> p.u")
    if guess is not None:
        for port in ("p.u", "q.u"):
            s.set_initial_value(port, guess)
    s.initialize(0.0, GaussSeidel())
    assert s.components["p"].outputs["y"].value == pytest.approx(root, rel=TOL)


def test_python_components_without_a_consistent_point_fail_in_one_line() -> None:
    s = System("py_none")
    s.add_component(Affine("p", 1.0, 1.0))
    s.add_component(Affine("q", 1.0))
    s.connect("p.y -> q.u")
    s.connect("q.y -> p.u")
    with pytest.raises(InitializationError) as info:
        s.initialize(0.0, GaussSeidel())
    assert str(info.value) == (
        "no consistent initial point of algebraic loop p -> q (inputs p.u, q.u) at t=0: residual 1 on input p.u; "
        "fixed point did not converge, Newton has a singular interface Jacobian (loop gain 1: no unique solution) "
        "(tolerance 1e-10); the start guesses are the initial values of p.u")


# ---------------------------------------------------------------------- the command line
def _experiment(conf: Path, name: str, path: Path, first: dict[str, float], second: dict[str, float]) -> None:
    cfg = {
        "name": name,
        "run": {"t0": 0.0, "tf": 0.2, "dt": 0.1},
        "components": {"f1": {"type": "fmu", "params": {"path": str(path), **first}},
                       "f2": {"type": "fmu", "params": {"path": str(path), **second}}},
        "connections": ["f1.y -> f2.u", "f2.y -> f1.u"],
    }
    (conf / "experiment").mkdir(parents=True, exist_ok=True)
    (conf / "experiment" / f"{name}.yaml").write_text("# @package _global_\n" + yaml.safe_dump(cfg))


@pytest.mark.slow
def test_the_command_line_runs_a_loop_without_initial_values_and_refuses_one_without_a_solution(
        affine: Path, cosimrun, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    _experiment(conf, "loop", affine, {"a": A, "b": B}, {"a": C, "b": D})
    _experiment(conf, "none", affine, {"a": 1.0, "b": 1.0}, {"a": 1.0})

    proc = cosimrun("--config-dir", str(conf), "+experiment=loop", "hydra.run.dir=ok")
    assert proc.returncode == 0, proc.stderr
    res = load_results(tmp_path / "ok" / "results.h5")
    assert res.status == "complete"
    np.testing.assert_allclose(res.history("f1")["y"].values, Y1, rtol=TOL)
    np.testing.assert_allclose(res.history("f2")["y"].values, Y2, rtol=TOL)

    proc = cosimrun("--config-dir", str(conf), "+experiment=none", "hydra.run.dir=bad")
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cosimrun: error: no consistent initial point of algebraic loop f")
    assert "(inputs f" in lines[0] and "residual 1 on input f" in lines[0]
    assert not (tmp_path / "bad").exists()  # nothing ran: no run directory, no results file claiming anything
