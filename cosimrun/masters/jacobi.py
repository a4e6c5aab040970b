"""Jacobi (parallel) master: every component steps from the same inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosimrun.masters.base import Master
from cosimrun.masters.stepsize import Clock


@dataclass
class Jacobi(Master):
    """All components step from inputs sampled at the start of the macro step.

    ``extrapolation`` (0, 1 or 2) replaces each real input by the mean over the
    step of the polynomial through its latest 1, 2 or 3 communication-point
    values, which lifts the coupling error by one order in ``dt`` per degree.
    """

    loop_solver: str = "jacobi"
    extrapolation: int = 0

    name: ClassVar[str] = "jacobi"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choice("extrapolation", self.extrapolation, (0, 1, 2))

    def begin(self, t0: float) -> None:
        super().begin(t0)
        assert self.system is not None
        self._start_extrapolation(self.extrapolation, self.system.links, t0)
        self._steppers = [(c, self.pushers[c.name]) for c in self.order]

    def advance(self, clock: Clock, a: int, b: int) -> int:
        t, t1 = clock.time(a), clock.time(b)
        h = t1 - t
        if self._lagging:
            self._extrapolate(t, h)
        for comp, push in self._steppers:
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
