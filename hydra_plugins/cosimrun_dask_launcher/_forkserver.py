"""Local workers forked from a server that has imported dask, Hydra and cosimrun once.

Spawning every worker of a ``LocalCluster`` (dask's default) re-imports all of
them in each process, a second or more per worker before its first job;
forking from a clean server process (no threads, unlike the driver) costs
milliseconds. :func:`prestart` starts that server as the ``cosimrun`` command
starts, so that its imports run beside Hydra's start-up rather than after it.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence

PRELOAD = (
    "distributed",
    "hydra.core.utils",
    "cosimrun.runner.sweep",
    "cosimrun.runner.worker",
    "cosimrun.runner.run",
)
"""What the server imports before it forks workers, besides the builtin components (see :func:`preload`)."""


def preload() -> list[str]:
    """The modules the server imports: :data:`PRELOAD` and the builtin components' modules."""
    from cosimrun.components import MODULES

    return [*PRELOAD, *MODULES]


def available() -> bool:
    """Whether this platform has a fork server (not on Windows)."""
    return "forkserver" in multiprocessing.get_all_start_methods()


def start() -> None:
    """Start the fork server with :func:`preload` (no-op when it runs already or there is none)."""
    if not available():
        return
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(preload())
    forkserver.ensure_running()


_OTHER_LAUNCH = ("hydra/launcher=", "hydra.launcher.address=", "hydra.launcher.cluster", "+hydra.launcher.cluster")


def _other_launch(arg: str) -> bool:
    return arg.startswith(_OTHER_LAUNCH) and arg != "hydra/launcher=dask"


def prestart(argv: Sequence[str]) -> bool:
    """Start the fork server now when *argv* is a sweep that will likely start a local cluster.

    That is ``-m`` without a launcher, address or cluster given on the command
    line (one set in a config file only costs the server's imports in an idle
    process). Returns whether it was started.
    """
    if not any(a in ("-m", "--multirun") for a in argv):
        return False
    if any(_other_launch(a) for a in argv) or not available():
        return False
    try:
        start()
    except (OSError, ValueError):  # no socket or pipe here: the cluster's own start will say why
        return False
    return True
