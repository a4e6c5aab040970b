"""Van der Pol (mu = 10, 20 s) split in two under error control: global error against the tolerance.

``x' = y`` and ``y' = mu (1 - x**2) y - x`` (x(0) = 2, y(0) = 0) as two ODE components
(``x`` takes ``y``, ``y`` takes ``x``; DOP853 inside each at rtol 1e-12), Jacobi with
extrapolation k at ``run.dt = 0.01``, ``step_control`` ``error`` and ``richardson`` at several
rtol. The error is the largest error of ``x`` relative to its range against a monolithic
``solve_ivp`` reference (DOP853, rtol 1e-13); the table gives it per rtol, with the steps taken
(rejected ones included; richardson's half steps besides). Each run has ``global_error:
estimate``: the estimate of that error (the run again at rtol / 10, see
:mod:`cosimrun.masters.global_error`) is given beside it, as is what the estimate cost (the
second run's steps, rejected ones included).

The tolerance bounds each step's local error. On a limit cycle the local errors shift the phase,
which no trajectory nearby corrects, and the relaxation's fast jumps turn a shift in time into an
error of the whole amplitude: the global error is not bounded by a multiple of rtol.

    python benchmarks/accuracy_van_der_pol.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from scipy.integrate import solve_ivp

from cosimrun.core import OdeComponent
from cosimrun.masters import Jacobi
from cosimrun.system import System

MU, TF, DT = 10.0, 20.0, 0.01
TOLERANCES = (1e-3, 1e-4, 1e-5)


class X(OdeComponent):
    """``x' = y``."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("x", None, 2.0)
        self.add_input("y", None, 0.0)

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([u[0]])


class Y(OdeComponent):
    """``y' = mu (1 - x**2) y - x``."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("y", None, 0.0)
        self.add_input("x", None, 2.0)

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([MU * (1.0 - u[0] ** 2) * x[0] - u[0]])


def split() -> System:
    system = System("van_der_pol")
    for comp in (X("a"), Y("b")):
        comp.set_parameters(integrator="dop853", rtol=1e-12, atol=1e-12)
        system.add_component(comp)
    system.connect("a.x -> b.x")
    system.connect("b.y -> a.y")
    return system


def main() -> None:
    ref = solve_ivp(lambda t, s: [s[1], MU * (1 - s[0] ** 2) * s[1] - s[0]], (0.0, TF), [2.0, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True).sol
    print(f"van der Pol, mu = {MU:g}, {TF:g} s, Jacobi: largest error of x relative to its range, per rtol")
    print(f"{'k':>2} | {'control':>10} | {'rtol':>7} | {'steps (rej)':>12} | {'half steps':>10} | {'error':>9} | "
          f"{'error / rtol':>12} | {'estimate':>9} | {'est. / error':>12} | estimate's steps")
    start = time.perf_counter()
    for k in (1, 2):
        for control in ("error", "richardson"):
            for rtol in TOLERANCES:
                system = split()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = system.run(0.0, TF, DT, master=Jacobi(extrapolation=k, step_control=control,
                                                                   rtol=rtol, global_error="estimate"))
                stats = result.stats
                t, x = (np.asarray(v) for v in system.history.get_port_trajectory("a", "x"))
                error = float(np.max(np.abs(x - ref(t)[0])) / np.ptp(x))
                estimate = next(e.max for e in result.global_errors if e.output == "a.x") / np.ptp(x)
                steps = stats.macro_steps + stats.rejected_steps
                print(f"{k:>2} | {control:>10} | {rtol:>7.0e} | {f'{steps} ({stats.rejected_steps})':>12} | "
                      f"{stats.half_steps:>10} | {error:>9.2e} | {error / rtol:>12.0f} | {estimate:>9.2e} | "
                      f"{estimate / error:>12.2f} | {stats.estimate_steps} ({stats.estimate_steps / steps:.1f} x)",
                      flush=True)
    print(f"\n(wall {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
