"""The log of the communication steps a run under error control tried, and the columns of its ``/steps`` table.

Plain run data: the masters append to it, the results store it, and neither imports the other.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

STEP_COLUMNS = ("time", "step", "error", "accepted")
"""The columns of a run's ``/steps`` table."""


@dataclass
class StepLog:
    """Every step a run under error control tried: start time, length, error norm, whether it was accepted."""

    time: array = field(default_factory=lambda: array("d"))
    step: array = field(default_factory=lambda: array("d"))
    error: array = field(default_factory=lambda: array("d"))
    accepted: array = field(default_factory=lambda: array("b"))

    def append(self, t: float, h: float, norm: float, accepted: bool) -> None:
        self.time.append(t)
        self.step.append(h)
        self.error.append(norm)
        self.accepted.append(accepted)

    def __len__(self) -> int:
        return len(self.time)

    def columns(self) -> dict[str, np.ndarray]:
        """The log as arrays by column name (:data:`STEP_COLUMNS`)."""
        return {
            "time": np.frombuffer(self.time, dtype=np.float64).copy(),
            "step": np.frombuffer(self.step, dtype=np.float64).copy(),
            "error": np.frombuffer(self.error, dtype=np.float64).copy(),
            "accepted": np.frombuffer(self.accepted, dtype=np.int8).copy(),
        }
