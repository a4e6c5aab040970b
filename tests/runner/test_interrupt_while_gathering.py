"""Ctrl-C while the driver fetches a finished chunk's outcomes: the jobs of that chunk whose results files this
launch completed must count ``complete`` (docs/concepts/sweeps.md, "After Ctrl-C or SIGTERM, a job whose results
file this sweep completed counts as complete in the summary and the index, whether or not the driver had heard
of it").

``_Batch._finished`` follows the chunk until its jobs are entered, so that ``settle`` finds the jobs an interrupt
left unentered (it took the chunk out first: its finished jobs ended ``interrupted`` beside their complete files
in about one of four ``cosimrun -m`` sweeps interrupted while jobs finished). In process, the interrupt is raised by
the fetch itself."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra._internal.callbacks import Callbacks
from support.hydra_sweep import sweep_context

from cosimrun.runner import compose, sweep, worker
from cosimrun.runner.ledger import SweepLedger
from hydra_plugins.cosimrun_dask_launcher._core import _Batch

JOB = ["+experiment=bouncing_ball", "run.tf=0.1"]


class _FetchInterrupted:
    """A chunk's future that finished on its worker, whose result the driver is fetching when Ctrl-C comes."""

    status = "finished"
    key = "run_hydra_chunk-test"

    def result(self) -> list[object]:
        raise KeyboardInterrupt


def test_a_job_finished_on_its_worker_counts_complete_after_an_interrupt_while_its_outcome_is_fetched(
        tmp_path: Path) -> None:
    ctx, master = sweep_context([*JOB, f"hydra.sweep.dir={tmp_path}"])
    spec = compose.compose_job(ctx, master, JOB, 0)
    token = uuid.uuid4().hex
    worker.mark_started(spec.job_dir, token, 1)
    with sweep.managed_job():  # the job runs on its worker and completes its file
        ret = worker.run_composed_job(spec.payload(), sweep.sweep_job, Callbacks(spec.payload().to_config()))
    assert ret.return_value.status == "complete"

    ledger = SweepLedger(tmp_path)
    ledger.add_pending(0, list(JOB))
    launcher = SimpleNamespace(progress=False, cluster=None, objective=None)
    batch = _Batch(launcher, ledger, 1, composer=None)  # type: ignore[arg-type]
    batch.token = token
    future = _FetchInterrupted()
    batch.pending[future] = [(0, spec, 1)]
    with pytest.raises(KeyboardInterrupt):
        batch._finished(future)
    batch.cancel()
    batch.settle()  # as launch() does after an interrupt
    ledger.interrupt_pending("interrupted by the user")
    assert ledger.outcomes[0].status == "complete"
    assert ledger.outcomes[0].path == str(spec.results_path)
