"""Coupling-error estimates: how far each coupled real input was, over each step, from its producer's output.

The standard estimator of extrapolation-based co-simulation: at the end of a
step, what the consumer was given is compared with what the producer actually
did. How the input was given decides the comparison (the *kind* of the link):

``held``
    a value held over the step (no extrapolation, or a fresh output's end value
    under Gauss-Seidel): the input's change over the step, ``|y1 - y0|``;
``taylor``
    the extrapolating polynomial of degree ``p`` evaluated inside the consumer:
    its value at the step end against the producer's, ``|P(t1) - y1|``;
``mean``
    that polynomial's mean over the step, held: the larger distance of the mean
    from the producer's values at the step's start and end;
``line``
    a fresh output interpolated linearly over the step (Gauss-Seidel with
    ``extrapolation >= 1``): the interpolation error ``h**2 / 8 |y''|``, with
    ``y''`` from the last three samples (0 on the first step).

Samples are gathered at each accepted communication point (the values the
inputs hold after the exchange, before events are handled; :meth:`rebase` takes
the values after the events as the next step's start) and processed with numpy
in chunks, so a step costs one list of the link values. The result per
connection is the largest and the RMS estimate over the run, where the largest
was, and the range of the input, which :attr:`CouplingError.relative` divides by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from cosimrun.system.connection import Link

KINDS = ("held", "taylor", "mean", "line")
CHUNK = 512
"""Samples gathered before they are processed."""
CONTEXT = 3
"""Samples of the previous chunk a chunk needs (the history of a degree-2 extrapolation)."""


@dataclass(frozen=True)
class CouplingError:
    """The estimated local coupling error of one connection over a run (in the input's unit)."""

    connection: str
    unit: str | None
    max: float
    rms: float
    time_of_max: float
    """End of the step with the largest estimate."""
    range: float
    """Largest minus smallest value of the input over the run."""

    @property
    def relative(self) -> float:
        """``max`` relative to the input's range (``max`` itself for an input that never changed)."""
        return self.max / self.range if self.range > 0.0 else self.max


class CouplingErrorEstimate:
    """Gathers a run's samples of the coupled real inputs and estimates their coupling errors (see the module)."""

    def __init__(self, links: list[Link], kinds: list[str], order: int, t0: float) -> None:
        for kind in kinds:
            if kind not in KINDS:
                raise ValueError(f"unknown coupling kind {kind!r} (valid: {', '.join(KINDS)})")
        self.links = links
        self.ports = [lk.dst for lk in links]
        self.order = order
        self._kinds = np.array(kinds)
        n = len(links)
        first = [p.value for p in self.ports]
        self._t: list[float] = [t0]
        self._end: list[list[float]] = [first]
        self._start: list[list[float]] = [first]
        self._done = 0
        """Rows of the buffer already processed (the context of the next chunk)."""
        self._base = 0
        """Index over the run of the buffer's first row."""
        self._max = np.zeros(n)
        self._at = np.full(n, t0)
        self._sumsq = np.zeros(n)
        self._count = 0
        self._lo = np.array(first, dtype=float) if n else np.zeros(0)
        self._hi = self._lo.copy()

    def sample(self, t: float) -> None:
        """The inputs' values at the end of an accepted step ending at *t* (after the exchange)."""
        values = [p.value for p in self.ports]
        self._t.append(t)
        self._end.append(values)
        self._start.append(values)
        if len(self._t) - self._done > CHUNK:
            self._process()

    def rebase(self) -> None:
        """Events at the last sample changed the inputs: their values now start the next step."""
        self._start[-1] = [p.value for p in self.ports]

    def result(self) -> list[CouplingError]:
        """The estimates per connection over the samples so far."""
        self._process()
        rms = np.sqrt(self._sumsq / self._count) if self._count else np.zeros(len(self.links))
        return [
            CouplingError(str(lk.connection), lk.dst.spec.unit_name, float(self._max[i]), float(rms[i]),
                          float(self._at[i]), float(self._hi[i] - self._lo[i]))
            for i, lk in enumerate(self.links)
        ]

    # ------------------------------------------------------------------ chunks
    def _process(self) -> None:
        rows = len(self._t)
        if rows - self._done <= 0 or not self.links:
            self._trim()
            return
        t = np.array(self._t)
        end = np.array(self._end, dtype=float)
        start = np.array(self._start, dtype=float)
        new = np.arange(max(self._done, 1), rows)
        if len(new):
            e = self._estimates(t, start, end, new)
            self._count += len(new)
            self._sumsq += np.einsum("ij,ij->j", e, e)
            best = np.argmax(e, axis=0)
            larger = e[best, np.arange(e.shape[1])] > self._max
            self._max = np.where(larger, e[best, np.arange(e.shape[1])], self._max)
            self._at = np.where(larger, t[new][best], self._at)
            self._lo = np.minimum(self._lo, np.minimum(end[new].min(axis=0), start[new].min(axis=0)))
            self._hi = np.maximum(self._hi, np.maximum(end[new].max(axis=0), start[new].max(axis=0)))
        self._done = rows
        self._trim()

    def _trim(self) -> None:
        """Keep the last ``CONTEXT`` processed rows as the history of the next chunk."""
        drop = max(0, len(self._t) - CONTEXT)
        drop = min(drop, self._done)
        if drop:
            del self._t[:drop], self._end[:drop], self._start[:drop]
            self._done -= drop
            self._base += drop

    def _estimates(self, t: np.ndarray, start: np.ndarray, end: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Estimates of the steps ending at rows *k* (each > 0), one column per link."""
        h = (t[k] - t[k - 1])[:, None]
        y0, y1 = start[k - 1], end[k]
        held = np.abs(y1 - y0)
        out = held.copy()
        kinds = self._kinds
        known = self._base + k  # samples at or before each step's start
        if np.any(kinds == "taylor") or np.any(kinds == "mean"):
            p = np.minimum(self.order, known - 1)[:, None]
            slope = _slope(t, start, k - 1, k - 2)
            d2 = (slope - _slope(t, start, k - 2, k - 3)) / _span(t, k - 1, k - 3)
            tb = t[np.maximum(k - 2, 0)][:, None]
            tc = t[k - 1][:, None]
            end_value = y0 + np.where(p >= 1, slope * h, 0.0) + np.where(p >= 2, d2 * h * (t[k][:, None] - tb), 0.0)
            mean = y0 + np.where(p >= 1, slope * h / 2, 0.0) \
                + np.where(p >= 2, d2 * (0.5 * h * (tc - tb) + h * h / 3.0), 0.0)
            taylor = np.abs(end_value - y1)
            held_mean = np.maximum(np.abs(mean - y0), np.abs(mean - y1))
            out = np.where(kinds == "taylor", taylor, out)
            out = np.where(kinds == "mean", held_mean, out)
        if np.any(kinds == "line"):
            h_prev = (t[k - 1] - t[np.maximum(k - 2, 0)])[:, None]
            curvature = 2.0 * ((y1 - y0) / h - _slope(t, start, k - 1, k - 2)) / (h + np.where(h_prev > 0, h_prev, h))
            line = np.where((known >= 2)[:, None], h * h / 8.0 * np.abs(curvature), 0.0)
            out = np.where(kinds == "line", line, out)
        return np.where(np.isfinite(out), out, math.inf)


def _span(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``t[a] - t[b]`` as a column, 1 where *b* is before the first row (the term is not used there)."""
    span = t[a] - t[np.maximum(b, 0)]
    return np.where((b >= 0) & (span != 0), span, 1.0)[:, None]


def _slope(t: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Divided difference ``(y[a] - y[b]) / (t[a] - t[b])`` per row, 0 where *b* is before the first row."""
    ok = (b >= 0)[:, None]
    return np.where(ok, (y[a] - y[np.maximum(b, 0)]) / _span(t, a, b), 0.0)
