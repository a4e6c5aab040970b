"""``prepare``: a torn loop needs no initial value (the coupled initialization finds its consistent point); one
without a consistent point is a one-line config error naming the loop."""

from __future__ import annotations

import pytest

from cosimrun.errors import ConfigError, InitializationError
from cosimrun.runner.run import prepare

LOOP = {
    "name": "loop",
    "run": {"t0": 0.0, "tf": 1.0, "dt": 0.1},
    "components": {
        "src": {"type": "ramp", "params": {"slope": 1.0, "offset": 3.0}},
        "s": {"type": "sum", "params": {"signs": "++"}},
        "a": {"type": "gain", "params": {"k": 0.5}},
    },
    "connections": ["src.y -> s.u1", "a.y -> s.u2", "s.y -> a.u"],
}


def test_a_torn_input_without_initial_value_gets_the_consistent_value() -> None:
    """s.y = 3 + 0.5 s.y: s.y = 6, so s.u2 = 3 at t0."""
    system = prepare(LOOP).system
    assert "s.u2" not in system.initial_values
    assert system.components["s"].inputs["u2"].value == pytest.approx(3.0, rel=1e-9)
    assert system.components["s"].outputs["y"].value == pytest.approx(6.0, rel=1e-9)


def test_the_initial_value_is_a_start_guess_only() -> None:
    cfg = {**LOOP, "components": {**LOOP["components"], "s": {**LOOP["components"]["s"], "initial": {"u2": 40.0}}}}
    system = prepare(cfg).system
    assert system.initial_values["s.u2"] == 40.0
    assert system.components["s"].inputs["u2"].value == pytest.approx(3.0, rel=1e-9)


def test_a_loop_without_a_consistent_point_is_one_config_error() -> None:
    """s.y = 3 + s.y has no solution."""
    cfg = {**LOOP, "components": {**LOOP["components"], "a": {"type": "gain", "params": {"k": 1.0}}}}
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    error = info.value
    assert isinstance(error, InitializationError)
    assert "\n" not in str(error)
    assert str(error).startswith("no consistent initial point of algebraic loop ")
    assert error.loop == ["s.u2", "a.u"] and error.port == "s.u2" and error.time == 0.0
    assert error.residual == pytest.approx(3.0, rel=1e-6)
