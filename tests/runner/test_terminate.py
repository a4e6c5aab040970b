"""An FMU that asks to terminate ends the run normally at that time, under every master (issue 23, item 3).

The stair test FMU (``tests/fmus/stair.c``, like the Reference FMUs' Stair) counts the whole seconds,
``counter = 1 + floor(t)``, and asks to terminate at its parameter ``t_stop``: FMI 2.0 co-simulation with
``fmi2Discard`` and ``fmi2Terminated``, FMI 3.0 co-simulation with ``terminateSimulation`` from ``fmi3DoStep``
or (event mode) from ``fmi3UpdateDiscreteStates``, model exchange from ``fmi2NewDiscreteStates`` and
``fmi3UpdateDiscreteStates``. A gain reads its output, so the stop is a communication point of both.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from helpers import StoppingClock

from cosimrun.components.fmu import FMUComponent
from cosimrun.console import Console
from cosimrun.core.component import StopRequest
from cosimrun.errors import FMUError, StepDiscarded
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi
from cosimrun.plugins import create_component
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results
from cosimrun.system import System
from tests.fmus import builders

VARIANTS = {
    "fmi2-cs": ({}, "fmi2DoStep returned fmi2Discard with fmi2Terminated"),
    "fmi3-cs": ({"fmi3": True}, "fmi3DoStep returned terminateSimulation"),
    "fmi3-cs-events": ({"fmi3": True, "event_mode": True}, "fmi3UpdateDiscreteStates returned terminateSimulation"),
    "fmi2-me": ({"interface": "me"}, "fmi2NewDiscreteStates returned terminateSimulation"),
    "fmi3-me": ({"fmi3": True, "interface": "me"}, "fmi3UpdateDiscreteStates returned terminateSimulation"),
}
MASTERS = ("jacobi", "gauss_seidel", "ijcsa", "hybrid")

pytestmark = pytest.mark.filterwarnings("ignore:experiment 'stair'.*differ.*from the default experiment")


@pytest.fixture(scope="module")
def fmus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("stair")
    fmus = {name: builders.stair(directory, **kwargs) for name, (kwargs, _) in VARIANTS.items()}
    fmus["fmi2-cs-norollback"] = builders.stair(directory, rollback=False)
    return fmus


def experiment(fmu: Path, master: str, t_stop: float, dt: float = 0.4, tf: float = 5.0) -> dict[str, Any]:
    return {
        "name": "stair",
        "run": {"t0": 0.0, "tf": tf, "dt": dt},
        "components": {
            "stair": {"type": "fmu", "params": {"path": str(fmu), "t_stop": t_stop}},
            "g": {"type": "gain", "params": {"k": 2.0}},
        },
        "connections": ["stair.y -> g.u"],
        "master": {"name": master},
    }


def staircase(time: np.ndarray) -> np.ndarray:
    """The analytic counter, after the events at each instant: 1 + the whole seconds reached."""
    return 1.0 + np.floor(time + 1e-9)


def check_staircase(time: np.ndarray, values: np.ndarray, scale: float = 1.0) -> None:
    """Every sample is the staircase; a sample followed by another at its instant (micro 0, before an event
    handled there) holds the value from before that instant."""
    before = np.append(time[1:] == time[:-1], False)
    expected = scale * np.where(before, staircase(time - 2e-9), staircase(time))
    np.testing.assert_array_equal(values, expected)


def summary(outcome: Any, cfg: dict[str, Any]) -> str:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        Console(prepare(cfg)).summary(outcome)
    return buffer.getvalue()


@pytest.mark.parametrize("master", MASTERS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_run_ends_complete_where_the_fmu_asks_to_terminate(tmp_path: Path, fmus: dict[str, Path], variant: str,
                                                               master: str) -> None:
    t_stop = 2.6  # inside the step 2.4 -> 2.8: the step is cut there for both components
    cfg = experiment(fmus[variant], master, t_stop)
    outcome = run_experiment(cfg, tmp_path)
    assert outcome.ok, outcome.error
    how = VARIANTS[variant][1]
    assert outcome.stopped is not None and outcome.stopped.component == "stair"
    assert outcome.stopped.time == pytest.approx(t_stop, abs=1e-12)
    assert outcome.stopped.reason == f"asked to terminate ({how})"
    assert f"stopped at t=2.6 s: component 'stair' asked to terminate ({how})\n" in summary(outcome, cfg)

    res = load_results(outcome.path)
    assert res.status == "complete"
    assert res.stop_time == pytest.approx(t_stop, abs=1e-12)
    assert (res.stop_component, res.stop_reason) == ("stair", f"asked to terminate ({how})")
    stops = res.events[res.events["event"] == "stop"]
    assert stops[["component", "event"]].values.tolist() == [["stair", "stop"]]
    assert stops["time"].iloc[0] == pytest.approx(t_stop, abs=1e-12)
    stair, gain = res.history("stair"), res.history("g")
    for series in (stair["counter"], gain["y"]):
        assert series.time[-1] == pytest.approx(t_stop, abs=1e-12)
        assert series.time[-2] < t_stop - 1e-9 or series.micro[-1] == 1  # the stop time is the last instant
    check_staircase(stair["counter"].time, stair["counter"].values)
    check_staircase(stair["y"].time, stair["y"].values)
    check_staircase(gain["y"].time, gain["y"].values, scale=2.0)
    assert stair["counter"].values[-1] == 3


@pytest.mark.parametrize("variant", ["fmi2-cs", "fmi3-cs", "fmi3-cs-events", "fmi2-me", "fmi2-cs-norollback"])
def test_a_stop_on_a_communication_point_ends_the_run_there(tmp_path: Path, fmus: dict[str, Path],
                                                            variant: str) -> None:
    """t_stop = 3 s on the grid of dt = 0.25 s: no step is cut; the last sample is at 3 s with the counter at 4."""
    for master in ("gauss_seidel", "hybrid"):
        outcome = run_experiment(experiment(fmus[variant], master, 3.0, dt=0.25), tmp_path / master)
        assert outcome.ok, outcome.error
        assert outcome.stopped is not None and outcome.stopped.time == pytest.approx(3.0, abs=1e-12)
        res = load_results(outcome.path)
        counter = res.history("stair")["counter"]
        assert counter.time[-1] == pytest.approx(3.0, abs=1e-12) and counter.values[-1] == 4
        check_staircase(counter.time, counter.values)
        assert res.stats["discards"] == 0
        assert len(np.unique(counter.time)) == 1 + 12  # 0, 0.25, ..., 3: nothing past the stop


@pytest.mark.parametrize("master", ["jacobi", "gauss_seidel"])
def test_another_fmu_stepped_in_parallel_is_cut_to_the_stop_too(tmp_path: Path, fmus: dict[str, Path],
                                                                master: str) -> None:
    """Two FMUs stepped concurrently (parallel: 2): the one that does not stop ends at the other's stop time."""
    cfg = experiment(fmus["fmi2-cs"], master, 2.6)
    cfg["components"]["other"] = {"type": "fmu", "params": {"path": str(fmus["fmi3-cs"])}}
    cfg["master"]["parallel"] = 2
    outcome = run_experiment(cfg, tmp_path)
    assert outcome.ok and outcome.stopped is not None and outcome.stopped.component == "stair"
    other = load_results(outcome.path).history("other")["counter"]
    assert other.time[-1] == pytest.approx(2.6, abs=1e-12) and other.values[-1] == 3
    check_staircase(other.time, other.values)


@pytest.mark.parametrize("variant", ["fmi2-cs", "fmi3-cs-events"])
def test_the_reference_stair_experiment_gives_the_published_result(tmp_path: Path, fmus: dict[str, Path],
                                                                   variant: str) -> None:
    """The Reference FMUs' Stair asks to terminate at t = 9 s; its published result, sampled every 0.2 s (its
    stepSize) from 0 to its stop request, is counter = 1 + floor(t) and ends at t = 9 s with counter = 10."""
    outcome = run_experiment(experiment(fmus[variant], "gauss_seidel", 9.0, dt=0.2, tf=10.0), tmp_path)
    assert outcome.ok and outcome.stopped is not None and outcome.stopped.time == pytest.approx(9.0, abs=1e-12)
    counter = load_results(outcome.path).history("stair")["counter"]
    last = np.append(counter.time[1:] != counter.time[:-1], True)  # the value after the events of each instant
    published_time = np.arange(46) * 0.2
    np.testing.assert_allclose(counter.time[last], published_time, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(counter.values[last], 1 + np.floor(published_time + 1e-9))
    assert counter.values[-1] == 10


def test_a_run_without_a_stop_records_none(tmp_path: Path, fmus: dict[str, Path]) -> None:
    outcome = run_experiment(experiment(fmus["fmi2-cs"], "jacobi", 1e300, tf=2.0), tmp_path)
    assert outcome.ok and outcome.stopped is None
    res = load_results(outcome.path)
    assert (res.stop_time, res.stop_component, res.stop_reason) == (None, "", "")
    assert "stop" not in set(res.events["event"])
    assert res.history("stair")["counter"].time[-1] == pytest.approx(2.0)


def test_the_stopped_file_reads_with_xarray(tmp_path: Path, fmus: dict[str, Path]) -> None:
    xr = pytest.importorskip("xarray")
    outcome = run_experiment(experiment(fmus["fmi3-cs"], "gauss_seidel", 2.6), tmp_path)
    with h5py.File(outcome.path, "r") as f:
        assert f.attrs["stop_time"] == pytest.approx(2.6) and f.attrs["stop_component"] == "stair"
    with open(outcome.path, "rb") as fh, xr.open_dataset(fh, engine="h5netcdf") as root:
        assert root.attrs["stop_time"] == pytest.approx(2.6) and root.attrs["status"] == "complete"
    data = load_results(outcome.path).to_xarray("stair")
    assert float(data["time"][-1]) == pytest.approx(2.6) and int(data["counter"][-1]) == 3


def test_an_fmu_stepped_after_it_asked_to_terminate_refuses(tmp_path: Path, fmus: dict[str, Path]) -> None:
    """On its own (or as a mode of a multi-model component, where no master ends the run) the FMU says so."""
    fmu = builders.component("stair", fmus["fmi2-cs"], t_stop=1.5)
    fmu.initialize(0.0)
    fmu.do_step(0.0, 1.5)
    assert fmu.stop_requested == "asked to terminate (fmi2DoStep returned fmi2Discard with fmi2Terminated)"
    assert fmu.outputs["counter"].value == 2
    with pytest.raises(FMUError, match=r"asked to step from t=1\.5 after it asked to terminate"):
        fmu.do_step(1.5, 0.5)
    fmu.free()


def test_rollback_forgets_a_request_made_after_the_snapshot(fmus: dict[str, Path]) -> None:
    fmu = builders.component("stair", fmus["fmi3-cs"], t_stop=1.5)
    assert isinstance(fmu, FMUComponent)
    fmu.initialize(0.0)
    snapshot = fmu.snapshot_state()
    with pytest.raises(StepDiscarded) as ended:  # the step ends early at t_stop, with the stop request
        fmu.do_step(0.0, 2.0)
    assert ended.value.last_successful_time == 1.5 and fmu.stop_requested is not None
    fmu.restore_state(snapshot, 0.0)
    assert fmu.stop_requested is None
    fmu.do_step(0.0, 1.0)
    assert fmu.outputs["counter"].value == 2 and fmu.stop_requested is None
    fmu.free()


def test_a_stop_at_the_start_ends_the_run_at_t0(tmp_path: Path, fmus: dict[str, Path]) -> None:
    """Model exchange asks in its first event iteration (t_stop = t0): the run is the initial sample."""
    outcome = run_experiment(experiment(fmus["fmi2-me"], "gauss_seidel", 0.0), tmp_path)
    assert outcome.ok, outcome.error
    assert outcome.stopped is not None and outcome.stopped.time == 0.0
    counter = load_results(outcome.path).history("stair")["counter"]
    assert counter.time.tolist() == [0.0] and counter.values.tolist() == [1]
    assert outcome.result is not None and outcome.result.stats.macro_steps == 0


@pytest.mark.parametrize("master", MASTERS)
def test_the_engine_ends_a_run_where_any_component_asks(master: str) -> None:
    """The contract is the engine's (no FMI): a library run ends at the request, the master says why."""
    system = System("clocked")
    system.add_component(StoppingClock("clock", t_stop=1.0))
    system.add_component(create_component("integrator", "i"))
    system.connect("clock.t", "i.u")
    masters = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel, "ijcsa": IJCSA, "hybrid": Hybrid}
    algorithm = masters[master]()
    result = system.run(0.0, 3.0, 0.25, algorithm)
    assert result.stopped == StopRequest(1.0, "clock", "reached its end")
    assert str(result.stopped) == "stopped at t=1 s: component 'clock' reached its end"
    assert [(e[0].t, e[1], e[2]) for e in result.events] == [(1.0, "clock", "stop")]
    time, values = result.history.get_component_history("i").to_arrays()
    assert time[-1] == 1.0 and len(time) == 5
    # i integrates the clock's time held over each step of 0.25 s: the fresh end value under Gauss-Seidel and
    # IJCSA, (0.25 + 0.5 + 0.75 + 1) * 0.25; the value at the step's start under Jacobi and under hybrid (the
    # clock cannot roll back, so it steps after the trial of i), (0 + 0.25 + 0.5 + 0.75) * 0.25
    fresh = master in ("gauss_seidel", "ijcsa")
    assert values["y"][-1] == pytest.approx(0.625 if fresh else 0.375, rel=0, abs=1e-12)


STAIR_EXPERIMENT = """\
# @package _global_
name: stair
run: {{t0: 0.0, tf: 5.0, dt: 0.4}}
components:
  stair: {{type: fmu, params: {{path: {path}, t_stop: 2.6}}}}
  g: {{type: gain, params: {{k: 2.0}}}}
connections: [stair.y -> g.u]
"""


def _config_dir(tmp_path: Path, fmu: Path) -> Path:
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "stair.yaml").write_text(STAIR_EXPERIMENT.format(path=fmu))
    return conf


@pytest.mark.slow
def test_cosimrun_exits_0_with_the_stop_in_the_summary(tmp_path: Path, fmus: dict[str, Path], cosimrun) -> None:
    conf = _config_dir(tmp_path, fmus["fmi2-cs"])
    proc = cosimrun(f"--config-dir={conf}", "+experiment=stair", "hydra.run.dir=run")
    assert proc.returncode == 0, proc.stderr
    assert "stair: complete |" in proc.stdout
    assert ("stopped at t=2.6 s: component 'stair' asked to terminate "
            "(fmi2DoStep returned fmi2Discard with fmi2Terminated)") in proc.stdout
    res = load_results(tmp_path / "run" / "results.h5")
    assert res.status == "complete" and res.stop_time == pytest.approx(2.6)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", [["hydra/launcher=basic"], ["hydra/launcher=dask", "hydra.launcher.n_workers=2"]])
def test_a_sweep_of_stopping_runs_completes_every_job(tmp_path: Path, fmus: dict[str, Path], cosimrun,
                                                     launcher: list[str]) -> None:
    from cosimrun.runner.load import load_sweep

    conf = _config_dir(tmp_path, fmus["fmi3-cs-events"])
    sweep_dir = tmp_path / "sweep"
    proc = cosimrun(f"--config-dir={conf}", "-m", "+experiment=stair", "components.stair.params.t_stop=1.3,3.2",
                    *launcher, f"hydra.sweep.dir={sweep_dir}", timeout=300)
    assert proc.returncode == 0, proc.stderr
    index = load_sweep(sweep_dir).sort_values("components.stair.params.t_stop")
    assert list(index["status"]) == ["complete", "complete"]
    assert list(index["final.stair.counter"]) == [2, 4]
    for path, t_stop in zip(index["path"], (1.3, 3.2), strict=True):
        res = load_results(sweep_dir / path)  # index paths are relative to the sweep directory
        assert res.stop_time == pytest.approx(t_stop) and res.history("g")["y"].time[-1] == pytest.approx(t_stop)
