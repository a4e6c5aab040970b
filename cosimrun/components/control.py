"""Controllers: a PID with derivative filter, output limits and anti-windup."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from cosimrun.components._base import OdeBlock, parameter_error
from cosimrun.components.blocks import clip
from cosimrun.core.parameters import Parameter
from cosimrun.core.units import UnitLike

ANTI_WINDUP = ("clamping", "back_calculation", "none")


class PID(OdeBlock):
    """PID controller with filtered derivative, output limits and anti-windup (r, y -> u).

    With ``e = r - y``::

        u_raw = kp * e + I + D,          u = clip(u_raw, u_min, u_max)
        dI/dt = ki * e  (+ anti-windup)
        D     = kd * (e_d - x_f) / tf,   dx_f/dt = (e_d - x_f) / tf

    i.e. ``D = kd * s / (1 + tf * s) * e_d`` where ``e_d`` is ``e``
    (``derivative_on: error``) or ``-y`` (``derivative_on: measurement``, no
    kick on reference steps). ``tf`` defaults to ``Td / N`` with ``Td = kd / kp``;
    with ``kp = 0`` and ``kd != 0`` set ``tf`` explicitly. A pure (unfiltered)
    derivative is not available: inputs are held over a step.

    Anti-windup (only active when a limit is set):

    - ``clamping`` (conditional integration, default): ``I`` is frozen while
      ``u_raw`` is beyond a limit and the error would push it further out;
    - ``back_calculation``: ``dI/dt = ki * e + (u - u_raw) / tt``, tracking time
      ``tt`` (default ``sqrt(Ti * Td)``, or ``Ti = kp / ki`` without derivative);
    - ``none``: plain integration (the integral winds up).

    States ``integral`` (in the output unit, initial value ``integral0``) and
    ``filter`` (in the input unit, initial value ``filter0``) are not outputs.
    Direct feedthrough: r and y -> u. The filter is integrated with the ODE
    integrator: with ``rk4`` keep the sub-step (``dt / substeps``, or
    ``max_substep``) below ``2 * tf`` for stability.

    Vectorizable: the gains, ``tf``, ``N``, ``tt`` and the limits may differ between an ensemble's members
    (each member computes what its scalar run does).
    """

    vectorizable = True

    PARAMETERS = {
        "kp": Parameter(float, default=1.0, doc="proportional gain"),
        "ki": Parameter(float, default=0.0, doc="integral gain (per second)"),
        "kd": Parameter(float, default=0.0, doc="derivative gain (seconds)"),
        "tf": Parameter(float, unit="s", gt=0, doc="derivative filter time constant (null: kd / (kp * N))"),
        "N": Parameter(float, default=10.0, gt=0, doc="derivative filter divisor for the default tf"),
        "u_min": Parameter(float, doc="lower output limit, in output_unit (null: none)"),
        "u_max": Parameter(float, doc="upper output limit, in output_unit (null: none)"),
        "anti_windup": Parameter("choice", choices=ANTI_WINDUP, default="clamping", doc="anti-windup method"),
        "tt": Parameter(float, unit="s", gt=0, doc="back-calculation tracking time (null: sqrt(Ti * Td))"),
        "derivative_on": Parameter("choice", choices=("error", "measurement"), default="error",
                                   doc="differentiate the error or -y (no kick on reference steps)"),
        "input_unit": Parameter("unit", doc="unit of r and y (null: plain numbers)"),
        "output_unit": Parameter("unit", doc="unit of u (null: a plain number)"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("integral", None, 0.0, "integral term I", output=False)
        self.add_state("filter", None, 0.0, "state of the derivative filter", output=False)
        self.add_input("r", None, 0.0, "reference")
        self.add_input("y", None, 0.0, "measurement")
        self.add_output("u", None, "control signal (limited)", feedthrough=True)
        self._refresh()

    def _port_units(self) -> dict[str, UnitLike]:
        p = self.parameters
        return {"r": p["input_unit"], "y": p["input_unit"], "filter": p["input_unit"],
                "u": p["output_unit"], "integral": p["output_unit"]}

    def check_parameters(self) -> None:
        super().check_parameters()
        p = self.parameters
        lo, hi = p["u_min"], p["u_max"]
        if lo is not None and hi is not None and not lo <= hi:
            raise parameter_error(self, "u_min", f"must be <= u_max = {hi!r}", lo)
        if p["kd"] != 0 and p["tf"] is None and p["kp"] == 0:
            raise parameter_error(self, "tf", "must be set when kd != 0 and kp == 0 (default tf = kd / (kp * N))",
                                  None)
        if p["anti_windup"] == "back_calculation" and p["tt"] is None and (p["kp"] == 0 or p["ki"] == 0):
            raise parameter_error(self, "tt", "must be set for back_calculation when kp == 0 or ki == 0 "
                                  "(default tt = sqrt(Ti * Td) with Ti = kp / ki)", None)

    def _refresh(self) -> None:
        p = self.parameters
        self._lo = -math.inf if p["u_min"] is None else p["u_min"]
        self._hi = math.inf if p["u_max"] is None else p["u_max"]
        self._on_error = p["derivative_on"] == "error"
        self._aw = p["anti_windup"]
        if any(isinstance(p[k], np.ndarray) for k in ("kp", "ki", "kd", "tf", "N", "tt")):
            self._refresh_members()
            return
        kp, ki, kd = p["kp"], p["ki"], p["kd"]
        if p["tf"] is not None:
            tf = p["tf"]
        elif kd != 0 and kp != 0:
            tf = abs(kd / kp) / p["N"]
        else:
            tf = 1.0
        self._tf = tf
        self._kd_tf = kd / tf
        tt = p["tt"]
        if tt is None and kp != 0 and ki != 0:
            ti = abs(kp / ki)
            tt = math.sqrt(ti * abs(kd / kp)) if kd != 0 else ti
        self._inv_tt = 1.0 / tt if tt else 0.0

    def _refresh_members(self) -> None:
        """:meth:`_refresh` for an ensemble's arrays of gains: each member's value as its scalar refresh gives it."""
        p = self.parameters
        kp, ki, kd, n = (np.asarray(p[k], dtype=float) for k in ("kp", "ki", "kd", "N"))
        with np.errstate(divide="ignore", invalid="ignore"):
            if p["tf"] is not None:
                tf = np.asarray(p["tf"], dtype=float)
            else:
                tf = np.where((kd != 0) & (kp != 0), np.abs(kd / kp) / n, 1.0)
            self._tf = tf
            self._kd_tf = kd / tf
            if p["tt"] is not None:
                self._inv_tt = 1.0 / np.asarray(p["tt"], dtype=float)
            else:
                ti = np.abs(kp / ki)
                tt = np.where(kd != 0, np.sqrt(ti * np.abs(kd / kp)), ti)
                self._inv_tt = np.where((kp != 0) & (ki != 0), 1.0 / tt, 0.0)

    def _raw(self, x: np.ndarray, u: np.ndarray) -> tuple[float, float, float]:
        """``(e, e_d, u_raw)`` for state *x* and inputs *u*."""
        e = u[0] - u[1]
        ed = e if self._on_error else -u[1]
        return e, ed, self.parameters["kp"] * e + x[0] + self._kd_tf * (ed - x[1])

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        e, ed, raw = self._raw(x, u)
        di = self.parameters["ki"] * e
        if self._aw == "clamping":
            if isinstance(raw, np.ndarray) or isinstance(di, np.ndarray):  # an ensemble's members
                di = np.where(((raw > self._hi) & (di > 0.0)) | ((raw < self._lo) & (di < 0.0)), 0.0, di)
            elif (raw > self._hi and di > 0.0) or (raw < self._lo and di < 0.0):
                di = 0.0
        elif self._aw == "back_calculation":
            di = di + (clip(raw, self._lo, self._hi) - raw) * self._inv_tt
        return np.array([di, (ed - x[1]) / self._tf])

    def compute_outputs(self, t: float, x: np.ndarray, u: np.ndarray) -> Sequence[float]:
        raw = self._raw(x, u)[2]
        return (clip(raw, self._lo, self._hi),)
