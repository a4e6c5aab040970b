"""The component reference (cosimrun.reference): builtins, plugins, unknown names, the table of the docs' reference
(generated at build time; see tests/docs/test_generate.py)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from types import SimpleNamespace

import pytest

from cosimrun.components import TYPES
from cosimrun.errors import PluginError
from cosimrun.plugins import ENTRY_POINT_GROUP, ComponentRegistry
from cosimrun.reference import (
    TABLE_END,
    TABLE_START,
    component_reference,
    describe_component,
    main,
    markdown_table,
    replace_table,
)


def test_a_builtin_lists_its_declared_parameters_ode_settings_and_ports() -> None:
    doc = describe_component("pendulum")
    assert doc.source == "cosimrun.components.mechanics:Pendulum, distribution cosimrun"
    assert doc.summary.startswith("Nonlinear pendulum driven by a torque")
    params = {p.name: p for p in doc.parameters}
    assert (params["length"].type, params["length"].unit, params["length"].default, params["length"].bounds,
            params["length"].doc) == ("float", "m", 1.0, "> 0", "rod length L")
    assert params["integrator"].choices[0] == "rk4" and params["q0"].unit == "rad"
    ports = {p.name: (p.direction, p.type, p.unit) for p in doc.ports}
    assert ports == {"torque": ("in", "real", "N*m"), "q": ("out", "real", "rad"), "omega": ("out", "real", "rad/s"),
                     "end_stop": ("out", "event", None)}


def test_the_text_reference() -> None:
    text = component_reference("first_order_lag")
    assert text.startswith("first_order_lag  (cosimrun.components.blocks:FirstOrderLag, distribution cosimrun)")
    assert "    time_constant: float [s] = 1.0, > 0  time constant T" in text
    assert "    in  u: real  input" in text
    assert "    interpolation: choice of linear, previous = 'linear'" in component_reference("table")


def test_multi_and_fmu_say_where_their_ports_come_from() -> None:
    assert "built from sub-components (modes)" in describe_component("multi").notes[0]
    assert "come from the FMU" in describe_component("fmu").notes[0]


def test_unknown_names_suggest() -> None:
    with pytest.raises(PluginError, match=r"unknown component type 'pendlum'; did you mean 'pendulum'"):
        describe_component("pendlum")
    assert main(["pendlum"]) == 2


class _Entry:
    def __init__(self, name: str, value: str) -> None:
        self.name, self.value, self.group = name, value, ENTRY_POINT_GROUP
        self.dist = SimpleNamespace(name="fakeplugin")

    def load(self) -> object:
        return importlib.metadata.EntryPoint(self.name, self.value, self.group).load()


def test_a_plugin_is_described_through_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ref_plugin.py").write_text(
        "from cosimrun.components.sources import Constant\n"
        "from cosimrun.parameters import Parameter\n\n"
        "class Level(Constant):\n"
        "    '''A constant level.\n\n    More.\n    '''\n\n"
        "    PARAMETERS = {'tank': Parameter(float, unit='m**3', default=1.0, gt=0, doc='tank volume')}\n\n"
        "class NeedsMore(Constant):\n"
        "    '''Needs a second argument.'''\n\n"
        "    def __init__(self, name, size):\n"
        "        super().__init__(name)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ComponentRegistry(source=lambda: [_Entry("level", "ref_plugin:Level"),
                                                 _Entry("odd", "ref_plugin:NeedsMore")], builtins={})
    doc = describe_component("level", registry)
    assert (doc.source, doc.description) == ("ref_plugin:Level, distribution fakeplugin", "A constant level.")
    assert [p.name for p in doc.parameters] == ["unit", "value", "tank"]
    odd = describe_component("odd", registry)
    assert odd.ports == () and "failed: TypeError" in odd.notes[0]


def test_the_table_covers_every_builtin() -> None:
    table = markdown_table()
    assert table.startswith(TABLE_START) and table.endswith(TABLE_END)
    for name in TYPES:
        assert f"| `{name}` |" in table
    assert "`length` = 1.0 m" in table and "`tf` = null," in table
    assert replace_table(f"a\n{TABLE_START}\nold\n{TABLE_END}\nb", "new") == "a\nnew\nb"

