"""Component names, and the port names of components other than FMUs, must be Python identifiers.

They become HDF5 paths, ``component.port`` references, CSV and MATLAB column
names and report headings. A name that is not one is refused in one line
naming the key and the value: from an experiment file, an override, a ``+``
addition, a sweep and :meth:`System.add_component`. An FMU's ports keep the
names of its variables (FMI 3 array elements ``scaled[1]``, ``der(x)``, ``a.b``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from helpers import Stateless, real_in, real_out

from cosimrun import cli
from cosimrun.components.sources import Sine
from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError
from cosimrun.exits import EXIT_CONFIG
from cosimrun.system import System

HOSTILE = "<img src=x onerror=alert(4)>"
RULE = "is not a Python identifier (letters, digits and underscores, not starting with a digit)"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with ``cfg/experiment/``: ``hostile.yaml`` (a sine named HOSTILE) and
    ``dashed.yaml`` (a constant named ``dashed-name``)."""
    folder = tmp_path / "cfg" / "experiment"
    folder.mkdir(parents=True)
    run = "run: {t0: 0, tf: 0.1, dt: 0.01}"
    (folder / "hostile.yaml").write_text(f"# @package _global_\nname: hostile\n{run}\n"
                                         f"components:\n  '{HOSTILE}': {{type: sine}}\n")
    (folder / "dashed.yaml").write_text(f"# @package _global_\nname: dashed\n{run}\n"
                                        "components:\n  dashed-name: {type: constant, params: {value: 1}}\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """``cosimrun ARGS`` in-process: its exit status."""
    monkeypatch.setattr(sys, "argv", ["cosimrun", "--config-dir", "cfg", *args])
    with pytest.raises(SystemExit) as end:
        cli.main()
    return end.value.code


CLI_CASES = [
    ("file", ["+experiment=hostile"], HOSTILE),
    ("file-with-override", ["+experiment=dashed", "components.dashed-name.params.value=2"], "dashed-name"),
    ("added", ["+experiment=bouncing_ball", "+components.my-sine={type: sine}"], "my-sine"),
    ("added-in-a-sweep", ["-m", "+experiment=bouncing_ball", "run.tf=0.1,0.2", "+components.my-sine={type: sine}",
                          "hydra/launcher=basic"], "my-sine"),
]


@pytest.mark.parametrize(("args", "name"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_a_component_name_that_is_not_an_identifier_is_one_line_naming_key_and_value(
        workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str],
        name: str) -> None:
    code = run_main(monkeypatch, *args)
    out, err = capsys.readouterr()
    assert (code, out) == (EXIT_CONFIG, ""), err
    assert err.splitlines() == [f"cosimrun: error: components.{name}: component name {name!r} {RULE}"]
    assert sorted(p.name for p in workdir.iterdir()) == ["cfg"]  # no run or sweep directory


def test_the_builder_refuses_the_name_before_building_the_component() -> None:
    cfg = {"components": {"2nd": {"type": "sine", "params": {"nosuch": 1}}}}
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    assert str(info.value) == f"components.2nd: component name '2nd' {RULE}"
    assert info.value.key == "components.2nd"


class Probe(Stateless):
    """A Python component with one input and one output of the given names."""

    def __init__(self, name: str, inp: str = "u", out: str = "y") -> None:
        super().__init__(name)
        self.input_specs = {inp: real_in(inp)}
        self.output_specs = {out: real_out(out)}

    def _update_output_states(self, t=None, event_names=()):
        pass


@pytest.mark.parametrize("name", [HOSTILE, "a b", "2nd", "ü-1", "x\n"])
def test_add_component_refuses_a_component_name_that_is_not_an_identifier(name: str) -> None:
    system = System("s")
    with pytest.raises(ConfigError) as info:
        system.add_component(Sine(name))
    assert str(info.value) == f"component name {name!r} {RULE}"
    assert system.components == {}


def test_add_component_refuses_a_python_components_port_name_that_is_not_an_identifier() -> None:
    system = System("s")
    for inp, out, bad in [("u", "y-out", "y-out"), ("in put", "y", "in put"), ("u", HOSTILE, HOSTILE)]:
        with pytest.raises(ConfigError) as info:
            system.add_component(Probe("p", inp, out))
        assert str(info.value) == f"port name {bad!r} of component 'p' {RULE}"
    assert system.components == {}
    accepted = system.add_component(Probe("p_1", "u_1", "höhe"))  # Python identifiers need not be ASCII
    assert system.components == {"p_1": accepted}


def test_an_fmus_ports_keep_their_variable_names(tmp_path_factory: pytest.TempPathFactory) -> None:
    """FMI 3 array elements are ports named ``scaled[1]`` ... ; the component name itself is still checked."""
    ball3 = builders.bouncing_ball3(tmp_path_factory.mktemp("fmus"))
    system = build_experiment({"components": {"b": {"type": "fmu", "params": {"path": str(ball3)}}}}).system
    try:
        ports = set(system.components["b"].output_specs)
        assert {"scaled[1]", "scaled[2]", "scaled[3]"} <= ports
    finally:
        system.free()
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"b-3": {"type": "fmu", "params": {"path": str(ball3)}}}})
    assert str(info.value) == f"components.b-3: component name 'b-3' {RULE}"
