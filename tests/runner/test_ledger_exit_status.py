"""The exit status a sweep's ledger gives the command (:func:`cosimrun.runner.ledger.finish`): 0 only when every
job it was given finished complete and the index holds them all."""

from __future__ import annotations

import io
from pathlib import Path

from cosimrun.runner.ledger import finish, ledger_for
from cosimrun.runner.load import load_sweep
from cosimrun.runner.outcome import JobOutcome


def test_jobs_left_not_run_make_the_command_fail(tmp_path: Path) -> None:
    """A launch that ended before entering every job (it raised) leaves them pending: the summary says they did not
    run, on stderr's stream, and the status is 1, not 0."""
    ledger = ledger_for(tmp_path)
    for num in range(3):
        ledger.add_pending(num, [f"a={num}"])
    ledger.enter(JobOutcome(0, "complete", ["a=0"], job_time_s=0.1))
    out = io.StringIO()
    assert finish(out) == 1
    assert out.getvalue().splitlines()[:1] == ["sweep: 3 jobs, 1 complete, 0 failed, 2 not run"]
    assert f"hydra.sweep.dir={tmp_path} hydra.launcher.resume=true" in out.getvalue()
    assert list(load_sweep(tmp_path)["status"]) == ["complete", "pending", "pending"]


def test_a_sweep_whose_jobs_all_completed_exits_0(tmp_path: Path) -> None:
    ledger = ledger_for(tmp_path)
    ledger.add_pending(0, ["a=0"])
    ledger.enter(JobOutcome(0, "complete", ["a=0"], job_time_s=0.1))
    out = io.StringIO()
    assert finish(out) == 0
    assert out.getvalue().startswith("sweep: 1 jobs, 1 complete, 0 failed\n")
