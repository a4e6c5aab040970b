"""``integrator: cvode``: SUNDIALS CVODE's BDF for stiff ODE components, with events, rollback and max_substep."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from cosimrun import OdeComponent
from cosimrun.core import INTEGRATORS
from cosimrun.errors import SimulationError
from cosimrun.masters import Hybrid
from cosimrun.system import System

G = 9.81

VDPOL_2000 = (1.706167732170469, -0.8928097010248125e-3)
"""Van der Pol with mu = 1000 at t = 2000, from y(0) = (2, 0): problem VDPOL of the Test Set for IVP Solvers
(F. Mazzia, C. Magherini et al., University of Bari, https://archimede.uniba.it/~testset/), whose reference
(1.706167732170469, -0.8928097010248125) at t = 2 is for the scaled form (epsilon = 1/mu^2 = 1e-6); in the
time t = mu * tau of this form the second component is divided by mu."""

ROBER_1E11 = (0.2083340149701255e-07, 0.8333360770334713e-13, 0.9999999791665050)
"""Robertson's kinetics at t = 1e11: problem ROBER of the same Test Set."""


class VanDerPol(OdeComponent):
    def __init__(self, name: str, mu: float = 1000.0) -> None:
        super().__init__(name)
        self.mu = mu
        self.add_state("y1", initial=2.0)
        self.add_state("y2")
        self.calls = 0

    def derivatives(self, t, x, u):
        self.calls += 1
        return np.array([x[1], self.mu * (1.0 - x[0] ** 2) * x[1] - x[0]])


class Robertson(OdeComponent):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("y1", initial=1.0)
        self.add_state("y2")
        self.add_state("y3")

    def derivatives(self, t, y, u):
        r1, r2, r3 = 0.04 * y[0], 1e4 * y[1] * y[2], 3e7 * y[1] ** 2
        return np.array([-r1 + r2, r1 - r2 - r3, r3])


class Ball(OdeComponent):
    """Falls from 1 m and bounces with restitution 0.8 (event ``bounce``)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("h", "m", initial=1.0)
        self.add_state("v", "m/s")
        self.add_state_event("bounce", lambda t, x, u: x[0], direction=-1,
                             update=lambda t, x, u: np.array([0.0, -0.8 * x[1]]))

    def derivatives(self, t, x, u):
        return np.array([x[1], -G])


def test_cvode_is_a_registered_integrator():
    assert "cvode" in INTEGRATORS
    comp = VanDerPol("v")
    comp.set_parameters(integrator="CVODE")
    assert comp.parameters["integrator"] == "cvode"


def test_van_der_pol_mu_1000_matches_the_test_set_reference():
    comp = VanDerPol("vdp")
    comp.set_parameters(integrator="cvode", rtol=1e-10, atol=1e-10)
    comp.record_history = False
    comp.initialize(0.0)
    for k in range(20):
        comp.do_step(100.0 * k, 100.0)
    # measured: relative errors 3.5e-8 (y1) and 1.0e-7 (y2)
    assert comp.x[0] == pytest.approx(VDPOL_2000[0], rel=1e-6)
    assert comp.x[1] == pytest.approx(VDPOL_2000[1], rel=1e-6)


def test_robertson_matches_radau_at_40_and_the_test_set_at_1e11():
    ref40 = solve_ivp(lambda t, y: Robertson("r").derivatives(t, y, None), (0.0, 40.0), [1.0, 0.0, 0.0],
                      method="Radau", rtol=1e-10, atol=1e-14).y[:, -1]
    comp = Robertson("rober")
    comp.set_parameters(integrator="cvode", rtol=1e-10, atol=[1e-12, 1e-16, 1e-12])
    comp.record_history = False
    comp.initialize(0.0)
    comp.do_step(0.0, 40.0)
    assert comp.x == pytest.approx(ref40, rel=1e-7)  # measured: 5e-9
    times = np.logspace(np.log10(40.0), 11, 12)
    for a, b in zip(times[:-1], times[1:], strict=True):
        comp.do_step(a, b - a)
    # measured: relative errors 1.9e-4 (y1, y2: values near the absolute tolerance) and 4e-12 (y3)
    assert comp.x[0] == pytest.approx(ROBER_1E11[0], rel=1e-3)
    assert comp.x[1] == pytest.approx(ROBER_1E11[1], rel=1e-3)
    assert comp.x[2] == pytest.approx(ROBER_1E11[2], rel=1e-11)


def test_max_substep_bounds_the_internal_steps():
    free, bounded = VanDerPol("a", mu=1.0), VanDerPol("b", mu=1.0)
    bounded.set_parameters(integrator="cvode", max_substep=1e-3)
    free.set_parameters(integrator="cvode")
    for comp in (free, bounded):
        comp.initialize(0.0)
        comp.do_step(0.0, 1.0)
    assert free.calls < 500 < 1000 <= bounded.calls  # at least one derivative per internal step
    assert bounded.x == pytest.approx(free.x, rel=1e-4)


def test_tolerances_may_change_between_steps():
    comp = VanDerPol("v", mu=1.0)
    comp.set_parameters(integrator="cvode")
    comp.initialize(0.0)
    comp.do_step(0.0, 0.5)
    comp.set_parameters(rtol=1e-10, atol=1e-12)  # a new solver, started from the current state
    comp.do_step(0.5, 0.5)
    ref = solve_ivp(lambda t, y: comp.derivatives(t, y, None), (0.0, 1.0), [2.0, 0.0], rtol=1e-12, atol=1e-12).y[:, -1]
    assert comp.x == pytest.approx(ref, rel=1e-5)


def test_events_are_reported_as_hints_and_located_by_the_hybrid_master():
    ball = Ball("b")
    ball.set_parameters(integrator="cvode", rtol=1e-10, atol=1e-12)
    ball.initialize(0.0)
    t1 = math.sqrt(2.0 / G)
    ball.do_step(0.0, 0.5)
    (hint,) = ball.get_internal_event_hints()
    assert hint.event_name == "bounce" and hint.t_before < t1 < hint.t_after
    assert hint.t_after - hint.t_before < 1e-6 and hint.indicator_before > 0 > hint.indicator_after

    system = System("ball")
    system.add_component(ball := Ball("b"))
    ball.set_parameters(integrator="cvode", rtol=1e-10, atol=1e-12)
    result = system.run(0.0, 1.5, 0.01, master=Hybrid())
    times = [ev[0].t for ev in result.events if ev[2] == "bounce"]
    assert times == pytest.approx([t1, t1 + 2 * 0.8 * t1], abs=1e-8)


def test_rollback_steps_again_reproducibly():
    comp = VanDerPol("v", mu=10.0)
    comp.set_parameters(integrator="cvode")
    comp.initialize(0.0)
    comp.do_step(0.0, 0.5)
    snap = comp.snapshot_state()
    comp.do_step(0.5, 0.5)
    continued = comp.x.copy()
    comp.restore_state(snap, 0.5)
    comp.do_step(0.5, 0.5)
    first = comp.x.copy()
    comp.restore_state(snap, 0.5)
    comp.do_step(0.5, 0.5)
    assert comp.x.tolist() == first.tolist()
    assert first == pytest.approx(continued, rel=1e-4)


def test_a_failing_step_is_one_simulation_error_line():
    class Blowup(OdeComponent):
        def __init__(self, name):
            super().__init__(name)
            self.add_state("x", initial=1.0)

        def derivatives(self, t, x, u):
            return x**2  # x = 1 / (1 - t): infinite at t = 1

    comp = Blowup("blowup")
    comp.set_parameters(integrator="cvode")
    comp.initialize(0.0)
    failed = r"^component 'blowup': CVODE failed in \[0\.0, 2\.0\]: at t=0\.99"
    with pytest.raises(SimulationError, match=failed) as info:
        comp.do_step(0.0, 2.0)
    assert "\n" not in str(info.value) and info.value.component == "blowup"


def test_the_explicit_integrators_do_not_import_scikit_sundae():
    code = (
        "import sys, numpy as np\n"
        "from cosimrun.core import OdeComponent\n"
        "class Decay(OdeComponent):\n"
        "    def __init__(self, name):\n"
        "        super().__init__(name); self.add_state('x', initial=1.0)\n"
        "    def derivatives(self, t, x, u): return -x\n"
        "for method in ('rk4', 'rk45'):\n"
        "    c = Decay('d'); c.set_parameters(integrator=method); c.initialize(0.0); c.do_step(0.0, 1.0)\n"
        "import cosimrun.components.mechanics\n"
        "print(sorted(m for m in sys.modules if m.startswith('sksundae')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
