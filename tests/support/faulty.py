"""A component that fails mid-run, for testing how failures are kept."""

from __future__ import annotations

from cosimrun.core import CoSimComponent, PortSpec, PortType


class Faulty(CoSimComponent):
    """Counts time, outputs NaN from ``nan_from`` on and raises once ``fail_at`` is reached (test-only)."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out", "s")}
        self.parameters = {"fail_at": 1.0, "nan_from": float("inf")}

    def _initialize_component(self, t0: float) -> None:
        pass

    def _do_step_internal(self, t: float, dt: float) -> None:
        if t + dt >= self.parameters["fail_at"]:
            raise RuntimeError(f"sensor broke at t={t + dt:g}")

    def _update_output_states(self, t=None, event_names=()) -> None:
        self.outputs["y"].value = float("nan") if self.t >= self.parameters["nan_from"] else self.t

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict, t: float) -> None:
        self.t = t
