"""run_experiment on its own (no Hydra): what a finished run reports and records."""

from __future__ import annotations

import io
import warnings
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import h5py
import pytest

from cosimrun.console import Console
from cosimrun.runner.run import prepare, run_experiment


def diverging_loop(on_nonconvergence: str) -> dict[str, Any]:
    """``s.y = ramp + 4 s.y``: fixed-point iteration diverges at every step after t = 0 (loop gain 4)."""
    return {
        "name": "diverging_loop",
        "run": {"t0": 0.0, "tf": 1.0, "dt": 0.1},
        "components": {
            "src": {"type": "ramp", "params": {"slope": 1.0}},
            "s": {"type": "sum", "params": {"signs": "++"}, "initial": {"u2": 0.0}},
            "a": {"type": "gain", "params": {"k": 4.0}},
        },
        "connections": ["src.y -> s.u1", "a.y -> s.u2", "s.y -> a.u"],
        "master": {"name": "gauss_seidel", "on_nonconvergence": on_nonconvergence},
    }


def test_unconverged_loops_warn_once_and_are_counted_in_the_file_and_the_summary(tmp_path: Path) -> None:
    cfg = diverging_loop("warn")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        exp = prepare(cfg)
        outcome = run_experiment(cfg, tmp_path, experiment=exp)
    assert outcome.ok, outcome.error
    assert [str(w.message).split(" at t=")[0] for w in record] == ["algebraic loop s -> a diverged"]
    assert outcome.result is not None and outcome.result.stats.unconverged_loop_solves == 10
    with h5py.File(outcome.path, "r") as f:
        assert f.attrs["status"] == "complete"
        assert f["stats"].attrs["unconverged_loop_solves"] == 10
    assert "| 0 mode switches | 10 unconverged loop solves |" in _summary(outcome, exp)


def _summary(outcome: Any, exp: Any) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        Console(exp).summary(outcome)
    return buf.getvalue()


def test_a_converging_run_says_nothing_about_loops(tmp_path: Path) -> None:
    cfg = diverging_loop("warn")
    cfg["components"]["a"]["params"]["k"] = 0.5
    exp = prepare(cfg)
    outcome = run_experiment(cfg, tmp_path, experiment=exp)
    assert outcome.ok and outcome.result is not None and outcome.result.stats.unconverged_loop_solves == 0
    assert "unconverged" not in _summary(outcome, exp)


def test_raise_fails_the_run_at_the_first_unconverged_loop(tmp_path: Path) -> None:
    cfg = diverging_loop("raise")
    exp = prepare(cfg)
    outcome = run_experiment(cfg, tmp_path, experiment=exp)
    assert outcome.status == "failed" and outcome.failed_at == pytest.approx(0.1)
    assert outcome.error.startswith("LoopConvergenceError: algebraic loop s -> a diverged at t=0.1")
    with h5py.File(outcome.path, "r") as f:
        assert f.attrs["status"] == "failed"
        assert f["components/s/time"].shape[0] == 1  # t0 only
