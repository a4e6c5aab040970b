"""The builder places every error at its config key, read from the exception's fields, never from its text."""

from __future__ import annotations

import pytest

from cosimrun.components.blocks import Gain
from cosimrun.config import build
from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError, InvalidConnectionError, PluginError, UnknownNameError

PENDULUM = {"type": "pendulum", "params": {"length": 1.0}}
MULTI = {
    "type": "multi",
    "initial_mode": "linear",
    "modes": {"nonlinear": {"type": "pendulum"}, "linear": {"type": "pendulum_linear"}},
    "selector": {"type": "threshold", "port": "q", "above": "nonlinear", "below": "linear", "upper": 0.3},
}


def build_error(**cfg) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    return info.value


def stored(file: str) -> dict:
    return {"components": {"g": {"type": "gain"}}, "storage": {"file": file}}


def multi(**changes) -> dict:
    return {"components": {"m": {**MULTI, **changes}}}


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        ({"components": {"p": {"type": "pendulum", "params": {"lenght": 2.0}}}},
         "components.p.params.lenght: unknown parameter 'lenght' of component 'p'; did you mean 'length'?"),
        ({"components": {"p": {"type": "pendulum", "params": {"length": -1}}}}, "components.p.params.length: "),
        ({"components": {"s": {"type": "saturation", "params": {"lower": 2.0}}}},
         "components.s.params: component 's' (Saturation): parameter 'lower' must be <= upper"),
        ({"components": {"p": {"type": "pendlum"}}},
         "components.p.type: unknown component type 'pendlum'; did you mean 'pendulum'"),
        ({"components": {"g": {"type": "gain", "initial": {"uu": 1.0}}}},
         "components.g.initial.uu: unknown input 'uu' of component 'g'; did you mean 'u'?"),
        ({"components": {"g": {"type": "gain", "units": {"yy": "m"}}}},
         "components.g.units.yy: unknown port 'yy' of component 'g'; did you mean 'y'?"),
        ({"components": {"g": {"type": "gain"}}, "connections": ["g.yy -> g.u"]},
         "connections[0]: connection g.yy -> g.u"),
        ({"components": {"g": {"type": "gain"}}, "master": {"name": "hybrid", "time_tolerance": -1.0}},
         "master.time_tolerance: must be positive, got -1.0"),
        ({"components": {"g": {"type": "gain"}}, "master": {"name": "hybrid", "time_tolerence": 1e-9}},
         "master.time_tolerence: unknown setting 'time_tolerence' of the hybrid master; did you mean "
         "'time_tolerance'"),
        ({"components": {"g": {"type": "gain"}}, "master": {"name": "jacobbi"}},
         "master: unknown master 'jacobbi'; did you mean 'jacobi'?"),
        ({"components": {"g": {"type": "gain"}}, "storage": {"record": ["gg.y"]}},
         "storage.record[0]: unknown component 'gg'; did you mean 'g'?"),
        (multi(initial_mode="linar"), "components.m.initial_mode: unknown mode 'linar'; did you mean 'linear'"),
        (multi(modes={"linear": {"type": "pendulum_linear", "params": {"lenght": 1.0}}}),
         "components.m.modes.linear.params.lenght: unknown parameter 'lenght'"),
        (multi(selector={**MULTI["selector"], "uper": 0.3}),
         "components.m.selector.uper: multi component 'm': selector of type 'threshold' has unknown key 'uper'"),
        (multi(selector={**MULTI["selector"], "type": "treshold"}),
         "components.m.selector.type: multi component 'm': selector type 'treshold' is unknown"),
        (multi(selector={**MULTI["selector"], "above": "nonlin"}),
         "components.m.selector: unknown mode 'nonlin'"),
        (multi(selector={**MULTI["selector"], "port": "qq", "lower": 0.35, "upper": 0.25}),
         "components.m.selector.port: unknown output port 'qq' for the selector of multi component 'm'; "
         "did you mean 'q'? (known: omega, q)"),
        (multi(hysteresis={"dwell": 1.0}),
         "components.m.hysteresis.dwell: unknown key 'dwell' in the hysteresis of 'm'; did you mean 'dwell_time'?"),
        (multi(hysteresis={"dwell_time": -1.0}), "components.m.hysteresis: multi component 'm': invalid hysteresis"),
        ({"run": {"tf": 1.0, "dt": 1e-300}},
         "run.dt: 1e-300 makes 1e+300 macro steps from run.t0=0.0 to run.tf=1.0, more than the 1e+12 a run may take"),
        ({"run": {"t0": 1e9, "tf": 1.5e9, "dt": 1e-7}}, "run.dt: 1e-07 makes 5e+15 macro steps"),
        (stored("."), "storage.file: '.' must be a plain file name such as results.h5"),
        (stored(".."), "storage.file: '..' must be a plain file name"),
        (stored("../out.h5"), "storage.file: '../out.h5' must be a plain file name"),
        (stored("/tmp/out.h5"), "storage.file: '/tmp/out.h5' must be a plain file name"),
        (stored(" out.h5"), "storage.file: ' out.h5' must be a plain file name"),
    ],
)
def test_errors_name_the_key(cfg, expected):
    assert str(build_error(**cfg)).startswith(expected)


def test_unknown_names_keep_their_fields_when_placed():
    exc = build_error(components={"p": {"type": "pendulum", "params": {"lenght": 2.0}}})
    assert isinstance(exc, UnknownNameError) and isinstance(exc, KeyError)
    assert (exc.key, exc.kind, exc.name, exc.suggestion) == ("components.p.params.lenght", "parameter", "lenght",
                                                             "length")
    assert "length" in exc.known
    placed = build_error(components={"p": {"type": "pendlum"}})
    assert isinstance(placed, PluginError) and placed.key == "components.p.type"
    connection = build_error(components={"g": {"type": "gain"}}, connections=["g.yy -> g.u"])
    assert isinstance(connection, InvalidConnectionError) and connection.key == "connections[0]"


class Keyed(Gain):
    """A gain whose parameter errors are ConfigErrors, keyed by the parameter or not keyed."""

    def set_parameters(self, **parameters):
        for name in parameters:
            if name == "keyed":
                raise ConfigError("keyed", "rejected with a key")
            if name == "bare":
                raise ConfigError(None, "rejected without a key")
        super().set_parameters(**parameters)


@pytest.mark.parametrize("param", ["keyed", "bare"])
def test_component_config_errors_are_placed_under_the_parameter(monkeypatch, param):
    monkeypatch.setattr(build, "create_component", lambda type_name, name, *args, **kwargs: Keyed(name))
    exc = build_error(components={"k": {"type": "keyed", "params": {param: 1.0}}})
    assert exc.key == f"components.k.params.{param}"
    assert str(exc).startswith(f"components.k.params.{param}: rejected with")


def test_plain_key_errors_from_the_engine_read_without_quotes(monkeypatch):
    """Engine code not yet raising UnknownNameError: the message is the KeyError's argument."""

    def create(type_name, name, *args, **kwargs):
        raise KeyError("unknown thing 'x'")

    monkeypatch.setattr(build, "create_component", create)
    assert str(build_error(components={"k": {"type": "gain"}})) == "components.k: unknown thing 'x'"


def test_the_step_bound_admits_long_runs():
    exp = build_experiment({"components": {"g": {"type": "gain"}}, "run": {"tf": 1e6, "dt": 1e-6}})
    assert exp.run.dt == 1e-6  # 1e12 steps: the bound itself is allowed
