"""The cause of a worker's death in a run is read once the crash witness has written it, not before."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cosimrun.core.crashsite import CAUSE, SUFFIX
from cosimrun.runner.signals import crash_cause

SAID = "the process crashed with SIGSEGV (Segmentation fault) in the step of component 'p' from t=0.5"


def test_the_cause_the_witness_writes_after_the_death_is_noticed_is_waited_for(tmp_path: Path) -> None:
    results = tmp_path / "results.h5"
    Path(str(results) + SUFFIX).write_bytes(b"record of the run in progress")

    def witness() -> None:
        time.sleep(0.3)
        Path(str(results) + CAUSE).write_text(SAID + "\n", encoding="utf-8")

    writing = threading.Thread(target=witness)
    writing.start()
    try:
        assert crash_cause(results) == SAID
    finally:
        writing.join()


def test_without_a_run_in_progress_nothing_is_waited_for(tmp_path: Path) -> None:
    start = time.monotonic()
    assert crash_cause(tmp_path / "results.h5") is None
    assert time.monotonic() - start < 1.0


def test_a_witness_that_writes_nothing_is_waited_for_a_bounded_time(tmp_path: Path) -> None:
    results = tmp_path / "results.h5"
    Path(str(results) + SUFFIX).write_bytes(b"record")
    start = time.monotonic()
    assert crash_cause(results, wait=0.3) is None
    assert 0.3 <= time.monotonic() - start < 2.0
