"""Shared test setup.

``tests/helpers.py`` is importable as ``helpers`` in every import mode, and the
fixtures below run the ``cosimrun`` command as users do, with a test-only
component and a real dask cluster.

Commands run as subprocesses (``python -c ...`` standing in for the ``cosimrun``
console script), so that Hydra, logging and dask start fresh each time and the
exit status can be checked. Their environment puts ``testdist/`` on
``PYTHONPATH``, inherited by dask workers started from them (and by the
scheduler and workers the cluster tests start): a tiny distribution
``cosimrun-sweep-testing`` (a module plus a ``.dist-info`` with an entry
point), which registers the component type ``crash`` in
``cosimrun.components``. It is found through ``importlib.metadata`` like any
installed plugin, without touching the virtual environment.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from support import forkserver  # noqa: E402 - tests/ is on sys.path from here on

CACHE_VARIABLES = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "COSIMRUN_CACHE_DIR", "MPLCONFIGDIR")
"""Where cosimrun (extracted FMUs, built example FMUs), matplotlib and browsers keep caches and profiles: a
temporary folder of the test session, inherited by every process the tests start."""
_OWN_CACHE = "COSIMRUN_TEST_CACHE"
"""Set by the process that made the session's cache folder (xdist's workers inherit it and reuse that folder)."""
_cache_key = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Point every cache at one temporary folder for the session, so that the tests write nothing outside
    temporary folders (not in ``$HOME/.cache``)."""
    if os.environ.get(_OWN_CACHE):
        return
    root = Path(tempfile.mkdtemp(prefix="cosimrun-tests-cache-"))
    config.stash[_cache_key] = root
    os.environ[_OWN_CACHE] = str(root)
    for name in CACHE_VARIABLES:
        os.environ[name] = str(root / name.lower())


def pytest_unconfigure(config: pytest.Config) -> None:
    root = config.stash.get(_cache_key, None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)
        os.environ.pop(_OWN_CACHE, None)


def in_ci() -> bool:
    """Whether the tests run in CI (``CI`` set to anything but ``""``, ``0`` or ``false``), where nothing may be
    skipped: a test that cannot run there (a missing dependency or browser) fails instead."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI, a skipped test is a failed one (see :func:`in_ci`)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every test must run (CI={os.environ['CI']}): {reason}"


GUARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _signal_handlers_kept() -> Iterator[None]:
    """A test that leaves the handler of SIGINT or SIGTERM changed fails, and the handler is put back: later tests
    in the same process (Ctrl-C and SIGTERM handling in-process) depend on the defaults, whatever ran before them."""
    before = {s: signal.getsignal(s) for s in GUARDED_SIGNALS}
    yield
    changed = [s for s, handler in before.items() if signal.getsignal(s) is not handler]
    for s in changed:
        signal.signal(s, before[s])
    if changed:
        names = ", ".join(signal.Signals(s).name for s in changed)
        pytest.fail(f"the test left the handler of {names} changed (put back now)", pytrace=False)


# The ``cosimrun`` command (the console script's entry point).
CLI = "from cosimrun.cli import main; main()"

CRASH_MODULE = '''
"""Test-only component types for the sweep tests."""

import math
import os
import time

from cosimrun.components.sources import Constant
from cosimrun.parameters import Parameter


class Crash(Constant):
    """A constant that misbehaves on request, to test what a sweep makes of it.

    ``crash_at``: ends its process with os._exit(17) once t >= crash_at (kills a dask worker);
    ``hang_at``: sleeps for an hour once t >= hang_at (a hung job);
    ``exit_on_free``: ends its process with os._exit(17) when a run frees it, which is after
    the results file was closed (a worker dying after its job finished).
    """

    vectorizable = False  # its misbehaviour is per job: a sweep of it runs one job per member, never an ensemble

    PARAMETERS = {
        "crash_at": Parameter(float, default=math.inf, doc="os._exit(17) once t >= crash_at"),
        "hang_at": Parameter(float, default=math.inf, doc="sleep for an hour once t >= hang_at"),
        "exit_on_free": Parameter(bool, default=False, doc="os._exit(17) when freed"),
    }

    def value(self, t):
        if t >= self.parameters["crash_at"]:
            os._exit(17)
        if t >= self.parameters["hang_at"]:
            time.sleep(3600)
        return super().value(t)

    def free(self):
        if self.parameters["exit_on_free"] and self.t > 0:  # after a run (not the sweeper's trial build)
            os._exit(17)
'''


def _write_test_distribution(root: Path) -> None:
    pkg = root / "cosimrun_sweep_testing"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(CRASH_MODULE))
    info = root / "cosimrun_sweep_testing-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cosimrun-sweep-testing\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[cosimrun.components]\ncrash = cosimrun_sweep_testing:Crash\n")


@pytest.fixture(scope="session")
def sweep_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for sweep subprocesses (see the module docstring)."""
    root = tmp_path_factory.mktemp("sweep_env")
    paths = [root / "testdist"]
    _write_test_distribution(paths[0])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES", None)
    env["COLUMNS"] = "200"
    return env


Cosimrun = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cosimrun(sweep_env: dict[str, str], tmp_path: Path) -> Cosimrun:
    """``cosimrun(*args, timeout=120)``: run the command in ``tmp_path``, output captured as text (forked from a
    process that imported it once, as ``python -c`` would run it: ``support/forkserver.py``)."""

    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return forkserver.run(forkserver.Form.python_c(), list(args), sweep_env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=timeout)

    return run


@pytest.fixture
def start_cosimrun(sweep_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``start_cosimrun(*args)``: the command in the background in ``tmp_path`` (output piped, as text).

    Whatever still runs at the end of the test is killed.
    """
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, *args],
            cwd=tmp_path,
            env=sweep_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


@pytest.fixture
def with_crash(tmp_path: Path) -> list[str]:
    """Overrides adding component ``bomb`` of the test-only type ``crash`` (see :data:`CRASH_MODULE`).

    Through a config file, as a sweep's shared component would come.
    ``components.bomb.params.<crash_at|hang_at|exit_on_free>`` then set what goes wrong.
    """
    conf = tmp_path / "conf" / "testing"
    conf.mkdir(parents=True)
    (conf / "crash.yaml").write_text(
        "# @package _global_\ncomponents:\n  bomb:\n    type: crash\n"
        "    params: {value: 1.0, crash_at: 100.0, hang_at: 100.0, exit_on_free: false}\n"
    )
    return [f"--config-dir={tmp_path / 'conf'}", "+testing=crash"]


# ---------------------------------------------------------------------- a real cluster on loopback
@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_workers(address: str, n: int, timeout: float = 60) -> None:
    from distributed import Client

    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(n, timeout=timeout)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate one after the other (workers first: they close at once while their scheduler is up)."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@pytest.fixture(scope="module")
def dask_cluster(sweep_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``dask scheduler`` and two ``dask worker`` processes (one thread each) on 127.0.0.1.

    The scheduler reports a task as failed at the first worker that dies
    running it (``allowed-failures`` 0), so that the launcher's ``retries``
    alone decide how often a job is tried, and gives a worker one task at a
    time (``worker-saturation`` 1.0), so that no other job waits on a worker
    that is about to die (the settings README.md recommends).
    """
    dask = [sys.executable, "-m", "dask"]  # the `dask` command of this environment
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = dict(
        sweep_env,
        DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0",
        DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION="1.0",
    )
    tmp_path = tmp_path_factory.mktemp("dask_cluster")
    logs = tmp_path / "logs"
    logs.mkdir()
    scheduler = subprocess.Popen(
        [*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(logs / "scheduler.log").open("wb"),
    )
    workers: list[subprocess.Popen[bytes]] = []
    try:
        time.sleep(0.2)
        for k in range(2):
            workers.append(
                subprocess.Popen(
                    [
                        *dask,
                        "worker",
                        address,
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--nworkers",
                        "1",
                        "--no-dashboard",
                        "--name",
                        f"w{k}",
                    ],
                    cwd=tmp_path,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=(logs / f"worker{k}.log").open("wb"),
                )
            )
        _wait_for_workers(address, 2)
        yield Cluster(address, scheduler, workers)
    finally:
        _stop([*workers, scheduler])
