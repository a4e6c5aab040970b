"""Systems of connected components and their structural analysis."""

from cosimrun.core.switching import ModeSwitch
from cosimrun.errors import InvalidConnectionError, MissingInitialValueError
from cosimrun.system.connection import Connection, Link
from cosimrun.system.graph import AlgebraicLoop, GraphAnalysis, analyze, greedy_cycle_removal, priority_levels
from cosimrun.system.recorder import MemorySink, Recorder, Sink
from cosimrun.system.system import EventConnection, RunResult, System

__all__ = [
    "AlgebraicLoop",
    "Connection",
    "EventConnection",
    "GraphAnalysis",
    "InvalidConnectionError",
    "Link",
    "MemorySink",
    "MissingInitialValueError",
    "ModeSwitch",
    "Recorder",
    "RunResult",
    "Sink",
    "System",
    "analyze",
    "greedy_cycle_removal",
    "priority_levels",
]
