"""The forked ``cosimrun`` of the examples (``forkserver.py``) prints, writes and exits exactly as the real command."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest

COMMANDS = [
    "cosimrun +experiment=room_heating run.tf=600 hydra.run.dir=out",
    "cosimrun +experiment=room_heating run.tf=-1",
    "cosimrun +experiment=room_heatin",
    "cosimrun +experiment=bouncing_ball run.tf=0.5 hydra.run.dir=b > out.txt 2> err.txt; cat err.txt out.txt",
    "cosimrun --list-components | grep -c builtin",
    "echo from stdin | cosimrun +experiment=bouncing_ball run.tf=0.1 hydra.run.dir=c 2>&1 | tail -n 1",
    "COLUMNS=40 cosimrun --help | grep -c usage",
]
"""Runs, errors (exit 2), output redirected and piped, input piped in, an environment of its own."""

WALL = re.compile(r"\d+(\.\d+)? s wall")


def _shell(command: str, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=workdir, env=env, text=True,
                          capture_output=True, timeout=300)


def _seen(done: subprocess.CompletedProcess[str], folder: Path) -> tuple[int, str, str]:
    """Exit status, output and error of a command, its folder and wall-clock times left out."""
    return (done.returncode, *(WALL.sub("", text.replace(str(folder), "DIR")) for text in (done.stdout, done.stderr)))


@pytest.mark.slow
def test_a_forked_command_prints_writes_and_exits_as_the_real_one(example_env: dict[str, str],
                                                                    example_server_log: Path, tmp_path: Path) -> None:
    real_env = dict(example_env, PATH=example_env["PATH"].split(":", 1)[1])  # without the shims: the real command
    assert _shell("command -v cosimrun", tmp_path, real_env).stdout.strip() == str(Path(sys.executable).parent /
                                                                                  "cosimrun")
    for command in COMMANDS:
        forked, real = tmp_path / "forked", tmp_path / "real"
        for folder in (forked, real):
            folder.mkdir(exist_ok=True)
        logged = len(example_server_log.read_text().splitlines())
        a, b = _shell(command, forked, example_env), _shell(command, real, real_env)
        assert _seen(a, forked) == _seen(b, real), command
        how = example_server_log.read_text().splitlines()[logged:]
        if command.startswith("COLUMNS=40"):  # a variable of its own: the real command
            assert len(how) == 1 and how[0].startswith("real command (COLUMNS differ): "), how
        else:
            assert len(how) == command.count("cosimrun ") and all(line.startswith("forked ") for line in how), how
    assert {p.relative_to(tmp_path / "forked").as_posix() for p in (tmp_path / "forked").rglob("*")} == \
        {p.relative_to(tmp_path / "real").as_posix() for p in (tmp_path / "real").rglob("*")}
    for run in ("out", "b"):
        with h5py.File(tmp_path / "forked" / run / "results.h5") as fa, \
                h5py.File(tmp_path / "real" / run / "results.h5") as fb:
            assert fa.attrs["status"] == fb.attrs["status"] == "complete"
            for name in fb["components"]:
                for port, data in fb["components"][name].items():
                    assert fa["components"][name][port][()].tobytes() == data[()].tobytes(), (run, name, port)


@pytest.mark.slow
def test_sigterm_to_the_shim_ends_the_forked_run_as_it_ends_the_real_one(example_env: dict[str, str],
                                                                          example_server_log: Path,
                                                                          tmp_path: Path) -> None:
    """A long run, interrupted by SIGTERM to the process the shell started: 143, one line, an interrupted file."""
    shim = example_env["PATH"].split(":", 1)[0] + "/cosimrun"
    logged = len(example_server_log.read_text().splitlines())
    ended = {}
    for name, script in (("forked", shim), ("real", str(Path(sys.executable).parent / "cosimrun"))):
        proc = subprocess.Popen([script, "+experiment=coupled_oscillators", "run.tf=100000", f"hydra.run.dir={name}"],
                                cwd=tmp_path, env=example_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        partial = tmp_path / name / "results.h5.partial"
        deadline = time.monotonic() + 120
        while not partial.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        with h5py.File(tmp_path / name / "results.h5") as f:
            status = f.attrs["status"]
        said = WALL.sub("", re.sub(r"t=\S+", "t=T", err.replace(str(tmp_path / name), "DIR")))
        ended[name] = (proc.returncode, said, out.replace(str(tmp_path / name), "DIR"), status)
    how = example_server_log.read_text().splitlines()[logged:]
    assert len(how) == 1 and how[0].startswith("forked "), how  # the forked run; the real one is not the shim
    assert ended["forked"] == ended["real"]
    assert ended["real"][0] == 143 and ended["real"][3] == "interrupted"
    assert "SIGTERM" in ended["real"][1]
