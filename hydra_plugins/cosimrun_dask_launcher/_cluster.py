"""The launcher's dask client: to a cluster it creates, to a scheduler's address, or to a new ``LocalCluster``.

A local cluster's workers are forked from cosimrun's fork server
(:mod:`._forkserver`) and run one job at a time, without dask's profiler and
with slower monitors (``quiet_workers``). Imported when a sweep is launched.

Whoever can talk to a dask scheduler can run code in its workers. A local
cluster therefore listens on the loopback interface only (scheduler, workers
and, unless an address with a host is given, the dashboard) and speaks TLS
with credentials made for the sweep (:func:`sweep_security`): the scheduler
and workers admit only clients holding the sweep's certificate, which lives in
the driver's and the workers' memory only. Another user of the machine can
reach the loopback ports but not run anything; the dashboard is read-only but
shows the sweep's task names (``hydra.launcher.dashboard_address=null``: no
dashboard). A ``cluster`` or an ``address`` is the user's to secure (dask's
``distributed.comm.tls.*`` settings apply to the client made here).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import weakref
from typing import TYPE_CHECKING, Any

from cosimrun.errors import ConfigError
from hydra_plugins.cosimrun_dask_launcher import _forkserver

if TYPE_CHECKING:
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher

log = logging.getLogger(__name__)

_DASK_LOGGERS = ("distributed", "distributed.scheduler", "distributed.core", "distributed.client")


def _quiet_dask() -> None:
    for name in _DASK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)


class Unreachable(ConfigError):
    """The scheduler at ``hydra.launcher.address`` did not answer within ``hydra.launcher.connect_timeout``."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


def connect(launcher: DaskLauncher) -> Any:
    """The launcher's client: to ``cluster`` (instantiated), to ``address``, or to a new ``LocalCluster``."""
    if launcher.client is not None:
        return launcher.client
    import dask
    from distributed import Client

    _quiet_dask()
    dask.config.set(SHORT_MESSAGE_LOGS)  # read as each connection opens, workers' restarts included

    cluster = None
    if launcher.cluster_config:
        from hydra.utils import instantiate

        cluster = instantiate(launcher.cluster_config)
        if launcher.n_workers:
            cluster.scale(launcher.n_workers)
        client = Client(cluster)
        where = type(cluster).__name__
    elif launcher.address:
        try:
            client = Client(launcher.address, timeout=launcher.connect_timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise Unreachable(
                f"hydra.launcher.address={launcher.address}: no dask scheduler answered within "
                f"{launcher.connect_timeout:g} s (hydra.launcher.connect_timeout): {type(exc).__name__}: {exc}"
            ) from exc
        where = launcher.address
    else:
        from dask.system import CPU_COUNT  # cores available to this process (affinity, cgroup limits)

        _fast_worker_start()
        n_workers = launcher.n_workers or CPU_COUNT or 1
        # one job at a time per worker: a worker that dies takes only the job it was running with it
        # (with dask's default 1.1, a second job may wait on it and be reported lost too)
        with dask.config.set({"distributed.scheduler.worker-saturation": 1.0, **_quiet_workers(launcher)}):
            cluster = _local_cluster(launcher, n_workers)
        dask.config.set(KEEP_NANNIES)  # read whenever a worker goes, for as long as the sweep runs
        client = Client(cluster)
        where = f"a local cluster of {n_workers} workers"
    _quiet_dask()
    launcher.client, launcher.cluster = client, cluster
    link = ""
    with contextlib.suppress(Exception):  # no dashboard (bokeh missing, disabled): no link
        if launcher.address or launcher.cluster_config:
            link = client.dashboard_link
        elif launcher.dashboard_address:
            link = _dashboard_link(cluster)
    log.info(f"dask: {where}{f', dashboard {link}' if link else ''}")
    atexit.register(close, weakref.ref(launcher))
    return client


QUIET_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
}
"""dask settings of a local cluster with ``quiet_workers``: no statistical profiler, slower monitors."""


def _quiet_workers(launcher: DaskLauncher) -> dict[str, Any]:
    """:data:`QUIET_WORKERS` when the launcher asks for them.

    A worker's profiler samples the job's thread every 10 ms and its monitors
    wake every 20 to 500 ms; each wake takes the GIL from the job. Together
    they cost single-threaded Python jobs some 5 % of their speed (measured
    with ``benchmarks/bench_sweep.py``).
    """
    return dict(QUIET_WORKERS) if launcher.quiet_workers else {}


SHORT_MESSAGE_LOGS = {"distributed.admin.low-level-log-length": 16}
"""dask keeps the last messages of each connection for debugging, by default 1000, each below 1 MB: on the
driver those are the chunks of jobs sent, every job's config and overrides (the local cluster's scheduler runs
in the driver). A sweep of 10^5 jobs kept some 40 MB of them; 16 keep what a debugger needs."""

KEEP_NANNIES = {"distributed.deploy.lost-worker-timeout": "36500d"}
"""A local cluster's nannies restart their workers; the cluster must not close them for good.

dask's ``SpecCluster`` checks, ``lost-worker-timeout`` (15 s) after a worker
went, whether a worker of that name is back, and otherwise closes its nanny
for good (meant for batch-system jobs that vanished). A nanny whose workers
keep crashing (jobs that call ``os._exit``) is often between two restarts at
that instant: with the default, a sweep of such jobs lost one worker after the
other until none was left and waited forever.
"""


LOOPBACK = "127.0.0.1"
"""Where a local cluster's scheduler, workers and (by default) dashboard listen."""


def sweep_security() -> Any:
    """TLS credentials made for one sweep: a self-signed key and certificate, in memory only.

    Needs the ``cryptography`` package; without it the sweep stops with a
    message rather than run an open cluster.
    """
    from distributed.security import Security

    try:
        return Security.temporary()
    except ImportError as exc:
        raise RuntimeError("a sweep's local dask cluster uses TLS with credentials made for the sweep, which "
                           "needs the 'cryptography' package: pip install cryptography") from exc


def loopback_dashboard(address: str | None) -> str | None:
    """*address* with the loopback host when it names only a port (``:0``, ``8787``); ``None`` stays none."""
    if address is None or str(address).strip() == "":
        return None
    text = str(address).strip()
    if text.startswith(":"):
        return f"{LOOPBACK}{text}"
    if text.isdigit():
        return f"{LOOPBACK}:{text}"
    return text


def _dashboard_link(cluster: Any) -> str:
    """The dashboard's link at the address its server is bound to ("" without a dashboard)."""
    from distributed.utils import format_dashboard_link

    server = cluster.scheduler.services.get("dashboard")
    if server is None:
        return ""
    host = server.address
    shown = format_dashboard_link(LOOPBACK if host in ("0.0.0.0", "::") else host, server.port)
    return f"{shown} (all interfaces)" if host in ("0.0.0.0", "::") else shown


def _local_cluster(launcher: DaskLauncher, n_workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        host=LOOPBACK,
        protocol="tls://",
        security=sweep_security(),
        dashboard_address=loopback_dashboard(launcher.dashboard_address),
        memory_limit=launcher.memory_limit,
        # cosimrun reports each job's failure and a worker's death in its own lines; dask's logs of its local
        # processes (e.g. a worker's heartbeat to a scheduler that a SIGTERM is closing) would only interleave
        silence_logs=logging.CRITICAL,
        # a job whose worker died is reported to the driver at once; `retries` decides what follows
        scheduler_kwargs={"allowed_failures": 0},
        preload=["hydra_plugins.cosimrun_dask_launcher._worker"],  # workers leave Ctrl-C to the driver
    )


def _fast_worker_start() -> None:
    """Start local workers from a fork server (see :mod:`._forkserver`).

    Left alone when dask's ``distributed.worker.multiprocessing-method`` was
    set to something else than its default, or where there is no fork server.
    """
    import dask

    from cosimrun.runner._private import PrivateAPIChanged, skip_distributed_forkserver_preload

    key = "distributed.worker.multiprocessing-method"
    if dask.config.get(key) != "spawn" or not _forkserver.available():
        return
    dask.config.set({key: "forkserver"})
    # distributed computes a preload list of its own on first use, importing pandas and more into
    # this process only for that; the server runs with cosimrun's list
    with contextlib.suppress(PrivateAPIChanged):  # then distributed's list costs its imports, nothing else
        skip_distributed_forkserver_preload()
    _forkserver.start()


def close(ref: weakref.ref[DaskLauncher]) -> None:
    """Close the client and cluster of the launcher *ref* refers to (at exit), if it is still there."""
    launcher = ref()
    if launcher is None:
        return
    client, cluster = launcher.client, launcher.cluster
    launcher.client = launcher.cluster = None
    for thing in (client, cluster):
        if thing is not None:
            with contextlib.suppress(Exception):  # shutting down: nothing useful to do about it
                thing.close()
