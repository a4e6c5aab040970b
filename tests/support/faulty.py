"""A component that fails mid-run in the ways a component can, for testing how failures are kept."""

from __future__ import annotations

import sys
import time

import numpy as np

from cosimrun.core import CoSimComponent, PortSpec, PortType

INF = float("inf")


class Faulty(CoSimComponent):
    """Counts time (``y = t``) and misbehaves once a step reaches a given time (test-only).

    Parameters: ``fail_at`` raises ``RuntimeError``, ``exit_at`` calls ``sys.exit(exit_code)``,
    ``interrupt_at`` raises ``KeyboardInterrupt``, ``generator_exit_at`` raises ``GeneratorExit``,
    ``nan_from`` outputs NaN from then on, ``overflow_from`` infinity from a numpy overflow
    (which warns), ``sleep_per_step`` sleeps that long each step (for
    sending signals to a run in progress).
    """

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out", "s")}
        self.parameters = {
            "fail_at": 1.0, "nan_from": INF, "exit_at": INF, "exit_code": 0, "interrupt_at": INF,
            "generator_exit_at": INF, "overflow_from": INF, "sleep_per_step": 0.0,
        }

    def _initialize_component(self, t0: float) -> None:
        pass

    def _do_step_internal(self, t: float, dt: float) -> None:
        p = self.parameters
        end = t + dt
        if p["sleep_per_step"]:
            time.sleep(p["sleep_per_step"])
        if end >= p["exit_at"]:
            sys.exit(p["exit_code"])
        if end >= p["interrupt_at"]:
            raise KeyboardInterrupt
        if end >= p["generator_exit_at"]:
            raise GeneratorExit
        if end >= p["fail_at"]:
            raise RuntimeError(f"sensor broke at t={end:g}")

    def _update_output_states(self, t=None, event_names=()) -> None:
        p, y = self.parameters, self.t
        if self.t >= p["overflow_from"]:
            y = float(np.float64(1e308) * np.float64(10.0))
        self.outputs["y"].value = float("nan") if self.t >= p["nan_from"] else y

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict, t: float) -> None:
        self.t = t
