"""Component registry: builtin types from the code table plus ``cosimrun.components`` entry points."""

import importlib.metadata
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from cosimrun import plugins
from cosimrun.components import TYPES
from cosimrun.plugins import ENTRY_POINT_GROUP, ComponentInfo, ComponentRegistry, PluginError

BUILTINS = {
    "constant", "step", "ramp", "sine", "table", "gain", "sum", "integrator", "saturation", "first_order_lag",
    "pid", "pendulum", "pendulum_linear", "bouncing_ball", "mass_spring_damper", "mass_spring_damper_force", "multi",
}

PLUGIN_SOURCE = '''
"""A fake third-party plugin module."""
from cosimrun.components.sources import Constant


class Answer(Constant):
    """Constant 42 for tests.

    More text that is not the description.
    """

    def __init__(self, name, label=None, group=None):
        super().__init__(name, label, group)
        self.parameters["value"] = 42.0


class NotAComponent:
    """Plain class."""


answer_factory = Answer
'''


class FakeEntryPoint:
    """Duck-typed entry point: name, value, dist and a real ``load``."""

    def __init__(self, name, value, dist="fakeplugin"):
        self.name, self.value, self.group = name, value, ENTRY_POINT_GROUP
        self.dist = SimpleNamespace(name=dist) if dist else None
        self.loads = 0

    def load(self):
        self.loads += 1
        return importlib.metadata.EntryPoint(self.name, self.value, self.group).load()


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    (tmp_path / "fake_cosim_plugin.py").write_text(PLUGIN_SOURCE)
    (tmp_path / "broken_cosim_plugin.py").write_text("raise ImportError('needs libfoo >= 2')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for mod in ("fake_cosim_plugin", "broken_cosim_plugin"):
        sys.modules.pop(mod, None)


def registry(*eps, builtins=None):
    return ComponentRegistry(source=lambda: list(eps), builtins=builtins or {})


def test_names_do_not_import_plugin_modules(plugin_dir):
    ep = FakeEntryPoint("answer", "fake_cosim_plugin:Answer")
    reg = registry(ep, FakeEntryPoint("broken", "broken_cosim_plugin:X"))
    assert reg.names() == ["answer", "broken"]
    assert "answer" in reg
    assert [i.description for i in reg.list_components(load=False)] == ["", ""]
    assert ep.loads == 0 and "fake_cosim_plugin" not in sys.modules


def test_get_class_and_create_component(plugin_dir):
    ep = FakeEntryPoint("answer", "fake_cosim_plugin:Answer")
    reg = registry(ep)
    cls = reg.get_component_class("answer")
    assert cls.__name__ == "Answer" and reg.get_component_class("answer") is cls
    assert ep.loads == 1  # cached
    comp = reg.create_component("answer", "a1", {"unit": "m"})
    assert comp.name == "a1" and comp.parameters["value"] == 42.0
    assert comp.output_specs["y"].unit_name == "m"


def test_unknown_name_lists_installed_and_suggests(plugin_dir):
    reg = registry(FakeEntryPoint("answer", "fake_cosim_plugin:Answer"),
                   FakeEntryPoint("pendulum", "x:Y"))
    with pytest.raises(PluginError, match=r"unknown component type 'answr'; did you mean 'answer'\? "
                                          r"\(installed: answer, pendulum\); plugins register types in the "
                                          r"entry-point group 'cosimrun.components'") as info:
        reg.create_component("answr", "a", {})
    assert isinstance(info.value, ValueError)


def test_import_failure_names_entry_point_value_and_distribution(plugin_dir):
    reg = registry(FakeEntryPoint("broken", "broken_cosim_plugin:Model", dist="brokenpkg"))
    with pytest.raises(PluginError, match=r"entry point 'broken' = 'broken_cosim_plugin:Model' \(distribution "
                                          r"'brokenpkg'\) failed to load: ImportError: needs libfoo >= 2") as info:
        reg.get_component_class("broken")
    assert isinstance(info.value.__cause__, ImportError)
    missing = registry(FakeEntryPoint("gone", "no_such_module_xyz:Model", dist=None))
    with pytest.raises(PluginError, match=r"\(distribution 'unknown'\) failed to load: ModuleNotFoundError"):
        missing.get_component_class("gone")
    attr = registry(FakeEntryPoint("typo", "fake_cosim_plugin:Answr"))
    with pytest.raises(PluginError, match=r"failed to load: AttributeError"):
        attr.get_component_class("typo")


def test_entry_point_that_is_not_a_component_class(plugin_dir):
    reg = registry(FakeEntryPoint("plain", "fake_cosim_plugin:NotAComponent"),
                   FakeEntryPoint("module", "fake_cosim_plugin"))
    with pytest.raises(PluginError, match=r"refers to class fake_cosim_plugin.NotAComponent, not a subclass of "
                                          r"cosimrun.CoSimComponent"):
        reg.get_component_class("plain")
    with pytest.raises(PluginError, match=r"refers to module, not a subclass"):
        reg.get_component_class("module")


def test_third_party_type_named_like_a_builtin_warns_and_the_builtin_wins(plugin_dir):
    other = FakeEntryPoint("constant", "fake_cosim_plugin:Answer", dist="otherpkg")
    reg = registry(other, builtins={"constant": "cosimrun.components.sources:Constant"})
    with pytest.warns(UserWarning, match=r"'constant' is registered twice .* by 'cosimrun' "
                                         r"\(cosimrun.components.sources:Constant\) and by 'otherpkg' "
                                         r"\(fake_cosim_plugin:Answer\); using the one from 'cosimrun'"):
        names = reg.names()
    assert names == ["constant"]
    assert reg.get_component_class("constant").__module__ == "cosimrun.components.sources"
    assert other.loads == 0
    first = registry(FakeEntryPoint("x", "a:A", dist="pkg_a"), FakeEntryPoint("x", "b:B", dist="pkg_b"))
    with pytest.warns(UserWarning, match=r"using the one from 'pkg_a'"):
        assert first.entry_point("x").value == "a:A"


def test_entry_points_of_cosimrun_itself_are_ignored(plugin_dir, recwarn):
    """An install from before the builtins moved into the code still lists them as entry points."""
    stale = [FakeEntryPoint("constant", "cosimrun.components.sources:Constant", dist="cosimrun"),
             FakeEntryPoint("gone", "cosimrun.components.gone:Gone", dist="cosimrun")]
    reg = registry(*stale, builtins={"constant": "cosimrun.components.sources:Constant"})
    assert reg.names() == ["constant"]
    assert plugins.distribution_name(reg.entry_point("constant")) == "cosimrun"
    assert not recwarn.list


def test_same_distribution_seen_twice_is_silent(plugin_dir, recwarn):
    reg = registry(FakeEntryPoint("answer", "fake_cosim_plugin:Answer"),
                   FakeEntryPoint("answer", "fake_cosim_plugin:Answer"))
    assert reg.names() == ["answer"]
    assert not recwarn.list


def test_listing_shows_descriptions_and_load_errors(plugin_dir):
    reg = registry(FakeEntryPoint("answer", "fake_cosim_plugin:Answer"),
                   FakeEntryPoint("broken", "broken_cosim_plugin:Model", dist="brokenpkg"))
    answer, broken = reg.list_components()
    assert answer == ComponentInfo("answer", "fakeplugin", "fake_cosim_plugin:Answer", "Constant 42 for tests.")
    assert broken.name == "broken" and broken.distribution == "brokenpkg"
    assert broken.description == "(failed to load: needs libfoo >= 2)"
    assert "entry point 'broken'" in broken.error


def test_default_source_reads_importlib_metadata(plugin_dir, monkeypatch):
    calls = []

    def fake_entry_points(**kwargs):
        calls.append(kwargs)
        return [FakeEntryPoint("answer", "fake_cosim_plugin:Answer")]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    plugins.refresh()
    try:
        assert plugins.component_names() == sorted({*TYPES, "answer"})
        assert plugins.create_component("answer", "a", {}).parameters["value"] == 42.0
        assert calls == [{"group": "cosimrun.components"}]
    finally:
        monkeypatch.undo()
        plugins.refresh()


def test_builtins_resolve_without_package_metadata(monkeypatch):
    """Run from a source tree or with metadata stripped: no distribution registers anything."""
    from cosimrun.components.mechanics import Pendulum

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kwargs: [])
    plugins.refresh()
    try:
        assert plugins.component_names() == sorted(TYPES)
        assert plugins.get_component_class("pendulum") is Pendulum
        assert plugins.create_component("gain", "g", {"k": 2.0}).parameters["k"] == 2.0
        info = {i.name: i for i in plugins.list_components(load=False)}["pendulum"]
        assert (info.distribution, info.value) == ("cosimrun", "cosimrun.components.mechanics:Pendulum")
    finally:
        monkeypatch.undo()
        plugins.refresh()


def test_create_without_params_defers_checks():
    table = plugins.create_component("table", "t")  # no path yet: checked at initialize
    with pytest.raises(ValueError, match=r"parameter 'path' must name a CSV file"):
        table.initialize(0.0)
    with pytest.raises(ValueError, match=r"parameter 'lower' must be <= upper"):
        plugins.create_component("saturation", "s", {"lower": 2.0})


def test_real_builtin_lookup():
    from cosimrun.components.mechanics import Pendulum

    assert set(plugins.component_names()) >= BUILTINS
    assert plugins.get_component_class("pendulum") is Pendulum
    infos = {i.name: i for i in plugins.list_components()}
    assert infos["pendulum"].distribution == "cosimrun"
    assert infos["pendulum"].value == "cosimrun.components.mechanics:Pendulum"
    assert infos["pendulum"].description.startswith("Nonlinear pendulum driven by a torque")
    for name in BUILTINS:
        assert infos[name].error is None and infos[name].description, name


def test_listing_real_names_imports_no_component_module():
    code = textwrap.dedent("""
        import sys
        from cosimrun import plugins
        names = plugins.component_names()
        assert "pendulum" in names, names
        loaded = sorted(m for m in sys.modules if m.startswith("cosimrun.components."))
        assert not loaded, loaded
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_create_component_is_public_and_builds_builtins_as_a_config_does():
    import cosimrun
    from cosimrun import Jacobi, System
    from cosimrun.errors import ConfigError

    assert "create_component" in cosimrun.__all__ and cosimrun.create_component.__doc__
    system = System("demo")  # the README's example ("The engine as a library")
    system.add_component(cosimrun.create_component("step", "ref", {"final": 2.0, "step_time": 0.5}))
    system.add_component(cosimrun.create_component("integrator", "i", {"k": 3.0}))
    system.connect("ref.y", "i.u")
    result = system.run(0.0, 1.0, 0.1, master=Jacobi())  # Jacobi: the input jumps at t = 0.5, held from there
    t, y = result.history.get_port_trajectory("i", "y")
    np.testing.assert_allclose(y, 3.0 * 2.0 * np.clip(t - 0.5, 0.0, None), atol=1e-12)  # y = k * final * (t - 0.5)
    with pytest.raises(PluginError, match=r"unknown component type 'integratr'; did you mean 'integrator'"):
        cosimrun.create_component("integratr", "i", {"k": 3.0})
    with pytest.raises(ConfigError, match=r"unknown parameter 'kk' of component 'i'; did you mean 'k'"):
        cosimrun.create_component("integrator", "i", {"kk": 3.0})
    with pytest.raises(ConfigError, match=r"^step_time: "):
        cosimrun.create_component("step", "ref", {"step_time": "2 m"})  # a length is not a time
