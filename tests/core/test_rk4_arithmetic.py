"""RK4's arithmetic: the textbook formula to the bit, whatever arrays the derivatives return.

The integrator writes its stage inputs, products and sums into buffers of its
own; these tests pin what that must keep: every result equal to the classic
RK4 step computed here on Python floats (the same operations in the same
order), also for derivatives that return their state argument itself or a view
of it, and for the builtin Integrator and FirstOrderLag blocks.
"""

import numpy as np
import pytest

from cosimrun.components.blocks import FirstOrderLag, Integrator
from cosimrun.core.ode import OdeComponent


def rk4_reference(f, x, u, t0, dt, substeps, steps):
    """Classic RK4 on a list of floats, *substeps* per macro step, in the order the integrator combines."""
    x = list(x)
    for k in range(steps):
        t = t0 + k * dt
        h = dt / substeps
        h2, h6 = 0.5 * h, h / 6.0
        for i in range(substeps):
            ti = t + i * h
            k1 = f(ti, x, u)
            k2 = f(ti + h2, [a * h2 + b for a, b in zip(k1, x, strict=True)], u)
            k3 = f(ti + h2, [a * h2 + b for a, b in zip(k2, x, strict=True)], u)
            k4 = f(ti + h, [a * h + b for a, b in zip(k3, x, strict=True)], u)
            x = [xi + ((((b + c) * 2.0) + a) + d) * h6 for xi, a, b, c, d in zip(x, k1, k2, k3, k4, strict=True)]
    return x


class Growth(OdeComponent):
    """``x' = x`` returned as the state argument itself (``view=False``) or as a view of it (``view=True``)."""

    def __init__(self, view: bool):
        super().__init__("growth")
        self.view = view
        self.add_state("a", initial=1.0)
        self.add_state("b", initial=-0.25)

    def derivatives(self, t, x, u):
        return x[:] if self.view else x


class Mixed(OdeComponent):
    """A two-state model whose derivatives depend on t, x and u (a new array each call)."""

    def __init__(self):
        super().__init__("mixed")
        self.add_state("p", initial=0.3)
        self.add_state("q", initial=-1.1)
        self.add_input("u", default=0.7)

    def derivatives(self, t, x, u):
        return np.array([x[1] * u[0] - 0.5 * t, -3.0 * x[0] + x[1] * x[1] * 0.1])


def step(comp, dt, steps):
    for k in range(steps):
        comp.do_step(k * dt, dt)


@pytest.mark.parametrize("view", [False, True])
def test_derivatives_returning_their_argument_give_the_textbook_bits(view):
    comp = Growth(view)
    comp.set_parameters(substeps=3)
    comp.initialize(0.0)
    step(comp, 0.1, 25)
    expected = rk4_reference(lambda t, x, u: x, [1.0, -0.25], [], 0.0, 0.1, 3, 25)
    assert [comp.outputs["a"].value, comp.outputs["b"].value] == expected
    assert expected[0] == pytest.approx(np.exp(2.5), rel=1e-6)


def test_time_state_and_input_dependent_derivatives_give_the_textbook_bits():
    comp = Mixed()
    comp.initialize(0.0)
    comp.set_inputs({"u": 0.7})
    step(comp, 0.05, 40)

    def f(t, x, u):
        return [x[1] * u[0] - 0.5 * t, -3.0 * x[0] + x[1] * x[1] * 0.1]

    expected = rk4_reference(f, [0.3, -1.1], [0.7], 0.0, 0.05, 10, 40)
    assert [comp.outputs["p"].value, comp.outputs["q"].value] == expected


def test_builtin_integrator_and_lag_give_the_textbook_bits():
    integrator = Integrator("i")
    integrator.set_parameters(k=1.7, y0=0.2)
    lag = FirstOrderLag("lag")
    lag.set_parameters(k=2.5, time_constant=0.3, y0=-0.4)
    for comp in (integrator, lag):
        comp.initialize(0.0)
        comp.set_inputs({"u": 0.9})
        step(comp, 0.01, 50)
    assert [integrator.outputs["y"].value] == rk4_reference(lambda t, x, u: [1.7 * u[0]], [0.2], [0.9], 0.0, 0.01,
                                                            10, 50)
    assert [lag.outputs["y"].value] == rk4_reference(lambda t, x, u: [(2.5 * u[0] - x[0]) / 0.3], [-0.4], [0.9],
                                                     0.0, 0.01, 10, 50)
    # the analytic solutions, to RK4's accuracy at h = 1e-3
    assert integrator.outputs["y"].value == pytest.approx(0.2 + 1.7 * 0.9 * 0.5, abs=1e-12)
    assert lag.outputs["y"].value == pytest.approx(2.25 + (-0.4 - 2.25) * np.exp(-0.5 / 0.3), abs=1e-10)


def test_integrator_gain_set_after_initialize_is_used():
    integrator = Integrator("i")
    integrator.initialize(0.0)
    integrator.set_inputs({"u": 2.0})
    step(integrator, 0.5, 1)
    integrator.set_parameters(k=-3.0)
    integrator.do_step(0.5, 0.5)
    assert integrator.outputs["y"].value == pytest.approx(2.0 * 0.5 - 3.0 * 2.0 * 0.5, abs=1e-14)
