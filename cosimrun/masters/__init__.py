"""Master algorithms that advance a `System` in time."""

from cosimrun.errors import EventLocalizationError, LoopConvergenceError, ZenoError
from cosimrun.masters.base import Master, MasterRun
from cosimrun.masters.gauss_seidel import GaussSeidel
from cosimrun.masters.hybrid import Hybrid
from cosimrun.masters.ijcsa import IJCSA
from cosimrun.masters.jacobi import Jacobi
from cosimrun.masters.stats import MasterStats, RunReport

__all__ = [
    "EventLocalizationError",
    "GaussSeidel",
    "Hybrid",
    "IJCSA",
    "Jacobi",
    "LoopConvergenceError",
    "Master",
    "MasterRun",
    "MasterStats",
    "RunReport",
    "ZenoError",
]
