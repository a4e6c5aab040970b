"""Jacobi (parallel) master: every component steps from the same inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosimrun.masters.explicit import ExplicitMaster


@dataclass(frozen=True)
class Jacobi(ExplicitMaster):
    """All components step from inputs sampled at the start of the macro step.

    Every real input can be extrapolated (``extrapolation`` 0, 1 or 2);
    algebraic loops are iterated with Jacobi sweeps by default.
    """

    loop_solver: str = "jacobi"

    name: ClassVar[str] = "jacobi"
    fresh_outputs: ClassVar[bool] = False
