"""The job log: a run's warnings and outcome in ``<run dir>/cosimrun.log``, warnings on stderr in one line.

Hydra configures logging for every job from ``hydra.job_logging``; cosimrun's
(``conf/config.yaml``) writes INFO and above to the job's log file with
timestamps, and WARNING and above to stderr as ``cosimrun: warning: ...``
(:class:`ConsoleFormatter`). :func:`warnings_logged` routes the Python
warnings of a run there, so the log file keeps them next to the outcome that
:func:`log_outcome` writes. Library use of ``run_experiment`` is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("cosimrun")


class ConsoleFormatter(logging.Formatter):
    """``cosimrun: warning: <message>`` (the level in lower case), like the command's error lines."""

    def format(self, record: logging.LogRecord) -> str:
        return f"cosimrun: {record.levelname.lower()}: {record.getMessage()}"


@contextlib.contextmanager
def warnings_logged() -> Iterator[None]:
    """Inside the block, a warning that Python shows goes to the ``cosimrun`` logger as one line
    (named by its category unless it is a plain ``UserWarning``, such as the masters' notices)."""
    previous = warnings.showwarning

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        log.warning(str(message) if category is UserWarning else f"{category.__name__}: {message}")

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def log_outcome(outcome: Any) -> None:
    """One INFO line for the log file: status, time reached or error, results path."""
    if outcome.ok:
        log.info(f"{outcome.experiment}: complete in {outcome.wall_time_s:.3f} s; results: {outcome.path}")
    else:
        log.info(f"{outcome.experiment}: {outcome.status}: {outcome.error}; results: {outcome.path}")
