"""Gauss-Seidel (sequential) master: components step in priority order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosimrun.masters.base import Master
from cosimrun.masters.stepsize import Clock


@dataclass
class GaussSeidel(Master):
    """Components step in priority order; each uses its producers' fresh outputs.

    Inputs from components later in the order (the connections cut to order the
    graph) lag by one step; ``extrapolation`` applies to those only.
    """

    loop_solver: str = "gauss_seidel"
    extrapolation: int = 0

    name: ClassVar[str] = "gauss_seidel"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choice("extrapolation", self.extrapolation, (0, 1, 2))

    def begin(self, t0: float) -> None:
        super().begin(t0)
        assert self.system is not None
        position = {c.name: i for i, c in enumerate(self.order)}
        fresh = {c.name: [] for c in self.order}
        lagging = []
        for lk in self.system.links:
            conn = lk.connection
            if position[conn.src_component] < position[conn.dst_component]:
                fresh[conn.dst_component].append(lk)
            else:
                lagging.append(lk)
        self._plan = [
            (
                c,
                self.pushers[c.name],
                [(lk.dst, lk.src, lk.conversion.scale, lk.conversion.offset) for lk in fresh[c.name]],
            )
            for c in self.order
        ]
        self._start_extrapolation(self.extrapolation, lagging, t0)

    def advance(self, clock: Clock, a: int, b: int) -> int:
        t, t1 = clock.time(a), clock.time(b)
        h = t1 - t
        if self._lagging:
            self._extrapolate(t, h)
        for comp, push, fresh in self._plan:
            for dst, src, scale, offset in fresh:
                dst.value = scale * src.value + offset
            if push is not None:
                push(t)
            comp.do_step(t, h)
        self.exchange()
        if self._resolution:
            self.resolve(t1)
            self.record_late(t1)
        if self._lagging:
            self._sample_extrapolation(t1)
        return b
