"""Console output of a run: a progress bar on a terminal, a one-block summary, and cosimrun's notices.

:func:`notice` is the one channel for what cosimrun tells a user beside results
and errors (a loop that did not converge, events handled late, a plugin package
that holds no experiments). A notice is a ``UserWarning`` issued each time it is
called (the caller says a thing once per run or once per process; Python's
once-per-location filter would hide it from every later run in the same
process, such as the jobs of a sweep worker). Library users see and filter it
as any warning; the ``cosimrun`` command shows it as one line
``cosimrun: warning: ...`` on stderr (:func:`warnings_as_lines`) and, during a
run, writes it to the run's ``cosimrun.log`` once, which also puts it on
stderr once (:func:`cosimrun.runner.joblog.warnings_logged`).

This module imports nothing beyond the standard library and
:mod:`cosimrun.errors` at import time, so the engine may use :func:`notice`.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import TYPE_CHECKING, Any

from cosimrun.errors import ResultsWriteError

if TYPE_CHECKING:
    from cosimrun.config.build import Experiment


def notice(message: str, *, stacklevel: int = 2) -> None:
    """Tell the user *message* (one line) as a ``UserWarning`` attributed to the caller's caller at
    *stacklevel*, every time this is called (see the module)."""
    try:
        frame = sys._getframe(stacklevel)
    except ValueError:  # called from less deep than stacklevel: the outermost frame
        frame = sys._getframe(1)
        while frame.f_back is not None:
            frame = frame.f_back
    warnings.warn_explicit(message, UserWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"), registry=None)


def warnings_as_lines(stream: Any = None) -> None:
    """Show every Python warning of this process as one line ``cosimrun: warning: <message>`` on *stream*
    (stderr), its category named unless it is a plain ``UserWarning`` (a notice); the ``cosimrun`` command."""

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        text = str(message) if category is UserWarning else f"{category.__name__}: {message}"
        print(f"cosimrun: warning: {text}", file=stream or sys.stderr)

    warnings.showwarning = show


class Console:
    """Progress on stderr for runs longer than a second on a terminal; summary at the end."""

    def __init__(self, experiment: Experiment, stream: Any = None, delay_s: float = 1.0) -> None:
        self.experiment = experiment
        self.stream = stream or sys.stderr
        self.delay_s = delay_s
        self._start = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def progress(self, t: float) -> None:
        """Progress callback: show (or advance) the bar once the run has taken a second."""
        if not self._tty:
            return
        run = self.experiment.run
        if self._bar is None:
            if time.perf_counter() - self._start < self.delay_s:
                return
            from rich.console import Console as RichConsole
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("t = {task.completed:.4g} / {task.total:.4g} s"),
                TimeRemainingColumn(),
                console=RichConsole(file=self.stream),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.experiment.name, total=run.tf - run.t0)
        self._bar.update(self._task, completed=t - run.t0)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def summary(self, outcome: Any) -> None:
        """One block: experiment, master, steps, events, mode switches, wall time, results path.

        A run that did not complete gets the error and the path on stderr; a write
        error one line (its message names the file and what it keeps).
        """
        self.close()
        result = outcome.result
        if outcome.ok and result is not None:
            line = (
                f"{outcome.experiment}: complete | master {outcome.master} | "
                f"{result.stats.macro_steps} steps | {result.stats.events} events | "
                f"{len(result.mode_switches)} mode switches{_notable(result.stats)} | "
                f"{outcome.wall_time_s:.2f} s wall\n"
                f"{_stopped(outcome)}"
                f"{_largest_coupling_error(result.coupling_errors)}"
                f"{_global_error(result)}"
                f"results: {outcome.path}"
            )
        elif isinstance(getattr(outcome, "cause", None), ResultsWriteError):  # one line: the error names the file
            line = f"cosimrun: error: {outcome.error}"
            if outcome.file_status != "running":
                line += f"; results up to the last flush kept in {outcome.path} (status {outcome.file_status})"
        else:
            where = f" at t={outcome.failed_at:.6g} s" if outcome.failed_at is not None else ""
            line = (
                f"cosimrun: error: run {outcome.status}{where}: {outcome.error}\n"
                f"partial results ({outcome.status}): {outcome.path}"
            )
        print(line, file=self.stream if not outcome.ok else sys.stdout)


def _stopped(outcome: Any) -> str:
    """``stopped at t=9 s: component 'stair' asked to terminate (...)`` and a newline for a run a component
    ended early, or nothing."""
    stopped = getattr(outcome, "stopped", None)
    return f"{stopped}\n" if stopped is not None else ""


def _largest_coupling_error(errors: list[Any]) -> str:
    """The coupling-error line (:func:`cosimrun.masters.coupling_error.summary_line`) and a newline, or nothing
    for a system without coupled real inputs."""
    from cosimrun.masters.coupling_error import summary_line  # here: the engine imports this module

    line = summary_line(errors)
    return f"{line}\n" if line else ""


def _global_error(result: Any) -> str:
    """The global-error line (:func:`cosimrun.masters.global_error.summary_line`) and a newline, or nothing under
    fixed steps."""
    from cosimrun.masters.global_error import summary_line  # here: the engine imports this module

    line = summary_line(getattr(result, "global_errors", []), getattr(result.stats, "step_control", "fixed"))
    return f"{line}\n" if line else ""


def _notable(stats: Any) -> str:
    """`` | steps 1e-4 to 3e-2 s, N rejected`` under error control, `` | N unconverged loop solves`` when a
    run went on past loops that did not converge, and `` | N discards`` when FMUs ended steps early
    (``fmi2Discard``)."""
    parts = []
    if getattr(stats, "step_control", "fixed") != "fixed":
        parts.append(f" | steps {stats.smallest_step:.2g} to {stats.largest_step:.2g} s, "
                     f"{stats.rejected_steps} rejected")
        if getattr(stats, "half_steps", 0):
            parts.append(f", {stats.half_steps} half steps")
        if stats.step_rejection != "rollback":
            parts.append(" (no rollback: estimates shaped later steps)")
        if stats.steps_over_tolerance:
            parts.append(f", {stats.steps_over_tolerance} over tolerance")
    for count, what in ((stats.unconverged_loop_solves, "unconverged loop solve"), (stats.discards, "discard")):
        if count:
            parts.append(f" | {count} {what}{'s' if count != 1 else ''}")
    return "".join(parts)
