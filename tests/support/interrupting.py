"""A Hydra callback that interrupts the command in Hydra's set-up of a run (tests of signals).

Usage: ``+hydra.callbacks.interrupt._target_=tests.support.interrupting.SignalAtJobStart`` (with
``tests/support/run_cli.py``, which puts the repository on ``sys.path``).
"""

from __future__ import annotations

import os
import signal
from typing import Any

from hydra.experimental.callback import Callback


class SignalAtJobStart(Callback):
    """Sends the command SIGINT when Hydra starts the job: its run directory and ``.hydra`` files written, its log
    open, its task not begun."""

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)
