"""Gauss-Seidel (sequential) master: components step in priority order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cosimrun.masters.explicit import ExplicitMaster


@dataclass(frozen=True)
class GaussSeidel(ExplicitMaster):
    """Components step in priority order; each uses its producers' fresh outputs.

    Inputs from components later in the order (the connections cut to order the
    graph) lag by one step and are extrapolated; with ``extrapolation >= 1`` a
    fresh input of a component that interpolates inputs is the line over the
    step between the producer's values at its start and end (order 2).
    """

    loop_solver: str = "gauss_seidel"

    name: ClassVar[str] = "gauss_seidel"
    fresh_outputs: ClassVar[bool] = True
