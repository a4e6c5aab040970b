"""Ensembles of equation components (:class:`~cosimrun.core.equations.EquationComponent` declared
``vectorizable``): equations written with array operations run over the members as over one run.

A damped oscillator given by its state equation, with a floor it rebounds from (an event and its update), feeds a
memoryless equation component (its output a function of its input). Members differ in their initial states; each
member's samples, events and final values are its scalar run's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cosimrun.core.equations import EquationComponent
from cosimrun.ensemble import COMPLETE, run_ensemble
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel, Hybrid
from cosimrun.system import System

T0, TF, DT = 0.0, 2.0, 0.01
MEMBERS = {"osc.x0": np.array([1.0, 0.2, -0.5, -0.2]), "osc.v0": np.array([0.0, 2.5, -1.0, 0.0])}


def system(vectorizable: bool = True, dt: float = 0.0) -> System:
    def state(t: Any, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([x[1], -9.0 * x[0] - 0.4 * x[1] - 2.0])

    def floor(t: Any, x: np.ndarray) -> Any:
        return x[0] + 0.3

    def rebound(t: Any, x: np.ndarray) -> np.ndarray:
        return np.array([-0.3 - 0.0 * x[0], -0.7 * x[1]])

    def power(t: Any, u: np.ndarray) -> list[Any]:
        return [u[0] * u[0], np.abs(u[0])]

    sys_ = System("equations")
    sys_.add_component(EquationComponent(
        "osc", state_equation=state, states=["x", "v"], initial_state=[1.0, 0.0], event_equation=floor,
        update_equation=rebound, event_name="floor", event_direction=-1, vectorizable=vectorizable, dt=dt))
    sys_.add_component(EquationComponent("sq", output_equation=power, inputs=["u"], outputs=["y", "a"],
                                         vectorizable=vectorizable))
    sys_.connect("osc.x", "sq.u")
    return sys_


@pytest.mark.parametrize("master", [GaussSeidel(), Hybrid(time_tolerance=1e-10)], ids=["gauss_seidel", "hybrid"])
def test_each_member_of_equation_components_equals_its_scalar_run(master: Any) -> None:
    ensemble = system()
    result = run_ensemble(ensemble, master, MEMBERS, t0=T0, tf=TF, dt=DT)
    assert list(result.status) == [COMPLETE] * 4
    bounced = 0
    for m in range(4):
        one = system()
        one.components["osc"].set_parameters(x0=float(MEMBERS["osc.x0"][m]), v0=float(MEMBERS["osc.v0"][m]))
        report = one.run(T0, TF, DT, master)
        events = result.member_events(m)
        assert list(events["event"]) == [name for _, _, name in report.events], m
        np.testing.assert_array_equal(events["time"], [dense.t for dense, _, _ in report.events])
        bounced += len(report.events) > 0
        for key in ("osc.x", "osc.v", "sq.y", "sq.a"):
            comp, port = key.split(".")
            series = one.components[comp].history.get_all_histories()[port]
            time, micro, values = result.member_history(m, key)  # its samples after the events too
            np.testing.assert_array_equal(time, series.time)
            np.testing.assert_array_equal(micro, series.micro)
            # 1e-12 relative stated; observed: equal to the bit
            np.testing.assert_allclose(values, series.values, rtol=1e-12, atol=0)
    assert 0 < bounced < 4  # some members reach the floor, some do not


def test_equation_components_not_declared_vectorizable_or_sampled_are_refused_in_one_keyed_line() -> None:
    for sys_, text in ((system(vectorizable=False), "is not vectorizable"),
                       (system(dt=0.05), "is a sampled equation component (dt=0.05)")):
        with pytest.raises(ConfigError) as info:
            run_ensemble(sys_, GaussSeidel(), MEMBERS, t0=T0, tf=0.1, dt=DT)
        assert info.value.key == "components.osc" and text in str(info.value) and "\n" not in str(info.value)
