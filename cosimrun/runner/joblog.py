"""The job log: a run's warnings and outcome in ``<run dir>/cosimrun.log``, warnings on stderr in one line.

Hydra configures logging for every job from ``hydra.job_logging``; cosimrun's
(``conf/config.yaml``) writes INFO and above to the job's log file with
timestamps, and WARNING and above to stderr as ``cosimrun: warning: ...``
(:class:`ConsoleFormatter`). :func:`warnings_logged` routes the Python
warnings of a run there, so the log file keeps them next to the outcome that
:func:`log_outcome` writes. Library use of ``run_experiment`` is left alone.

A warm worker runs many jobs in one process: :func:`configure_job_log` configures
logging as Hydra's ``configure_log`` does, once, and for each later job whose
logging config differs only in its log files' names, points the same file
handlers at the job's files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cosimrun.runner.configtext import resolved_container

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


@dataclass
class _Configured:
    """Logging as :func:`configure_job_log` last configured it in full."""

    key: str
    """The resolved logging config without its file names, the handlers that have one, and the verbosity."""
    files: dict[logging.FileHandler, str]
    """The file handlers it made -> the handler's name in the config."""
    handlers: dict[str, list[logging.Handler]]
    """The handlers of the root ("") and of each logger the config names, as configured."""


_configured: _Configured | None = None


def configure_job_log(log_config: Any, verbose: Any, raw: Any = None) -> None:
    """Configure logging for a job as Hydra's ``configure_log(log_config, verbose)`` does.

    When logging was configured so for an earlier job of this process, from a config that differs only in the
    ``filename`` of its file handlers, and its handlers are still in place, those handlers are pointed at the new
    files and the levels set again instead: what Hydra's configuration would make, without building every
    handler and formatter again for each job of a warm worker. *raw*: *log_config* unresolved as plain data,
    when the caller has it (see :func:`~cosimrun.runner.configtext.resolved_container`).
    """
    global _configured
    from hydra.core.utils import configure_log
    from omegaconf import OmegaConf

    if log_config is None:
        _configured = None
        configure_log(log_config, verbose)
        return
    conf = resolved_container(log_config, raw)
    names = {name: h.pop("filename") for name, h in conf.get("handlers", {}).items()
             if isinstance(h, dict) and "filename" in h}
    key = repr((conf, sorted(names), OmegaConf.to_container(verbose) if OmegaConf.is_config(verbose) else verbose))
    last = _configured
    if (last is not None and last.key == key and _handlers(conf) == last.handlers
            and all(h.name == name and not getattr(h, "_closed", False) for h, name in last.files.items())):
        for handler, name in last.files.items():
            _reopen(handler, str(names[name]))
        _set_levels(conf, verbose)
        return
    _configured = None
    configure_log(log_config, verbose)
    if conf.get("incremental") or conf.get("disable_existing_loggers", True):
        return  # each configuration changes more than the files (loggers made since are disabled)
    handlers = _handlers(conf)
    by_name = {h.name: h for hs in handlers.values() for h in hs}
    files = {by_name[name]: name for name in names
             if name in by_name and type(by_name[name]) is logging.FileHandler}
    if len(files) == len(names):
        _configured = _Configured(key, files, handlers)


def _handlers(conf: dict[str, Any]) -> dict[str, list[logging.Handler]]:
    return {name: list(logging.getLogger(name).handlers) for name in ("", *(conf.get("loggers") or {}))}


def _reopen(handler: logging.FileHandler, filename: str) -> None:
    """Point *handler* at *filename*, as a new ``FileHandler`` of that file with its settings would write."""
    path = os.path.abspath(filename)
    with handler.lock or contextlib.nullcontext():
        if handler.baseFilename == path and handler.stream is not None:
            return
        handler.flush()
        if handler.stream is not None:
            handler.stream.close()
        handler.baseFilename = path
        handler.stream = None if handler.delay else handler._open()


def _set_levels(conf: dict[str, Any], verbose: Any) -> None:
    """The levels ``logging.config.dictConfig(conf)`` and then Hydra's *verbose* give the root and the named
    loggers (set where they differ: each ``setLevel`` clears the caches of every logger of the process)."""
    from omegaconf import OmegaConf

    root = conf.get("root") or {}
    if "level" in root:
        _set_level(logging.getLogger(), root["level"])
    for name, settings in (conf.get("loggers") or {}).items():
        if isinstance(settings, dict) and "level" in settings:
            _set_level(logging.getLogger(name), settings["level"])
    if isinstance(verbose, bool):
        if verbose:
            _set_level(logging.getLogger(), logging.DEBUG)
    else:
        for name in [verbose] if isinstance(verbose, str) else OmegaConf.to_container(verbose):
            _set_level(logging.getLogger(name), logging.DEBUG)


def _set_level(logger: logging.Logger, level: int | str) -> None:
    """``logger.setLevel(level)`` unless *logger* has that level (a name, such as ``INFO``, or a number)."""
    if logger.level != (logging.getLevelName(level) if isinstance(level, str) else level):
        logger.setLevel(level)
