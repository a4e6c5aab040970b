"""The masters' contract for steps ended early and fixed steps is the component's, not an FMU's.

Any component that declares ``may_discard`` and raises the generic
:class:`~cosimrun.errors.StepEndedEarly` has its step cut where it stopped,
under every master; any that declares ``fixed_step_only`` is refused runs that
would cut its steps, with the reason it gives (``fixed_step_reason``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from cosimrun import CoSimComponent, DenseTime, PortSpec, PortType, create_component
from cosimrun.core.ode import OdeComponent
from cosimrun.errors import ConfigError, SimulationError, StepEndedEarly
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master
from cosimrun.system import System

AT, DT, TF = 0.53, 0.1, 1.0
MASTERS = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel, "ijcsa": IJCSA, "hybrid": Hybrid}


class Halting(CoSimComponent):
    """``x = t``, ending the first step that passes *at* early there (a plain Python component, no FMU)."""

    may_discard: ClassVar[bool] = True

    def __init__(self, name: str, at: float, event: str | None = None) -> None:
        super().__init__(name)
        self.at, self.event = at, event
        self.output_specs = {"x": PortSpec("x", PortType.REAL, "out")}
        self.halted = False

    def _initialize_component(self, t0: float) -> None:
        self.halted = False

    def _do_step_internal(self, t: float, dt: float) -> None:
        if not self.halted and t < self.at < t + dt:
            self.halted = True
            self.t = self.at
            self._update_output_states(self.at)
            raise StepEndedEarly(f"component {self.name!r} stopped at t={self.at}", component=self.name, time=t,
                                 reached=self.at, event=self.event)

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        self.outputs["x"].value = self.t if t is None else t

    def get_state(self) -> dict[str, Any]:
        return {"t": self.t, "halted": self.halted}

    def set_state(self, state: dict[str, Any], t: float) -> None:
        self.t, self.halted = state["t"], state["halted"]
        self._update_output_states(self.t)

    def snapshot_state(self) -> Any:
        return self.get_state()

    def restore_state(self, snapshot: Any, t: float) -> None:
        self.set_state(snapshot, t)


def halting_system(event: str | None = None) -> System:
    """The halting component feeding an integrator (which can roll back)."""
    system = System("halting")
    system.add_component(Halting("halt", AT, event))
    system.add_component(create_component("integrator", "integ"))
    system.connect("halt.x -> integ.u")
    return system


@pytest.mark.parametrize("name", list(MASTERS))
@pytest.mark.parametrize("event", [None, "early"])
def test_any_component_that_ends_a_step_early_has_the_step_cut_there(name: str, event: str | None) -> None:
    result = halting_system(event).run(0.0, TF, DT, master=MASTERS[name]())
    assert result.events == [(DenseTime(AT, 0), "halt", event or "discard")]
    assert result.stats.discards == 1
    t, x = result.history.get_port_trajectory("halt", "x")
    t_integ, _ = result.history.get_port_trajectory("integ", "y")
    assert AT in t.tolist() and AT in t_integ.tolist()  # every component was brought to that instant
    np.testing.assert_allclose(x, t, rtol=0, atol=1e-15)
    assert t[-1] == TF


class OneStepSize(OdeComponent):
    """``v' = -x``, stepping by one step size only."""

    fixed_step_only: ClassVar[bool] = True
    fixed_step_reason: ClassVar[str] = "its integrator has one step size"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.add_state("v", "m/s", initial=0.5)
        self.add_input("x", "m")

    def derivatives(self, t, x, u):
        return np.array([-u[0]])


def test_a_fixed_step_component_is_refused_with_its_own_reason() -> None:
    system = System("fixed")
    system.add_component(OneStepSize("fixed"))
    system.set_initial_value("fixed.x", 1.0)
    with pytest.raises(ConfigError) as info:
        system.run(0.0, 1.05, DT, master=GaussSeidel())
    assert info.value.key is None
    assert str(info.value) == (
        "component 'fixed' cannot handle variable communication step sizes (its integrator has one step size), so "
        "every step must be dt=0.1, but tf=1.05 is not on the grid t0 + k*dt (the last step would be 0.05); choose "
        "tf on the grid")


def test_a_fixed_step_component_fails_where_another_ends_a_step_early() -> None:
    system = halting_system()
    system.add_component(OneStepSize("fixed"))
    system.connect("halt.x -> fixed.x", convert_units=False)
    master: Master = Jacobi()
    with pytest.raises(SimulationError) as info:
        system.run(0.0, TF, DT, master=master)
    assert str(info.value) == (
        "component 'halt' ended the step from t=0.5 to 0.6 early at t=0.53; the run cannot continue: component "
        "'fixed' cannot handle variable communication step sizes (its integrator has one step size), so it cannot "
        "be stepped to t=0.53 with the others")
    assert (info.value.component, info.value.time) == ("halt", 0.5)
