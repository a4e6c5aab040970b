"""The Hydra callback that keeps an interrupt out of Hydra's set-up of a single run.

Between composing a run's config and calling its task, Hydra makes the run directory and writes its ``.hydra``
files and log. A signal there would end the command with that directory left behind, although nothing ran. From
``on_run_start`` the signal is noted (:func:`cosimrun.runner.signals.hold`) and raised as the task begins
(``cosimrun.cli``'s task calls :func:`~cosimrun.runner.signals.release` first), where an interrupted run removes
a directory that holds Hydra's files only; ``on_run_end`` releases it too, should Hydra end without the task.
"""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback

from cosimrun.runner import signals


class RunSetUpShield(Callback):
    """Hold signals from the start of a single run until its task begins (see the module)."""

    def on_run_start(self, config: Any, **kwargs: Any) -> None:
        signals.hold()

    def on_run_end(self, config: Any, **kwargs: Any) -> None:
        signals.release()
