"""Connections written as mappings with ``scale``, ``offset`` and ``convert_units``; bad values named by key."""

from __future__ import annotations

import pytest
from helpers import Constant

from cosimrun import PortSpec, PortType
from cosimrun.config import build
from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel

COMPONENTS = {
    "src": {"type": "constant", "params": {"value": 20.0, "unit": "degC"}},
    "g": {"type": "gain", "params": {"input_unit": "K", "output_unit": "K"}},
    "step": {"type": "step", "params": {"step_time": 0.5}},
}


def built(connection: object) -> dict:
    exp = build_experiment({"components": COMPONENTS, "connections": [connection]})
    exp.system.initialize(0.0, GaussSeidel())
    return {"u": exp.system.components["g"].inputs["u"].value, "link": exp.system.links[0]}


def test_the_mapping_takes_scale_offset_and_convert_units():
    plain = built("src.y -> g.u")
    assert plain["u"] == pytest.approx(293.15, rel=1e-15)
    scaled = built({"src": "src.y", "dst": "g.u", "scale": 2, "offset": 1.0})
    assert scaled["u"] == pytest.approx(2 * 293.15 + 1.0, rel=1e-15)
    raw = built({"src": "src.y", "dst": "g.u", "scale": 2.0, "convert_units": False})
    assert raw["u"] == 40.0
    assert raw["link"].connection.describe_transform() == "scale 2, units not converted"


@pytest.mark.parametrize(("connection", "expected"), [
    ({"src": "src.y", "dst": "g.u", "scale": "abc"},
     "connections[0].scale: 'abc' is not a finite number; expected a number, e.g. scale: 2.0"),
    ({"src": "src.y", "dst": "g.u", "offset": [1]},
     "connections[0].offset: [1] is not a finite number; expected a number, e.g. offset: 2.0"),
    ({"src": "src.y", "dst": "g.u", "convert_units": "off"},
     "connections[0].convert_units: 'off' is not true or false; expected true or false, e.g. convert_units: false"),
    ({"src": "src.y", "dst": "g.u", "factor": 2.0},
     "connections[0].factor: unknown key 'factor' in connections[0] (known: convert_units, dst, offset, scale, src)"),
    ({"src": "src.y", "dst": "step.y", "scale": 2.0}, "connections[0]: connection src.y -> step.y: step.y is an "
                                                      "output; a connection ends at an input"),
])
def test_bad_values_name_their_key(connection, expected):
    with pytest.raises(ConfigError) as info:
        built(connection)
    assert str(info.value) == expected


def test_a_transformation_on_an_integer_port_names_its_key(monkeypatch):
    def create(type_name: str, name: str, *args: object, **kwargs: object) -> Constant:
        comp = Constant(name, 3, port_type=PortType.INT)
        comp.input_specs = {"n": PortSpec("n", PortType.INT, "in")}
        return comp

    monkeypatch.setattr(build, "create_component", create)
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"a": {"type": "counter"}, "b": {"type": "counter"}},
                          "connections": ["a.y -> b.n", {"src": "b.y", "dst": "a.n", "offset": 0.5}]})
    assert str(info.value) == ("connections[1].offset: connection b.y -> a.n: offset +0.5 applies to real ports "
                               "only; b.y is int (leave out scale, offset and convert_units)")
