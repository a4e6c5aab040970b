"""The run-scoped recorder: what it samples, when it hands blocks over, and what stays in memory."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import Affine, Ramp, Stateless

from cosimrun import CoSimComponent, PortSpec, PortType
from cosimrun.core.history import ComponentHistory, SystemHistory
from cosimrun.core.multi import MultiComponent
from cosimrun.core.regions import SwitchRegions
from cosimrun.errors import ConfigError, NonFiniteValueError, UnknownNameError
from cosimrun.masters import GaussSeidel, Hybrid, Jacobi
from cosimrun.system import MemorySink, Recorder, System


class Mixed(Stateless):
    """One output of every port type, each a function of time."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.output_specs = {
            "x": PortSpec("x", PortType.REAL, "out", "m"),
            "n": PortSpec("n", PortType.INT, "out"),
            "on": PortSpec("on", PortType.BOOL, "out"),
            "label": PortSpec("label", PortType.STRING, "out"),
        }

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        t = self.t if t is None else t
        k = round(t * 10)
        self.outputs["x"].value = 0.5 * t
        self.outputs["n"].value = k
        self.outputs["on"].value = k % 2 == 0
        self.outputs["label"].value = f"k={k}"


class Failing(Ramp):
    """A ramp whose step fails once time passes *t_fail*."""

    def __init__(self, name: str, t_fail: float) -> None:
        super().__init__(name)
        self.t_fail = t_fail

    def _do_step_internal(self, t: float, dt: float) -> None:
        if t + dt > self.t_fail:
            raise RuntimeError(f"boom at {t + dt}")


def empty_history(*names: str) -> SystemHistory:
    """A history apart from the components' own, with an empty entry per component name."""
    history = SystemHistory("kept")
    for name in names:
        history.add_component(name, ComponentHistory(name))
    return history


class CountingSink(MemorySink):
    """A memory sink that notes the size of every block it receives."""

    def __init__(self, history: SystemHistory) -> None:
        super().__init__(history)
        self.blocks: list[int] = []

    def append(self, component, time, micro, values, *, flush=True) -> None:
        self.blocks.append(len(time))
        super().append(component, time, micro, values, flush=flush)


def test_every_port_type_round_trips_through_blocks_with_micro_steps():
    comp = Mixed("m")
    system = System("s")
    system.add_component(comp)
    system.initialize(0.0, Jacobi())
    history = empty_history("m")
    sink = CountingSink(history)
    recorder = Recorder(sink, flush_interval=4)
    recorder.attach(system.components)
    times = [0.0, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.5, 0.6, 0.7]
    micros = [0, 0, 1, 0, 0, 0, 0, 2, 0, 0]
    for t, micro in zip(times, micros, strict=True):
        comp.refresh_outputs(t)
        recorder.sample(t, micro)
    assert sink.blocks == [4, 4]  # two full blocks handed over, two samples still buffered
    recorder.flush()
    assert sink.blocks == [4, 4, 2]
    ports = history.get_component_history("m").get_all_histories()
    assert ports["x"].unit == "m" and ports["label"].port_type is PortType.STRING
    for port in ports.values():
        np.testing.assert_array_equal(port.time, times)
        np.testing.assert_array_equal(port.micro, micros)
    np.testing.assert_allclose(ports["x"].values, 0.5 * np.array(times))
    assert ports["n"].values.tolist() == [round(t * 10) for t in times]
    assert ports["on"].values.tolist() == [round(t * 10) % 2 == 0 for t in times]
    assert ports["label"].values.tolist() == [f"k={round(t * 10)}" for t in times]


def test_only_selected_ports_are_read_and_declared():
    system = System("s")
    system.add_component(Mixed("m"))
    system.add_component(Ramp("r"))
    system.initialize(0.0, Jacobi())
    sink = CountingSink(SystemHistory("s"))
    declared: dict[str, Any] = {}
    sink.add_component = lambda name, ports: declared.update({name: dict(ports)})  # type: ignore[method-assign]
    sink.append = lambda component, time, micro, values, *, flush=True: declared.update(  # type: ignore[method-assign]
        {f"{component}.written": sorted(values)})
    sink.n_samples = lambda component: 0  # type: ignore[method-assign]
    recorder = Recorder(sink, flush_interval=3)
    recorder.attach(system.components, {"m": ["x", "label"]})
    assert declared == {"m": {"x": ("m", "real"), "label": (None, "string")}}
    recorder.sample(0.0)
    recorder.flush()
    assert declared["m.written"] == ["label", "x"]


def test_an_unknown_selection_names_what_is_known():
    system = System("s")
    system.add_component(Ramp("r"))
    system.initialize(0.0, Jacobi())
    recorder = Recorder(MemorySink(SystemHistory("s")))
    with pytest.raises(UnknownNameError, match=r"unknown output 'z' of component 'r' to record.*\(known: y\)"):
        recorder.attach(system.components, {"r": ["z"]})
    with pytest.raises(UnknownNameError, match=r"unknown component 'q' to record \(known: r\)"):
        recorder.attach(system.components, {"q": ["y"]})


def test_events_reach_the_sink_in_order():
    system = System("s")
    system.add_component(Ramp("r"))
    system.initialize(0.0, Jacobi())
    history = system.history
    recorder = Recorder(MemorySink(history), flush_interval=100)
    recorder.attach(system.components)
    recorder.event(0.5, 0, "r", "hit")
    recorder.event(0.5, 1, "r", "hit")
    assert history.event_log() == []  # buffered until a flush
    recorder.flush()
    assert [(e[0].t, e[0].micro, e[1], e[2]) for e in history.event_log()] == [(0.5, 0, "r", "hit"),
                                                                               (0.5, 1, "r", "hit")]


def test_flush_interval_must_be_positive():
    with pytest.raises(ConfigError, match="flush_interval: must be >= 1, got 0") as info:
        Recorder(MemorySink(SystemHistory("s")), flush_interval=0)
    assert info.value.key == "flush_interval" and isinstance(info.value, ValueError)


def test_components_in_a_system_never_record_themselves_but_alone_they_do():
    alone = Ramp("alone")
    alone.initialize(0.0)
    for k in range(3):
        alone.do_step(0.1 * k, 0.1)
    assert len(alone.history) == 4  # the reference API's standalone use

    system = System("s")
    ramp = system.add_component(Ramp("r"))
    gain = system.add_component(Affine("g", 2.0))
    system.connect("r.y -> g.u")
    assert not ramp.record_history
    sink_history = empty_history(*system.components)
    recorder = Recorder(MemorySink(sink_history), flush_interval=7)
    system.run(0.0, 1.0, 0.1, master=GaussSeidel(), recorder=recorder)
    assert len(ramp.history) == 0 and len(gain.history) == 0  # nothing kept by the components
    t, y = sink_history.get_port_trajectory("g", "y")
    np.testing.assert_allclose(t, np.linspace(0.0, 1.0, 11))
    np.testing.assert_allclose(y, 2.0 * t)


def test_a_failing_run_hands_over_everything_accepted_before_the_failure():
    system = System("s")
    system.add_component(Failing("f", t_fail=0.55))
    history = empty_history("f")
    recorder = Recorder(MemorySink(history), flush_interval=1000)
    with pytest.raises(RuntimeError, match="boom"):
        system.run(0.0, 1.0, 0.1, master=Jacobi(), recorder=recorder)
    t, y = history.get_port_trajectory("f", "y")
    np.testing.assert_allclose(t, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    np.testing.assert_allclose(y, t)


class Level(Stateless):
    """``y = u`` with rollback: a mode of the multi component below."""

    def __init__(self, name: str, offset: float) -> None:
        super().__init__(name)
        self.input_specs = {"u": PortSpec("u", PortType.REAL, "in")}
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out")}
        self.direct_feedthrough = {"y": {"u"}}
        self.offset = offset

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        self.outputs["y"].value = self.inputs["u"].value + self.offset

    def snapshot_state(self) -> Any:
        return self.t

    def restore_state(self, snapshot: Any, t: float) -> None:
        self.t = t


class Wave(Ramp):
    """``y = sin(2 pi t)`` with rollback, so the hybrid master can locate its boundary crossings."""

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        self.outputs["y"].value = float(np.sin(2 * np.pi * (self.t if t is None else t)))

    def snapshot_state(self) -> Any:
        return self.t

    def restore_state(self, snapshot: Any, t: float) -> None:
        self.t = t


# the notice of a master that handles events at communication points is expected here
@pytest.mark.filterwarnings("ignore:events are handled at communication points")
@pytest.mark.parametrize("master", [GaussSeidel, Hybrid])
def test_a_multi_component_s_models_hold_at_most_a_flush_interval_of_samples(master: type) -> None:
    flush_interval = 50
    system = System("s")
    system.add_component(Wave("wave"))
    multi = MultiComponent("m", {"low": Level("m_low", 0.0), "high": Level("m_high", 0.001)}, "low")
    multi.set_switch_regions(SwitchRegions.threshold("y", "low", "high", lower=0.2, upper=0.5))
    system.add_component(multi)
    system.connect("wave.y -> m.u")
    history = empty_history(*system.components)
    held: list[int] = []

    def watch(t: float) -> None:
        held.append(max(len(model.history) for model in multi.models.values()))
        held.append(max(len(comp.history) for comp in system.components.values()))

    recorder = Recorder(MemorySink(history), flush_interval=flush_interval)
    result = system.run(0.0, 3.0, 0.005, master=master(), recorder=recorder, progress=watch)
    assert len(result.mode_switches) >= 4  # both models were active in turn
    assert held and max(held) <= flush_interval
    assert max(len(model.history) for model in multi.models.values()) <= flush_interval
    assert len(history.get_component_history("m")) >= 601  # the multi component's own samples were all kept


def test_a_reference_style_evaluate_outputs_override_is_what_masters_use():
    calls: list[float] = []

    class Legacy(Affine):
        def evaluate_outputs(self, inputs: dict[str, Any], t: float | None = None) -> dict[str, Any]:
            calls.append(self.t if t is None else t)
            if inputs:
                self.set_inputs(inputs, t)
            self._update_output_states(t)
            return self.get_outputs()

    system = System("s")
    system.add_component(Ramp("r"))
    legacy: CoSimComponent = system.add_component(Legacy("g", 3.0))
    system.connect("r.y -> g.u")
    result = system.run(0.0, 0.3, 0.1, master=Jacobi())
    assert calls  # feedthrough re-evaluation went through the override
    np.testing.assert_allclose(result.history.get_port_trajectory("g", "y")[1], [0.0, 0.3, 0.6, 0.9])
    assert legacy.direct_feedthrough == {"y": {"u"}}


@pytest.mark.parametrize("bad_at", [0, 3, 9])
def test_the_first_non_finite_value_ends_the_run_after_the_samples_before_it(bad_at: int) -> None:
    comp = Mixed("m")
    system = System("s")
    system.add_component(comp)
    system.add_component(Ramp("r"))
    system.initialize(0.0, Jacobi())
    history = empty_history("m", "r")
    recorder = Recorder(MemorySink(history), flush_interval=4)
    recorder.attach(system.components)
    times = [0.1 * k for k in range(12)]
    with pytest.raises(NonFiniteValueError) as info:
        for k, t in enumerate(times):
            comp.refresh_outputs(t)
            system.components["r"].refresh_outputs(t)
            if k >= bad_at:
                comp.outputs["x"].value = float("inf") if k == bad_at else float("nan")
            recorder.sample(t)
        recorder.flush()
    error = info.value
    assert (error.component, error.port, error.time) == ("m", "x", pytest.approx(times[bad_at]))
    assert str(error) == f"output m.x is inf at t={times[bad_at]:.12g}: the run stops at the first non-finite value"
    for name in ("m", "r"):
        for port in history.get_component_history(name).get_all_histories().values():
            np.testing.assert_allclose(port.time, times[:bad_at])  # every port up to the bad instant, none after
    recorder.flush()  # nothing is handed over twice
    assert len(history.get_component_history("m")) == bad_at


def test_non_finite_values_are_kept_when_allowed() -> None:
    comp = Mixed("m")
    system = System("s")
    system.add_component(comp)
    system.initialize(0.0, Jacobi())
    history = empty_history("m")
    recorder = Recorder(MemorySink(history), flush_interval=2, allow_nonfinite=True)
    recorder.attach(system.components)
    for k in range(3):
        comp.refresh_outputs(0.1 * k)
        comp.outputs["x"].value = float("nan") if k == 1 else 1.0
        recorder.sample(0.1 * k)
    recorder.flush()
    x = history.get_component_history("m").get_port_history("x").values
    assert x[0] == 1.0 and np.isnan(x[1]) and x[2] == 1.0


class Undefined(Mixed):
    """``x`` is NaN from the start (an output a model leaves undefined)."""

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        super()._update_output_states(t, event_names)
        self.outputs["x"].value = float("nan")


def test_initialize_keeps_a_non_finite_initial_value_and_the_run_reports_it() -> None:
    system = System("s")
    comp = system.add_component(Undefined("m"))
    system.initialize(0.0, Jacobi())  # the initial point is shown as it is, not judged
    assert np.isnan(comp.history.get_port_history("x").values).all()
    with pytest.raises(NonFiniteValueError, match=r"output m\.x is nan at t=0:"):
        system.run(0.0, 0.3, 0.1, master=Jacobi())
