"""Two masses coupled by a spring, split into two components (force/displacement coupling).

Run: ``python examples/two_mass_oscillator.py`` — prints the coupling error of each
master against a monolithic reference solution.
"""

import numpy as np
from scipy.integrate import solve_ivp

from cosimrun.core import OdeComponent
from cosimrun.masters import IJCSA, GaussSeidel, Jacobi
from cosimrun.system import System

K1, K2, KC = 10.0, 10.0, 100.0


class MassA(OdeComponent):
    """Mass 1 on a spring to the wall, pushed by the coupling force F."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("x1", "m", initial=1.0)
        self.add_state("v1", "m/s")
        self.add_input("F", "N")

    def derivatives(self, t, x, u):
        return np.array([x[1], -K1 * x[0] + u[0]])


class MassB(OdeComponent):
    """Mass 2 on a spring to the wall and the coupling spring; outputs the coupling force."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("x2", "m")
        self.add_state("v2", "m/s")
        self.add_input("x1", "mm")  # a different unit on purpose: converted on the connection
        self.add_output("F", "N", feedthrough=["x1"])

    def derivatives(self, t, x, u):
        return np.array([x[1], -K2 * x[0] - KC * (x[0] - u[0] / 1000.0)])

    def compute_outputs(self, t, x, u):
        return [KC * (x[0] - u[0] / 1000.0)]


def build() -> System:
    system = System("two_mass")
    system.add_component(MassA("a"))
    system.add_component(MassB("b"))
    system.connect("a.x1", "b.x1")
    system.connect("b.F -> a.F")
    return system


def reference(t: np.ndarray) -> np.ndarray:
    def rhs(_, y):
        return [y[1], -K1 * y[0] + KC * (y[2] - y[0]), y[3], -K2 * y[2] - KC * (y[2] - y[0])]

    return solve_ivp(rhs, (t[0], t[-1]), [1.0, 0, 0, 0], t_eval=t, rtol=1e-11, atol=1e-12).y[0]


if __name__ == "__main__":
    for master in (Jacobi(), Jacobi(extrapolation=1), GaussSeidel(), IJCSA(iterate_steps=True)):
        result = build().run(0.0, 2.0, 0.005, master=master)
        t, x1 = result.history.get_port_trajectory("a", "x1")
        print(f"{master.name:13s} {master.settings().get('extrapolation', '')!s:2s} "
              f"max |x1 - reference| = {np.max(np.abs(x1 - reference(t))):.2e}")
