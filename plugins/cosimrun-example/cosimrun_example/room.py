"""A room as a single thermal mass heated by a radiator and losing heat outside."""

from __future__ import annotations

import numpy as np

from cosimrun.core import OdeComponent
from cosimrun.parameters import Parameter


class Room(OdeComponent):
    """Heated room as one thermal mass (heating power -> air temperature in degC).

    ``C dT/dt = P - (T - T_out) / R`` with heat capacity ``C``, thermal
    resistance to outside ``R`` and outside temperature ``T_out``.
    Vectorizable: written with array arithmetic, so that an ensemble steps
    many rooms (states and parameters over members) at once.
    """

    vectorizable = True

    PARAMETERS = {
        "capacity": Parameter(float, unit="J/K", default=2.0e5, gt=0, doc="heat capacity C of the air and walls"),
        "resistance": Parameter(float, unit="K/W", default=0.01, gt=0, doc="thermal resistance R to outside"),
        "t_outside": Parameter(float, unit="degC", default=5.0, doc="outside temperature T_out"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("temperature", "degC", initial=15.0, description="air temperature")
        self.add_input("power", "W", description="heating power")

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        p = self.parameters
        loss = (x[0] - p["t_outside"]) / p["resistance"]
        return np.array([(u[0] - loss) / p["capacity"]])
