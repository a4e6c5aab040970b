"""The global error of a run under step control, estimated by tolerance reduction (``global_error: estimate``).

Step control bounds the local error each communication step makes, not what
the run accumulates from it: on a limit cycle the local errors shift the
phase, which no trajectory nearby corrects, and the global error can be many
times the tolerance. The classic check of ODE codes estimates it by running
again at a tighter tolerance: after the run (the *primary*) the system runs
again from ``t0`` with the same settings at ``rtol / 10`` and ``atol / 10``
(the *tight* run), made to stop at every instant the primary recorded a sample
(its own controlled steps fall in between), and the difference of the two at
those instants estimates the primary's global error.

With coupling order ``q`` (``extrapolation + 1``) a step's local error is
``O(h**(q + 1))``, so steps scale as ``tol**(1 / (q + 1))`` and the global
error as ``tol**(q / (q + 1))``: the tight run's own error is about ``f =
10**(-q / (q + 1))`` of the primary's (0.32, 0.22, 0.18 for ``q`` = 1, 2, 3).
Where both errors have the same sign, as a phase lag does, the difference is
``(1 - f)`` of the primary's error, so the estimate is up to that much low.
It is not divided by ``(1 - f)``: measured against monolithic references the
tight run's error was smaller than ``f`` says (the estimate came to 0.85-0.98
of the true error on van der Pol and 0.88-1.02 on the quarter car, see
``docs/how-to/error-control.md``), and the division would overstate it by
about 20 %.

Per recorded real output the result (:class:`GlobalError`) is the largest
estimate over the run, where it was, and its ratio to the output's tolerance
``atol + rtol * s`` with ``s`` the output's largest magnitude in the primary
run, as the step controller's tolerance uses. Both runs' samples are seen
through :meth:`~cosimrun.system.recorder.Recorder.watch` (the recorded real
outputs); at an instant with several samples (events) the last one, after the
events, is compared. An event whose instant differs between the two runs shows
as the size of its jump near it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping

GLOBAL_ERRORS = ("none", "estimate")
"""The values of the explicit masters' ``global_error`` setting."""
TIGHTENING = 10.0
"""The tight run's ``rtol`` and ``atol`` are the primary's divided by this."""
RATIO_WARNED = 10.0
"""A largest ratio above this warns (:meth:`GlobalErrorEstimate.warning`)."""


@dataclass(frozen=True)
class GlobalError:
    """The estimated global error of one recorded real output over a run (in the output's unit)."""

    output: str
    """``component.port``."""
    unit: str | None
    max: float
    """The largest estimate over the run."""
    time_of_max: float
    scale: float
    """The output's largest magnitude in the run (``s``)."""
    tolerance: float
    """``atol + rtol * scale``."""

    @property
    def ratio(self) -> float:
        """``max`` relative to the tolerance."""
        return self.max / self.tolerance if self.tolerance > 0.0 else math.inf if self.max > 0.0 else 0.0


class RecordedSamples:
    """The recorded real samples of one run, as the recorder hands them over (:meth:`take`, a watcher)."""

    def __init__(self) -> None:
        self.times: list[np.ndarray] = []
        self.blocks: list[np.ndarray] = []
        self.names: list[tuple[str, str]] = []

    def take(self, times: np.ndarray, block: np.ndarray, names: list[tuple[str, str]]) -> None:
        """Keep a copy of one block (rows: samples, columns: the ports *names*)."""
        self.times.append(np.array(times, dtype=np.float64))
        self.blocks.append(np.array(block, dtype=np.float64))
        self.names = list(names)

    def concatenated(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sample: the times and the values (rows: samples, columns: the ports :attr:`names`)."""
        if not self.times:
            return np.empty(0), np.empty((0, len(self.names)))
        return np.concatenate(self.times), np.concatenate(self.blocks)

    def last_per_instant(self) -> tuple[np.ndarray, np.ndarray]:
        """The sample times, each once, and the last sample at each (after the events there)."""
        return _last_per_instant(*self.concatenated())


def _last_per_instant(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """*times* each once (they are in order) and the last row of *values* at each."""
    last = np.append(times[1:] != times[:-1], True)
    return times[last], values[last]


class GlobalErrorEstimate:
    """One estimate: the tight master, the primary's and the tight run's samples, and their comparison."""

    def __init__(self, master: Any) -> None:
        self.rtol: float = master.rtol
        self.atol: float = master.atol
        self.tight = dataclasses.replace(master, rtol=master.rtol / TIGHTENING, atol=master.atol / TIGHTENING,
                                         global_error="none")
        """The master of the tight run."""
        self.primary_samples = RecordedSamples()
        self.tight_samples = RecordedSamples()

    def stops(self) -> list[float]:
        """The instants the primary recorded, where the tight run must stop."""
        return self.primary_samples.last_per_instant()[0].tolist()

    def result(self, units: Mapping[tuple[str, str], str | None]) -> list[GlobalError]:
        """Per output recorded by both runs: the estimate at their common sample instants, largest ratio
        first (*units*: each ``(component, port)``'s unit)."""
        every_time, everything = self.primary_samples.concatenated()
        t_p, y_p = _last_per_instant(every_time, everything)
        t_t, y_t = self.tight_samples.last_per_instant()
        common, i_p, i_t = np.intersect1d(t_p, t_t, assume_unique=True, return_indices=True)
        tight_columns = {name: j for j, name in enumerate(self.tight_samples.names)}
        rows = []
        for j, name in enumerate(self.primary_samples.names):
            k = tight_columns.get(name)
            if k is None or not len(common):
                continue
            error = np.abs(y_p[i_p, j] - y_t[i_t, k])
            worst = int(np.argmax(error))
            scale = float(np.max(np.abs(everything[:, j])))
            rows.append(GlobalError(f"{name[0]}.{name[1]}", units.get(name), float(error[worst]),
                                    float(common[worst]), scale, self.atol + self.rtol * scale))
        return sorted(rows, key=lambda e: -e.ratio)

    def warning(self, errors: list[GlobalError]) -> str | None:
        """The one-line warning when the largest ratio of *errors* exceeds :data:`RATIO_WARNED`, else ``None``."""
        if not errors or not errors[0].ratio > RATIO_WARNED:
            return None
        e = errors[0]
        unit = f" {e.unit}" if e.unit else ""
        return (f"the estimated global error of {e.output} is {e.max:.2g}{unit} at t={e.time_of_max:.6g} s, "
                f"{e.ratio:.3g} x its tolerance {e.tolerance:.2g}{unit} (rtol={self.rtol:g}, atol={self.atol:g}): "
                f"step control bounds each step's local error, not what the run accumulates from it (e.g. the phase "
                f"of a limit cycle); tighten rtol")


def summary_line(errors: list[GlobalError], step_control: str) -> str:
    """The end-of-run summary's line on the global error (without a newline): the largest ratio's output, or,
    under step control without an estimate, that the tolerance is per step; ``""`` under fixed steps."""
    if errors:
        e = errors[0]
        unit = f" {e.unit}" if e.unit else ""
        return (f"estimated global error: {e.max:.2g}{unit} on {e.output} at t={e.time_of_max:.6g} s, "
                f"{e.ratio:.3g} x its tolerance")
    if step_control != "fixed":
        return "tolerance per step; global error not estimated (master.global_error=estimate)"
    return ""
