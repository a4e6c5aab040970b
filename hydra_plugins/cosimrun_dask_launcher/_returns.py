"""What a finished job becomes on the driver: a failed outcome for a task that raised or was lost, a ``JobReturn``.

Imported when a sweep is launched (dask only inside the functions that need it).
"""

from __future__ import annotations

import sys
import traceback as _traceback
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus

from cosimrun.runner.compose import JobComposer, JobSpec
from cosimrun.runner.outcome import JobOutcome
from cosimrun.runner.worker import JobPayload


class SweepJobReturn(JobReturn):
    """The ``JobReturn`` of a job run on dask: status ``COMPLETED``, the :class:`JobOutcome` as return value.

    Failed jobs are completed Hydra jobs too, so that the sweeper does not stop
    the sweep at the first failure; the sweep's exit status comes from
    :func:`cosimrun.runner.ledger.finish`. ``cfg`` and ``hydra_cfg`` are
    made when first read: composed again by the sweep's *composer* (a sweep
    holds the overrides of each finished job, not its config), or without one
    unpickled from the job's payload.
    """

    @classmethod
    def of(cls, spec: JobSpec, outcome: JobOutcome, composer: JobComposer | None = None) -> SweepJobReturn:
        """The return of job *spec* whose outcome is *outcome* (whose list of overrides it shares)."""
        ret = cls(
            overrides=outcome.overrides,
            working_dir=str(spec.job_dir) if spec.chdir else sys.intern(str(Path.cwd())),
            task_name=spec.task_name,
            status=JobStatus.COMPLETED,
        )
        ret.return_value = outcome
        if composer is None:
            ret._payload = spec.payload()
        else:
            ret._composer, ret._num = composer, spec.num
        return ret

    _payload: JobPayload | None = None
    _composer: JobComposer | None = None
    _num = 0
    _configs: list[Any] | None = None

    def _config(self, which: int) -> Any:
        if self._configs is None and self._composer is not None:
            self._payload = self._composer.compose(self.overrides, self._num).payload()
        if self._configs is None and self._payload is not None:
            self._configs = list(self._payload.configs())
            self._payload = None
        return None if self._configs is None else self._configs[which]

    def _set_config(self, which: int, value: Any) -> None:
        if value is not None:  # JobReturn's __init__ sets None
            self._config(which)
            self._configs = self._configs or [None, None]
            self._configs[which] = value

    cfg = property(lambda self: self._config(0), lambda self, v: self._set_config(0, v))  # type: ignore[assignment]
    hydra_cfg = property(lambda self: self._config(1), lambda self, v: self._set_config(1, v))  # type: ignore[assignment]


def worker_died(exc: BaseException | None) -> bool:
    """Whether a task failed because the worker running it died (dask's ``KilledWorker``)."""
    from distributed.scheduler import KilledWorker

    return isinstance(exc, KilledWorker)


def failed_outcome(spec: JobSpec, attempt: int, exc: BaseException | None, tb: Any = None) -> JobOutcome:
    """The outcome of a job whose dask task failed with *exc* (traceback *tb*), or whose worker died.

    *exc* None means the task's result was lost: the worker holding it died
    before the driver fetched it (dask's future status ``lost``).
    """
    outcome = JobOutcome(spec.num, "failed", spec.overrides, attempts=attempt)
    if exc is None or worker_died(exc):
        from cosimrun.runner.signals import crash_cause

        last = getattr(getattr(exc, "last_worker", None), "address", "")
        times = "once" if attempt == 1 else f"{attempt} times"
        cause = crash_cause(spec.results_path)
        outcome.error = (
            f"WorkerDied: the worker process running this job died {times} "
            + (f"({cause})" if cause else "(a crash, os._exit, a signal or its memory limit)")
            + f"{f'; last on {last}' if last else ''}; see that worker's log"
        )
        outcome.worker = str(last)
        outcome.traceback = f"{type(exc).__name__}: {exc}" if exc is not None else "the task's result was lost"
    else:
        outcome.error = f"{type(exc).__name__}: {exc}"
        lines = _traceback.format_tb(tb) if tb is not None else []
        outcome.traceback = "".join(["Traceback (most recent call last):\n", *lines, outcome.error, "\n"])
    return outcome


def timed_out(spec: JobSpec, attempt: int, timeout: float, worker: str, how: str) -> JobOutcome:
    """The outcome of a job stopped after running longer than ``hydra.launcher.timeout`` (its worker *how*)."""
    return JobOutcome(
        spec.num,
        "failed",
        spec.overrides,
        path=str(spec.results_path),
        error=f"timeout after {timeout:g} s",
        traceback=f"the job ran longer than hydra.launcher.timeout={timeout:g} s; its worker {worker} was {how}",
        attempts=attempt,
        worker=worker,
    )
