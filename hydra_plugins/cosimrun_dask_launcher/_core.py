"""The batch launch of the dask launcher (imported when a sweep is launched, never by Hydra's plugin scan).

The driver composes every job's config (so workers need only the installed
packages, not the config directories; a job that a shared composition makes
is made on its worker from that composition, sent with its chunk, and its
overrides) as it submits it, with a bounded number
of jobs in flight (it keeps the overrides of the others only), submits them
in chunks (one task runs about ``hydra.launcher.chunk_seconds`` of jobs one after the other,
sized from the durations of the jobs finished so far; the last chunks
shrink), enters each job's outcome in the sweep's ledger as its chunk
finishes and returns
Hydra ``JobReturn`` objects that always carry a status: a failed job never
stops the sweep. A job whose worker died is started again ``retries`` times,
then entered as failed. An ensemble's members not finished when its worker died, or when it ran longer than
``timeout``, run again as ordinary jobs. The client and cluster come from :mod:`._cluster`, the
returns and failed outcomes from :mod:`._returns`, the progress display from
:mod:`._progress`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
import uuid
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals

from cosimrun.errors import ConfigError, suggest
from cosimrun.exits import EXIT_FAILED, fail
from cosimrun.runner import ensembles, signals, worker
from cosimrun.runner.compose import JobComposer, JobSpec
from cosimrun.runner.ledger import SweepLedger, ledger_for
from cosimrun.runner.lock import claim, release_all
from cosimrun.runner.outcome import (
    SUMMARY_PREFIX,
    JobOutcome,
    objective_value,
    outcome_from_file,
)
from cosimrun.runner.resume import (
    Location,
    PreviousIndex,
    Reuse,
    config_key,
    fingerprint,
    results_location,
    take_over,
)
from cosimrun.storage.summary import results_attrs
from cosimrun.storage.verify import verify_results
from hydra_plugins.cosimrun_dask_launcher._cluster import Unreachable, close, connect
from hydra_plugins.cosimrun_dask_launcher._progress import Progress
from hydra_plugins.cosimrun_dask_launcher._returns import SweepJobReturn, failed_outcome, timed_out, worker_died

if TYPE_CHECKING:
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher

log = logging.getLogger(__name__)

_LOOKAHEAD = 4
"""Jobs composed while the cluster starts."""
IN_FLIGHT_PER_THREAD = 4
"""Chunks submitted and not finished, per worker thread of the cluster (their configs are all the driver holds)."""
MIN_IN_FLIGHT = 16
MAX_CHUNK = 1000
"""Most jobs in one dask task."""
TICK_S = 1.0
"""While jobs run, the driver wakes at least this often: index rewrite when due, timeouts."""
RECOVERED = "recovered: its worker died after the job finished; outcome read from its verified results file"


def launch(launcher: DaskLauncher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    """Run *job_overrides* (jobs ``initial_job_idx``, ...) on dask; ``JobReturn`` s in the same order."""
    setup_globals()
    assert launcher.config is not None and launcher.hydra_context is not None
    assert launcher.task_function is not None
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
    claim(sweep_dir)  # held already when cosimrun's sweeper started the sweep
    sweep_dir.mkdir(parents=True, exist_ok=True)
    ledger = ledger_for(sweep_dir)
    ledger.experiment = str(config.get("name", "") or "")
    log.info(f"Launching {len(job_overrides)} jobs on dask, sweep directory {sweep_dir}")
    composer = launcher.composer or JobComposer(launcher.hydra_context, config)
    jobs = [(pos, initial_job_idx + pos, list(overrides)) for pos, overrides in enumerate(job_overrides)]
    for _, num, overrides in jobs:  # the driver keeps each job's overrides; configs only of the jobs in flight
        ledger.add_pending(num, overrides)
    batch = _Batch(launcher, ledger, len(jobs), composer)
    previous = _previous_index(ledger) if launcher.resume else None
    start = time.perf_counter()
    try:
        plan = ensembles.plan(jobs, composer, launcher.ensemble_size, launcher.n_workers or os.cpu_count() or 1,
                              sweep_dir)
        batch.plan = plan
        for line in plan.notices():
            if line not in launcher.said:  # once per sweep, not once per batch of an optimizing sweeper
                launcher.said.add(line)
                log.info(f"dask: {line}")
        finished = ensembles.Finished(sweep_dir) if launcher.resume and plan.ensembles else None
        for pos, num, overrides in jobs:
            batch.make_room()
            spec = composer.compose(overrides, num, on_worker=True)
            spec.payload().sweep_files = True  # the sweep's .hydra files are at its root: the job writes its overrides
            if pos == 0:
                if launcher.objective:
                    check_objective(launcher.objective, spec)
                worker.write_sweep_files(sweep_dir, spec.payload(), [str(o) for o in config.hydra.overrides.task])
            ensemble = plan.of.get(pos)
            member = None
            if finished is not None and ensemble is not None:
                member = finished.outcome(num, overrides, ensemble.group, ensemble.group.values[pos])
            reuse, taken = take_over(spec, previous) if launcher.resume and member is None else (Reuse(False), None)
            if member is not None:
                batch.done(pos, spec, member)
            elif taken is not None:
                batch.done(pos, spec, taken)
            if ensemble is not None:
                batch.arrived(ensemble, None if member is not None or reuse.ok else (pos, spec, 1), reuse.note)
            elif not reuse.ok:
                batch.submit(pos, spec, note=reuse.note)
            batch.composed = pos + 1
            batch.drain(block=False)  # enter what finished while composing
        if launcher.resume:
            log.debug(f"dask: resume took over {batch.reused} of {len(jobs)} jobs; the launch loop took "
                      f"{time.perf_counter() - start:.3f} s")
        batch.bar.start()
        ledger.flush()
        batch.drain(block=True)
        log.info(f"dask: the jobs ran in {batch.tasks} task{'' if batch.tasks == 1 else 's'}")
    except (Unreachable, ObjectiveError) as exc:  # nothing ran: no sweep directory, one line
        from cosimrun.config.reporting import remove_unused_dir  # not at import: it loads the engine

        ledger.forget()
        release_all()
        remove_unused_dir(sweep_dir, ("multirun.yaml", ".hydra"))
        fail(str(exc))
    except NoWorkers as exc:  # the jobs not run cannot run: they fail, the sweep ends in one line
        with signals.shielded(deliver=False):
            batch.cancel()
            batch.settle(failed=str(exc))
            batch.fail_not_composed(jobs, failed=str(exc))
        fail(f"{exc}; the jobs not finished are failed (hydra.launcher.resume=true runs them again)", EXIT_FAILED)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as a KeyboardInterrupt that names it
        with signals.shielded(deliver=False):
            batch.cancel()
            batch.settle()
            ledger.interrupt_pending(signals.message(exc))
        raise
    finally:
        batch.bar.close()
        ledger.flush()  # nothing once forgotten
    return batch.returns()


OBJECTIVE_FIELDS = ("wall_time_s", "job_time_s", "coupling_error_max")
"""Index columns besides ``final.<comp>.<port>`` that :func:`objective_value` reads as numbers."""


class ObjectiveError(ConfigError):
    """``hydra.launcher.objective`` names no number of the sweep index."""


def check_objective(objective: str, spec: JobSpec) -> None:
    """Raise :class:`ObjectiveError` unless *objective* is a column of the index the job *spec* will have: a
    recorded port's ``final.<comp>.<port>`` or one of :data:`OBJECTIVE_FIELDS`. A job that cannot be built is not
    judged here: it fails as a job."""
    from omegaconf import OmegaConf

    from cosimrun.runner.configtext import resolved
    from cosimrun.runner.run import prepare
    from cosimrun.runner.worker import hydra_config

    config = spec.full_config()
    try:
        with hydra_config(config):  # as the job resolves it
            plain, _ = resolved(OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"]))
        experiment = prepare(plain)
    except Exception:  # the job will say what is wrong with it
        return
    try:
        columns = [f"{SUMMARY_PREFIX}{c}.{p}" for c, ports in experiment.recorded.items() for p in ports]
    finally:
        experiment.system.free()
    columns += OBJECTIVE_FIELDS
    if objective not in columns:
        raise ObjectiveError("hydra.launcher.objective", f"{objective!r} is no number of the sweep index"
                             f"{suggest(objective, columns)} (the index's numbers: {', '.join(columns)})")


class NoWorkers(RuntimeError):
    """The cluster has had no worker for ``hydra.launcher.no_worker_timeout`` seconds while jobs waited."""


_previous: weakref.WeakKeyDictionary[SweepLedger, PreviousIndex] = weakref.WeakKeyDictionary()


def _previous_index(ledger: SweepLedger) -> PreviousIndex:
    """The sweep's index as the resume found it, read once per sweep: before its first launch writes the index
    anew (an optimizing sweeper launches batches into one ledger)."""
    if ledger not in _previous:
        _previous[ledger] = PreviousIndex(ledger.index_path)
    return _previous[ledger]


def _status(path: str | Path) -> str:
    """The ``status`` a results file records ("" when there is none or it cannot be read)."""
    try:
        return str(results_attrs(path, ("status",)).get("status", ""))
    except OSError:
        return ""


class _Batch:
    """The jobs of one ``launch``: submission, retries after lost workers, timeouts, results in order."""

    def __init__(self, launcher: DaskLauncher, ledger: SweepLedger, n: int, composer: JobComposer) -> None:
        self.launcher = launcher
        self.ledger = ledger
        self.composer = composer
        self.composed = 0
        """Jobs composed so far (the others are only overrides in the ledger)."""
        self.window = MIN_IN_FLIGHT
        """Most jobs in flight: see :data:`IN_FLIGHT_PER_THREAD`."""
        self.bar = Progress(n, enabled=launcher.progress)
        self._returns: list[JobReturn | None] = [None] * n
        self.pending: dict[Any, list[tuple[int, JobSpec, int]]] = {}
        """Futures of the chunks submitted -> their jobs ``(position, spec, attempt)``, run in that order."""
        self.n = n
        self.all_composed = False
        self.tasks = 0
        """Dask tasks submitted (chunks of jobs)."""
        self.reused = 0
        """Jobs a resume took over."""
        self._timed = 0
        self._time_sum = 0.0
        self._threads = 0
        self.client: Any = None
        self.futures: Any = None
        self.state = b""
        self.token = ""
        self.notes: dict[int, str] = {}
        """Job number -> note for its outcome (why a resume runs it again)."""
        self._queue: list[tuple[int, JobSpec, int]] = []
        self._connecting: Future[Any] | None = None
        self._requeued = 0
        self._started_at: dict[Any, tuple[int, float]] = {}
        """Running chunks -> ``(index of the job running in it, when the driver first saw that job started)``."""
        self._next_tick = 0.0
        self._workerless_since: float | None = None
        self.plan = ensembles.Plan()
        self._ensembles: list[tuple[ensembles.Ensemble, list[tuple[int, JobSpec, int]]]] = []
        """Ensembles whose members are all composed, not submitted yet."""
        self._collecting: dict[int, tuple[int, list[tuple[int, JobSpec, int]]]] = {}
        """``id`` of an ensemble -> (its members composed so far, those of them to run)."""
        self._ensemble_of: dict[Any, ensembles.Ensemble] = {}
        """Futures of the ensembles' tasks submitted -> their ensemble."""

    def arrived(self, ensemble: ensembles.Ensemble, job: tuple[int, JobSpec, int] | None, note: str = "") -> None:
        """Member *job* of *ensemble* is composed (None: taken over by a resume); the ensemble is queued once all
        its members are (one left to run runs as an ordinary job)."""
        count, members = self._collecting.get(id(ensemble), (0, []))
        if job is not None:
            members.append(job)
            if note:
                self.notes[job[1].num] = note
        count += 1
        if count < len(ensemble.positions):
            self._collecting[id(ensemble)] = (count, members)
            return
        self._collecting.pop(id(ensemble), None)
        if len(members) == 1:
            self._queue.append(members[0])
        elif members:
            self._ensembles.append((ensemble, members))
        self._connect()
        self.submit_queued(block=False)

    def _connect(self) -> None:
        """Connect (or start the local cluster) in the background while the driver composes jobs."""
        if self._connecting is None:
            pool = ThreadPoolExecutor(1, thread_name_prefix="cosimrun-dask-connect")
            self._connecting = pool.submit(connect, self.launcher)
            pool.shutdown(wait=False)

    def submit(self, pos: int, spec: JobSpec, attempt: int = 1, note: str = "") -> None:
        """Submit a job, or queue it while the cluster is still starting (it starts with the first job)."""
        if attempt == 1:
            log.debug(f"\t#{spec.num} : {' '.join(filter_overrides(spec.overrides))}")
        if note:
            self.notes[spec.num] = note
        self._queue.append((pos, spec, attempt))
        self._connect()
        self.submit_queued(block=False)

    def submit_queued(self, block: bool) -> None:
        if self.client is None:
            if self._connecting is None or not (block or self._connecting.done()):
                return
            from distributed import as_completed

            self.client = self._connecting.result()
            self._size_window()
            assert self.launcher.hydra_context is not None
            self.state = worker.worker_state(self.launcher.hydra_context.callbacks)
            self.token = uuid.uuid4().hex
            self.futures = as_completed()
            self.bar.start()
        while self._ensembles:
            ensemble, members = self._ensembles.pop(0)
            future = self.client.submit(
                ensembles.run_ensemble_task,
                [spec.payload() for _, spec, _ in members],
                ensemble.group.keys,
                [ensemble.group.values[pos] for pos, _, _ in members],
                str(ensemble.path),
                ensemble.group.config_key,
                self.launcher.task_function,
                self.state,
                self.token,
                [attempt for _, _, attempt in members],
                pure=False,
            )
            self._ensemble_of[future] = ensemble
            self._submitted(future, members)
        while self._queue:
            if not self._timed and len(self.pending) >= max(self._threads, 1):
                return  # one job per worker thread until the first finishes and tells how long jobs take
            size = self.chunk_size()
            if len(self._queue) < size and not self.all_composed and len(self.pending) >= self._threads:
                return  # a chunk fills while every worker thread has one
            chunk = self._queue[:size]  # left in the queue until followed: an interrupt between finds it (settle)
            future = self.client.submit(
                worker.run_hydra_chunk,
                [spec.payload() for _, spec, _ in chunk],
                self.launcher.task_function,
                self.state,
                self.token,
                [attempt for _, _, attempt in chunk],
                pure=False,
            )
            self._submitted(future, chunk)
            self._queue = self._queue[size:]

    def _submitted(self, future: Any, jobs: list[tuple[int, JobSpec, int]]) -> None:
        """Follow *future*, the task running *jobs* (a chunk, or an ensemble's members)."""
        self.pending[future] = jobs
        self.futures.add(future)
        self.tasks += 1

    def chunk_size(self) -> int:
        """Jobs per task: about ``chunk_seconds`` of work by the finished jobs' mean duration (1 before one
        finished), at most a share of the jobs left per worker thread, so the last chunks shrink."""
        size = self._target_size()
        left = len(self._queue) + self.n - self.composed
        return max(1, min(size, math.ceil(left / (2 * max(self._threads, 1)))))

    def _target_size(self) -> int:
        if not self._timed:
            return 1
        mean = self._time_sum / self._timed
        return max(1, min(MAX_CHUNK, math.floor(self.launcher.chunk_seconds / mean) if mean > 0 else MAX_CHUNK))

    @property
    def in_flight(self) -> int:
        """Jobs queued or submitted and not finished."""
        return (len(self._queue) + sum(len(chunk) for chunk in self.pending.values())
                + sum(len(members) for _, members in self._ensembles))

    def _size_window(self) -> None:
        """Size the window of jobs in flight (and the progress bar's ETA) from the cluster's worker threads."""
        with contextlib.suppress(Exception):  # the ETA then infers how many jobs run at once
            threads = sum(self.client.nthreads().values())
            self.bar.workers = threads or None
            self._threads = threads
        self.window = max(MIN_IN_FLIGHT, IN_FLIGHT_PER_THREAD * max(self._threads, 1) * self._target_size())
        if self.plan.ensembles:  # room for an ensemble per worker thread running and one more being composed
            largest = max(len(e.positions) for e in self.plan.ensembles)
            self.window = max(self.window, 2 * (max(self._threads, 1) + 1) * largest)

    def make_room(self) -> None:
        """Before a job is composed: wait until fewer than :attr:`window` jobs are in flight, entering those that
        finish (a sweep of many jobs holds the configs of a few only)."""
        if self.client is None:
            if not (self.connecting and self.queued >= _LOOKAHEAD):
                return
            # a few jobs ready, then let the cluster finish starting: composing holds the GIL the
            # driver's dask event loop needs for that (the rest is composed while jobs run)
            self.submit_queued(block=True)
        while self.in_flight >= self.window:
            ready = self.futures.next_batch(block=False)
            for future in ready:
                self._finished(future)
            self._tick()
            self.submit_queued(block=False)
            if not ready and self.in_flight >= self.window:
                self._wait(TICK_S)

    def fail_not_composed(self, jobs: Sequence[tuple[int, int, list[str]]], failed: str) -> None:
        """Enter the jobs of *jobs* not composed yet as failed, *failed* saying why they were not run."""
        for _, num, overrides in jobs[self.composed :]:
            self.ledger.enter(JobOutcome(num, "failed", overrides, error=f"not run: {failed}", attempts=1))

    @property
    def connecting(self) -> bool:
        return self.client is None and self._connecting is not None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def drain(self, block: bool) -> None:
        """Handle finished futures: all of them until none is left (*block*), or those ready now.

        While it waits it wakes every :data:`TICK_S` seconds (:meth:`_tick`).
        """
        self.all_composed = self.all_composed or block
        self.submit_queued(block)
        if self.futures is None:
            return
        while self.pending or self._queue or self._ensembles:
            ready = self.futures.next_batch(block=False)
            for future in ready:
                self._finished(future)
            self._tick()
            self.submit_queued(block=False)
            if not block:
                return
            if not ready:
                self._wait(TICK_S)

    def _wait(self, seconds: float) -> None:
        """Until a future is ready, at most *seconds*."""
        deadline = time.monotonic() + seconds
        with self.futures.thread_condition:
            while not self.futures.has_ready() and (left := deadline - time.monotonic()) > 0:
                self.futures.thread_condition.wait(min(left, 0.1))

    def _tick(self) -> None:
        """At most every :data:`TICK_S`: rewrite the index if it is due, stop jobs past their timeout."""
        now = time.monotonic()
        if now < self._next_tick:
            return
        self._next_tick = now + TICK_S
        if self.launcher.timeout is not None and self.pending:
            self._check_timeouts(now)
        if self.pending:
            self._check_workers(now)
            self._size_window()
        self.ledger.flush_due()

    def _check_workers(self, now: float) -> None:
        """Raise :class:`NoWorkers` once the cluster had no worker for ``no_worker_timeout`` seconds."""
        try:
            workers = len(self.client.nthreads())
        except Exception:  # the scheduler is gone: the futures say so
            return
        if workers:
            self._workerless_since = None
        elif self._workerless_since is None:
            self._workerless_since = now
        elif now - self._workerless_since >= self.launcher.no_worker_timeout:
            where = self.launcher.address or "the sweep's dask cluster"
            raise NoWorkers(f"{where} has had no worker for {self.launcher.no_worker_timeout:g} s "
                            "(hydra.launcher.no_worker_timeout)")

    def _check_timeouts(self, now: float) -> None:
        """Note when the jobs of running chunks start (their start marks, on a worker) and when an ensemble's task
        starts running on a worker; stop a job or an ensemble running too long."""
        running = {key: addr for addr, keys in self.client.processing().items() for key in keys}
        for future, chunk in list(self.pending.items()):
            addr = running.get(future.key)
            if addr is None or future.done():  # waiting, or finished since: handled as it comes
                continue
            index, since = self._started_at.get(future, (-1, now))
            if future in self._ensemble_of:  # its members write no start marks: timed from the task's start, or
                # from the start of the member it runs when they run one after the other
                ensemble = self._ensemble_of[future]
                member = ensembles.running_member(ensemble.path) if ensemble.group.serial else 0
                if future not in self._started_at or member != index:
                    self._started_at[future] = (member, now)
                elif now - since > self.launcher.timeout:
                    self._time_out_ensemble(future, addr)
                continue
            latest = index
            while latest + 1 < len(chunk) and worker.started(chunk[latest + 1][1].job_dir, self.token,
                                                             chunk[latest + 1][2]):
                latest += 1
            if latest != index:
                self._started_at[future] = (latest, now)
            elif index >= 0 and now - since > self.launcher.timeout:
                self._time_out(future, addr, index)

    def _time_out(self, future: Any, addr: str, index: int) -> None:
        """Enter the job *index* of a chunk that ran too long as failed, and restart its worker so that it stops;
        the chunk's other jobs are taken from their results files or run again (:meth:`_lost`)."""
        chunk = self.pending.pop(future)
        self._started_at.pop(future, None)
        self.client.cancel([future])
        how = self._restart_worker(addr)
        pos, spec, attempt = chunk[index]
        self.done(pos, spec, timed_out(spec, attempt, self.launcher.timeout, addr, how))
        self._lost(chunk[:index] + chunk[index + 1 :], None, count_attempt=False)

    def _time_out_ensemble(self, future: Any, addr: str) -> None:
        """Stop an ensemble's task that ran longer than ``timeout``, or one of its members that did when they run
        one after the other (its worker restarted, as for a job): its members not finished run again as ordinary
        jobs, each under the timeout of a job."""
        members = self.pending.pop(future)
        index, _ = self._started_at.pop(future, (0, 0.0))
        self.client.cancel([future])
        how = self._restart_worker(addr)
        what = (f"member {index} (job {members[index][1].num})" if self._ensemble_of[future].group.serial
                and 0 <= index < len(members) else "")
        self._ensemble_stopped(future, members, None, f"ran {what + ' ' if what else ''}longer than "
                               f"hydra.launcher.timeout={self.launcher.timeout:g} s", f" (its worker {addr} was {how})",
                               count_attempt=False)

    def _ensemble_stopped(self, future: Any, members: list[tuple[int, JobSpec, int]], exc: Any, cause: str,
                          detail: str = "", count_attempt: bool = True) -> None:
        """The members of an ensemble whose task ended without returning (*cause*, in each member's note; *detail*
        in the log only): those its file holds as complete are entered from it, as are those that had finished on
        their own in the task; the others run as ordinary jobs (:meth:`_lost`); said once."""
        ensemble = self._ensemble_of.pop(future)
        ensembles.drop_member_mark(ensemble.path)  # left by a task that did not end
        complete = ensembles.complete_members(ensemble.path, [(spec.num, spec.overrides, attempt)
                                                              for _, spec, attempt in members])
        rest = []
        for pos, spec, attempt in members:
            outcome = complete.get(spec.num) or worker.finished_outcome(spec.job_dir, self.token, attempt)
            if outcome is not None:
                self.done(pos, spec, outcome)
            else:
                rest.append((pos, spec, attempt))
                if not worker.started(spec.job_dir, self.token, attempt):  # not run on its own in the task yet
                    self.notes.setdefault(spec.num, ensembles.RAN_ALONE.format(cause=f"its ensemble {cause}"))
        if rest:
            nums = [spec.num for _, spec, _ in members]
            self.bar.note(f"dask: the ensemble of jobs {nums[0]}-{nums[-1]} {cause}{detail}; {len(rest)} of its "
                          f"{len(members)} members run again as ordinary jobs")
        self._lost(rest, exc, count_attempt=count_attempt)

    def _restart_worker(self, addr: str) -> str:
        """Restart the worker *addr* through its nanny (else end its process); what was done, in words."""
        try:
            self.client.restart_workers([addr], timeout=30)
            return "restarted"
        except Exception as exc:  # no nanny, or it did not come back in time
            log.warning(f"could not restart dask worker {addr} ({type(exc).__name__}: {exc}); ending it")
        with contextlib.suppress(Exception):  # gone already
            self.client.run(os._exit, 1, workers=[addr], wait=False)
        return "ended"

    def _finished(self, future: Any) -> None:
        if future not in self.pending:  # a chunk entered already (timed out), whose task was cancelled
            return
        chunk = self.pending[future]  # followed until its jobs are entered: an interrupt before finds them (settle)
        status = future.status
        if status == "finished":
            try:
                outcomes = list(future.result())
            except Exception as exc:  # the result did not come back (e.g. it could not be unpickled)
                outcomes = [failed_outcome(spec, attempt, exc) for _, spec, attempt in chunk]
        elif status == "cancelled":
            outcomes = [JobOutcome(spec.num, "failed", spec.overrides, error="the dask task was cancelled",
                                   attempts=attempt) for _, spec, attempt in chunk]
        else:
            # "lost": the worker holding its result died (exception() would wait for dask to recompute it)
            exc = future.exception() if status == "error" else None
            if status == "lost" or worker_died(exc):
                self._unfollow(future)
                future.release()
                if future in self._ensemble_of:
                    self._ensemble_stopped(future, chunk, exc, "lost its worker, which died")
                else:
                    self._lost(chunk, exc)
                return
            tb = future.traceback() if status == "error" else None
            outcomes = [failed_outcome(spec, attempt, exc, tb) for _, spec, attempt in chunk]
        for (pos, spec, _), outcome in zip(chunk, outcomes, strict=True):
            self.done(pos, spec, outcome)
        self._unfollow(future)
        future.release()
        self._ensemble_of.pop(future, None)

    def _unfollow(self, future: Any) -> None:
        """Stop following *future* (its jobs entered or sent again)."""
        self.pending.pop(future, None)
        self._started_at.pop(future, None)

    def _lost(self, chunk: list[tuple[int, JobSpec, int]], exc: Any, count_attempt: bool = True) -> None:
        """The jobs of a chunk whose worker died (or was restarted): each is submitted again if it had not
        started, taken from its results file if it had finished, else (*count_attempt*) retried or failed."""
        requeued = False
        for pos, spec, attempt in chunk:
            if not worker.started(spec.job_dir, self.token, attempt) and self._requeued < 100:
                # it was only waiting on the worker that died: not an attempt
                self._queue.append((pos, spec, attempt))
                requeued = True
                continue
            finished = worker.finished_outcome(spec.job_dir, self.token, attempt)
            if finished is not None:  # it had finished before the chunk's worker died
                self.done(pos, spec, finished)
                continue
            recovered = self._recovered(spec, attempt, exc)
            if recovered is not None:
                self.done(pos, spec, recovered)
            elif not count_attempt:
                self._queue.append((pos, spec, attempt))
                requeued = True
            elif attempt <= self.launcher.retries:
                self.bar.note(
                    f"#{spec.num}: the worker running it died; starting it again "
                    f"(attempt {attempt + 1} of {self.launcher.retries + 1})"
                )
                self._queue.append((pos, spec, attempt + 1))
            else:
                self.done(pos, spec, failed_outcome(spec, attempt, exc))
        self._requeued += requeued
        self.submit_queued(block=False)

    def _recovered(self, spec: JobSpec, attempt: int, exc: Any, note: str = RECOVERED,
                   location: Location | None = None) -> JobOutcome | None:
        """The outcome of a job whose worker died (or whose sweep was interrupted) after it finished: its results
        file, written by this attempt, verifies as complete (None otherwise). *location* is
        :func:`results_location` of *spec* when the caller has it."""
        location = location or results_location(spec)
        path = location.results
        if not worker.written_since_start(spec.job_dir, location.written) or verify_results(path):
            return None
        outcome = outcome_from_file(spec.num, spec.overrides, path)
        outcome.reused, outcome.attempts, outcome.note = False, attempt, note
        outcome.worker = str(getattr(getattr(exc, "last_worker", None), "address", ""))
        return outcome

    def done(self, pos: int, spec: JobSpec, outcome: JobOutcome) -> None:
        if not outcome.reused and outcome.member < 0 and math.isfinite(outcome.job_time_s):
            self._timed += 1
            self._time_sum += outcome.job_time_s
        if self.launcher.objective:
            outcome.objective = objective_value(outcome, self.launcher.objective)
        if spec.num in self.notes and not outcome.note:
            outcome.note = self.notes.pop(spec.num)
        if outcome.ok and outcome.member < 0 and outcome.path and not outcome.fingerprint:
            outcome.fingerprint = fingerprint(outcome.path, config_key(spec.payload()), outcome.inputs)
        self.reused += outcome.reused
        self.ledger.enter(outcome)  # first: the outcome then shares the ledger's list of the job's overrides
        self._returns[pos] = SweepJobReturn.of(spec, outcome, self.composer)
        self.bar.finished(outcome)

    def cancel(self) -> None:
        """Cancel the jobs not finished (they stay pending in the ledger until :meth:`settle`)."""
        if self.client is not None and self.pending:
            self.client.cancel(list(self.pending))

    def settle(self, failed: str = "") -> None:
        """After :meth:`cancel`: close the cluster this sweep started (its workers close their jobs' files), then
        enter the jobs whose results file this launch completed as complete, whatever the driver had heard; with
        *failed*, the others as failed with that error (else they stay pending)."""
        if self.launcher.cluster is not None:
            close(weakref.ref(self.launcher))
        for ensemble in self._ensemble_of.values():  # the running member's mark of a task cut short
            ensembles.drop_member_mark(ensemble.path)
        waiting = [*(job for _, members in self._ensembles for job in members),
                   *(job for _, members in self._collecting.values() for job in members)]
        for pos, spec, attempt in [*(job for chunk in self.pending.values() for job in chunk), *self._queue, *waiting]:
            if self._returns[pos] is not None:  # entered before the interrupt (or a job both queued and sent)
                continue
            outcome = None
            if worker.started(spec.job_dir, self.token, attempt):
                location = results_location(spec)
                if _status(location.results) == "complete":
                    outcome = self._recovered(spec, attempt, None, note="", location=location)
            if outcome is None and failed:
                outcome = JobOutcome(spec.num, "failed", spec.overrides, error=f"not run: {failed}", attempts=attempt)
            if outcome is not None:
                self.done(pos, spec, outcome)
        self.pending.clear()
        self._queue.clear()
        self._ensembles.clear()
        self._collecting.clear()

    def returns(self) -> list[JobReturn]:
        assert all(r is not None for r in self._returns)
        return list(self._returns)  # type: ignore[arg-type]
