"""``prepare``: a tear input without an initial value is a config error at its key, suggesting the override."""

from __future__ import annotations

import pytest

from cosimrun import GaussSeidel
from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError, MissingInitialValueError
from cosimrun.runner.run import prepare

LOOP = {
    "name": "loop",
    "run": {"t0": 0.0, "tf": 1.0, "dt": 0.1},
    "components": {
        "src": {"type": "ramp", "params": {"slope": 1.0}},
        "s": {"type": "sum", "params": {"signs": "++"}},
        "a": {"type": "gain", "params": {"k": 0.5}},
    },
    "connections": ["src.y -> s.u1", "a.y -> s.u2", "s.y -> a.u"],
}


def test_the_error_names_the_config_key_and_the_override() -> None:
    with pytest.raises(ConfigError) as info:
        prepare(LOOP)
    message = str(info.value)
    assert message.startswith("components.s.initial.u2: input s.u2 closes an algebraic loop (torn at a.y -> s.u2)")
    assert message.endswith("; set its initial value with +components.s.initial.u2=VALUE")
    assert "set_initial_value" not in message
    assert info.value.key == "components.s.initial.u2"


def test_library_users_keep_the_engines_hint() -> None:
    exp = build_experiment(LOOP)
    with pytest.raises(MissingInitialValueError, match=r"set one with set_initial_value\('s\.u2', value\)"):
        exp.system.initialize(0.0, GaussSeidel())


def test_with_the_suggested_initial_value_it_runs() -> None:
    cfg = {**LOOP, "components": {**LOOP["components"], "s": {**LOOP["components"]["s"], "initial": {"u2": 0.0}}}}
    assert prepare(cfg).system.initial_values["s.u2"] == 0.0


def test_the_config_error_is_made_from_the_error_s_fields_not_its_message(monkeypatch) -> None:
    """Whatever the engine's wording (here: another hint after a '; '), the key, the port and the torn
    connection come from the error's ``port`` and the system's loop analysis."""
    from cosimrun.system import System

    initialize = System.initialize

    def reworded(self, t0, master):
        try:
            initialize(self, t0, master)
        except MissingInitialValueError as exc:
            raise MissingInitialValueError("tear s.u2 lacks a start value; call System.set_initial_value",
                                           exc.port) from None

    monkeypatch.setattr(System, "initialize", reworded)
    with pytest.raises(ConfigError) as info:
        prepare(LOOP)
    assert str(info.value) == (
        "components.s.initial.u2: input s.u2 closes an algebraic loop (torn at a.y -> s.u2) and needs an initial "
        "value; set its initial value with +components.s.initial.u2=VALUE"
    )
    assert info.value.key == "components.s.initial.u2"
