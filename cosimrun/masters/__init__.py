"""Master algorithms that advance a `System` in time."""

from cosimrun.masters.base import LoopConvergenceError, Master, MasterStats
from cosimrun.masters.gauss_seidel import GaussSeidel
from cosimrun.masters.hybrid import EventLocalizationError, Hybrid
from cosimrun.masters.ijcsa import IJCSA
from cosimrun.masters.jacobi import Jacobi

__all__ = [
    "EventLocalizationError",
    "GaussSeidel",
    "Hybrid",
    "IJCSA",
    "Jacobi",
    "LoopConvergenceError",
    "Master",
    "MasterStats",
]
