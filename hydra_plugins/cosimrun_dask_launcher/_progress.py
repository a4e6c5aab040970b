"""Progress of a sweep on the driver: jobs done, failed and in all, and the time left.

The time left is not rich's estimate (the rate of recent completions, which
two jobs finishing together on two workers make look near-instant) but
:func:`estimate_remaining`: the finished jobs' mean duration spread over the
workers, less what the running jobs have done.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from hydra.core.utils import filter_overrides

from cosimrun.runner.outcome import JobOutcome

log = logging.getLogger(__name__)

OVERLAP_TOLERANCE = 0.05
"""Fraction of a job's duration by which two jobs must overlap to count as running at once (absorbs the
driver's delay in seeing a job finish)."""


def estimate_remaining(
    durations: Sequence[float], running: Sequence[float], waiting: int, workers: int
) -> float | None:
    """Seconds until the last job ends; None before any job finished.

    *durations* are the finished jobs' (each other job is assumed to take
    their mean), *running* how long each running job has been running,
    *waiting* how many jobs have not started, *workers* how many jobs run at
    once. Waiting jobs go to the worker that is free first, as a dask
    scheduler hands them out; for jobs of equal duration that is exact.
    """
    if not durations:
        return None
    mean = math.fsum(durations) / len(durations)
    free = sorted(max(mean - elapsed, 0.0) for elapsed in running)  # when each busy worker is free again
    free = sorted(free + [0.0] * max(workers - len(free), 0))
    if not free:
        return 0.0
    rounds, extra = divmod(max(waiting, 0), len(free))
    return max(at + (rounds + (i < extra)) * mean for i, at in enumerate(free))


class Progress:
    """Jobs done / failed / total: a rich bar on stderr when it is a terminal, log lines otherwise.

    *workers* is how many jobs run at once when the launcher knows it; else
    it is inferred from the finished jobs that overlapped in time.
    """

    def __init__(self, total: int, enabled: bool = True, workers: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.workers = workers
        self.tty = bool(enabled) and bool(getattr(sys.stderr, "isatty", lambda: False)())
        self._bar: Any = None
        self._task: Any = None
        self._clock = clock
        self._started: float | None = None
        self._reused = 0
        self._ends: list[float] = []
        """When each job that ran was seen to finish (in that order)."""
        self._durations: list[float] = []
        self._spans: list[tuple[float, float]] = []
        self._overlap = 1

    def start(self) -> None:
        if self._started is None:
            self._started = self._clock()
        if not self.tty or self._bar is not None:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        owner = self

        class Remaining(ProgressColumn):
            """The time left by :meth:`Progress.remaining`, as rich's ``TimeRemainingColumn`` shows it."""

            def render(self, task: Any) -> Text:
                return Text(format_seconds(owner.remaining()), style="progress.remaining")

        self._bar = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} done"),
            TextColumn("[red]{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            Remaining(),
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
        self._timed(outcome)
        overrides = " ".join(filter_overrides(outcome.overrides))
        if outcome.failed:
            self.note(f"#{outcome.num} {outcome.status}: {overrides}: {outcome.error}")
        elif self._bar is None:
            how = "reused" if outcome.reused else f"{outcome.wall_time_s:.2f} s"
            log.info(f"\t#{outcome.num} {outcome.status} ({how}) : {overrides}")
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, failed=self.failed)

    def _timed(self, outcome: JobOutcome) -> None:
        """Note when the job ended and how long it took; a reused job took no worker's time."""
        if outcome.reused:
            self._reused += 1
            return
        now = self._clock()
        self._ends.append(now)
        duration = outcome.job_time_s
        if not math.isfinite(duration):  # it did not run (a cancelled task, a lost result)
            return
        self._durations.append(duration)
        begin = now - duration
        at = begin + OVERLAP_TOLERANCE * duration
        together = 1
        for span_begin, span_end in reversed(self._spans):  # ends only grow: stop at the first that ended before
            if span_end < at:
                break
            together += span_begin <= at
        self._spans.append((begin, now))
        self._overlap = max(self._overlap, together)

    def remaining(self) -> float | None:
        """Seconds until the sweep ends (see :func:`estimate_remaining`); None before a job finished."""
        to_run = self.total - self._reused
        ran = len(self._ends)
        if ran >= to_run:
            return 0.0
        now = self._clock()
        workers = self.workers or self._overlap
        # job k started when the sweep started (the first *workers* ones) or when job k - workers ended
        starts = [now if self._started is None else self._started] * workers + self._ends
        started = min(to_run, workers + ran)
        running = [now - at for at in starts[ran:started]]
        return estimate_remaining(self._durations, running, to_run - started, workers)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def format_seconds(seconds: float | None) -> str:
    """``H:MM:SS`` as rich shows a time left; ``-:--:--`` when unknown."""
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}"
