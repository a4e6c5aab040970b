"""The dask launcher's config (``hydra/launcher=dask``) and ``Launcher`` class.

Imported by Hydra's plugin scan at every start: no dask import here. No
``from __future__ import annotations`` either: the scan executes this module
before it is in ``sys.modules``, where ``dataclasses`` looks string annotations up.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

ENSEMBLE_SIZE = 1000
"""Default ``ensemble_size``: in ``benchmarks/bench_ensemble.py --dask-sweep`` (2000 members, 2 workers) ensembles
of 1000 members cost less per member end to end than ensembles of 250 (fewer tasks, set-ups and files; both far
below one job per member). Long runs are split further by the histories' memory
(``cosimrun.runner.ensembles.HISTORY_BYTES``)."""


@dataclass
class DaskLauncherConf:
    """Settings of ``hydra/launcher=dask`` (override as ``hydra.launcher.<name>=...``)."""

    _target_: str = "hydra_plugins.cosimrun_dask_launcher.dask_launcher.DaskLauncher"
    _recursive_: bool = False
    """``cluster`` is instantiated when the sweep starts, not with the launcher."""
    address: str | None = None
    """An existing scheduler (``tcp://host:8786``); empty: start a ``LocalCluster``."""
    n_workers: int | None = None
    """``LocalCluster``: worker processes (default: one per core); ``cluster``: passed to ``cluster.scale``."""
    retries: int = 1
    """How often a job is started again after the worker running it died (segfault, ``os._exit``, memory)."""
    resume: bool = False
    """Skip jobs whose results file in the sweep directory is complete and made from the same config."""
    cluster: Any = None
    """Optional cluster to create, e.g. ``{_target_: dask_jobqueue.SLURMCluster, cores: 1, memory: 2GB}``."""
    memory_limit: str | None = "auto"
    """``LocalCluster`` memory limit per worker (a worker above it is restarted, its job retried)."""
    dashboard_address: str | None = ":0"
    """``LocalCluster`` dashboard (``:0``: a free port on 127.0.0.1, printed at start; ``host:port`` as given;
    ``null``: none)."""
    quiet_workers: bool = True
    """``LocalCluster``: workers without dask's statistical profiler and with slower monitors (faster jobs)."""
    progress: bool = True
    """A progress bar on stderr when it is a terminal (one log line per job otherwise)."""
    objective: str | None = None
    """Index column whose value a job returns to an optimizing sweeper (``final.pendulum.q``; Optuna)."""
    timeout: float | None = None
    """Seconds a job may run; a job running longer is ``failed`` (``timeout after N s``), its worker restarted."""
    no_worker_timeout: float = 120.0
    """Seconds the sweep waits with jobs to run and no dask worker (all died, none came back) before it fails."""
    connect_timeout: float = 10.0
    """Seconds to reach the scheduler at ``address`` (or the ``cluster``'s) before the sweep is refused."""
    chunk_seconds: float = 1.0
    """Work per dask task: shorter jobs go to a worker in chunks of about this many seconds (0: one job per task)."""
    ensemble_size: int = ENSEMBLE_SIZE
    """Most members of one ensemble: jobs that differ only in component parameter values run together, as arrays,
    or one after the other where the system is not vectorizable (``docs/how-to/ensembles.md``); 0 runs every job on
    its own."""


ConfigStore.instance().store(group="hydra/launcher", name="dask", node=DaskLauncherConf, provider="cosimrun")


def _refuse(name: str, value: Any, valid: bool, what: str) -> None:
    """End the command with one line (exit status 2) for a launcher setting that cannot work, before anything runs."""
    if not valid:
        from cosimrun.exits import fail

        fail(f"hydra.launcher.{name}={value:g} cannot work: give {what}")


SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")
"""The protocols of a dask scheduler address."""


def _check_address(address: str | None) -> None:
    """End the command in one line for a scheduler ``address`` that is no ``[protocol://]host:port``."""
    if not address:
        return
    text = str(address)
    scheme, sep, rest = text.rpartition("://")
    host, colon, port = rest.rpartition(":")
    if (sep and scheme not in SCHEMES) or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        from cosimrun.exits import fail

        fail(f"hydra.launcher.address={text} cannot work: give a dask scheduler's address, PROTOCOL://HOST:PORT "
             f"with PROTOCOL one of {', '.join(SCHEMES)} (tcp://127.0.0.1:8786), or null for a local cluster")


def _check_memory_limit(limit: Any) -> None:
    """End the command in one line for a ``memory_limit`` dask cannot read (as ``LocalCluster`` reads it)."""
    if limit is None or str(limit).strip().lower() == "auto":
        return
    from dask.utils import parse_bytes

    try:
        value = float(limit) if isinstance(limit, int | float) else float(parse_bytes(str(limit)))
    except (TypeError, ValueError):
        value = -1.0
    if not value >= 0:
        from cosimrun.exits import fail

        fail(f"hydra.launcher.memory_limit={limit} cannot work: give a size per worker (4GB, 512MiB), a fraction "
             "of the machine's memory (0.25), auto (the memory shared among the workers) or null/0 (no limit)")


class DaskLauncher(Launcher):
    """Run the jobs of a sweep as dask tasks (short ones in chunks); the driver composes configs and keeps the
    sweep index."""

    def __init__(
        self,
        address: str | None = None,
        n_workers: int | None = None,
        retries: int = 1,
        resume: bool = False,
        cluster: Any = None,
        memory_limit: str | None = "auto",
        dashboard_address: str | None = ":0",
        quiet_workers: bool = True,
        progress: bool = True,
        objective: str | None = None,
        timeout: float | None = None,
        no_worker_timeout: float = 120.0,
        connect_timeout: float = 10.0,
        chunk_seconds: float = 1.0,
        ensemble_size: int = ENSEMBLE_SIZE,
    ) -> None:
        _refuse("n_workers", n_workers, n_workers is None or n_workers >= 1, "an integer >= 1, or null: one per core")
        _refuse("retries", retries, retries >= 0, "an integer >= 0")
        _refuse("timeout", timeout, timeout is None or timeout > 0, "a number of seconds > 0, or null: none")
        _refuse("no_worker_timeout", no_worker_timeout, no_worker_timeout > 0, "a number of seconds > 0")
        _refuse("connect_timeout", connect_timeout, connect_timeout > 0, "a number of seconds > 0")
        _refuse("chunk_seconds", chunk_seconds, 0 <= chunk_seconds < math.inf,
                "a finite number of seconds >= 0 (0: one job per task)")
        _refuse("ensemble_size", ensemble_size, ensemble_size >= 0, "an integer >= 0 (0: no ensembles)")
        _check_address(address)
        _check_memory_limit(memory_limit)
        self.no_worker_timeout = float(no_worker_timeout)
        self.connect_timeout = float(connect_timeout)
        self.chunk_seconds = float(chunk_seconds)
        self.ensemble_size = int(ensemble_size)
        self.address = address or None
        self.n_workers = n_workers
        self.timeout = None if timeout is None else float(timeout)
        self.retries = int(retries)
        self.resume = bool(resume)
        self.cluster_config = cluster
        self.memory_limit = memory_limit
        self.dashboard_address = dashboard_address
        self.quiet_workers = bool(quiet_workers)
        self.progress = progress
        self.objective = objective or None
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None
        self.client: Any = None
        self.cluster: Any = None
        self.said: set[str] = set()
        """The lines about jobs not run as ensembles said so far (each once per sweep)."""
        self.composer: Any = None
        """A ``cosimrun.runner.compose.JobComposer`` handed over by the sweeper that validated the jobs."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.cosimrun_dask_launcher import _core

        return _core.launch(self, job_overrides, initial_job_idx)
