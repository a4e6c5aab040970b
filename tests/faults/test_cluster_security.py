"""A sweep's local dask cluster admits only the sweep's own client: loopback only, TLS with per-sweep credentials.

Whoever can talk to a dask scheduler can run code in its workers, so another
user of the machine must not be able to connect. The cluster is started in
this process as a sweep starts it (``_cluster.connect`` with the launcher's
settings, workers from the fork server), then clients without the sweep's
credentials try to connect.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from hydra_plugins.cosimrun_dask_launcher import _cluster
from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher


def test_a_dashboard_given_as_a_port_listens_on_loopback() -> None:
    assert _cluster.loopback_dashboard(":0") == "127.0.0.1:0"
    assert _cluster.loopback_dashboard("8787") == "127.0.0.1:8787"
    assert _cluster.loopback_dashboard(None) is None and _cluster.loopback_dashboard("") is None
    assert _cluster.loopback_dashboard("0.0.0.0:8787") == "0.0.0.0:8787"  # asked for: left alone


@pytest.fixture
def sweep(caplog: pytest.LogCaptureFixture) -> Iterator[tuple[DaskLauncher, Any]]:
    """A launcher with its local cluster of one worker (from the fork server, as a sweep starts it)."""
    import dask
    import distributed  # noqa: F401  (its config defaults, before the context below records the config)

    launcher = DaskLauncher(n_workers=1, dashboard_address=":0")
    caplog.set_level(logging.INFO, logger=_cluster.log.name)
    with dask.config.set({"distributed.worker.multiprocessing-method": "spawn"}):  # restored afterwards
        client = _cluster.connect(launcher)
        try:
            yield launcher, client
        finally:
            _cluster.close(weakref.ref(launcher))


INTRUDER = """
import gc, sys, time
from distributed import Client
from distributed.security import Security

address = sys.argv[1]
for name, url, security in (("no credentials", address, None),
                            ("plain TCP", address.replace("tls://", "tcp://"), None),
                            ("credentials of its own", address, Security.temporary())):
    start = time.perf_counter()
    try:
        Client(url, security=security, timeout="3s")
        outcome = "connected"
    except Exception as exc:
        outcome = f"refused ({type(exc).__name__})"
    print(f"{name}: {outcome} in {time.perf_counter() - start:.1f} s", flush=True)
    gc.collect()  # a failed client closes its event loop when collected: now, not inside the next one's start
"""
"""Another user's process: tries to connect to the scheduler at argv[1] three ways, a line per try."""


@pytest.mark.slow
def test_the_local_cluster_admits_only_the_sweeps_client(sweep: tuple[DaskLauncher, Any],
                                                         caplog: pytest.LogCaptureFixture) -> None:
    launcher, client = sweep
    address = client.scheduler.address
    assert address.startswith("tls://127.0.0.1:")
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 1
    assert all(w.startswith("tls://127.0.0.1:") and info["nanny"].startswith("tls://127.0.0.1:")
               for w, info in workers.items())
    assert client.submit(sum, [40, 2], pure=False).result(timeout=60) == 42  # the sweep's client works
    proc = subprocess.run([sys.executable, "-c", INTRUDER, address], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    tries = [line.rsplit(" in ", 1) for line in proc.stdout.splitlines()]
    assert [outcome.split(" (")[0] for outcome, _ in tries] == [
        "no credentials: refused", "plain TCP: refused", "credentials of its own: refused"], proc.stdout
    assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3  # still serving its own client
    dashboard = launcher.cluster.scheduler.services["dashboard"]
    assert dashboard.address == "127.0.0.1"
    link = f"http://127.0.0.1:{dashboard.port}/status"
    logged = [r.getMessage() for r in caplog.get_records("setup")]  # the fixture started the cluster
    assert f"dask: a local cluster of 1 workers, dashboard {link}" in logged
