"""A damaged results file makes plot, export, report and compare end in one line, exit status 2, nothing written.

The file is the ``pendulum_switch`` run of ``conftest.py`` (events, mode
switches), damaged with h5py: every dataset of the component declaring 2**40
samples (8 TiB of float64, in a file of a few tens of kB), or one port half as
long as its time axis.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import h5py
import pytest
from conftest import Cli

from cosimrun.post import commands

HUGE = 2**40


def _huge(group: h5py.Group) -> str:
    for ds in group.values():
        ds.resize((HUGE,))
    return f"{group.name}/time declares {HUGE} samples but holds data for {group['time'].chunks[0]}"  # one chunk


def _half(group: h5py.Group) -> str:
    port = next(name for name in group if name not in ("time", "micro"))
    n = group["time"].shape[0]
    group[port].resize((n // 2,))
    return f"{group.name}/{port} has {n // 2} samples but {n} were written"


DAMAGES: dict[str, Callable[[h5py.Group], str]] = {"huge": _huge, "half": _half}


@pytest.fixture(params=list(DAMAGES))
def damaged(request: pytest.FixtureRequest, pendulum_run: Path, tmp_path: Path) -> tuple[Path, str]:
    """A run directory holding only the damaged copy of the pendulum's results file, and what is wrong with it."""
    run = tmp_path / "run"
    run.mkdir()
    path = run / "results.h5"
    shutil.copy(pendulum_run / "results.h5", path)
    with h5py.File(path, "a") as f:
        group = f["components"][next(iter(f["components"]))]
        problem = DAMAGES[request.param](group)
    return path, f"{path} is damaged: {problem}"


def command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    """``cosimrun COMMAND ...`` in-process: exit status, stdout lines, stderr lines."""
    with pytest.raises(SystemExit) as end:
        commands.main(list(argv))
    out, err = capsys.readouterr()
    return end.value.code, out.splitlines(), err.splitlines()


@pytest.mark.parametrize("name", ["plot", "export", "report", "compare"])
def test_each_result_command_refuses_a_damaged_file_in_one_line(
        name: str, damaged: tuple[Path, str], pendulum_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, problem = damaged
    argv = {"plot": ["plot", str(path), "-o", str(path.parent / "figure.png")],
            "export": ["export", str(path)],
            "report": ["report", str(path)],
            "compare": ["compare", str(path), str(pendulum_run / "results.h5")]}[name]
    code, out, err = command(capsys, *argv)
    assert (code, out) == (2, [])
    assert err == [f"cosimrun: error: {name}: {problem}"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.h5"]  # no figure, export/ or page
    if name == "compare":  # either side
        code, out, err = command(capsys, "compare", str(pendulum_run), str(path.parent))
        assert (code, out, err) == (2, [], [f"cosimrun: error: compare: {problem}"])


def test_the_command_prints_no_traceback(damaged: tuple[Path, str], cli: Cli) -> None:
    """The real program, as a user runs it."""
    path, problem = damaged
    proc = cli("plot", str(path), "-o", str(path.parent / "figure.png"), cwd=path.parent.parent)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"cosimrun: error: plot: {problem}"]
    assert proc.stdout == ""
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.h5"]
