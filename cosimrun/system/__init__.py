"""Systems of connected components and their structural analysis."""

from cosimrun.system.connection import Connection, Link
from cosimrun.system.graph import AlgebraicLoop, GraphAnalysis, analyze, greedy_cycle_removal, priority_levels
from cosimrun.system.system import (
    EventConnection,
    InvalidConnectionError,
    MissingInitialValueError,
    ModeSwitch,
    RunResult,
    System,
)

__all__ = [
    "AlgebraicLoop",
    "Connection",
    "EventConnection",
    "GraphAnalysis",
    "InvalidConnectionError",
    "Link",
    "MissingInitialValueError",
    "ModeSwitch",
    "RunResult",
    "System",
    "analyze",
    "greedy_cycle_removal",
    "priority_levels",
]
