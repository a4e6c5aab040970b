"""Error-controlled communication steps against the best fixed step, side by side.

For each system, master and ``rtol`` the script runs ``step_control: error``
(``run.dt`` = 1e-2 s, so the first step is rtol * 1e-2 s) and measures its global error against a
monolithic ``solve_ivp`` reference (DOP853, rtol 1e-12): the largest position
error of either mass relative to that position's range. It then searches the
number of fixed steps whose global error is no larger (bisection on the step
count, to 2 %), and prints the ratio of the two step counts.

Systems (two masses split as in ``coupled_oscillators``: mass 1 takes the
coupling force, mass 2 carries the coupling spring and damper):

* ``coupled_oscillators``: the shipped experiment (k = 10, 10, coupling 100 N/m);
* ``two_mass``: the two-mass oscillator of the convergence-order tests (k = 10, 20, coupling 15 N/m);
* ``damped_coupling``: ``coupled_oscillators`` with a coupling damper of 4 N s/m,
  whose fast mode dies out within the first second while the slow one goes on.

Run: ``python benchmarks/bench_step_control.py [--quick]`` (``--quick``: rtol 1e-4 only).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from cosimrun.components.mechanics import MassSpringDamper, MassSpringDamperForce
from cosimrun.masters import GaussSeidel, Jacobi, Master
from cosimrun.system import System

T_END = 5.0
DT = 1e-2
SUBSTEPS = 4


@dataclass(frozen=True)
class TwoMass:
    name: str
    k1: float
    k2: float
    kc: float
    dc: float = 0.0

    def split(self) -> System:
        system = System(self.name)
        one = MassSpringDamper("mass1")
        one.set_parameters(mass=1.0, stiffness=self.k1, x0=1.0, v0=0.0, substeps=SUBSTEPS)
        two = MassSpringDamperForce("mass2")
        two.set_parameters(mass=1.0, stiffness=self.k2, coupling_stiffness=self.kc, coupling_damping=self.dc,
                           x0=0.0, v0=0.0, substeps=SUBSTEPS)
        system.add_component(one)
        system.add_component(two)
        system.connect("mass1.x -> mass2.x_in")
        system.connect("mass1.v -> mass2.v_in")
        system.connect("mass2.force -> mass1.force")
        return system

    def reference(self) -> Callable[[np.ndarray], np.ndarray]:
        def rhs(t: float, y: np.ndarray) -> list[float]:
            x1, v1, x2, v2 = y
            f = self.kc * (x2 - x1) + self.dc * (v2 - v1)
            return [v1, -self.k1 * x1 + f, v2, -self.k2 * x2 - f]

        sol = solve_ivp(rhs, (0.0, T_END), (1.0, 0.0, 0.0, 0.0), method="DOP853", rtol=1e-12, atol=1e-14,
                        dense_output=True)
        return sol.sol


SYSTEMS = (TwoMass("coupled_oscillators", 10.0, 10.0, 100.0), TwoMass("two_mass", 10.0, 20.0, 15.0),
           TwoMass("damped_coupling", 10.0, 10.0, 100.0, dc=4.0))
MASTERS: dict[str, Callable[..., Master]] = {
    "jacobi p=2": lambda **kw: Jacobi(extrapolation=2, **kw),
    "gauss_seidel p=1": lambda **kw: GaussSeidel(extrapolation=1, **kw),
}


def relative_error(system: System, reference: Callable[[np.ndarray], np.ndarray]) -> float:
    worst = 0.0
    for comp, row in (("mass1", 0), ("mass2", 2)):
        t, x = system.history.get_port_trajectory(comp, "x")
        t, x = np.asarray(t), np.asarray(x)
        worst = max(worst, float(np.max(np.abs(x - reference(t)[row])) / np.ptp(x)))
    return worst


def fixed_error(case: TwoMass, make: Callable[..., Master], steps: int, reference) -> float:
    system = case.split()
    system.run(0.0, T_END, T_END / steps, master=make())
    return relative_error(system, reference)


def fixed_steps_for(case: TwoMass, make: Callable[..., Master], target: float, guess: int, reference) -> int:
    """The fewest fixed steps (to 2 %) whose relative global error is at most *target*."""
    lo, hi = max(2, guess // 8), guess
    while fixed_error(case, make, hi, reference) > target:
        lo, hi = hi, hi * 2
    while hi - lo > max(2, hi // 50):
        mid = (lo + hi) // 2
        if fixed_error(case, make, mid, reference) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def main() -> None:
    tolerances = (1e-4,) if "--quick" in sys.argv else (1e-4, 1e-6)
    header = (f"{'system':<20} {'master':<17} {'rtol':>6} {'error/rtol':>10} {'steps':>6} {'rejected':>8} "
              f"{'fixed steps, same error':>23} {'ratio':>6} {'wall s':>7}")
    print(header)
    print("-" * len(header))
    for case in SYSTEMS:
        reference = case.reference()
        for label, make in MASTERS.items():
            for rtol in tolerances:
                system = case.split()
                master = make(step_control="error", rtol=rtol)
                start = time.perf_counter()
                stats = system.run(0.0, T_END, DT, master=master).stats
                wall = time.perf_counter() - start
                error = relative_error(system, reference)
                steps = stats.macro_steps
                fixed = fixed_steps_for(case, make, error, steps, reference)
                print(f"{case.name:<20} {label:<17} {rtol:>6.0e} {error / rtol:>10.2f} {steps:>6} "
                      f"{stats.rejected_steps:>8} {fixed:>23} {fixed / steps:>6.2f} {wall:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
