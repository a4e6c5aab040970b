"""Fixtures of the result-command tests: a run with events and mode switches, a sweep with a failed job."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support import forkserver

from cosimrun.runner.run import prepare, run_experiment

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """``cli(*args, cwd=DIR)``: the ``cosimrun`` command in *cwd*, output captured as text; no display (figures go to
    files) and a home folder of the session's own. Forked from a process that imported it once (one environment for
    every call, so one server: ``support/forkserver.py``)."""
    env = {"PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg", "HOME": str(tmp_path_factory.mktemp("home"))}

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return forkserver.run(forkserver.Form.python_c(), list(args), env, cwd=cwd, capture_output=True, text=True,
                              timeout=120)

    return run


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
def sweep_dir(tmp_path_factory: pytest.TempPathFactory, cli: Cli) -> Path:
    """A sweep of the ball over e (three runs) plus one failing job (e = -1)."""
    root = tmp_path_factory.mktemp("sweep")
    proc = cli("-m", "+experiment=bouncing_ball", "run.tf=1", "components.ball.params.e=0.5,0.7,0.9,-1",
                   "hydra/launcher=basic", f"hydra.sweep.dir={root / 'sweep'}", cwd=root)
    assert proc.returncode == 1, proc.stderr  # the e=-1 job fails
    return root / "sweep"
