"""FMU states in checkpoints: serialized through fmi2SerializeFMUstate / fmi3SerializeFMUState where the FMU can
(canSerializeFMUstate), refused in one line where it cannot.

The test FMUs are the suite's C sources (tests/fmus): the FMI 2.0 and FMI 3.0 co-simulation bouncing balls
serialize their state (a plain copy of the model's struct).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu

from cosimrun.checkpoint import CheckpointSettings
from cosimrun.components.sources import Ramp
from cosimrun.errors import ComponentStateError
from cosimrun.masters import GaussSeidel, Hybrid
from cosimrun.system import System


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fmus")


@pytest.fixture(scope="module")
def ball2(fmu_dir: Path) -> Path:
    return builders.bouncing_ball(fmu_dir)


@pytest.fixture(scope="module")
def ball3(fmu_dir: Path) -> Path:
    return builders.bouncing_ball3(fmu_dir)


def ball_system(path: Path, gain_input: bool = False) -> System:
    system = System("balls")
    system.add_component(fmu("ball", path))
    if gain_input:  # the FMI 3 ball's array input gain is fed by a ramp (a Python component beside the FMU)
        ramp = system.add_component(Ramp("ramp"))
        ramp.set_parameters(slope=0.5, offset=1.0)
        system.connect("ramp.y", "ball.gain[1]")
    return system


def run(system: System, master: Any, tf: float, **kwargs: Any):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system.initialize(0.0, master)
        return system.run(0.0, tf, 0.01, master, **kwargs)


@pytest.mark.parametrize("version", ["fmi2", "fmi3"])
@pytest.mark.parametrize("master", [GaussSeidel(), Hybrid()], ids=["gauss_seidel", "hybrid"])
def test_a_run_continued_from_a_serialized_fmu_state_equals_the_uninterrupted_one(request, version, master):
    path = request.getfixturevalue("ball2" if version == "fmi2" else "ball3")
    gain = version == "fmi3"
    whole = ball_system(path, gain)
    first = run(whole, master, 2.0, checkpoint=CheckpointSettings(at=(0.73,)))
    state = first.checkpoints[0]
    data = state.component("ball")["fmu_state"]
    assert data.dtype == np.uint8 and data.size > 0
    rest = ball_system(path, gain)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rest.initialize(0.0, master)
    rest.restore_state(state)
    second = run_restored(rest, master, 2.0)
    t1, v1 = whole.components["ball"].get_history_arrays()
    t2, v2 = rest.components["ball"].get_history_arrays()
    n = len(t2)
    assert n > 100 and t2[0] > state.time
    assert np.array_equal(t2, t1[-n:])
    for port, values in v1.items():
        assert np.array_equal(np.asarray(v2[port]), np.asarray(values)[-n:]), port
    assert second.events == first.events[len(first.events) - len(second.events):]
    assert second.stats.events == first.stats.events
    assert np.any(np.diff(np.sign(np.asarray(v2["v"]))) > 0)  # the ball bounced after the checkpoint too
    free(whole, rest)


def run_restored(system: System, master: Any, tf: float):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return system.run(0.0, tf, 0.01, master)


def free(*systems: System) -> None:
    for system in systems:
        system.free()


def test_restoring_a_checkpoint_returns_the_fmu_to_it(ball2):
    """The component's own round trip: state saved, the FMU stepped on, the state restored, the same outputs
    and the same next step."""
    system = ball_system(ball2)
    run(system, GaussSeidel(), 0.4)
    ball = system.components["ball"]
    saved = ball.checkpoint_state()
    h, v = ball.outputs["h"].value, ball.outputs["v"].value
    ball.do_step(0.4, 0.3)
    after = ball.outputs["h"].value
    assert after != h
    ball.restore_checkpoint(saved)
    assert (ball.t, ball.outputs["h"].value, ball.outputs["v"].value) == (0.4, h, v)
    ball.do_step(0.4, 0.3)
    assert ball.outputs["h"].value == after
    free(system)


def test_an_fmu_that_cannot_serialize_its_state_is_refused_in_one_line(fmu_dir):
    path = builders.feedthrough(fmu_dir)  # can get and set its state, cannot serialize it
    system = System("s")
    system.add_component(fmu("f", path))
    with pytest.raises(ComponentStateError) as info:
        run(system, GaussSeidel(), 0.1, checkpoint=CheckpointSettings(every=0.05))
    assert str(info.value) == ("FMU component 'f' (feedthrough.fmu) cannot be checkpointed: its FMU cannot serialize "
                               "its state (canSerializeFMUstate is false)")
    free(system)


def test_an_fmu_without_fmu_states_is_refused_in_one_line(fmu_dir):
    path = builders.bouncing_ball3(fmu_dir, rollback=False)
    system = System("s")
    system.add_component(fmu("ball", path))
    with pytest.raises(ComponentStateError, match=r"^FMU component 'ball' \(bouncing_ball3_norollback.fmu\) cannot "
                                                  r"be checkpointed: its FMU cannot get its state "
                                                  r"\(canGetAndSetFMUstate is false\)$"):
        run(system, GaussSeidel(), 0.1, checkpoint=CheckpointSettings(every=0.05))
    free(system)
