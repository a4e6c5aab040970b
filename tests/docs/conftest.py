"""The environment of the documentation's example commands (``test_examples.py``, ``test_forkserver.py``)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import forkserver
import pytest
from doc_examples import ROOT


@pytest.fixture(scope="session")
def example_server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of the examples' fork server: a line per command (see :func:`forkserver.serve`)."""
    return tmp_path_factory.mktemp("example_server") / "server.log"


@pytest.fixture(scope="session")
def example_env(tmp_path_factory: pytest.TempPathFactory, example_server_log: Path) -> Iterator[dict[str, str]]:
    """The environment of the examples' commands: this interpreter's scripts first, ``pip`` checked, caches private,
    ``cosimrun`` forked from a server that imported it once (``forkserver.py``)."""
    shims = tmp_path_factory.mktemp("example_bin")
    pip = shims / "pip"
    pip.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "docs" / "pipcheck.py"}" "$@"\n')
    pip.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(shims), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["COSIMRUN_CACHE_DIR"] = str(tmp_path_factory.mktemp("example_cache"))
    env["MPLBACKEND"] = "Agg"
    env["COLUMNS"] = "100"
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "HYDRA_FULL_ERROR", "PYTHONPATH"):
        env.pop(name, None)
    with _fork_server(env, example_server_log.parent) as (socket_path, real):
        forkserver.write_shim(shims / "cosimrun", socket_path, real)
        yield env


@contextlib.contextmanager
def _fork_server(env: dict[str, str], folder: Path) -> Iterator[tuple[Path, Path]]:
    """``forkserver.py``'s server for commands run in *env*: ``(its socket, the real cosimrun)``, once it listens."""
    socket_path, real = folder / "cosimrun.sock", Path(sys.executable).parent / "cosimrun"
    with (folder / "server.log").open("wb") as log:
        server = subprocess.Popen([sys.executable, forkserver.__file__, str(socket_path), str(real)], env=env,
                                  cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while not socket_path.exists():
            assert server.poll() is None and time.monotonic() < deadline, \
                f"the fork server did not start: {(folder / 'server.log').read_text()}"
            time.sleep(0.05)
        yield socket_path, real
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the server ends at the end of its input
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
