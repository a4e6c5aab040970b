"""``storage.decimate``: a run records every N-th communication point from t0, both samples at each event instant
and its last sample; everything else in the results file stays as the undecimated run writes it.

Each decimated run is compared with the undecimated run of the same experiment, computed here: the rows kept
are the ones the rule selects from it (the rule applied to its ``micro`` column), bit for bit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from helpers import experiment_config as config
from helpers import results_contents as contents
from helpers import simulate
from test_recorder import Mixed, empty_history

from cosimrun import cli
from cosimrun.errors import ConfigError, NonFiniteValueError
from cosimrun.exits import EXIT_CONFIG
from cosimrun.masters import Jacobi
from cosimrun.runner.run import run_experiment
from cosimrun.storage.checkpoints import list_checkpoints
from cosimrun.system import MemorySink, System
from cosimrun.system.recorder import Recorder

ROOT = Path(__file__).resolve().parents[2]


def assert_same(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert sorted(left) == sorted(right)
    for key, value in left.items():
        x, y = np.asarray(value), np.asarray(right[key])
        if x.dtype.kind == "O":
            assert list(x.flat) == list(y.flat), key
        else:
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), key


def histories(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """``{component: {dataset: values}}`` of the recorded components (``time``, ``micro`` and the ports)."""
    with h5py.File(path, "r") as f:
        return {name: {key: group[key][()] for key in group} for name, group in f["components"].items()}


def kept_rows(micro: np.ndarray, n: int) -> np.ndarray:
    """The rows of an undecimated history (its micro steps *micro*) that ``decimate=n`` keeps: every n-th sample
    at micro step 0 counted from the first, every sample after an event and the one before it, the last."""
    points = np.cumsum(micro == 0) - 1
    keep = (micro == 0) & (points % n == 0)
    after = micro > 0
    keep |= after
    keep[:-1] |= after[1:]
    keep[-1] = True
    return np.flatnonzero(keep)


def assert_thinned(full: Path, thin: Path, n: int) -> np.ndarray:
    """*thin* holds exactly the rows of *full* that ``decimate=n`` keeps, bit for bit; the rows kept."""
    whole, got = histories(full), histories(thin)
    assert sorted(whole) == sorted(got)
    rows = None
    for name, data in whole.items():
        rows = kept_rows(data["micro"], n)
        assert sorted(got[name]) == sorted(data)
        for key, values in data.items():
            np.testing.assert_array_equal(got[name][key], values[rows], err_msg=f"{name}.{key}")
    assert rows is not None
    return rows


def test_decimate_1_writes_the_file_of_a_run_without_the_setting(tmp_path: Path) -> None:
    cfg = config("bouncing_ball", {"name": "hybrid"}, 2.0)
    plain = simulate(cfg, tmp_path / "plain")
    one = simulate({**cfg, "storage": {"decimate": 1}}, tmp_path / "one")
    assert_same(contents(plain), contents(one))
    with h5py.File(one, "r") as f:
        assert f.attrs["decimate"] == 1


def test_a_fixed_step_run_keeps_every_nth_point_and_the_last(tmp_path: Path) -> None:
    """coupled_oscillators under Jacobi, dt=0.01 to tf=1.005: 101 grid points and the shorter last step."""
    cfg = config("coupled_oscillators", {"name": "jacobi", "extrapolation": 2}, 1.005, dt=0.01)
    full = simulate(cfg, tmp_path / "full")
    thin = simulate({**cfg, "storage": {"decimate": 3}}, tmp_path / "thin")
    assert_thinned(full, thin, 3)
    for name, data in histories(thin).items():
        time = data["time"]
        assert len(time) == 34 + 1, name  # t = 0, 0.03, ..., 0.99 and tf
        np.testing.assert_allclose(time[:-1], 0.03 * np.arange(34), rtol=0, atol=1e-12)
        assert time[-1] == 1.005
    # only the histories are thinned: the coupling errors, statistics and events are the undecimated run's
    left, right = contents(full, components=False), contents(thin, components=False)
    assert (left.pop("@decimate"), right.pop("@decimate")) == (1, 3)
    assert_same(left, right)


@pytest.mark.parametrize("flush_interval", [pytest.param(1, marks=pytest.mark.slow), 4, 7, 2000])
def test_both_samples_at_every_event_are_kept(tmp_path: Path, flush_interval: int) -> None:
    """Bouncing ball under the hybrid master; small flush intervals put events at every place in a block."""
    cfg = config("bouncing_ball", {"name": "hybrid"}, 3.0, storage={"flush_interval": flush_interval})
    full = simulate(cfg, tmp_path / "full")
    thin = simulate({**cfg, "storage": {"flush_interval": flush_interval, "decimate": 5}}, tmp_path / "thin")
    rows = assert_thinned(full, thin, 5)
    data = histories(thin)["ball"]
    jumps = np.flatnonzero(data["micro"] > 0)
    assert len(jumps) >= 3  # the ball bounces
    for j in jumps:  # the sample before the jump, at its instant, and after it: the velocity changes sign
        assert data["time"][j - 1] == data["time"][j] and data["micro"][j - 1] == 0
        assert data["v"][j - 1] < 0 < data["v"][j]
    assert len(rows) < len(histories(full)["ball"]["time"]) / 3
    with h5py.File(full, "r") as a, h5py.File(thin, "r") as b:
        for key in ("time", "micro", "component", "event"):
            np.testing.assert_array_equal(a["events"][key][()], b["events"][key][()])


@pytest.mark.slow
def test_variable_steps_keep_every_nth_point_and_the_last(tmp_path: Path) -> None:
    cfg = config("coupled_oscillators", {"name": "gauss_seidel", "extrapolation": 1, "step_control": "error",
                                         "rtol": 1e-3}, 1.0)
    full = simulate(cfg, tmp_path / "full")
    thin = simulate({**cfg, "storage": {"decimate": 4}}, tmp_path / "thin")
    rows = assert_thinned(full, thin, 4)
    steps = np.diff(histories(full)["mass1"]["time"])
    assert steps.max() > 1.5 * steps.min()  # the steps do vary
    n = len(histories(full)["mass1"]["time"])
    assert rows.tolist() == sorted({*range(0, n, 4), n - 1})


RESTARTS = {
    "jacobi": ("coupled_oscillators", {"name": "jacobi", "extrapolation": 2}, 1.0, 0.01, [0.55]),
    "step_control": ("coupled_oscillators", {"name": "gauss_seidel", "extrapolation": 1, "step_control": "error",
                                             "rtol": 1e-3}, 1.0, 0.01, [0.55]),
    "hybrid": ("bouncing_ball", {"name": "hybrid"}, 2.0, 0.01, [0.97, 1.2]),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(RESTARTS))
def test_a_restart_thins_as_the_uninterrupted_run(tmp_path: Path, case: str) -> None:
    name, master, tf, dt, at = RESTARTS[case]
    cfg = config(name, master, tf, storage={"decimate": 3}, dt=dt)
    plain = simulate(cfg, tmp_path / "plain")
    whole = simulate({**cfg, "run": {**cfg["run"], "checkpoint": {"at": at, "every": tf / 4}}}, tmp_path / "whole")
    full = simulate({**cfg, "storage": {"decimate": 1}}, tmp_path / "full")
    assert_thinned(full, plain, 3)
    # checkpoints (whose flushes keep back a sample the rule drops) leave the histories as they are
    left, right = histories(plain), histories(whole)
    for comp, data in left.items():
        for key, values in data.items():
            np.testing.assert_array_equal(right[comp][key], values, err_msg=f"{comp}.{key}")
    with h5py.File(whole, "r") as f:
        infos = list_checkpoints(f)
    assert infos[-1].time == tf
    for info in infos:
        restart = {**cfg, "run": {**cfg["run"], "checkpoint": {"at": at, "every": tf / 4},
                                  "restart": f"{whole}@{info.time!r}"}}
        again = simulate(restart, tmp_path / f"again{info.name}")
        if info.time < tf:
            assert_same(contents(whole), contents(again))
        else:  # the state at tf holds the last sample, so a restart from it has the histories whole
            for comp, data in histories(whole).items():
                for key, values in data.items():
                    np.testing.assert_array_equal(histories(again)[comp][key], values, err_msg=f"{comp}.{key}")


def test_a_restart_with_another_decimate_is_refused_before_any_file(tmp_path: Path) -> None:
    cfg = config("coupled_oscillators", {"name": "jacobi"}, 0.2, storage={"decimate": 3}, checkpoint={"at": [0.1]})
    whole = simulate(cfg, tmp_path / "whole")
    for decimate in (1, 4):
        restart = {**cfg, "storage": {"decimate": decimate}, "run": {**cfg["run"], "restart": f"{whole}@0.1"}}
        with pytest.raises(ConfigError) as info:
            run_experiment(restart, tmp_path / f"again{decimate}")
        assert info.value.key == "storage.decimate"
        assert f"{decimate} differs from the checkpoint's 3" in str(info.value)
        assert "storage.decimate=3" in str(info.value)
        assert not (tmp_path / f"again{decimate}").exists()


def test_xarray_opens_a_decimated_file(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    thin = simulate(config("bouncing_ball", {"name": "hybrid"}, 1.0, storage={"decimate": 4}), tmp_path / "thin")
    with xr.open_dataset(thin, engine="h5netcdf", group="components/ball", phony_dims="sort") as ds:
        np.testing.assert_array_equal(ds["h"].values, histories(thin)["ball"]["h"])


def test_the_recorder_refuses_a_decimate_that_is_no_positive_integer() -> None:
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ConfigError) as info:
            Recorder(None, decimate=bad)  # type: ignore[arg-type]
        assert info.value.key == "decimate"


@pytest.mark.parametrize(("value", "expected"), [
    ("0", "storage.decimate: 0 must be >= 1"),
    ("-3", "storage.decimate: -3 must be >= 1"),
    ("2.5", "storage.decimate: '2.5' is not an integer"),
    ("ten", "storage.decimate: 'ten' is not an integer"),
])
def test_a_bad_decimate_on_the_command_line_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str], value: str,
                                                                  expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["cosimrun", "+experiment=bouncing_ball", f"storage.decimate={value}"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == EXIT_CONFIG == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("cosimrun: error: ") and expected in lines[0], lines
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("flush_interval", "bad_at"), [(4, 0), (4, 3), (4, 5), (4, 9), (2000, 7), (1, 8)])
def test_a_non_finite_value_at_a_dropped_point_still_ends_the_run(flush_interval: int, bad_at: int) -> None:
    """Every port type, thinned alike; the samples kept before the bad one are handed over, and the one just
    before it (the last sound sample of the run) too."""
    comp = Mixed("m")
    system = System("s")
    system.add_component(comp)
    system.initialize(0.0, Jacobi())
    history = empty_history("m")
    recorder = Recorder(MemorySink(history), flush_interval=flush_interval, decimate=3)
    recorder.attach(system.components)
    times = [0.1 * k for k in range(12)]
    with pytest.raises(NonFiniteValueError) as info:
        for k, t in enumerate(times):
            comp.refresh_outputs(t)
            if k >= bad_at:
                comp.outputs["x"].value = float("nan")
            recorder.sample(t)
        recorder.flush()
    assert info.value.time == pytest.approx(times[bad_at])
    recorder.flush()  # nothing is handed over twice
    rows = sorted({k for k in range(bad_at) if k % 3 == 0} | ({bad_at - 1} if bad_at else set()))
    ports = history.get_component_history("m").get_all_histories()
    assert sorted(ports) == ["label", "n", "on", "x"]
    for port in ports.values():
        np.testing.assert_array_equal(port.time, [times[k] for k in rows])
    assert list(ports["n"].values) == rows
    assert list(ports["label"].values) == [f"k={k}" for k in rows]
    assert list(ports["x"].values) == [0.5 * times[k] for k in rows]
