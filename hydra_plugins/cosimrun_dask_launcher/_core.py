"""The dask side of the launcher (imported when a sweep is launched, never by Hydra's plugin scan).

The driver composes every job's config (so workers need only the installed
packages, not the config directories), submits one task per job with a unique
key, records each job's outcome in the sweep index as it finishes and returns
Hydra ``JobReturn`` objects that always carry a status: a failed job never
stops the sweep. A job whose worker died is started again ``retries`` times,
then recorded as failed.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sys
import uuid
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cloudpickle
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals

from cosimrun.runner import sweep, worker
from cosimrun.runner.outcome import JobOutcome, objective_value, outcome_from_file
from cosimrun.runner.recorder import SweepRecorder, recorder_for
from hydra_plugins.cosimrun_dask_launcher import _forkserver

if TYPE_CHECKING:
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher

log = logging.getLogger(__name__)

_DASK_LOGGERS = ("distributed", "distributed.scheduler", "distributed.core", "distributed.client")


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
    recorder = recorder_for(sweep_dir)
    recorder.experiment = str(config.get("name", "") or "")
    log.info(f"Launching {len(job_overrides)} jobs on dask, sweep directory {sweep_dir}")
    batch = _Batch(launcher, recorder, len(job_overrides))
    composer = launcher.composer or sweep.JobComposer(launcher.hydra_context, config)
    try:
        for pos, overrides in enumerate(job_overrides):
            num = initial_job_idx + pos
            spec = composer.compose(overrides, num)
            if launcher.resume and sweep.reusable(spec):
                batch.done(pos, spec, outcome_from_file(num, overrides, spec.results_path))
            else:
                batch.submit(pos, spec)
            # a few jobs ready, then let the cluster finish starting: composing holds the GIL the
            # driver's dask event loop needs for that (the rest is composed while jobs run)
            if batch.connecting and batch.queued >= _LOOKAHEAD:
                batch.submit_queued(block=True)
            batch.drain(block=False)  # record what finished while composing
        batch.bar.start()
        recorder.flush()
        batch.drain(block=True)
    except KeyboardInterrupt:
        batch.cancel()
        recorder.interrupt_pending()
        raise
    finally:
        batch.bar.close()
        recorder.flush()
    return batch.returns()


class _Batch:
    """The jobs of one ``launch``: submission, retries after lost workers, results in order."""

    def __init__(self, launcher: DaskLauncher, recorder: SweepRecorder, n: int) -> None:
        self.launcher = launcher
        self.recorder = recorder
        self.bar = _Progress(n, enabled=launcher.progress)
        self._returns: list[JobReturn | None] = [None] * n
        self.pending: dict[Any, tuple[int, sweep.JobSpec, int]] = {}
        self.client: Any = None
        self.futures: Any = None
        self.state = b""
        self.token = ""
        self._queue: list[tuple[int, sweep.JobSpec, int]] = []
        self._connecting: Future[Any] | None = None
        self._requeued = 0

    def submit(self, pos: int, spec: sweep.JobSpec, attempt: int = 1) -> None:
        """Submit a job, or queue it while the cluster is still starting (it starts with the first job)."""
        if attempt == 1:
            log.debug(f"\t#{spec.num} : {' '.join(filter_overrides(spec.overrides))}")
            self.recorder.add_pending(spec.num, spec.overrides)
        self._queue.append((pos, spec, attempt))
        if self._connecting is None:
            # connect (or start the local cluster) in the background while the driver composes jobs
            pool = ThreadPoolExecutor(1, thread_name_prefix="cosimrun-dask-connect")
            self._connecting = pool.submit(_connect, self.launcher)
            pool.shutdown(wait=False)
        self.submit_queued(block=False)

    def submit_queued(self, block: bool) -> None:
        if self.client is None:
            if self._connecting is None or not (block or self._connecting.done()):
                return
            from distributed import as_completed

            self.client = self._connecting.result()
            self.state = cloudpickle.dumps(Singleton.get_state())
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
                outcome = _failed(spec, attempt, exc)
        elif future.status == "cancelled":
            outcome = JobOutcome(spec.num, "failed", spec.overrides, error="the dask task was cancelled")
            outcome.attempts = attempt
        else:
            exc = future.exception()
            if _worker_died(exc) and not worker.started(spec.job_dir, self.token, attempt) and self._requeued < 100:
                # it was only waiting on the worker that died: not an attempt
                self._requeued += 1
                future.release()
                self._queue.append((pos, spec, attempt))
                self.submit_queued(block=False)
                return
            if _worker_died(exc) and attempt <= self.launcher.retries:
                self.bar.note(
                    f"#{spec.num}: the worker running it died; starting it again "
                    f"(attempt {attempt + 1} of {self.launcher.retries + 1})"
                )
                future.release()
                self.submit(pos, spec, attempt + 1)
                return
            outcome = _failed(spec, attempt, exc, future.traceback())
        future.release()
        self.done(pos, spec, outcome)

    def done(self, pos: int, spec: sweep.JobSpec, outcome: JobOutcome) -> None:
        if self.launcher.objective:
            outcome.objective = objective_value(outcome, self.launcher.objective)
        self._returns[pos] = SweepJobReturn.of(spec, outcome)
        self.recorder.record(outcome)
        self.bar.finished(outcome)

    def cancel(self) -> None:
        if self.client is not None and self.pending:
            self.client.cancel(list(self.pending))
        self.pending.clear()
        self._queue.clear()

    def returns(self) -> list[JobReturn]:
        assert all(r is not None for r in self._returns)
        return list(self._returns)  # type: ignore[arg-type]


class SweepJobReturn(JobReturn):
    """The ``JobReturn`` of a job run on dask: status ``COMPLETED``, the :class:`JobOutcome` as return value.

    Failed jobs are completed Hydra jobs too, so that the sweeper does not stop
    the sweep at the first failure; the sweep's exit status comes from
    :func:`cosimrun.runner.recorder.finish`. ``cfg`` and ``hydra_cfg`` are
    unpickled from the job's payload when first read: a sweep holds some
    20 kB per finished job instead of two configs of some 160 kB each.
    """

    @classmethod
    def of(cls, spec: sweep.JobSpec, outcome: JobOutcome) -> SweepJobReturn:
        ret = cls(
            overrides=list(spec.overrides),
            working_dir=str(spec.job_dir) if spec.chdir else str(Path.cwd()),
            task_name=spec.task_name,
            status=JobStatus.COMPLETED,
            _return_value=outcome,
        )
        ret._payload = spec.payload()
        return ret

    _payload: worker.JobPayload | None = None
    _configs: list[Any] | None = None

    def _config(self, which: int) -> Any:
        if self._configs is None and self._payload is not None:
            self._configs = list(self._payload.configs())
        return None if self._configs is None else self._configs[which]

    def _set_config(self, which: int, value: Any) -> None:
        if value is not None:  # JobReturn's __init__ sets None
            self._config(which)
            self._configs = self._configs or [None, None]
            self._configs[which] = value

    cfg = property(lambda self: self._config(0), lambda self, v: self._set_config(0, v))  # type: ignore[assignment]
    hydra_cfg = property(lambda self: self._config(1), lambda self, v: self._set_config(1, v))  # type: ignore[assignment]


def _worker_died(exc: BaseException | None) -> bool:
    from distributed.scheduler import KilledWorker

    return isinstance(exc, KilledWorker)


def _failed(spec: sweep.JobSpec, attempt: int, exc: BaseException | None, tb: Any = None) -> JobOutcome:
    import traceback as _traceback

    outcome = JobOutcome(spec.num, "failed", spec.overrides, attempts=attempt)
    if _worker_died(exc):
        last = getattr(getattr(exc, "last_worker", None), "address", "")
        times = "once" if attempt == 1 else f"{attempt} times"
        outcome.error = (
            f"WorkerDied: the worker process running this job died {times} (a crash, os._exit, a signal "
            f"or its memory limit){f'; last on {last}' if last else ''}; see that worker's log"
        )
        outcome.worker = str(last)
        outcome.traceback = f"{type(exc).__name__}: {exc}"
    else:
        outcome.error = f"{type(exc).__name__}: {exc}"
        lines = _traceback.format_tb(tb) if tb is not None else []
        outcome.traceback = "".join(["Traceback (most recent call last):\n", *lines, outcome.error, "\n"])
    return outcome


# ---------------------------------------------------------------------- cluster
def _quiet_dask() -> None:
    for name in _DASK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)


def _connect(launcher: DaskLauncher) -> Any:
    """The launcher's client: to ``cluster`` (instantiated), to ``address``, or to a new ``LocalCluster``."""
    if launcher.client is not None:
        return launcher.client
    from distributed import Client

    _quiet_dask()

    cluster = None
    if launcher.cluster_config:
        from hydra.utils import instantiate

        cluster = instantiate(launcher.cluster_config)
        if launcher.n_workers:
            cluster.scale(launcher.n_workers)
        client = Client(cluster)
        where = type(cluster).__name__
    elif launcher.address:
        try:
            client = Client(launcher.address)
        except (OSError, TimeoutError) as exc:
            raise RuntimeError(f"cannot reach the dask scheduler at {launcher.address}: {exc}") from exc
        where = launcher.address
    else:
        import dask
        from dask.system import CPU_COUNT  # cores available to this process (affinity, cgroup limits)

        _fast_worker_start()
        n_workers = launcher.n_workers or CPU_COUNT or 1
        # one job at a time per worker: a worker that dies takes only the job it was running with it
        # (with dask's default 1.1, a second job may wait on it and be reported lost too)
        with dask.config.set({"distributed.scheduler.worker-saturation": 1.0, **_quiet_workers(launcher)}):
            cluster = _local_cluster(launcher, n_workers)
        client = Client(cluster)
        where = f"a local cluster of {n_workers} workers"
    _quiet_dask()
    launcher.client, launcher.cluster = client, cluster
    dashboard = ""
    if launcher.dashboard_address or launcher.address or launcher.cluster_config:
        with contextlib.suppress(Exception):  # no dashboard (bokeh missing, disabled): no link
            dashboard = f", dashboard {client.dashboard_link}"
    log.info(f"dask: {where}{dashboard}")
    atexit.register(_close, weakref.ref(launcher))
    return client


QUIET_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}
"""dask settings of a local cluster with ``quiet_workers``: no statistical profiler, slower monitors."""


def _quiet_workers(launcher: DaskLauncher) -> dict[str, Any]:
    """:data:`QUIET_WORKERS` when the launcher asks for them.

    A worker's profiler samples the job's thread every 10 ms and its monitors
    wake every 20 to 500 ms; each wake takes the GIL from the job. Together
    they cost single-threaded Python jobs some 5 % of their speed (measured
    with ``benchmarks/bench_sweep.py``).
    """
    return dict(QUIET_WORKERS) if launcher.quiet_workers else {}


def _local_cluster(launcher: DaskLauncher, n_workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=launcher.dashboard_address,
        memory_limit=launcher.memory_limit,
        silence_logs=logging.ERROR,
        # a job whose worker died is reported to the driver at once; `retries` decides what follows
        scheduler_kwargs={"allowed_failures": 0},
        preload=["hydra_plugins.cosimrun_dask_launcher._worker"],  # workers leave Ctrl-C to the driver
    )


def _fast_worker_start() -> None:
    """Start local workers from a fork server (see :mod:`._forkserver`).

    Left alone when dask's ``distributed.worker.multiprocessing-method`` was
    set to something else than its default, or where there is no fork server.
    """
    import dask
    import distributed.utils

    key = "distributed.worker.multiprocessing-method"
    if dask.config.get(key) != "spawn" or not _forkserver.available():
        return
    dask.config.set({key: "forkserver"})
    # distributed computes a preload list of its own on first use, importing pandas and more into
    # this process only for that; the server runs with cosimrun's list
    distributed.utils._forkserver_preload_set = True
    _forkserver.start()


def _close(ref: Any) -> None:
    launcher = ref()
    if launcher is None:
        return
    client, cluster = launcher.client, launcher.cluster
    launcher.client = launcher.cluster = None
    for thing in (client, cluster):
        if thing is not None:
            with contextlib.suppress(Exception):  # shutting down: nothing useful to do about it
                thing.close()


# ---------------------------------------------------------------------- progress
class _Progress:
    """Jobs done / failed / total: a rich bar on stderr when it is a terminal, log lines otherwise."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.tty = bool(enabled) and bool(getattr(sys.stderr, "isatty", lambda: False)())
        self._bar: Any = None
        self._task: Any = None

    def start(self) -> None:
        if not self.tty or self._bar is not None:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._bar = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} done"),
            TextColumn("[red]{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr),
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._bar.start()
        self._task = self._bar.add_task("sweep", total=self.total, completed=self.done, failed=self.failed)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
        else:
            log.warning(text)

    def finished(self, outcome: JobOutcome) -> None:
        self.done += 1
        self.failed += int(outcome.failed)
        overrides = " ".join(filter_overrides(outcome.overrides))
        if outcome.failed:
            self.note(f"#{outcome.num} {outcome.status}: {overrides}: {outcome.error}")
        elif self._bar is None:
            how = "reused" if outcome.reused else f"{outcome.wall_time_s:.2f} s"
            log.info(f"\t#{outcome.num} {outcome.status} ({how}) : {overrides}")
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, failed=self.failed)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
