"""Fixtures of the result-command tests: a run with events and mode switches, a sweep with a failed job."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from cosimrun.runner.run import prepare, run_experiment

CLI = "from cosimrun.cli import main; main()"
Cli = Callable[..., subprocess.CompletedProcess[str]]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The ``cosimrun`` command in *cwd* (no display: figures go to files), output captured as text."""
    env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-c", CLI, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture(scope="session")
def cli() -> Cli:
    """``cli(*args, cwd=DIR)``: see :func:`run_cli`."""
    return run_cli


@pytest.fixture(scope="session")
def pendulum_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with events and mode switches: ``pendulum_switch`` under hybrid for 4 s."""
    root = Path(__file__).resolve().parents[2]
    cfg = yaml.safe_load((root / "experiments" / "pendulum_switch.yaml").read_text())
    cfg.pop("defaults")
    cfg["master"] = {"name": "hybrid"}
    cfg["run"]["tf"] = 4.0
    out = tmp_path_factory.mktemp("pendulum")
    outcome = run_experiment(cfg, out, experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    return out


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep of the ball over e (three runs) plus one failing job (e = -1)."""
    root = tmp_path_factory.mktemp("sweep")
    proc = run_cli("-m", "+experiment=bouncing_ball", "run.tf=1", "components.ball.params.e=0.5,0.7,0.9,-1",
                   "hydra/launcher=basic", f"hydra.sweep.dir={root / 'sweep'}", cwd=root)
    assert proc.returncode == 1, proc.stderr  # the e=-1 job fails
    return root / "sweep"
