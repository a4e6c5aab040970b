"""Runs forked from a checkpoint with other parameters (``run.start_from``, ``System.restore_state(fork=True)``):
Python component parameters and tunable FMU parameters may change; a fixed one is refused in one line."""

from __future__ import annotations

import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu
from test_restart import config, simulate

from cosimrun.checkpoint import CheckpointSettings
from cosimrun.config.build import build_experiment, build_run
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel
from cosimrun.storage.checkpoints import read_parent
from cosimrun.system import System


def test_a_fork_with_another_python_parameter_continues_the_parent_with_it(tmp_path):
    master = {"name": "jacobi", "extrapolation": 1}
    parent = simulate(config("coupled_oscillators", master, 1.0, checkpoint={"at": [0.5]}), tmp_path / "parent")
    cfg = config("coupled_oscillators", master, 1.0, start_from=f"{parent}@0.5")
    cfg["components"]["mass1"]["params"]["damping"] = 2.0
    forked = simulate(cfg, tmp_path / "fork")
    # the reference: the same fork through the library, from the state read back from the parent's file
    ref_cfg = config("coupled_oscillators", master, 1.0)
    ref_cfg["components"]["mass1"]["params"]["damping"] = 2.0
    exp = build_experiment(ref_cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp.system.initialize(0.0, exp.master)
        assert exp.system.restore_state(read_parent(parent, 0.5).state, fork=True) == ["mass1.damping"]
        exp.system.run(0.0, 1.0, exp.run.dt, exp.master)
    t_ref, v_ref = exp.system.components["mass1"].get_history_arrays()
    with h5py.File(parent, "r") as p, h5py.File(forked, "r") as f:
        t_p, x_p = p["components/mass1/time"][:], p["components/mass1/x"][:]
        t_f, x_f = f["components/mass1/time"][:], f["components/mass1/x"][:]
        assert f.attrs["parent_path"] == str(parent) and f.attrs["parent_time"] == 0.5
    assert np.array_equal(t_f, t_p)
    before = t_f <= 0.5
    assert np.array_equal(x_f[before], x_p[before])  # the parent's history up to the fork
    assert np.array_equal(t_f[~before], t_ref) and np.array_equal(x_f[~before], v_ref["x"])
    assert np.max(np.abs(x_f[~before] - x_p[~before])) > 1e-3  # the damping changed what follows


@pytest.fixture(scope="module")
def ball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.bouncing_ball(tmp_path_factory.mktemp("fmus"))


def ball_run(path: Path, tf: float, **params: float) -> tuple[System, object]:
    system = System("s")
    system.add_component(fmu("ball", path, **params))
    master = GaussSeidel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system.initialize(0.0, master)
        result = system.run(0.0, tf, 0.01, master, checkpoint=CheckpointSettings(at=(0.3,)))
    return system, result


def test_a_tunable_fmu_parameter_takes_its_new_value_in_the_restored_fmu(ball):
    parent, result = ball_run(ball, 2.0)
    state = result.checkpoints[0]
    parent.free()
    for e in (0.8, 0.3):  # the checkpoint's value, then another
        system = System("s")
        system.add_component(fmu("ball", ball, e=e))
        master = GaussSeidel()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            system.initialize(0.0, master)
            assert system.restore_state(state, fork=True) == ([] if e == 0.8 else ["ball.e"])
            system.run(0.0, 2.0, 0.01, master)
        comp = system.components["ball"]
        assert comp.fmu.get_values([comp.fmu.model.variables["e"]]) == [e]
        t, values = comp.get_history_arrays()
        v = np.asarray(values["v"])
        # the first bounce after the fork: v jumps from about -v_hit to e * v_hit (exact impacts inside the step)
        up = int(np.argmax(np.diff(v) > 0)) + 1
        g, h_up = 9.81, np.asarray(values["h"])[up]
        hit_speed = -v[up - 1] + g * 0.01  # an upper bound of the speed at impact within the step
        assert e * (-v[up - 1]) <= v[up] + g * 0.01 + 1e-9 and v[up] <= e * hit_speed + 1e-9
        assert h_up >= 0.0
        system.free()


def test_a_fixed_fmu_parameter_is_refused_in_one_line(ball):
    parent, result = ball_run(ball, 0.5)
    parent.free()
    system = System("s")
    system.add_component(fmu("ball", ball, g=5.0))
    master = GaussSeidel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system.initialize(0.0, master)
    with pytest.raises(ConfigError) as info:
        system.restore_state(result.checkpoints[0], fork=True)
    assert str(info.value) == ("parameter ball.g cannot change from the checkpoint's 9.81 to 5.0: it is a fixed FMU "
                               "parameter (only tunable ones can change after the start)")
    system.free()


def test_restart_and_start_from_together_are_refused():
    with pytest.raises(ConfigError, match=r"^run.start_from: give run.restart .* or run.start_from .*, not both$"):
        build_run({"restart": "a.h5", "start_from": "b.h5"})


@pytest.mark.slow
def test_a_forked_sweep_changing_a_fixed_fmu_parameter_is_refused_before_any_job_runs(tmp_path, ball, cosimrun):
    """``run.start_from`` with a sweep of a fixed FMU parameter: every job would be refused, so the command ends
    with that one line (exit 2) before any job runs, and leaves no job behind."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "ballx.yaml").write_text(
        "# @package _global_\nname: ballx\nrun: {t0: 0.0, tf: 0.5, dt: 0.01}\n"
        f"components:\n  ball: {{type: fmu, params: {{path: {ball}, g: 9.81}}}}\n", encoding="utf-8")
    parent = tmp_path / "parent"
    proc = cosimrun(f"--config-dir={conf}", "+experiment=ballx", "run.checkpoint.at=[0.3]", f"hydra.run.dir={parent}")
    assert proc.returncode == 0, proc.stderr
    sweep = tmp_path / "sweep"
    proc = cosimrun("-m", f"--config-dir={conf}", "+experiment=ballx", f"run.start_from={parent / 'results.h5'}@0.3",
                    "components.ball.params.g=4.0,5.0", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"cosimrun: error: run.start_from: {parent / 'results.h5'}: parameter ball.g cannot change from the "
        "checkpoint's 9.81 to 4.0: it is a fixed FMU parameter (only tunable ones can change after the start)"]
    assert not list(sweep.rglob("results.h5*")) and not list(sweep.rglob("overrides.yaml"))
