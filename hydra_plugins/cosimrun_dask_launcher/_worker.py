"""Preload of the local cluster's workers: Ctrl-C is the driver's to handle; warm up for jobs.

A terminal sends SIGINT to the whole foreground process group, the workers of
a ``LocalCluster`` included. The driver cancels the jobs and shuts the cluster
down; a worker that raised ``KeyboardInterrupt`` itself would only add a
traceback per process.
"""

from __future__ import annotations

import signal
from typing import Any


def dask_setup(worker: Any) -> None:
    from cosimrun.runner.worker import warm_up

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm_up()
