"""The environment of the documentation's example commands (``test_examples.py``, ``test_forkserver.py``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_examples import ROOT
from support import forkserver


@pytest.fixture(scope="session")
def example_server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The log of the examples' fork server: a line per command (see :func:`forkserver.serve`)."""
    return tmp_path_factory.mktemp("example_server") / "server.log"


@pytest.fixture(scope="session")
def example_env(tmp_path_factory: pytest.TempPathFactory, example_server_log: Path) -> Iterator[dict[str, str]]:
    """The environment of the examples' commands: this interpreter's scripts first, ``pip`` checked, caches private,
    ``cosimrun`` forked from a server that imported it once (``tests/support/forkserver.py``)."""
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
    form = forkserver.Form.console_script()
    with forkserver.started(env, example_server_log.parent, form) as socket_path:
        forkserver.write_shim(shims / "cosimrun", socket_path, form)
        yield env
