"""The error family reaches the whole library API: nothing is raised on purpose as a plain built-in error.

The scan reads every module of ``cosimrun/`` with :mod:`ast` and lists each
``ValueError(...)``, ``TypeError(...)`` and ``RuntimeError(...)`` made (raised
at once or returned by a helper that builds the error) and each bare
``raise ValueError``; the few that guard an internal invariant (never a user's
input) are allowed below with their reason.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import pytest

import cosimrun
from cosimrun.components.blocks import Gain, Integrator
from cosimrun.components.sources import Table
from cosimrun.config.build import build_experiment
from cosimrun.core.equations import EquationComponent
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.core.units import parse_unit
from cosimrun.errors import (
    ComponentContractError,
    ComponentStateError,
    ConfigError,
    CosimrunError,
    DataFileError,
    DuplicateNameError,
    InvalidConnectionError,
    ModelOutputError,
    SimulationError,
)
from cosimrun.masters import Jacobi
from cosimrun.parameters import Parameter
from cosimrun.post.signals import read_csv
from cosimrun.system import System

PACKAGE = Path(cosimrun.__file__).parent
PLAIN = {"ValueError", "TypeError", "RuntimeError"}

ALLOWED: dict[tuple[str, str], str] = {
    ("core/ode/component.py", "restore_state"):
        "a master handing a component a snapshot that is not its own, or one taken at another time",
    ("core/ode/component.py", "restore_checkpoint"):
        "a state of another component handed to this one: the system's fingerprint refuses such a state first",
    ("storage/sweep_index.py", "append_index_rows"):
        "a caller handing over a row schema without an int num: a programming error",
    ("core/multi.py", "restore_state"):
        "a master handing a multi component a snapshot that is not its own, or one of another mode",
    ("components/sources.py", "_whole"):
        "a table cell parser standing in for float(): its ValueError is caught by the table, which names the row",
    ("components/sources.py", "_boolean"):
        "a table cell parser standing in for float(): its ValueError is caught by the table, which names the row",
    ("fmi/pool.py", "__init__"):
        "the Python stand-in for the native pool raises what the C extension's Pool raises",
    ("fmi/pool.py", "run"):
        "the Python stand-in for the native pool raises what the C extension's Pool.run raises",
    ("runner/configtext.py", "resolved"):
        "a caller handing over a config that is not a mapping: a programming error, Python's TypeError",
    ("runner/outcome.py", "__float__"):
        "float() of a job outcome that holds no number: Python's number protocol expects a TypeError",
    ("components/fmu/base.py", "_set_path"):
        "an unusable FMU file: the parameter check of set_parameters turns it into the ConfigError keyed 'path' "
        "that names the value given, as for any plugin's plain ValueError",
}
"""``(module, function)``: why a plain error is right there."""


def plain_raises(root: Path = PACKAGE) -> list[tuple[str, int, str, str]]:
    """``(module, line, function, exception)`` of every plain error of :data:`PLAIN` made or raised under *root*."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call):
                    made = node.func
                elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Name):
                    made = node.exc
                else:
                    continue
                if isinstance(made, ast.Name) and made.id in PLAIN:
                    found.append((module, node.lineno, func.name, made.id))
    return sorted(set(found))


def test_the_scan_finds_plain_errors_raised_or_built(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(
        "def f(x):\n    if x:\n        raise ValueError('bad')\n    raise KeyError(x)\n\n\n"
        "def g():\n    return TypeError('built here, raised by the caller')\n\n\n"
        "def h(x):\n    if isinstance(x, RuntimeError):\n        raise RuntimeError\n"
    )
    assert plain_raises(tmp_path) == [("mod.py", 3, "f", "ValueError"), ("mod.py", 8, "g", "TypeError"),
                                      ("mod.py", 13, "h", "RuntimeError")]


def test_the_library_raises_no_plain_value_type_or_runtime_error() -> None:
    found = [f"cosimrun/{module}:{line} {func}: raise {exc}" for module, line, func, exc in plain_raises()
             if (module, func) not in ALLOWED]
    assert found == []


def test_every_allowed_raise_still_exists() -> None:
    present = {(module, func) for module, _, func, _ in plain_raises()}
    assert set(ALLOWED) <= present


# ---------------------------------------------------------------------- the cases, with their fields
def two_gains() -> System:
    system = System("s")
    system.add_component(Gain("a"))
    system.add_component(Gain("b"))
    return system


def test_a_duplicate_component_name_is_a_duplicate_name_error_naming_it() -> None:
    system = two_gains()
    with pytest.raises(DuplicateNameError) as info:
        system.add_component(Gain("a"))
    exc = info.value
    assert (exc.kind, exc.name, exc.key) == ("component", "a", None)
    assert str(exc) == "system 's' already has a component named 'a'"
    assert isinstance(exc, ValueError) and isinstance(exc, KeyError)  # what callers caught before, and a lookup
    assert list(system.components) == ["a", "b"]


def test_a_connection_to_a_bare_component_is_an_invalid_connection_error_with_the_connection() -> None:
    system = two_gains()
    with pytest.raises(InvalidConnectionError) as info:
        system.connect("a.y -> b")
    exc = info.value
    assert exc.connection == "a.y -> b"
    assert str(exc) == "connection destination 'b' must be written 'component.port'"
    assert isinstance(exc, ValueError)
    with pytest.raises(InvalidConnectionError) as info:
        system.connect("a.y => b.u")
    assert info.value.connection == "a.y => b.u"
    assert system.connections == []


def test_an_unknown_port_in_a_connection_carries_the_connection_and_the_closest_name() -> None:
    with pytest.raises(InvalidConnectionError) as info:
        two_gains().connect("a.yy", "b.u")
    assert (info.value.connection, info.value.suggestion) == ("a.yy -> b.u", "y")
    assert str(info.value).startswith("connection a.yy -> b.u: unknown output 'yy' of component 'a'; did you mean 'y'?")


def test_a_macro_step_that_is_not_positive_is_a_config_error_keyed_dt_naming_no_config_key() -> None:
    system = two_gains()
    system.connect("a.y -> b.u")
    with pytest.raises(ConfigError) as info:
        system.run(0.0, 1.0, 0.0, Jacobi())
    assert info.value.key == "dt"
    assert "run." not in str(info.value)


def test_the_builder_places_the_macro_step_at_run_dt() -> None:
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"g": {"type": "gain"}}, "run": {"dt": 0}})
    assert str(info.value) == "run.dt: the macro step must be positive, got 0"


def test_an_invalid_value_a_component_refuses_is_keyed_by_the_parameter_and_placed_by_the_builder() -> None:
    with pytest.raises(ConfigError) as info:
        Integrator("i").set_parameters(integrator="rk5")
    assert info.value.key == "integrator"
    assert info.value.message.startswith("'rk5' is invalid: component 'i': unknown integrator 'rk5'; did you mean")
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"i": {"type": "integrator", "params": {"integrator": "rk5"}}}})
    assert str(info.value).startswith("components.i.params.integrator: 'rk5' is invalid: component 'i': unknown "
                                      "integrator 'rk5'")


class Picky(Gain):
    """A plugin written against the reference API: its hook raises a plain ``ValueError``."""

    def _validate_parameter(self, name: str, value: Any) -> Any:
        if name == "k" and value == 13:
            raise ValueError("13 is unlucky")
        return super()._validate_parameter(name, value)


def test_a_plugins_plain_value_error_from_set_parameters_becomes_a_config_error_keyed_by_the_parameter() -> None:
    comp = Picky("p")
    with pytest.raises(ConfigError) as info:
        comp.set_parameters(k=13)
    assert (info.value.key, info.value.message) == ("k", "13 is invalid: 13 is unlucky")
    assert isinstance(info.value.__cause__, ValueError) and str(info.value.__cause__) == "13 is unlucky"
    comp.set_parameters(k=2.0)
    assert comp.parameters["k"] == 2.0


def test_a_parameters_table_written_wrong_is_a_component_contract_error_naming_the_class() -> None:
    class Broken(Gain):
        PARAMETERS = {"gain": 1.0}

    with pytest.raises(ComponentContractError) as info:
        Broken("b")
    assert info.value.component == Broken.__qualname__
    assert isinstance(info.value, TypeError)
    assert str(info.value).endswith(".PARAMETERS['gain'] is 1.0, not a cosimrun.parameters.Parameter")
    with pytest.raises(ComponentContractError, match="Parameter type 'complex' is not one of"):
        Parameter("complex")


def test_a_port_value_of_the_wrong_type_names_the_port() -> None:
    with pytest.raises(ComponentContractError) as info:
        PortSpec("u", PortType.REAL, "in").validate_value("fast")
    assert (info.value.port, str(info.value)) == ("u", "port 'u' (real) expects a number, got str 'fast'")


def test_a_call_the_component_cannot_take_yet_is_a_component_state_error_naming_it() -> None:
    comp = Gain("g")
    with pytest.raises(ComponentStateError) as info:
        comp.set_inputs({"u": 1.0})
    assert info.value.component == "g" and isinstance(info.value, RuntimeError)
    assert str(info.value) == "component 'g': call initialize(t0) before setting input 'u'"


def test_a_model_function_of_the_wrong_shape_is_a_model_output_error_at_its_time() -> None:
    comp = EquationComponent("m", dim_state=2, state_equation=lambda t, x, u: x[:1], dt=0.5)
    comp.initialize(0.0)
    with pytest.raises(ModelOutputError) as info:
        comp.do_step(0.0, 0.5)
    exc = info.value
    assert (exc.component, exc.time, exc.function, exc.expected, exc.got) == ("m", 0.0, "state_equation", (2,), (1,))
    assert isinstance(exc, SimulationError) and isinstance(exc, ValueError)


def test_a_table_row_that_is_not_a_number_is_a_data_file_error_with_path_and_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("time,value\n0,1\n1,fast\n")
    table = Table("tab")
    table.set_parameters(path=str(path))
    with pytest.raises(DataFileError) as info:
        table.check_parameters()
    assert (info.value.path, info.value.row, info.value.key) == (str(path), 3, None)
    assert "data row 3: expected numbers in columns 'time' and 'value', got ['1', 'fast']" in str(info.value)


def test_a_reference_csv_whose_time_decreases_is_a_data_file_error_with_path_and_row(tmp_path: Path) -> None:
    path = tmp_path / "ref.csv"
    path.write_text("time,y\n0,1\n2,2\n1,3\n")
    with pytest.raises(DataFileError) as info:
        read_csv(path)
    assert (info.value.path, info.value.row) == (str(path), 3)
    assert str(info.value) == f"{path}: time decreases at data row 3"


def test_an_unknown_unit_carries_the_closest_registry_name() -> None:
    with pytest.raises(ConfigError) as info:
        parse_unit("kilogramm")
    assert info.value.suggestion == "kilogram"
    assert str(info.value).startswith("unknown unit 'kilogramm'; did you mean 'kilogram' or ")


@pytest.mark.parametrize("exc", [
    ModelOutputError("m", component="c", time=1.5, function="derivatives", expected=(2,), got=(3,)),
    DataFileError("bad", path="/x.csv", row=4, key="path"),
    DuplicateNameError("twice", kind="component", name="a"),
    ComponentContractError("wrong", component="C", port="u"),
    ComponentStateError("not now", component="c"),
], ids=lambda exc: type(exc).__name__)
def test_the_new_errors_pickle_with_their_fields(exc: CosimrunError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert (str(back), vars(back)) == (str(exc), vars(exc))
