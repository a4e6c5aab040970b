"""Checkpoints in the results file and runs restarted from them (``run.checkpoint``, ``run.restart``).

A restarted run's results file equals the uninterrupted run's bit for bit: every sample, event, mode switch,
statistic, coupling-error estimate and step of the log, and every checkpoint; it names its parent.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from helpers import experiment_config as config
from helpers import results_contents as contents
from helpers import simulate
from support import forkserver

from cosimrun.checkpoint import SystemState
from cosimrun.checkpoint.schedule import checkpoint_settings
from cosimrun.config.build import build_run
from cosimrun.errors import ConfigError
from cosimrun.runner.run import run_experiment
from cosimrun.storage.checkpoints import list_checkpoints, read_state
from cosimrun.storage.verify import verify_results

ROOT = Path(__file__).resolve().parents[2]
RUN_CLI = ROOT / "tests" / "support" / "run_cli.py"


def assert_same_file(a: Path, b: Path) -> None:
    left, right = contents(a), contents(b)
    assert sorted(left) == sorted(right)
    for key, value in left.items():
        x, y = np.asarray(value), np.asarray(right[key])
        same = np.array_equal(x, y, equal_nan=x.dtype.kind == "f") if x.dtype.kind != "O" else list(x.flat) == list(
            y.flat)
        assert same, key


CASES = {
    "jacobi": ("coupled_oscillators", {"name": "jacobi", "extrapolation": 2}, 1.0, [0.55]),
    "gauss_seidel": ("coupled_oscillators", {"name": "gauss_seidel", "extrapolation": 1, "step_control": "error",
                                             "rtol": 1e-3}, 1.0, [0.55]),
    "ijcsa": ("coupled_oscillators", {"name": "ijcsa", "iterate_steps": True}, 0.5, [0.3]),
    "hybrid": ("bouncing_ball", {"name": "hybrid"}, 2.0, [1.2]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_restarted_run_writes_the_uninterrupted_file(tmp_path, case):
    name, master, tf, at = CASES[case]
    cfg = config(name, master, tf, checkpoint={"at": at, "every": tf / 4})
    whole = simulate(cfg, tmp_path / "whole")
    with h5py.File(whole, "r") as f:
        infos = list_checkpoints(f)
        states = [read_state(f["checkpoints"][i.name]) for i in infos]
    assert [i.time for i in infos][-1] == tf  # the final state
    assert [s.checksum() for s in states] == [i.checksum for i in infos]
    chosen = next(i for i in infos if i.time >= at[0])
    restart = {**cfg, "run": {**cfg["run"], "restart": f"{whole}@{chosen.time!r}"}}
    again = simulate(restart, tmp_path / "again")
    assert_same_file(whole, again)
    with h5py.File(again, "r") as f:
        assert f.attrs["parent_path"] == str(whole) and f.attrs["parent_time"] == chosen.time
        assert len(f.attrs["parent_fingerprint"]) == 64
    assert verify_results(again) == []


def test_hybrid_restart_after_a_mode_switch_with_a_pending_dwell_timer(tmp_path):
    """pendulum_switch: the checkpoint 0.02 s after a switch, its 0.05 s dwell window open."""
    probe = simulate(config("pendulum_switch", {"name": "hybrid"}, 3.0), tmp_path / "probe")
    with h5py.File(probe, "r") as f:
        switch = float(f["mode_switches"]["time"][1])
    cfg = config("pendulum_switch", {"name": "hybrid"}, 3.0, checkpoint={"at": [switch + 0.02]})
    whole = simulate(cfg, tmp_path / "whole")
    with h5py.File(whole, "r") as f:
        info = list_checkpoints(f)[0]
        state = read_state(f["checkpoints"][info.name])
        switches_after = int(np.sum(f["mode_switches"]["time"][:] > info.time))
    assert state.component("pendulum")["last_switch_time"] == switch and info.time < switch + 0.05
    assert switches_after >= 1
    again = simulate({**cfg, "run": {**cfg["run"], "restart": f"{whole}@{info.time!r}"}}, tmp_path / "again")
    assert_same_file(whole, again)


def test_a_restart_into_the_same_file_cuts_its_history_at_the_checkpoint(tmp_path):
    cfg = config("bouncing_ball", {"name": "gauss_seidel"}, 2.0, checkpoint={"at": [0.8]})
    whole = simulate(cfg, tmp_path / "whole")
    parent = simulate(config("bouncing_ball", {"name": "gauss_seidel"}, 2.0, checkpoint={"at": [0.8]}), tmp_path / "p")
    with h5py.File(parent, "a") as f:  # mark samples after the checkpoint: the restart must replace them
        f["components/ball/h"][-5:] = -1.0
    cfg["run"]["restart"] = f"{parent}@0.8"
    again = simulate(cfg, tmp_path / "p")
    assert again == parent
    assert_same_file(whole, again)
    with h5py.File(again, "r") as f:
        assert f.attrs["status"] == "complete" and f.attrs["parent_path"] == str(parent)
        assert np.min(f["components/ball/h"][:]) > -0.5


def test_a_damaged_checkpoint_is_refused(tmp_path):
    cfg = config("coupled_oscillators", {"name": "jacobi"}, 0.2, checkpoint={"every": 0.1})
    whole = simulate(cfg, tmp_path / "whole")
    with h5py.File(whole, "a") as f:  # one bit of one number of the final state
        data = f["checkpoints/000001/float64"]
        data[3] = np.nextafter(data[3], np.inf)
    cfg["run"]["restart"] = str(whole)
    with pytest.raises(ConfigError) as info:
        simulate(cfg, tmp_path / "again")
    assert info.value.key == "run.restart"
    assert str(info.value).startswith(f"run.restart: the checkpoint at t=0.2 of {whole} is damaged: its checksum is ")
    assert not (tmp_path / "again").exists()


def test_a_checkpoint_of_another_system_is_refused(tmp_path):
    cfg = config("coupled_oscillators", {"name": "jacobi"}, 0.2, checkpoint={"every": 0.1})
    whole = simulate(cfg, tmp_path / "whole")
    cfg["run"]["restart"] = f"{whole}@0.1"
    cfg["components"]["mass1"]["params"]["mass"] = 2.0
    with pytest.raises(ConfigError) as info:
        simulate(cfg, tmp_path / "again")
    assert str(info.value) == (f"run.restart: {whole}: the checkpoint belongs to another system or settings: this "
                               "system has 'parameter mass1.mass = 2.0' where the checkpoint has 'parameter "
                               "mass1.mass = 1.0'")
    cfg["components"]["mass1"]["params"]["mass"] = 1.0
    cfg["run"]["restart"] = f"{whole}@0.15"
    with pytest.raises(ConfigError, match=r"has no checkpoint at t=0.15 \(checkpoints at t=0.1, 0.2\)"):
        simulate(cfg, tmp_path / "again")


def test_checkpoint_settings_in_the_config_are_checked():
    with pytest.raises(ConfigError) as info:
        build_run({"checkpoint": {"evry": 10}})
    assert str(info.value) == ("run.checkpoint.evry: unknown setting 'evry' of run.checkpoint; did you mean 'every'? "
                               "(known: at, every, wall)")
    with pytest.raises(ConfigError, match=r"^run.checkpoint.wall: 'soon' is not a time"):
        build_run({"checkpoint": {"wall": "soon"}})
    with pytest.raises(ConfigError, match=r"^run.checkpoint.every: must be a positive number of seconds, got 0"):
        build_run({"checkpoint": {"every": 0}})
    settings = build_run({"checkpoint": {"wall": "10 min", "at": ["1.5 s", 3]}}).checkpoint
    assert settings.wall == 600.0 and settings.at == [1.5, 3]


def test_the_command_refuses_a_foreign_checkpoint_in_one_line(tmp_path):
    cfg = config("coupled_oscillators", {"name": "jacobi"}, 0.2, checkpoint={"every": 0.1})
    whole = simulate(cfg, tmp_path / "whole")
    proc = forkserver.run(forkserver.Form.run_cli(), ["+experiment=coupled_oscillators", "master=gauss_seidel",
                                                      "run.tf=0.2", f"run.restart={whole}",
                                                      f"hydra.run.dir={tmp_path / 'again'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"cosimrun: error: run.restart: {whole}: the checkpoint belongs to another system or settings: this system "
        "has 'master gauss_seidel' where the checkpoint has 'master jacobi'"]
    assert not (tmp_path / "again").exists()


def latest_checkpoint(path: Path) -> float:
    """The time of the last checkpoint of a results file being written (-inf while none can be read)."""
    try:
        with h5py.File(path, "r", locking=False) as f:
            infos = list_checkpoints(f)
    except Exception:  # not created yet, or caught half-way through a write: look again
        return -np.inf
    return infos[-1].time if infos else -np.inf


@pytest.mark.slow
def test_a_run_killed_with_sigkill_restarts_to_the_uninterrupted_results(tmp_path):
    """The command killed at about 90 % of its run, restarted into its own (unfinished) file."""
    args = ["+experiment=coupled_oscillators", "master=gauss_seidel", "master.extrapolation=1", "run.tf=2",
            "run.checkpoint.every=0.1", "storage.flush_interval=200"]

    def command(out: Path, *more: str) -> list[str]:
        return [sys.executable, str(RUN_CLI), *args, *more, f"hydra.run.dir={out}"]

    subprocess.run(command(tmp_path / "whole"), cwd=tmp_path, check=True, capture_output=True, timeout=300)
    killed = tmp_path / "killed"
    partial = killed / "results.h5.partial"
    proc = subprocess.Popen(command(killed), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while latest_checkpoint(partial) < 1.8 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # until the run passed about 90 % (its checkpoint at 1.8 s of 2 s)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert partial.exists() and not (killed / "results.h5").exists()  # it died before closing its file
    again = subprocess.run(command(killed, f"run.restart={killed / 'results.h5'}"), cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert not partial.exists()
    with h5py.File(killed / "results.h5", "r") as f:
        parent_time = float(f.attrs["parent_time"])
    assert 1.8 <= parent_time < 2.0
    assert_same_file(tmp_path / "whole" / "results.h5", killed / "results.h5")


def test_states_read_back_from_the_file_equal_the_saved_ones(tmp_path):
    """The states the file holds are those the run saved, entry by entry (kind, shape and bits)."""
    from cosimrun.config.build import build_experiment

    cfg = config("pendulum_switch", {"name": "hybrid"}, 0.3, checkpoint={"every": 0.1})
    whole = simulate(cfg, tmp_path / "whole")
    with h5py.File(whole, "r") as f:
        states = [read_state(f["checkpoints"][i.name]) for i in list_checkpoints(f)]
        assert sorted(f["checkpoints/000000"]) == ["bool", "float64", "int64", "kinds", "names", "offsets", "shapes",
                                                   "strings", "uint8"]
    assert [s.time for s in states] == pytest.approx([0.1, 0.2, 0.3], abs=1e-12)
    exp = build_experiment(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp.system.initialize(0.0, exp.master)
        saved = exp.system.run(0.0, 0.3, exp.run.dt, exp.master,
                               checkpoint=checkpoint_settings(exp.run.checkpoint)).checkpoints
    for state, expected in zip(states, saved, strict=True):
        assert isinstance(state, SystemState)
        assert list(state.entries) == list(expected.entries)
        for name, value in expected.entries.items():
            got = state.entries[name]
            if isinstance(value, str):
                assert got == value, name
            else:
                assert got.dtype == value.dtype and got.shape == value.shape, name
                assert np.array_equal(got, value, equal_nan=True), name
        assert state.checksum() == expected.checksum()


def test_a_killed_run_run_again_into_its_directory_continues_from_its_last_checkpoint(tmp_path):
    """What a sweep's resume does with a killed job: the job runs again into its directory, where its unfinished
    file (.partial, status running) holds checkpoints of the same config; the run continues from the last one."""
    cfg = config("coupled_oscillators", {"name": "gauss_seidel", "extrapolation": 1}, 1.0, checkpoint={"every": 0.25})
    whole = simulate(cfg, tmp_path / "whole")

    def again(out: Path, text: str) -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome = run_experiment(cfg, out, config_yaml=text)
        assert outcome.ok, outcome.error
        return [str(w.message) for w in caught]

    job = tmp_path / "job"
    again(job, "the config")
    killed = job / "results.h5.partial"
    (job / "results.h5").rename(killed)  # as the kill after the checkpoint at 0.5 left it:
    with h5py.File(killed, "a") as f:  # running, its last checkpoints not written yet
        f.attrs["status"] = "running"
        del f["checkpoints/000003"], f["checkpoints/000002"]
    notes = again(job, "the config")
    assert any(f"continuing the unfinished run of {killed} from its checkpoint at t=0.5" in n for n in notes), notes
    assert not killed.exists()
    assert_same_file(whole, job / "results.h5")
    with h5py.File(job / "results.h5", "r") as f:
        assert f.attrs["parent_time"] == 0.5
    # another config's unfinished file is not continued: the run starts again
    (job / "results.h5").rename(killed)
    notes = again(job, "another config")
    assert not any("continuing" in n for n in notes)
    with h5py.File(job / "results.h5", "r") as f:
        assert "parent_path" not in f.attrs
