"""``multi``: building from sub-components or registry specs, selector specs, switching pendulum models."""

import math

import numpy as np
import pytest

from cosimrun.components.mechanics import LinearPendulum, Pendulum
from cosimrun.components.multi import ConfiguredMultiComponent
from cosimrun.core.multi import Hysteresis, SwitchRegions
from cosimrun.errors import ConfigError, UnknownNameError
from cosimrun.masters import Hybrid
from cosimrun.plugins import PluginError, create_component
from cosimrun.system import System

THRESHOLD = {"type": "threshold", "port": "q", "above": "nonlinear", "below": "linear", "upper": 0.35,
             "lower": 0.25, "abs": True}
MODES = {
    "nonlinear": {"type": "pendulum", "params": {"length": 1.0, "mass": 1.0}},
    "linear": {"type": "pendulum_linear", "params": {"length": 1.0, "mass": 1.0}},
}


def test_constructor_with_models_selector_and_hysteresis():
    models = {"nonlinear": Pendulum("p_nl"), "linear": LinearPendulum("p_lin")}
    multi = create_component("multi", "p", {"q0": 0.1}, models=models, initial_mode="linear",
                             selector=THRESHOLD, hysteresis={"dwell_time": 0.05})
    assert isinstance(multi, ConfiguredMultiComponent)
    assert multi.switch_regions == SwitchRegions("q", ["linear", "nonlinear"], [(0.25, 0.35)], True)
    assert isinstance(multi.hysteresis, Hysteresis) and multi.hysteresis.dwell_time == 0.05
    assert models["linear"].parameters["q0"] == models["nonlinear"].parameters["q0"] == 0.1
    assert {n: s.unit_name for n, s in multi.output_specs.items()} == {"q": "rad", "omega": "rad/s"}


def test_multi_needs_models():
    with pytest.raises(PluginError, match=r"type 'multi' is built from sub-components; pass models=\.\.\."):
        create_component("multi", "p", {})


def test_from_specs_and_quantity_bounds():
    sel = dict(THRESHOLD, upper="20 deg", lower="15 deg")
    multi = ConfiguredMultiComponent.from_specs("p", MODES, "linear", selector=sel, hysteresis=0.1)
    assert set(multi.models) == {"nonlinear", "linear"}
    assert multi.models["linear"].name == "p__linear"
    assert multi.switch_regions.bounds == ((pytest.approx(math.radians(15)), pytest.approx(math.radians(20))),)
    assert multi.hysteresis.dwell_time == 0.1


def test_regions_selector():
    modes = dict(MODES, stiff={"type": "pendulum", "params": {"damping": 1.0}})
    multi = ConfiguredMultiComponent.from_specs("p", modes, "linear", selector={
        "type": "regions", "port": "q", "modes": ["linear", "nonlinear", "stiff"],
        "bounds": [[0.2, 0.3], [0.8, 1.0]], "abs": True})
    assert multi.switch_regions.modes == ("linear", "nonlinear", "stiff")


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"type": "treshold"}, r"selector type 'treshold' is unknown; did you mean 'threshold'\?"),
        ({"type": "threshold", "port": "q", "above": "nonlinear"}, r"lacks below, upper"),
        (dict(THRESHOLD, uper=1.0), r"unknown key 'uper'; did you mean 'upper'\?"),
        (dict(THRESHOLD, above="nonlin"), r"unknown mode 'nonlin'"),
        (dict(THRESHOLD, port="x"), r"unknown output port 'x'"),
        (dict(THRESHOLD, upper="2 m"), r"bound 2 meter cannot be converted to the unit 'rad' of port 'q'"),
        (dict(THRESHOLD, lower=0.5), r"lower 0.5 > upper 0.35"),
    ],
)
def test_selector_errors(selector, message):
    with pytest.raises(ConfigError, match=message) as info:
        ConfiguredMultiComponent.from_specs("p", MODES, "linear", selector=selector)
    assert info.value.key.startswith("selector")


def test_spec_errors():
    with pytest.raises(ValueError, match=r"mode 'linear' needs a 'type'"):
        ConfiguredMultiComponent.from_specs("p", {"linear": {"params": {}}}, "linear")
    with pytest.raises(ConfigError, match=r"^hysteresis.dwell: unknown key 'dwell' .*; did you mean 'dwell_time'"):
        ConfiguredMultiComponent.from_specs("p", MODES, "linear", hysteresis={"dwell": 1})
    with pytest.raises(PluginError, match=r"unknown component type 'pendulumm'; did you mean 'pendulum'"):
        ConfiguredMultiComponent.from_specs("p", {"a": {"type": "pendulumm"}}, "a")
    multi = ConfiguredMultiComponent.from_specs("p", MODES, "linear")
    with pytest.raises(UnknownNameError, match=r"unknown parameter 'lenght'.*did you mean 'length'") as info:
        multi.set_parameters(lenght=2.0)
    assert isinstance(info.value, KeyError) and info.value.name == "lenght"


def test_switching_transfers_state_under_hybrid_master():
    sys_ = System("s")
    multi = sys_.add_component(ConfiguredMultiComponent.from_specs(
        "p", {name: {"type": spec["type"], "params": {"q0": 0.5, "damping": 0.3}} for name, spec in MODES.items()},
        "nonlinear", selector=THRESHOLD, hysteresis={"dwell_time": 0.05}))
    result = sys_.run(0.0, 6.0, 0.01, master=Hybrid())
    switches = [(s.from_mode, s.to_mode) for s in result.mode_switches]
    assert switches[:2] == [("nonlinear", "linear"), ("linear", "nonlinear")]
    t, out = multi.get_history_arrays()
    first = result.mode_switches[0].time
    assert abs(np.interp(first, t, out["q"])) == pytest.approx(0.25, abs=1e-6)  # switched on the boundary
    assert np.all(np.abs(np.diff(out["q"])) < 0.05)  # continuous across switches (state transferred)


def test_accepts_omegaconf_containers():
    omegaconf = pytest.importorskip("omegaconf")
    cfg = omegaconf.OmegaConf.create({
        "selector": {"type": "regions", "port": "q", "modes": ["linear", "nonlinear"],
                     "bounds": [["10 deg", "20 deg"]], "abs": True},
        "hysteresis": {"dwell_time": 0.1},
    })
    multi = ConfiguredMultiComponent("p", {"linear": LinearPendulum("a"), "nonlinear": Pendulum("b")}, "linear",
                       selector=cfg.selector, hysteresis=cfg.hysteresis)
    assert multi.switch_regions.bounds == ((pytest.approx(math.radians(10)), pytest.approx(math.radians(20))),)
    assert multi.hysteresis.dwell_time == 0.1
