"""Switch regions: a scalar output mapped onto ordered modes, with a hysteresis band per boundary.

Attached to a :class:`~cosimrun.core.multi.MultiComponent`, each boundary
doubles as an event indicator, so that an event-locating (hybrid) master
switches at the exact crossing instant.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cosimrun.errors import ConfigError


@dataclass(frozen=True)
class SwitchRegions:
    """Ordered regions of a scalar output port, one mode each, with a hysteresis band per boundary.

    ``bounds[i] = (lower_i, upper_i)`` separates region ``i`` from region ``i + 1``:
    from region ``i`` the component moves up only once the value exceeds
    ``upper_i`` and from region ``i + 1`` down only once it falls below
    ``lower_i`` (several boundaries may be passed at once). A value oscillating
    inside a band therefore never switches. With ``use_abs`` the regions apply to
    ``|value|``.

    Attached with :meth:`MultiComponent.set_switch_regions`, boundary ``i`` also
    provides the event indicators ``f"{port}_up{i}"`` and ``f"{port}_down{i}"``
    (see :meth:`indicator_names`).
    """

    port: str
    modes: Sequence[str]
    bounds: Sequence[tuple[float, float]]
    use_abs: bool = False

    def __post_init__(self) -> None:
        where = f"SwitchRegions(port={self.port!r})"
        if not isinstance(self.port, str) or not self.port:
            raise ConfigError("port", f"SwitchRegions: port must be a non-empty string, got {self.port!r}")
        if isinstance(self.modes, str) or not isinstance(self.modes, Sequence):
            raise ConfigError("modes", f"{where}: modes must be a list of mode names, got {self.modes!r}")
        modes = tuple(self.modes)
        if len(modes) < 2:
            raise ConfigError("modes", f"{where}: at least two modes are needed, got {list(modes)!r}")
        for i, mode in enumerate(modes):
            if not isinstance(mode, str) or not mode:
                raise ConfigError("modes", f"{where}: modes[{i}] must be a non-empty string, got {mode!r}")
        for i in range(len(modes) - 1):
            if modes[i] == modes[i + 1]:
                raise ConfigError(
                    "modes", f"{where}: adjacent regions {i} and {i + 1} both select mode {modes[i]!r}; merge them"
                )
        if isinstance(self.bounds, str) or not isinstance(self.bounds, Sequence):
            raise ConfigError("bounds", f"{where}: bounds must be a list of (lower, upper) pairs, got {self.bounds!r}")
        if len(self.bounds) != len(modes) - 1:
            raise ConfigError(
                "bounds",
                f"{where}: {len(modes)} modes need {len(modes) - 1} (lower, upper) bounds, got {len(self.bounds)}",
            )
        bounds = tuple(_bound_pair(where, i, b) for i, b in enumerate(self.bounds))
        for i in range(1, len(bounds)):
            if not bounds[i][0] > bounds[i - 1][1]:
                raise ConfigError(
                    "bounds", f"{where}: bounds must increase: bounds[{i}]={bounds[i]} must lie above "
                    f"bounds[{i - 1}]={bounds[i - 1]} (lower {bounds[i][0]} > previous upper {bounds[i - 1][1]})"
                )
        if not isinstance(self.use_abs, bool):
            raise ConfigError("use_abs", f"{where}: use_abs must be True or False, got {self.use_abs!r}")
        if self.use_abs and bounds[0][0] <= 0.0:
            raise ConfigError(
                "bounds", f"{where}: with use_abs=True the lowest lower bound must be > 0 "
                f"(|{self.port}| never falls below {bounds[0][0]}, so region 0 could never be re-entered)"
            )
        object.__setattr__(self, "modes", modes)
        object.__setattr__(self, "bounds", bounds)

    @classmethod
    def threshold(
        cls, port: str, below: str, above: str, lower: float, upper: float, use_abs: bool = False
    ) -> SwitchRegions:
        """Two modes: *above* once the value exceeds *upper*, *below* once it falls below *lower*."""
        return cls(port, [below, above], [(lower, upper)], use_abs)

    @property
    def n_regions(self) -> int:
        return len(self.modes)

    def value(self, raw: float) -> float:
        """The compared value: *raw*, or ``|raw|`` with ``use_abs``."""
        return abs(raw) if self.use_abs else float(raw)

    def next_region(self, region: int, value: float, direction: int = 0) -> int:
        """The region reached from *region* for *value* (+1: only upward moves, -1: only downward)."""
        last = len(self.modes) - 1
        if direction >= 0:
            while region < last and value > self.bounds[region][1]:
                region += 1
        if direction <= 0:
            while region > 0 and value < self.bounds[region - 1][0]:
                region -= 1
        return region

    def classify(self, value: float, prefer_mode: str | None = None) -> int:
        """A region in which *value* may rest, preferring one of mode *prefer_mode*.

        Inside a band both neighbouring regions are valid; the preferred mode wins,
        otherwise the lower region is chosen.
        """
        last = len(self.modes) - 1
        stable = [
            i
            for i in range(len(self.modes))
            if (i == 0 or value >= self.bounds[i - 1][0]) and (i == last or value <= self.bounds[i][1])
        ]
        for i in stable:
            if self.modes[i] == prefer_mode:
                return i
        if stable:
            return stable[0]
        return self.modes.index(prefer_mode) if prefer_mode in self.modes else 0

    def indicator_names(self) -> dict[str, tuple[str, int]]:
        """``{name: (kind, boundary)}`` of the boundary indicators, kind ``"up"`` or ``"down"``."""
        names: dict[str, tuple[str, int]] = {}
        for i in range(len(self.bounds)):
            names[f"{self.port}_up{i}"] = ("up", i)
            names[f"{self.port}_down{i}"] = ("down", i)
        return names


def _bound_pair(where: str, i: int, bound: Any) -> tuple[float, float]:
    if isinstance(bound, str) or not isinstance(bound, Sequence) or len(bound) != 2:
        raise ConfigError("bounds", f"{where}: bounds[{i}] must be a (lower, upper) pair, got {bound!r}")
    pair = []
    for label, x in zip(("lower", "upper"), bound, strict=True):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
            raise ConfigError("bounds", f"{where}: bounds[{i}] {label} must be a finite number, got {x!r}")
        pair.append(float(x))
    lower, upper = pair
    if lower > upper:
        raise ConfigError("bounds", f"{where}: bounds[{i}] has lower {lower} > upper {upper}")
    return lower, upper



IRRELEVANT = -1.0
"""Value of a boundary indicator whose boundary does not touch the current region."""


class RegionTracker:
    """The region of :class:`SwitchRegions` a multi component is in, and where the regions' value takes it.

    *value* reads the regions' value now (``SwitchRegions.value`` of the active
    model's cached output); *mode*, passed to each call, is the component's
    active mode then, which places a value inside a band. ``region`` is
    ``None`` until first needed, and is part of the component's snapshot.
    """

    def __init__(self, regions: SwitchRegions, value: Callable[[], float]) -> None:
        self.regions = regions
        self._value = value
        self.region: int | None = None

    def classify(self, mode: str) -> None:
        """Place the current value afresh (at initialization)."""
        self.region = self.regions.classify(self._value(), mode)

    def current(self, value: float, mode: str) -> int:
        """The current region, placing *value* if there is none yet."""
        if self.region is None:
            self.region = self.regions.classify(value, mode)
        return self.region

    def select(self, mode: str) -> str:
        """The mode the value asks for (the regions as a mode selector); staying in *mode* updates the region."""
        value = self._value()
        target = self.regions.next_region(self.current(value, mode), value)
        selected = self.regions.modes[target]
        if selected == mode:
            self.region = target
        return selected

    def after_switch(self, mode: str) -> int:
        """The region to be in after a switch to *mode* that the regions did not choose themselves."""
        value = self._value()
        target = self.regions.next_region(self.current(value, mode), value)
        if self.regions.modes[target] == mode:
            return target
        candidates = [i for i, m in enumerate(self.regions.modes) if m == mode]
        return min(candidates, key=lambda i: abs(i - target)) if candidates else target

    def indicator(self, kind: str, boundary: int, mode: str) -> float:
        """Value of boundary indicator *kind* (``up``/``down``) of *boundary*: crosses zero only leaving the region."""
        value = self._value()
        region = self.current(value, mode)
        lower, upper = self.regions.bounds[boundary]
        if kind == "up":
            return value - upper if region == boundary else IRRELEVANT
        return lower - value if region == boundary + 1 else IRRELEVANT

    def crossed(self, boundaries: Sequence[tuple[str, int]], mode: str) -> int | None:
        """The region a handled boundary event (``(kind, boundary)``) leads to, or ``None`` if none applies now."""
        value = self._value()
        region = self.current(value, mode)
        for kind, i in boundaries:
            if kind == "up" and region == i:
                return self.regions.next_region(i + 1, value, direction=1)
            if kind == "down" and region == i + 1:
                return self.regions.next_region(i, value, direction=-1)
        return None
