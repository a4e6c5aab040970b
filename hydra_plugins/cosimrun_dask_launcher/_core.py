"""The batch launch of the dask launcher (imported when a sweep is launched, never by Hydra's plugin scan).

The driver composes every job's config (so workers need only the installed
packages, not the config directories), submits one task per job with a unique
key, enters each job's outcome in the sweep's ledger as it finishes and returns
Hydra ``JobReturn`` objects that always carry a status: a failed job never
stops the sweep. A job whose worker died is started again ``retries`` times,
then entered as failed. The client and cluster come from :mod:`._cluster`, the
returns and failed outcomes from :mod:`._returns`, the progress display from
:mod:`._progress`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals

from cosimrun.runner import worker
from cosimrun.runner.compose import JobComposer, JobSpec
from cosimrun.runner.ledger import SweepLedger, ledger_for
from cosimrun.runner.outcome import JobOutcome, objective_value, outcome_from_file
from cosimrun.runner.resume import reusable
from hydra_plugins.cosimrun_dask_launcher._cluster import connect
from hydra_plugins.cosimrun_dask_launcher._progress import Progress
from hydra_plugins.cosimrun_dask_launcher._returns import SweepJobReturn, failed_outcome, worker_died

if TYPE_CHECKING:
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher

log = logging.getLogger(__name__)

_LOOKAHEAD = 4
"""Jobs composed while the cluster starts."""


def launch(launcher: DaskLauncher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    """Run *job_overrides* (jobs ``initial_job_idx``, ...) on dask; ``JobReturn`` s in the same order."""
    setup_globals()
    assert launcher.config is not None and launcher.hydra_context is not None
    assert launcher.task_function is not None
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    ledger = ledger_for(sweep_dir)
    ledger.experiment = str(config.get("name", "") or "")
    log.info(f"Launching {len(job_overrides)} jobs on dask, sweep directory {sweep_dir}")
    batch = _Batch(launcher, ledger, len(job_overrides))
    composer = launcher.composer or JobComposer(launcher.hydra_context, config)
    try:
        for pos, overrides in enumerate(job_overrides):
            num = initial_job_idx + pos
            spec = composer.compose(overrides, num)
            if launcher.resume and reusable(spec):
                batch.done(pos, spec, outcome_from_file(num, overrides, spec.results_path))
            else:
                batch.submit(pos, spec)
            # a few jobs ready, then let the cluster finish starting: composing holds the GIL the
            # driver's dask event loop needs for that (the rest is composed while jobs run)
            if batch.connecting and batch.queued >= _LOOKAHEAD:
                batch.submit_queued(block=True)
            batch.drain(block=False)  # enter what finished while composing
        batch.bar.start()
        ledger.flush()
        batch.drain(block=True)
    except KeyboardInterrupt:
        batch.cancel()
        ledger.interrupt_pending()
        raise
    finally:
        batch.bar.close()
        ledger.flush()
    return batch.returns()


class _Batch:
    """The jobs of one ``launch``: submission, retries after lost workers, results in order."""

    def __init__(self, launcher: DaskLauncher, ledger: SweepLedger, n: int) -> None:
        self.launcher = launcher
        self.ledger = ledger
        self.bar = Progress(n, enabled=launcher.progress)
        self._returns: list[JobReturn | None] = [None] * n
        self.pending: dict[Any, tuple[int, JobSpec, int]] = {}
        self.client: Any = None
        self.futures: Any = None
        self.state = b""
        self.token = ""
        self._queue: list[tuple[int, JobSpec, int]] = []
        self._connecting: Future[Any] | None = None
        self._requeued = 0

    def submit(self, pos: int, spec: JobSpec, attempt: int = 1) -> None:
        """Submit a job, or queue it while the cluster is still starting (it starts with the first job)."""
        if attempt == 1:
            log.debug(f"\t#{spec.num} : {' '.join(filter_overrides(spec.overrides))}")
            self.ledger.add_pending(spec.num, spec.overrides)
        self._queue.append((pos, spec, attempt))
        if self._connecting is None:
            # connect (or start the local cluster) in the background while the driver composes jobs
            pool = ThreadPoolExecutor(1, thread_name_prefix="cosimrun-dask-connect")
            self._connecting = pool.submit(connect, self.launcher)
            pool.shutdown(wait=False)
        self.submit_queued(block=False)

    def submit_queued(self, block: bool) -> None:
        if self.client is None:
            if self._connecting is None or not (block or self._connecting.done()):
                return
            from distributed import as_completed

            self.client = self._connecting.result()
            assert self.launcher.hydra_context is not None
            self.state = worker.worker_state(self.launcher.hydra_context.callbacks)
            self.token = uuid.uuid4().hex
            self.futures = as_completed()
            self.bar.start()
        queue, self._queue = self._queue, []
        for pos, spec, attempt in queue:
            future = self.client.submit(
                worker.run_hydra_job,
                spec.payload(),
                self.launcher.task_function,
                self.state,
                self.token,
                attempt,
                pure=False,
            )
            self.pending[future] = (pos, spec, attempt)
            self.futures.add(future)

    @property
    def connecting(self) -> bool:
        return self.client is None and self._connecting is not None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def drain(self, block: bool) -> None:
        """Handle finished futures: all of them until none is left (*block*), or those ready now."""
        self.submit_queued(block)
        if self.futures is None:
            return
        while self.pending:
            if not block and not self.futures.has_ready():
                return
            for future in self.futures.next_batch(block=True):
                self._finished(future)

    def _finished(self, future: Any) -> None:
        pos, spec, attempt = self.pending.pop(future)
        if future.status == "finished":
            try:
                outcome = future.result()
            except Exception as exc:  # the result did not come back (e.g. it could not be unpickled)
                outcome = failed_outcome(spec, attempt, exc)
        elif future.status == "cancelled":
            outcome = JobOutcome(spec.num, "failed", spec.overrides, error="the dask task was cancelled")
            outcome.attempts = attempt
        else:
            exc = future.exception()
            if worker_died(exc) and not worker.started(spec.job_dir, self.token, attempt) and self._requeued < 100:
                # it was only waiting on the worker that died: not an attempt
                self._requeued += 1
                future.release()
                self._queue.append((pos, spec, attempt))
                self.submit_queued(block=False)
                return
            if worker_died(exc) and attempt <= self.launcher.retries:
                self.bar.note(
                    f"#{spec.num}: the worker running it died; starting it again "
                    f"(attempt {attempt + 1} of {self.launcher.retries + 1})"
                )
                future.release()
                self.submit(pos, spec, attempt + 1)
                return
            outcome = failed_outcome(spec, attempt, exc, future.traceback())
        future.release()
        self.done(pos, spec, outcome)

    def done(self, pos: int, spec: JobSpec, outcome: JobOutcome) -> None:
        if self.launcher.objective:
            outcome.objective = objective_value(outcome, self.launcher.objective)
        self._returns[pos] = SweepJobReturn.of(spec, outcome)
        self.ledger.enter(outcome)
        self.bar.finished(outcome)

    def cancel(self) -> None:
        if self.client is not None and self.pending:
            self.client.cancel(list(self.pending))
        self.pending.clear()
        self._queue.clear()

    def returns(self) -> list[JobReturn]:
        assert all(r is not None for r in self._returns)
        return list(self._returns)  # type: ignore[arg-type]
