"""Integer and Boolean table columns: a ``table`` source with ``type: int`` or ``bool`` feeds INT and BOOL inputs."""

from __future__ import annotations

import pytest
from helpers import Stateless

from cosimrun import PortSpec, PortType
from cosimrun.components.sources import Table
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel
from cosimrun.plugins import create_component
from cosimrun.system import System

CSV = "time,gear,brake\n0,1,false\n0.25,2,true\n0.5,2,0\n0.75,3.0,1\n"
GEAR = {0.0: 1, 0.25: 2, 0.5: 2, 0.75: 3}
BRAKE = {0.0: False, 0.25: True, 0.5: False, 0.75: True}


class Echo(Stateless):
    """Copies an INT and a BOOL input to outputs of the same types."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.input_specs = {"n": PortSpec("n", PortType.INT, "in"), "b": PortSpec("b", PortType.BOOL, "in")}
        self.output_specs = {"n_out": PortSpec("n_out", PortType.INT, "out"),
                             "b_out": PortSpec("b_out", PortType.BOOL, "out")}

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["n_out"].set(self.inputs["n"].value)
        self.outputs["b_out"].set(self.inputs["b"].value)


def expected(table: dict[float, object], t: float) -> object:
    return table[max(s for s in table if s <= t + 1e-12)]


def test_int_and_bool_columns_feed_int_and_bool_inputs_held_between_rows(tmp_path) -> None:
    path = tmp_path / "modes.csv"
    path.write_text(CSV)
    system = System("modes")
    for name, column, kind in (("gear", "gear", "int"), ("brake", "brake", "bool")):
        system.add_component(create_component("table", name, {"path": str(path), "value_column": column,
                                                             "type": kind, "interpolation": "previous"}))
    system.add_component(Echo("echo"))
    system.connect("gear.y", "echo.n")
    system.connect("brake.y", "echo.b")
    system.run(0.0, 1.0, 0.1, master=GaussSeidel())
    t, n = system.history.get_port_trajectory("echo", "n_out")
    _, b = system.history.get_port_trajectory("echo", "b_out")
    assert len(t) == 13  # the grid and the rows at 0.25 and 0.75 (time events)
    for ti, ni, bi in zip(t, n, b, strict=True):
        assert int(ni) == expected(GEAR, ti) and bool(bi) is expected(BRAKE, ti), (ti, ni, bi)
    _, y = system.history.get_port_trajectory("gear", "y")
    assert [type(v) for v in (system.components["gear"].outputs["y"].value,
                              system.components["brake"].outputs["y"].value)] == [int, bool]
    assert int(y[-1]) == 3


@pytest.mark.parametrize(("params", "message"), [
    ({"type": "int"}, r"parameter 'interpolation' must be 'previous' for type 'int', got 'linear'"),
    ({"type": "bool", "interpolation": "previous", "unit": "m"},
     r"parameter 'unit' must be null for type 'bool' \(only real outputs carry a unit\), got 'm'"),
])
def test_an_int_or_bool_table_needs_previous_and_no_unit(tmp_path, params, message) -> None:
    path = tmp_path / "modes.csv"
    path.write_text(CSV)
    with pytest.raises(ConfigError, match=message):
        create_component("table", "gear", {"path": str(path), "value_column": "gear", **params})


@pytest.mark.parametrize(("kind", "cell", "what"), [("int", "1.5", "a whole number"),
                                                    ("bool", "yes", "0, 1, true or false")])
def test_a_cell_that_is_not_of_the_type_names_its_row(tmp_path, kind, cell, what) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f"time,value\n0,1\n1,{cell}\n")
    with pytest.raises(ValueError, match=rf"data row 3: expected a number and {what} in columns 'time' and 'value'"):
        create_component("table", "tab", {"path": str(path), "type": kind, "interpolation": "previous"})


def test_a_real_table_is_unchanged(tmp_path) -> None:
    path = tmp_path / "modes.csv"
    path.write_text(CSV)
    table = create_component("table", "gear", {"path": str(path), "value_column": "gear"})
    assert isinstance(table, Table) and table.output_specs["y"].type is PortType.REAL
    assert list(table.values) == [1.0, 2.0, 2.0, 3.0]
