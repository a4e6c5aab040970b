"""``cosimrun simulate MODEL.fmu``: one FMU on its default experiment (issue 23, item 6), and the notice for an
experiment whose run settings differ from the default experiment of its only FMU.

The stair test FMU (``tests/fmus/stair.c``: counter = 1 + the whole periods reached, y = counter) declares
``<DefaultExperiment startTime="0.5" stopTime="6" stepSize="0.25" tolerance="1e-7"/>``.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cosimrun.post import commands
from cosimrun.runner.run import run_experiment
from cosimrun.storage import load_results
from tests.fmus import builders


@pytest.fixture(scope="module")
def stair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.stair(tmp_path_factory.mktemp("stair"))


@pytest.fixture(scope="module")
def stair_me(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.stair(tmp_path_factory.mktemp("stair_me"), fmi3=True, interface="me")


def default_experiment(fmu: Path) -> dict[str, float]:
    """The DefaultExperiment attributes of the FMU's modelDescription.xml, read here independently."""
    with zipfile.ZipFile(fmu) as zf:
        root = ET.fromstring(zf.read("modelDescription.xml"))
    node = root.find("DefaultExperiment")
    assert node is not None
    return {k: float(v) for k, v in node.attrib.items()}


def simulate(*args: str) -> int:
    """``cosimrun simulate ARGS`` in this process; its exit status."""
    with pytest.raises(SystemExit) as exited:
        commands.main(["simulate", *args])
    return int(exited.value.code or 0)


def stair_experiment(fmu: Path, run: dict[str, float], **params: Any) -> dict[str, Any]:
    return {"name": "stair", "run": run, "master": {"name": "gauss_seidel"},
            "components": {"stair": {"type": "fmu", "params": {"path": str(fmu), **params}}}}


def test_simulate_runs_the_default_experiment_of_the_fmu(tmp_path: Path, stair: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert simulate(str(stair)) == 0
    out = capsys.readouterr()
    [path] = list(tmp_path.glob("outputs/stair/*/results.h5"))
    assert out.out.startswith("stair: complete | master gauss_seidel | 22 steps |")
    assert f"results: {path.relative_to(tmp_path)}" in out.out
    assert "differ" not in out.err  # no notice: the run is the default experiment
    assert (path.parent / "cosimrun.log").read_text().count("stair: complete in") == 1

    xml = default_experiment(stair)
    res = load_results(path)
    assert (res.attrs["t0"], res.attrs["tf"], res.attrs["dt"]) == (xml["startTime"], xml["stopTime"], xml["stepSize"])
    assert res.config["components"]["stair"]["params"]["tolerance"] == xml["tolerance"]
    counter = res.history("stair")["counter"]
    np.testing.assert_allclose(counter.time, 0.5 + 0.25 * np.arange(23), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(counter.values, 1 + np.floor(counter.time + 1e-9))  # floor(t0) = 0

    run = {"t0": xml["startTime"], "tf": xml["stopTime"], "dt": xml["stepSize"]}
    reference = run_experiment(stair_experiment(stair, run, tolerance=xml["tolerance"]), tmp_path / "ref")
    expected = load_results(reference.path).history("stair")
    for port, series in res.history("stair").items():
        np.testing.assert_array_equal(series.time, expected[port].time)
        np.testing.assert_array_equal(series.values, expected[port].values)


def test_the_options_override_the_default_experiment(tmp_path: Path, stair: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    code = simulate(str(stair), "--start", "1", "--stop", "4", "--step", "0.5", "--set", "period=0.5",
                    "--set", "t_stop=2.5", "--master", "hybrid", "--output", "mine.h5")
    assert code == 0
    out = capsys.readouterr().out
    assert "stair: complete | master hybrid |" in out
    assert "stopped at t=2.5 s: component 'stair' asked to terminate" in out
    res = load_results(tmp_path / "mine.h5")
    assert (res.attrs["t0"], res.attrs["tf"], res.attrs["dt"]) == (1.0, 4.0, 0.5)
    counter = res.history("stair")["counter"]
    np.testing.assert_allclose(counter.time, [1.0, 1.5, 2.0, 2.5], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(counter.values, 1 + np.floor(counter.time / 0.5 + 1e-9) - 2)  # from t0 = 1 on
    assert res.stop_time == 2.5

    assert simulate(str(stair), "--output-interval", "0.5", "--output", "by_interval") == 0
    res = load_results(tmp_path / "by_interval" / "results.h5")
    assert res.attrs["dt"] == 0.5 and res.attrs["t0"] == 0.5 and res.attrs["tf"] == 6.0


def test_a_model_exchange_fmu_gets_the_tolerance_as_its_integrators(tmp_path: Path, stair_me: Path,
                                                                    monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert simulate(str(stair_me), "--output", "me") == 0
    res = load_results(tmp_path / "me")
    params = res.config["components"]["stair3_me"]["params"]
    assert params["rtol"] == params["tolerance"] == 1e-7
    assert simulate(str(stair_me), "--output", "me2", "--set", "tolerance=1e-5", "--set", "integrator=rk45") == 0
    params = load_results(tmp_path / "me2").config["components"]["stair3_me"]["params"]
    assert params["rtol"] == params["tolerance"] == 1e-5 and params["integrator"] == "rk45"
    counter = res.history("stair3_me")["counter"]
    np.testing.assert_array_equal(counter.values, 1 + np.floor(counter.time + 1e-9))


def test_without_a_default_experiment_the_run_is_one_second_in_500_steps(tmp_path: Path, monkeypatch) -> None:
    fmu = builders.feedthrough(tmp_path)  # y = k u, no DefaultExperiment
    monkeypatch.chdir(tmp_path)
    assert simulate(str(fmu), "--set", "u=1.5", "--set", "k=2", "-o", "ft") == 0
    res = load_results(tmp_path / "ft")
    assert (res.attrs["t0"], res.attrs["tf"], res.attrs["dt"]) == (0.0, 1.0, 1.0 / 500)
    y = res.history("feedthrough")["y"]
    assert len(y) == 501 and y.time[-1] == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_array_equal(y.values, np.full(501, 3.0))


BAD_ARGUMENTS = [
    (["--set", "t_stopp=2"], "simulate: --set t_stopp: unknown parameter 't_stopp' of FMU component 'stair' "
                             "(stair.fmu); did you mean 't_stop'?"),
    (["--set", "t_stop=abc"], "simulate: --set t_stop: 'abc' is not a number (variable 't_stop' is Real [s])"),
    (["--set", "t_stop"], "simulate: --set: 't_stop' is not NAME=VALUE"),
    (["--step", "fast"], "simulate: argument --step: 'fast' is not a number"),
    (["--stop", "0.1"], "simulate: --stop: 0.1 is not after the start time 0.5"),
    (["--step", "-1"], "simulate: --step: -1 must be positive"),
    (["--step", "0.1", "--output-interval", "0.2"], "simulate: --output-interval: 0.2 differs from --step 0.1"),
    (["--output", "notes.txt"], "simulate: --output: notes.txt is a file; name a directory, or a results file"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_ARGUMENTS])
def test_bad_arguments_give_one_line_and_exit_2(tmp_path: Path, stair: Path, monkeypatch, capsys,
                                                args: list[str], expected: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a directory")
    assert simulate(str(stair), *args) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cosimrun: error: {expected}"), err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]  # nothing ran, nothing written


def test_a_missing_fmu_file_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert simulate("nowhere/model.fmu") == 2
    assert capsys.readouterr().err == "cosimrun: error: simulate: nowhere/model.fmu: no such FMU file\n"


def test_an_experiment_that_differs_from_its_fmus_default_experiment_gets_a_notice(tmp_path: Path,
                                                                                  stair: Path) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        outcome = run_experiment(stair_experiment(stair, {"t0": 0.0, "tf": 6.0, "dt": 0.01}), tmp_path / "a")
    assert outcome.ok, outcome.error
    assert [str(w.message) for w in record] == [
        "experiment 'stair': run.t0=0 and run.dt=0.01 differ from the default experiment of its FMU 'stair' "
        "(stair.fmu: startTime=0.5, stepSize=0.25); run.t0=0.5 run.dt=0.25 runs the FMU as its default experiment "
        "does"]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        run_experiment(stair_experiment(stair, {"t0": 0.5, "tf": 6.0, "dt": 0.25}), tmp_path / "b")
        two = stair_experiment(stair, {"t0": 0.0, "tf": 1.0, "dt": 0.1})
        two["components"]["other"] = {"type": "fmu", "params": {"path": str(stair)}}
        run_experiment(two, tmp_path / "c")  # two FMUs: whose default experiment would it be?
    assert [str(w.message) for w in record] == []


@pytest.mark.slow
def test_the_command_simulates_and_warns_through_cosimruns_channel(tmp_path: Path, stair: Path, cosimrun) -> None:
    proc = cosimrun("simulate", str(stair), "--stop", "2", "--output", "run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("stair: complete | master gauss_seidel | 6 steps |"), proc.stdout
    assert load_results(tmp_path / "run").status == "complete"
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "plain.yaml").write_text(f"# @package _global_\nname: plain\ncomponents:\n  stair: {{type: fmu, params: "
                                     f"{{path: {stair}}}}}\n")
    proc = cosimrun(f"--config-dir={tmp_path / 'conf'}", "+experiment=plain", "hydra.run.dir=plain")
    assert proc.returncode == 0, proc.stderr
    expected = ("cosimrun: warning: experiment 'plain': run.t0=0, run.tf=10 and run.dt=0.01 differ from the default "
                "experiment of its FMU 'stair' (stair.fmu: startTime=0.5, stopTime=6, stepSize=0.25); run.t0=0.5 "
                "run.tf=6 run.dt=0.25 runs the FMU as its default experiment does")
    assert expected in proc.stderr.splitlines()
    assert expected.removeprefix("cosimrun: warning: ") in (tmp_path / "plain" / "cosimrun.log").read_text()


def test_simulate_is_listed_in_the_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "cosimrun", "--help"], capture_output=True, text=True)
    assert "cosimrun simulate MODEL.fmu" in proc.stdout
