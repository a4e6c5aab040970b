"""Relative file paths of components resolve against the directory of the experiment's file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from support import forkserver

from cosimrun.runner.configtext import experiment_dir, relocate_paths, resolved
from cosimrun.runner.run import prepare
from cosimrun.storage import load_results

REPO = Path(__file__).resolve().parents[2]

CSV = "time,value\n0,1\n1,3\n"


def config(**components: Any) -> dict[str, Any]:
    return {"name": "paths", "run": {"t0": 0.0, "tf": 1.0, "dt": 0.5}, "components": components}


def test_relocate_paths_rewrites_relative_fmu_and_table_paths_only(tmp_path: Path) -> None:
    absolute = str(tmp_path / "abs.csv")
    cfg = config(
        plant={"type": "fmu", "params": {"path": "models/plant.fmu", "mass": 2.0}},
        builtin={"type": "fmu", "params": {"path": "example:pendulum"}},
        tab={"type": "table", "params": {"path": "signal.csv"}},
        fixed={"type": "table", "params": {"path": absolute}},
        home={"type": "table", "params": {"path": "~/signal.csv"}},
        unset={"type": "table", "params": {"path": None}},
        other={"type": "my_plugin", "params": {"path": "data.bin"}},
        switching={
            "type": "multi",
            "modes": {
                "fast": {"type": "table", "params": {"path": "../fast.csv"}},
                "slow": {"type": "fmu", "params": {"path": "slow.fmu"}},
                "plain": {"type": "gain", "params": {"k": 1.0}},
            },
        },
    )
    out = relocate_paths(cfg, tmp_path / "exp")
    params = {name: comp["params"]["path"] for name, comp in out["components"].items() if "params" in comp}
    assert params == {
        "plant": str(tmp_path / "exp" / "models" / "plant.fmu"),
        "builtin": "example:pendulum",
        "tab": str(tmp_path / "exp" / "signal.csv"),
        "fixed": absolute,
        "home": "~/signal.csv",
        "unset": None,
        "other": "data.bin",
    }
    modes = out["components"]["switching"]["modes"]
    assert modes["fast"]["params"]["path"] == str(tmp_path / "exp" / ".." / "fast.csv")
    assert modes["slow"]["params"]["path"] == str(tmp_path / "exp" / "slow.fmu")
    assert modes["plain"] == {"type": "gain", "params": {"k": 1.0}}
    assert cfg["components"]["tab"]["params"]["path"] == "signal.csv"  # the caller's config is left alone
    assert out["components"]["plant"]["params"]["mass"] == 2.0


def test_prepare_resolves_against_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "signal.csv").write_text(CSV)
    monkeypatch.chdir(tmp_path)
    cfg = config(tab={"type": "table", "params": {"path": "signal.csv"}})
    exp = prepare(cfg, base_dir=tmp_path / "exp")
    assert exp.system.components["tab"].parameters["path"] == str(tmp_path / "exp" / "signal.csv")
    with pytest.raises(ValueError, match="CSV file not found"):  # without it: the working directory
        prepare(cfg)


def hydra_runtime(experiment: str | None, *sources: tuple[str, str]) -> Any:
    choices = {"master": "gauss_seidel"} | ({"experiment": experiment} if experiment else {})
    return OmegaConf.create({"runtime": {
        "choices": choices,
        "config_sources": [{"path": p, "schema": schema, "provider": "test"} for schema, p in sources],
    }})


def test_experiment_dir_is_where_hydra_finds_the_experiment(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for root in (first, second):
        (root / "experiment").mkdir(parents=True)
    (second / "experiment" / "x.yaml").write_text("name: x\n")
    sources = [("structured", "schema"), ("file", str(first)), ("pkg", "cosimrun.conf"), ("file", str(second))]
    assert experiment_dir(hydra_runtime("x", *sources)) == second / "experiment"
    (first / "experiment" / "x.yaml").write_text("name: x\n")
    assert experiment_dir(hydra_runtime("x", *sources)) == first / "experiment"  # the first source wins
    assert experiment_dir(hydra_runtime("pendulum_switch", *sources)) == REPO / "experiments"  # via the symlink
    assert experiment_dir(hydra_runtime("nowhere", *sources)) is None
    assert experiment_dir(hydra_runtime(None, *sources)) is None
    assert experiment_dir(hydra_runtime("x", ("pkg", "no_such_package_xyz"))) is None


def test_resolved_outside_of_hydra_leaves_paths_alone() -> None:
    cfg = OmegaConf.create(config(tab={"type": "table", "params": {"path": "signal.csv"}}))
    plain, text = resolved(cfg)
    assert plain["components"]["tab"]["params"]["path"] == "signal.csv"
    assert "path: signal.csv" in text


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    exp = tmp_path / "cfg" / "experiment"
    exp.mkdir(parents=True)
    (exp / "signal.csv").write_text(CSV)
    (exp / "tab.yaml").write_text(
        "# @package _global_\n"
        "name: tab\n"
        "run: {t0: 0.0, tf: 1.0, dt: 0.25}\n"
        "components:\n"
        "  tab: {type: table, params: {path: signal.csv}}\n"
        "  gain: {type: gain, params: {k: 2.0}}\n"
        "connections: ['tab.y -> gain.u']\n"
    )
    return tmp_path / "cfg"


def cosimrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return forkserver.run(forkserver.Form.python_c(), list(args), env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("mode", ["run", "sweep"])
def test_a_config_dir_experiment_reads_the_csv_beside_it_from_another_directory(
    tmp_path: Path, config_dir: Path, mode: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if mode == "run":
        args, run_dir = ["hydra.run.dir=out"], elsewhere / "out"
    else:  # the sweep job's path (cosimrun.runner.sweep), in this process
        args, run_dir = ["hydra/launcher=basic", "hydra.sweep.dir=sweep", "components.gain.params.k=2"], \
            elsewhere / "sweep" / "0"
    flags = ["-m"] if mode == "sweep" else []
    proc = cosimrun(*flags, "--config-dir", str(config_dir), "+experiment=tab", *args, cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    results = load_results(run_dir)
    assert results.status == "complete"
    csv = config_dir.resolve() / "experiment" / "signal.csv"
    assert results.config["components"]["tab"]["params"]["path"] == str(csv)  # stored as resolved
    time, values = results.trajectory("gain", "y")
    assert list(values) == pytest.approx([2.0, 3.0, 4.0, 5.0, 6.0])
