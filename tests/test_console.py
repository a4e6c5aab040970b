"""Console output: the progress bar on a terminal and the end-of-run summary."""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from cosimrun.console import Console, notice, warnings_as_lines


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def experiment(name: str = "demo") -> SimpleNamespace:
    return SimpleNamespace(name=name, run=SimpleNamespace(t0=0.0, tf=10.0, dt=0.1))


def test_progress_bar_only_on_a_terminal_and_after_the_delay() -> None:
    pipe = io.StringIO()
    console = Console(experiment(), stream=pipe, delay_s=0.0)
    console.progress(5.0)
    console.close()
    assert pipe.getvalue() == ""  # not a terminal: no bar

    slow = Terminal()
    console = Console(experiment(), stream=slow, delay_s=3600.0)
    console.progress(5.0)
    assert console._bar is None  # shorter than the delay: no bar yet

    tty = Terminal()
    console = Console(experiment(), stream=tty, delay_s=0.0)
    console.progress(2.5)
    console.progress(5.0)
    assert console._bar is not None
    assert console._bar.tasks[0].completed == 5.0 and console._bar.tasks[0].total == 10.0
    console.close()
    assert "demo" in tty.getvalue()


def test_summary_of_a_complete_and_of_a_failed_run(capsys) -> None:
    stats = SimpleNamespace(macro_steps=100, events=3, unconverged_loop_solves=0, discards=0)
    done = SimpleNamespace(ok=True, experiment="demo", master="hybrid", wall_time_s=1.5, path=Path("r.h5"),
                           result=SimpleNamespace(stats=stats, mode_switches=[1, 2], coupling_errors=[]),
                           status="complete")
    Console(experiment()).summary(done)
    out = capsys.readouterr().out
    assert "demo: complete | master hybrid | 100 steps | 3 events | 2 mode switches | 1.50 s wall" in out
    assert "results: r.h5" in out

    stream = io.StringIO()
    failed = SimpleNamespace(ok=False, experiment="demo", master="hybrid", wall_time_s=0.1, path=Path("r.h5"),
                             result=None, status="failed", failed_at=0.9, error="RuntimeError: boom")
    Console(experiment(), stream=stream).summary(failed)
    assert stream.getvalue().splitlines() == [
        "cosimrun: error: run failed at t=0.9 s: RuntimeError: boom",
        "partial results (failed): r.h5",
    ]


def _notify(message: str) -> None:
    notice(message)  # attributed to the caller of _notify, as a component's or master's notice would be


def test_a_notice_is_a_user_warning_each_time_and_one_line_under_the_command(monkeypatch) -> None:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")  # once per location and text: a notice is not held back by it
        for _ in range(2):
            _notify("events are handled late")
    assert [(w.category, str(w.message), Path(w.filename).name) for w in record] == \
        [(UserWarning, "events are handled late", "test_console.py")] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a library user's filter applies
        _notify("not shown")
    stream = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings_as_lines(stream)
        _notify("events are handled late")
        warnings.warn("old API", DeprecationWarning, stacklevel=1)
    assert stream.getvalue().splitlines() == ["cosimrun: warning: events are handled late",
                                              "cosimrun: warning: DeprecationWarning: old API"]
    with pytest.warns(UserWarning, match="^from deep$"):
        notice("from deep", stacklevel=10_000)  # deeper than the stack: the outermost frame
