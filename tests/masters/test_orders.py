"""Observed convergence orders of the coupling against a monolithic reference.

The two-mass oscillator is split into the builtin ``mass_spring_damper`` (mass 1,
force in, position and velocity out) and ``mass_spring_damper_force`` (mass 2
with the coupling spring, returning the force). Both integrate with RK4 and 40
sub-steps per macro step, so the error left is the coupling's. The reference
is the monolithic four-state system from ``solve_ivp`` (DOP853, rtol 1e-12).
The orders expected: inputs extrapolated with a polynomial of degree p and
evaluated inside the integrators give a local error ~ H^(p+2) and a global one
~ H^(p+1) (Jacobi, p = 0, 1, 2); under Gauss-Seidel a fresh output is
interpolated linearly over the step for p >= 1 (order 2), held at its end value
for p = 0 (order 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import two_mass_rhs, two_mass_split
from scipy.integrate import solve_ivp

from cosimrun.masters import GaussSeidel, Jacobi, Master
from cosimrun.system import System

M1, K1, M2, K2, KC = 1.0, 10.0, 1.0, 20.0, 15.0
X0 = (1.0, 0.0, 0.0, 0.0)
T_END = 1.0
STEPS = (1e-2, 5e-3, 2.5e-3, 1.25e-3)
SUBSTEPS = 40


def split(h: float) -> System:
    return two_mass_split(K1, K2, KC, substeps=SUBSTEPS)


@pytest.fixture(scope="module")
def reference():
    rhs = two_mass_rhs({"m1": M1, "m2": M2, "k1": K1, "k2": K2, "kc": KC, "dc": 0.0})
    sol = solve_ivp(rhs, (0.0, T_END), X0, method="DOP853", rtol=1e-12, atol=1e-14, dense_output=True)
    assert sol.success
    return sol.sol


def global_error(master: Master, h: float, reference) -> float:
    system = split(h)
    system.run(0.0, T_END, h, master=master)
    err = 0.0
    for comp, row in (("mass1", 0), ("mass2", 2)):
        t, x = system.history.get_port_trajectory(comp, "x")
        err = max(err, float(np.max(np.abs(np.asarray(x) - reference(np.asarray(t))[row]))))
    return err


def observed_order(errors: list[float]) -> float:
    """Least-squares slope of log(error) against log(H)."""
    return float(np.polyfit(np.log(STEPS), np.log(errors), 1)[0])


SCHEMES = {
    "jacobi p=0": (lambda: Jacobi(extrapolation=0), 1),
    "jacobi p=1": (lambda: Jacobi(extrapolation=1), 2),
    "jacobi p=2": (lambda: Jacobi(extrapolation=2), 3),
    "gauss_seidel p=0": (lambda: GaussSeidel(extrapolation=0), 1),
    "gauss_seidel p=1": (lambda: GaussSeidel(extrapolation=1), 2),
}


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_observed_global_order_is_at_least_p_plus_one(scheme: str, reference) -> None:
    make, expected = SCHEMES[scheme]
    errors = [global_error(make(), h, reference) for h in STEPS]
    order = observed_order(errors)
    assert order >= expected - 0.2, (scheme, errors, order)
    assert all(math.isfinite(e) and e > 0 for e in errors)


# ---------------------------------------------------------------------------- FMUs that interpolate inputs
@pytest.fixture(scope="module")
def integrator_fmus(tmp_path_factory: pytest.TempPathFactory):
    from fmus import builders  # tests/fmus, built with gcc

    root = tmp_path_factory.mktemp("fmus")
    return builders.discard(root, interpolate=True), builders.discard(root)


@pytest.mark.parametrize("interpolating", [True, False], ids=["canInterpolateInputs", "held"])
def test_an_fmu_that_interpolates_inputs_gets_their_derivatives(integrator_fmus, interpolating: bool) -> None:
    """A ramp u = 2 t into an FMU integrating x' = u: with canInterpolateInputs the FMU receives du/dt = 2 through
    fmi2SetRealInputDerivatives (from the second step on, when two samples define the line); otherwise it gets
    the line's mean over each step, held. Both integrate the ramp exactly after the first step, which holds
    u = 0 (one sample: order 0): x = 1 + t**2 - 0.05**2."""
    from helpers import Ramp

    from cosimrun.components.fmu import FMUComponent

    path = integrator_fmus[0 if interpolating else 1]
    system = System("ramp_into_fmu")
    system.add_component(Ramp("src", slope=2.0, unit="m/s"))
    fmu = FMUComponent("f")
    fmu.set_parameters(path=str(path))
    system.add_component(fmu)
    system.connect("src.y -> f.u")
    system.run(0.0, 0.5, 0.05, master=Jacobi(extrapolation=1))
    assert fmu.interpolates_inputs is interpolating
    t, du1 = system.history.get_port_trajectory("f", "du1")
    _, x = system.history.get_port_trajectory("f", "x")
    t = np.asarray(t)
    np.testing.assert_allclose(x[1:], 1.0 + t[1:] ** 2 - 0.05**2, rtol=0, atol=1e-12)
    expected = np.where(t > 0.051, 2.0, 0.0) if interpolating else np.zeros(len(t))
    np.testing.assert_array_equal(du1, expected)
