"""Exact communication times: integer ticks instead of accumulated floats.

Time is counted in ticks of ``dt / resolution`` from ``t0``; grid point ``k``
is exactly ``t0 + k*dt`` (one rounding), and instants that come from floats
(time events, the end time) keep the float they were given. Repeated steps
therefore never drift or leave residual steps of a few ulp.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cosimrun.errors import ConfigError

DEFAULT_RESOLUTION = 2**40


class Clock:
    """Maps between float times and integer ticks on a ``t0 + k*dt`` grid."""

    __slots__ = ("t0", "dt", "resolution", "tick", "end", "_exact", "_last")

    def __init__(self, t0: float, dt: float, tf: float, resolution: int = DEFAULT_RESOLUTION) -> None:
        if not dt > 0.0 or not math.isfinite(dt):
            raise ConfigError("dt", f"must be a positive number, got {dt!r}")
        if not tf >= t0:
            raise ConfigError("tf", f"must not be before t0, got t0={t0!r}, tf={tf!r}")
        self.t0 = float(t0)
        self.dt = float(dt)
        self.resolution = resolution
        self.tick = self.dt / resolution
        self._exact: dict[int, float] = {0: self.t0}
        self._last: tuple[int, float] = (0, self.t0)
        """The tick :meth:`time` gave last, and its time: a step asks for the time of its end, and the next step
        for that of its start."""
        self.end = self.mark(float(tf))

    def ticks(self, t: float) -> int:
        """The tick nearest to time *t*."""
        offset = t - self.t0
        k = math.floor(offset / self.dt)
        return k * self.resolution + round((offset - k * self.dt) / self.tick)

    def mark(self, t: float) -> int:
        """Tick of *t*, remembering *t* itself as that tick's exact time."""
        ticks = self.ticks(t)
        exact = self._exact.setdefault(ticks, t)
        if self._last[0] == ticks:
            self._last = (ticks, exact)  # the tick's time may have been computed before it was marked
        return ticks

    def time(self, ticks: int) -> float:
        """The float time of a tick."""
        last = self._last
        if last[0] == ticks:
            return last[1]
        exact = self._exact.get(ticks)
        if exact is None:
            k, r = divmod(ticks, self.resolution)
            exact = self.t0 + k * self.dt if r == 0 else self.t0 + k * self.dt + r * self.tick
        self._last = (ticks, exact)
        return exact

    @property
    def snap(self) -> int:
        """Ticks below which two instants count as one (about ``6e-8 * dt``): a float time's
        rounding error, never a step worth taking."""
        return self.resolution >> 24

    def next_grid(self, ticks: int) -> int:
        """The first grid point strictly after *ticks*."""
        return (ticks // self.resolution + 1) * self.resolution

    def grid_index(self, ticks: int) -> int:
        """Index ``k`` of the last grid point at or before *ticks*."""
        return ticks // self.resolution

    # ------------------------------------------------------------------ checkpoints
    def split(self, ticks: int) -> list[int]:
        """*ticks* as ``[grid index, remainder]``: two 64-bit integers, however long the run (ticks may not fit one)."""
        return list(divmod(ticks, self.resolution))

    def join(self, parts: Any) -> int:
        """The ticks of :meth:`split`'s ``[grid index, remainder]``."""
        k, r = (int(v) for v in parts)
        return k * self.resolution + r

    def marks(self) -> dict[str, Any]:
        """The exact times remembered for ticks (:meth:`mark`), as arrays: grid index, remainder, time."""
        items = sorted(self._exact.items())
        parts = [divmod(tick, self.resolution) for tick, _ in items]
        return {"grid": np.array([k for k, _ in parts], dtype=np.int64),
                "rest": np.array([r for _, r in parts], dtype=np.int64),
                "time": np.array([t for _, t in items], dtype=np.float64)}

    def restore_marks(self, marks: Any) -> None:
        """Remember the exact times of :meth:`marks` (a checkpoint's) too."""
        for k, r, t in zip(marks["grid"].tolist(), marks["rest"].tolist(), marks["time"].tolist(), strict=True):
            self._exact.setdefault(k * self.resolution + r, t)
        self._last = (0, self._exact[0])
