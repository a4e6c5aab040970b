"""Progress of a sweep on the driver: jobs done, failed and in all."""

from __future__ import annotations

import logging
import sys
from typing import Any

from hydra.core.utils import filter_overrides

from cosimrun.runner.outcome import JobOutcome

log = logging.getLogger(__name__)


class Progress:
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
