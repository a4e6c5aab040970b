"""A warm worker configures logging once and points the same handlers at each later job's log file: each job's
file holds its own lines, as with Hydra's configuration per job, and anything else that changed configures anew."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from cosimrun.runner import joblog
from cosimrun.runner.joblog import configure_job_log


def job_logging(path: Path, **changes: object) -> object:
    """cosimrun's job logging (conf/config.yaml) writing to *path*, with *changes* to its top level."""
    conf = OmegaConf.load(Path(__file__).parents[2] / "conf" / "config.yaml").hydra.job_logging
    conf.handlers.file.filename = str(path)
    for key, value in changes.items():
        OmegaConf.update(conf, key, value)
    return conf


@pytest.fixture(autouse=True)
def restored_logging():
    """Logging as before the test, the loggers that ``disable_existing_loggers`` disabled enabled again (else a
    later test of this process would not see their records)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    enabled = [logger for logger in logging.Logger.manager.loggerDict.values()
               if isinstance(logger, logging.Logger) and not logger.disabled]
    joblog._configured = None
    yield
    for logger in enabled:
        logger.disabled = False
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("cosimrun.test").setLevel(logging.NOTSET)
    joblog._configured = None


def lines(path: Path) -> list[str]:
    return [line.split(" - ", 1)[1] for line in path.read_text().splitlines()]


def test_each_job_writes_its_own_file_through_the_same_handlers(tmp_path: Path) -> None:
    log = logging.getLogger("cosimrun.test")
    files = [tmp_path / f"job{k}" / "cosimrun.log" for k in range(3)]
    seen = []
    for k, path in enumerate(files):
        path.parent.mkdir()
        configure_job_log(job_logging(path), False)
        seen.append(list(logging.getLogger().handlers))
        log.info(f"job {k}")
        log.debug("not at INFO")
    assert seen[0] == seen[1] == seen[2]  # configured once: the same handler objects
    for k, path in enumerate(files):
        assert lines(path) == [f"job {k}"]
        assert path.read_text().startswith("[") and "][cosimrun.test][INFO] - job" in path.read_text()


def test_the_file_equals_what_hydras_configuration_writes(tmp_path: Path) -> None:
    from hydra.core.utils import configure_log

    log = logging.getLogger("cosimrun.test")
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    configure_job_log(job_logging(tmp_path / "a" / "x.log"), False)
    configure_job_log(job_logging(tmp_path / "b" / "x.log"), False)
    log.warning("the same line")
    configure_log(job_logging(tmp_path / "c" / "x.log"), False)
    log.warning("the same line")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert lines(tmp_path / "b" / "x.log") == lines(tmp_path / "c" / "x.log") == ["the same line"]
    assert (tmp_path / "a" / "x.log").read_text() == ""


def test_a_config_that_differs_beyond_its_file_names_configures_anew(tmp_path: Path) -> None:
    log = logging.getLogger("cosimrun.test")
    configure_job_log(job_logging(tmp_path / "a.log"), False)
    first = list(logging.getLogger().handlers)
    configure_job_log(job_logging(tmp_path / "b.log", **{"root.level": "DEBUG"}), False)
    assert logging.getLogger().handlers != first and logging.getLogger().level == logging.DEBUG
    log.debug("now at DEBUG")
    assert lines(tmp_path / "b.log") == ["now at DEBUG"]


def test_handlers_a_job_added_or_levels_it_changed_do_not_survive_into_the_next(tmp_path: Path) -> None:
    configure_job_log(job_logging(tmp_path / "a.log"), OmegaConf.create(["cosimrun.test"]))
    configured = list(logging.getLogger().handlers)
    logging.getLogger().addHandler(logging.NullHandler())  # the job's own
    logging.getLogger("cosimrun.test").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)
    configure_job_log(job_logging(tmp_path / "b.log"), OmegaConf.create(["cosimrun.test"]))
    handlers = logging.getLogger().handlers
    assert len(handlers) == 2 and not any(isinstance(h, logging.NullHandler) for h in handlers)
    assert handlers != configured  # configured anew
    logging.getLogger("cosimrun.test").setLevel(logging.ERROR)
    logging.getLogger().setLevel(logging.ERROR)
    configure_job_log(job_logging(tmp_path / "c.log"), OmegaConf.create(["cosimrun.test"]))
    assert logging.getLogger().handlers == handlers  # the same handlers, the levels as configured
    assert logging.getLogger().level == logging.INFO
    assert logging.getLogger("cosimrun.test").level == logging.DEBUG  # verbose


def test_with_existing_loggers_disabled_every_job_configures_anew(tmp_path: Path) -> None:
    configure_job_log(job_logging(tmp_path / "a.log", disable_existing_loggers=True), False)
    first = list(logging.getLogger().handlers)
    configure_job_log(job_logging(tmp_path / "b.log", disable_existing_loggers=True), False)
    assert logging.getLogger().handlers != first


def test_a_later_job_sets_only_the_levels_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``setLevel`` clears the cache of every logger of the process: a job whose loggers have their levels
    already sets none, and one whose levels a job changed sets those back (by name or number)."""
    verbose = OmegaConf.create(["cosimrun.test"])
    configure_job_log(job_logging(tmp_path / "a.log"), verbose)
    calls: list[tuple[str, object]] = []
    set_level = logging.Logger.setLevel

    def counted(logger: logging.Logger, level: object) -> None:
        calls.append((logger.name, level))
        set_level(logger, level)  # type: ignore[arg-type]

    monkeypatch.setattr(logging.Logger, "setLevel", counted)
    configure_job_log(job_logging(tmp_path / "b.log"), verbose)
    assert calls == []
    set_level(logging.getLogger(), logging.WARNING)
    set_level(logging.getLogger("cosimrun.test"), logging.INFO)
    configure_job_log(job_logging(tmp_path / "c.log"), verbose)
    assert calls == [("root", "INFO"), ("cosimrun.test", logging.DEBUG)]
    assert logging.getLogger().level == logging.INFO and logging.getLogger("cosimrun.test").level == logging.DEBUG
    logging.getLogger("cosimrun.test").debug("at DEBUG again")
    assert lines(tmp_path / "c.log") == ["at DEBUG again"]
