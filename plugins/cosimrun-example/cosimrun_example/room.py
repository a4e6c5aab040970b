"""A room as a single thermal mass heated by a radiator and losing heat outside."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosimrun.core import OdeComponent


class Room(OdeComponent):
    """Heated room as one thermal mass (heating power -> air temperature in degC).

    ``C dT/dt = P - (T - T_out) / R`` with heat capacity ``C`` [J/K], thermal
    resistance to outside ``R`` [K/W] and outside temperature ``T_out`` [degC].
    """

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.parameters.update(capacity=2.0e5, resistance=0.01, t_outside=5.0)
        self.add_state("temperature", "degC", initial=15.0, description="air temperature")
        self.add_input("power", "W", description="heating power")

    def _validate_parameter(self, name: str, value: Any) -> Any:
        if name in ("capacity", "resistance") and not float(value) > 0:
            raise ValueError(f"component {self.name!r}: parameter {name!r} must be > 0, got {value!r}")
        return super()._validate_parameter(name, value)

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        p = self.parameters
        loss = (x[0] - p["t_outside"]) / p["resistance"]
        return np.array([(u[0] - loss) / p["capacity"]])
