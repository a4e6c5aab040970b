"""Preload of the local cluster's workers: Ctrl-C is the driver's to handle; warm up for jobs (FMU instances kept
between them); stop at close.

A terminal sends SIGINT to the whole foreground process group, the workers of
a ``LocalCluster`` included. The driver cancels the jobs and shuts the cluster
down; a worker that raised ``KeyboardInterrupt`` itself would only add a
traceback per process. A worker being closed (the sweep was interrupted, or
its worker is restarted) asks the run in progress to stop
(:func:`cosimrun.runner.signals.request_stop`): it ends ``interrupted`` at its
next check, with its results file closed, instead of being killed mid-write.
"""

from __future__ import annotations

import signal
from typing import Any


def dask_setup(worker: Any) -> None:
    from cosimrun.runner.worker import keep_workers_fmus, warm_up

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm_up()
    keep_workers_fmus()


def dask_teardown(worker: Any) -> None:
    """Called as the worker closes: the job running in it (in another thread) ends at its next check."""
    from cosimrun.runner import signals

    signals.request_stop()
