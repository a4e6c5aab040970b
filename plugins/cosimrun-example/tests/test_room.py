"""The example plugin's component and experiment, through cosimrun's registry and command."""

import math
import subprocess
import sys

import numpy as np

from cosimrun.plugins import create_component, list_components
from cosimrun.storage import load_results


def test_room_is_registered() -> None:
    info = {i.name: i for i in list_components()}
    assert info["room"].distribution == "cosimrun-example"
    assert info["room"].description.startswith("Heated room")


def test_room_cools_towards_outside_exponentially() -> None:
    room = create_component("room", "room", {"capacity": 1.0e5, "resistance": 0.02, "t_outside": 0.0})
    room.set_parameters(temperature0=20.0)
    room.initialize(0.0)
    for k in range(100):
        room.do_step(k * 10.0, 10.0)
    tau = 1.0e5 * 0.02
    assert math.isclose(room.outputs["temperature"].value, 20.0 * math.exp(-1000.0 / tau), rel_tol=1e-9)


def test_room_heating_experiment_runs_through_cosimrun(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cosimrun", "+experiment=room_heating", f"hydra.run.dir={tmp_path}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = load_results(tmp_path / "results.h5")
    assert results.status == "complete"
    t, temp = results.history("room")["temperature"]
    late = t > 5400.0
    assert np.all(np.abs(temp[late] - 21.0) < 0.2)  # settled on the new setpoint
    assert results.history("room")["temperature"].unit == "degC"


def test_room_parameters_take_quantities_in_their_declared_units() -> None:
    room = create_component("room", "room", {"capacity": "200 kJ/K", "t_outside": "278.15 K"})
    assert math.isclose(room.parameters["capacity"], 2.0e5)
    assert math.isclose(room.parameters["t_outside"], 5.0, abs_tol=1e-9)


def test_room_parameter_errors_name_the_config_key() -> None:
    from cosimrun.config.build import build_experiment
    from cosimrun.errors import ConfigError

    def error(params: dict) -> str:
        try:
            build_experiment({"components": {"room": {"type": "room", "params": params}}})
        except ConfigError as exc:
            return str(exc)
        raise AssertionError("no error")

    assert error({"t_outside": "2 s"}) == ("components.room.params.t_outside: '2 s' has units of time, not of "
                                           "temperature (degC)")
    assert error({"resistance": 0}).startswith("components.room.params.resistance: must be a finite number > 0 "
                                               "(in K/W), got 0")
