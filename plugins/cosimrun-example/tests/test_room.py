"""The example plugin's component and experiment, through cosimrun's registry and command."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

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


def test_room_heating_members_of_an_ensemble_equal_their_own_runs() -> None:
    """The plugin opts in to ensembles by declaring its component vectorizable: an ensemble of rooms of other
    capacities, resistances and setpoints gives each member its own run's histories, bit for bit."""
    from cosimrun.config.build import build_experiment
    from cosimrun.ensemble import run_ensemble

    path = Path(__file__).parents[1] / "cosimrun_example" / "conf" / "experiment" / "room_heating.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg.pop("defaults")
    cfg["master"] = {"name": "gauss_seidel"}
    params = {"room.capacity": [1.0e5, 2.0e5, 4.0e5], "room.resistance": [0.005, 0.01, 0.02],
              "setpoint.final": [20.0, 21.0, 22.5]}
    exp = build_experiment(cfg)
    result = run_ensemble(exp.system, exp.master, params, t0=0.0, tf=3600.0, dt=10.0)
    assert list(result.status) == ["complete"] * 3
    for m in range(3):
        exp = build_experiment(cfg)
        for key, values in params.items():
            comp, _, name = key.partition(".")
            exp.system.components[comp].set_parameters(**{name: values[m]})
        exp.system.run(0.0, 3600.0, 10.0, exp.master)
        for comp in ("room", "ctrl"):
            _, values = exp.system.components[comp].get_history_arrays()
            for port, scalar in values.items():
                member = result.history[f"{comp}.{port}"][:, m]
                assert member.tobytes() == np.asarray(scalar, dtype=float).tobytes(), (m, comp, port)
    assert result.final["room.temperature"][2] > result.final["room.temperature"][0]  # its higher setpoint
