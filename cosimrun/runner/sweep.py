"""The body of one sweep job (:func:`sweep_job`): run the experiment, never raise for a failed run.

A sweep (``cosimrun -m ...``) runs one experiment per job; Hydra's sweeper
expands the overrides and a launcher runs the jobs (the dask launcher in
``hydra_plugins.cosimrun_dask_launcher`` by default, ``hydra/launcher=basic``
runs them one after the other in the driver process). Each job writes its own
results file in its job directory (``<sweep dir>/<job number>/results.h5``, from
job 1000 on in shards of 1000 jobs: :mod:`cosimrun.runner.layout`).

Before anything is written into the sweep directory the sweep claims its
lock (:mod:`cosimrun.runner.lock`; cosimrun's sweeper does, for either
launcher), so that a second sweep into it is refused; the lock is released
when the command ends.

The dask launcher composes the jobs on the driver as it submits them, or
leaves jobs that differ only in values for their worker to make
(:mod:`cosimrun.runner.compose`), skips on a resume those whose results file
verifies as complete and made from the same config (:mod:`cosimrun.runner.resume`),
and runs the others on workers in chunks with
:func:`cosimrun.runner.worker.run_hydra_chunk`. The driver enters the outcomes
in its ledger (:mod:`cosimrun.runner.ledger`), which keeps the sweep index
(:mod:`cosimrun.runner.index`) that :mod:`cosimrun.runner.load` reads; it adds
the new rows to the index while jobs run, stops
jobs past ``hydra.launcher.timeout``, and takes a job whose worker died after
it finished from its verified results file.

Nothing here imports dask: the launcher owns that. Hydra is imported where it
is used.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cosimrun.masters.coupling_error import largest_relative
from cosimrun.runner import signals
from cosimrun.runner.configtext import resolved, task_overrides
from cosimrun.runner.joblog import log_outcome, warnings_logged
from cosimrun.runner.ledger import ledger_for
from cosimrun.runner.lock import claim
from cosimrun.runner.outcome import JobOutcome, describe_exception
from cosimrun.storage.summary import largest_coupling_error, results_attrs

if TYPE_CHECKING:
    from omegaconf import DictConfig


_managed = threading.local()
_driver_pid: int | None = None


def mark_driver() -> None:
    """Declare this process the sweep driver: jobs run in it (``hydra/launcher=basic``) enter their own outcomes."""
    global _driver_pid
    _driver_pid = os.getpid()


@contextlib.contextmanager
def managed_job() -> Iterator[None]:
    """Jobs run inside this block are entered in the ledger by their launcher, not by themselves."""
    previous = getattr(_managed, "active", False)
    _managed.active = True
    try:
        yield
    finally:
        _managed.active = previous


def sweep_job(cfg: DictConfig) -> JobOutcome:
    """Hydra task body of one sweep job: run the experiment, never raise for a failed run.

    The run writes ``<job dir>/<storage.file>``; configuration errors and
    failures during the run come back as a ``failed`` outcome with the error
    and traceback, so that one job does not stop the others. Ctrl-C stops the
    sweep: the job is ``interrupted`` with ``str(exc)`` (``terminated by
    SIGTERM``) or ``interrupted by the user`` as its error, and the exception
    is raised again once the outcome is entered. Run in the driver
    (``hydra/launcher=basic``), the job claims the sweep directory's lock
    (:mod:`cosimrun.runner.lock`) if the sweeper has not, and enters its own
    outcome in the ledger.
    """
    return run_sweep_job(lambda: resolved(cfg))


@dataclass(frozen=True)
class JobPlace:
    """What :func:`sweep_job` reads of the running job's ``hydra`` node (``HydraConfig.get()``)."""

    out_dir: Path
    """``hydra.runtime.output_dir``."""
    overrides: list[str]
    """``hydra.overrides.task`` (:func:`~cosimrun.runner.configtext.task_overrides`)."""
    num: int
    """``hydra.job.num``."""
    sweep_dir: Path
    """``hydra.sweep.dir``, absolute."""

    @classmethod
    def running(cls) -> JobPlace:
        """The place of the Hydra job running."""
        from hydra.core.hydra_config import HydraConfig

        hydra_cfg = HydraConfig.get()
        return cls(Path(hydra_cfg.runtime.output_dir), task_overrides(hydra_cfg), int(hydra_cfg.job.num),
                   Path(str(hydra_cfg.sweep.dir)).absolute())


def run_sweep_job(resolve: Callable[[], tuple[dict[str, Any], str]], place: JobPlace | None = None) -> JobOutcome:
    """:func:`sweep_job` of the job whose config *resolve* gives resolved (``(plain, text)`` as
    :func:`~cosimrun.runner.configtext.resolved`; called where the job resolves its config, its errors the job's)
    at *place* (by default read from the running job's ``hydra`` node): what a worker runs when it resolves a
    job's config without making its task config (:mod:`cosimrun.runner.plainjob`)."""
    from cosimrun.runner.run import prepare, run_experiment

    start = time.perf_counter()
    if place is None:
        place = JobPlace.running()
    out_dir, num, sweep_dir = place.out_dir, place.num, place.sweep_dir
    overrides = list(place.overrides)
    outcome = JobOutcome(num=num, status="failed", overrides=overrides)
    in_driver = not getattr(_managed, "active", False) and _driver_pid == os.getpid()
    if in_driver:
        claim(sweep_dir)  # already held when the sweep started with cosimrun's sweeper
    stop: KeyboardInterrupt | None = None
    try:
        plain, config_yaml = resolve()
        experiment = prepare(plain)
        if experiment.action == "describe":
            print(f"#{num} {' '.join(overrides)}\n{experiment.system.describe()}")
            outcome.status = "complete"
        else:
            with warnings_logged():
                run = run_experiment(
                    plain,
                    out_dir,
                    config_yaml=config_yaml,
                    overrides=overrides,
                    experiment=experiment,
                )
            log_outcome(run)
            outcome = replace(
                outcome,
                status=run.status,
                path=str(run.path),
                error=run.error or "",
                wall_time_s=run.wall_time_s,
                summaries=run.final_values,
                inputs=run.inputs,
                coupling_error_max=(largest_coupling_error(run.path) if run.result is None
                                    else largest_relative(run.result.coupling_errors)),
            )
            if run.status != "complete":
                outcome.traceback = _stored_traceback(run.path)
            if run.status == "interrupted":  # the run recorded the interrupt (signals.message) and returned
                stop = KeyboardInterrupt(outcome.error)
            elif signals.received() is not None:  # a signal after the run's file was closed: it stays as it is
                stop = signals.interruption(signals.received())
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as a KeyboardInterrupt that names it
        if not signals.from_signal(exc):  # raised by the job's code (a component building): the job fails
            outcome.error, outcome.traceback = describe_exception(exc)
        else:
            outcome.status, outcome.error = "interrupted", signals.message(exc)
            stop = exc
    except Exception as exc:  # a config error or a bug: this job fails, the sweep goes on
        if signals.received() is not None:  # unless the interrupt caused it (a library cleaning up after it)
            outcome.status, outcome.error = "interrupted", signals.message()
            stop = signals.interruption(signals.received())
        else:
            outcome.error, outcome.traceback = describe_exception(exc)
    outcome.job_time_s = time.perf_counter() - start
    if in_driver:
        ledger = ledger_for(sweep_dir)
        ledger.enter(outcome)
        if stop is not None:
            ledger.interrupt_pending(outcome.error)
        elif outcome.failed:
            print(f"cosimrun: job #{num} {outcome.status}: {outcome.error}", file=sys.stderr)
    if stop is not None:
        raise stop
    return outcome


def _stored_traceback(path: str | os.PathLike[str]) -> str:
    try:
        return str(results_attrs(path, ("traceback",)).get("traceback", ""))
    except OSError:
        return ""
