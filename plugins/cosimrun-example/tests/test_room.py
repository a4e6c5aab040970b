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
