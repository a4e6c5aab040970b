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


def test_the_witness_names_the_run_going_on_when_the_process_died_after_many_runs(tmp_path: Path) -> None:
    """Runs' starts and ends only change the shared map, its two slots taking turns: after runs that ended and one
    still going on when the process is killed, the witness writes the cause for the last one and says it once."""
    import os
    import subprocess
    import sys

    records = [tmp_path / f"run{n}" / "results.h5" for n in range(4)]
    for results in records:
        results.parent.mkdir()
        Path(str(results) + SUFFIX).write_bytes(b"record")
    code = "\n".join([
        "import os, sys",
        "from cosimrun.runner import signals",
        "signals.watch_crashes()",
        *(f"signals._run_recorded({str(r) + SUFFIX!r}); signals._run_recorded(None)" for r in records[:3]),
        f"signals._run_recorded({str(records[3]) + SUFFIX!r})",
        "os._exit(3)",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 3
    said = "the process ended (exit() in native code, or killed)"
    assert crash_cause(records[3], wait=10.0) == said
    assert [crash_cause(r, wait=0.0) for r in records[:3]] == [None] * 3
    # the witness holds the captured stderr until it ends, so its line is in it
    assert done.stderr.count("cosimrun: error: the process ended") == 1
    assert f"kept in {records[3]}.partial (status running)" in done.stderr
    assert not any(str(r) in done.stderr for r in records[:3])


def test_the_witness_says_nothing_of_a_process_that_ended_between_runs(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    results = tmp_path / "results.h5"
    Path(str(results) + SUFFIX).write_bytes(b"record")
    code = (f"import os\nfrom cosimrun.runner import signals\nsignals.watch_crashes()\n"
            f"signals._run_recorded({str(results) + SUFFIX!r})\nsignals._run_recorded(None)\nos._exit(0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0
    assert "cosimrun: error" not in done.stderr  # the witness had ended: it holds the captured stderr till then
    assert not Path(str(results) + CAUSE).exists()
