"""The CoSimComponent contract: lifecycle, parameters, ports, events, feedthrough."""

import numpy as np
import pytest

from cosimrun.core.component import CoSimComponent
from cosimrun.core.events import Event, InternalEventInfo
from cosimrun.core.ports import PortSpec, PortType


# The reference's example, verbatim except the imports above.
class Integrator(CoSimComponent):
    def __init__(self, name: str):
        super().__init__(name)
        self.input_specs = {'u': PortSpec('u', PortType.REAL, 'in')}
        self.output_specs = {'y': PortSpec('y', PortType.REAL, 'out')}
        self.parameters = {'gain': 1.0}
        self._state = 0.0

    def _initialize_component(self, t0: float) -> None:
        self._state = 0.0

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._state += self.parameters['gain'] * self.inputs['u'].get() * dt

    def _update_output_states(self, t: float, event_names=None) -> None:
        self.outputs['y'].set(self._state, t=t)

    def get_state(self) -> dict:
        return {'y': {'value': self._state, 'unit': '1'}}

    def set_state(self, state: dict, t: float) -> None:
        self._state = state['y']['value']
        self.t = t


class Gain(CoSimComponent):
    """y = k * u, computed in _update_output_states (direct feedthrough)."""

    def __init__(self, name="gain", k=2.0):
        super().__init__(name)
        self.input_specs = {"u": PortSpec("u", PortType.REAL, "in", "m")}
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out", "m")}
        self.parameters = {"k": k, "mass": 1.0}

    def _validate_parameter(self, name, value):
        if name == "mass" and value <= 0:
            raise ValueError("mass must be positive")
        if name == "k":
            return float(value)
        return super()._validate_parameter(name, value)

    def _initialize_component(self, t0):
        pass

    def _do_step_internal(self, t, dt):
        pass

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].set(self.parameters["k"] * self.inputs["u"].get(), t=t)

    def get_state(self):
        return {}

    def set_state(self, state, t):
        self.t = t


class Tank(CoSimComponent):
    """A level h with rollback; ``_update_output_states`` also caches what it read.

    Outputs: ``h`` (state, no feedthrough), ``overflow`` = q_in + h (feedthrough from q_in),
    ``mode`` (string), ``count`` (int). Inputs: q_in (REAL), flag (BOOL, unused).
    """

    def __init__(self, name="tank"):
        super().__init__(name)
        self.input_specs = {
            "q_in": PortSpec("q_in", PortType.REAL, "in", "m/s"),
            "flag": PortSpec("flag", PortType.BOOL, "in"),
        }
        self.output_specs = {
            "h": PortSpec("h", PortType.REAL, "out", "m"),
            "overflow": PortSpec("overflow", PortType.REAL, "out"),
            "mode": PortSpec("mode", PortType.STRING, "out"),
            "count": PortSpec("count", PortType.INT, "out"),
        }
        self.parameters = {"h0": 1.0}
        self.h = 0.0
        self.last_q = None
        self.n_updates = 0
        self.handled = []

    def _initialize_component(self, t0):
        self.h = self.parameters["h0"]
        self.n_updates = 0

    def _do_step_internal(self, t, dt):
        self.h += self.inputs["q_in"].get() * dt

    def _update_output_states(self, t=None, event_names=()):
        q = self.inputs["q_in"].get()
        self.last_q = q
        self.n_updates += 1
        self.outputs["h"].set(self.h, t=t)
        self.outputs["overflow"].set(q + self.h, t=t)
        self.outputs["mode"].set("filling" if q > 0 else "idle", t=t)
        self.outputs["count"].set(self.n_updates, t=t)

    def _handle_events_internal(self, event_names, t):
        self.handled.append((list(event_names), t))
        if "empty" in event_names:
            self.h = 0.0

    def get_state(self):
        return {"h": {"value": self.h, "unit": "m"}}

    def set_state(self, state, t):
        self.h = state["h"]["value"]
        self.t = t

    def snapshot_state(self):
        return (self.h, self.last_q, self.n_updates, self.t)

    def restore_state(self, snapshot, t):
        self.h, self.last_q, self.n_updates, _ = snapshot
        self.t = t


# ---------------------------------------------------------------- reference example
def test_reference_integrator_runs():
    comp = Integrator("int")
    comp.set_parameters(gain=2.0)
    comp.initialize(t0=0.0)
    assert comp.t == 0.0
    assert comp.get_outputs() == {"y": 0.0}
    dt = 0.01
    for i in range(100):
        comp.set_inputs({"u": 1.5}, t=i * dt)
        comp.do_step(i * dt, dt)
    assert comp.get_outputs()["y"] == pytest.approx(2.0 * 1.5 * 1.0, rel=1e-12)
    assert comp.t == pytest.approx(1.0)
    t, values = comp.get_history_arrays()
    assert t.shape == (101,) and values["y"].shape == (101,)
    np.testing.assert_allclose(t, np.cumsum([0.0] + [dt] * 100))
    np.testing.assert_allclose(values["y"], 3.0 * t, atol=1e-12)
    assert comp.get_state() == {"y": {"value": comp._state, "unit": "1"}}
    comp.set_state({"y": {"value": 5.0, "unit": "1"}}, t=2.0)
    assert comp.t == 2.0 and comp.get_state()["y"]["value"] == 5.0
    assert not comp.supports_rollback
    assert comp.direct_feedthrough == {"y": set()}
    assert not comp.has_direct_feedthrough


# ---------------------------------------------------------------- construction and lifecycle
def test_name_label_group():
    comp = Integrator("int")
    assert (comp.name, comp.label, comp.group) == ("int", "int", None)
    g = Gain("pid_1")
    assert g.label == "pid_1"
    for bad in ("", "a.b", "a/b"):
        with pytest.raises(ValueError):
            Integrator(bad)


def test_initialize_is_idempotent_and_records_initial_sample():
    comp = Tank()
    comp.set_parameters(h0=3.0)
    comp.initialize(1.5)
    assert comp.is_initialized and comp.t == 1.5
    h = comp.history.get_port_history("h")
    np.testing.assert_array_equal(h.time, [1.5])
    np.testing.assert_array_equal(h.values, [3.0])
    assert comp.history.get_port_history("mode").values.tolist() == ["idle"]
    updates = comp.n_updates
    comp.initialize(7.0)  # no effect
    assert comp.t == 1.5
    assert len(h) == 1
    assert comp.n_updates == updates


def test_do_step_updates_time_outputs_and_history():
    comp = Tank()
    comp.initialize(0.0)
    comp.set_inputs({"q_in": 0.5})
    comp.do_step(0.0, 0.2)
    comp.do_step(0.2, 0.3)
    assert comp.t == pytest.approx(0.5)
    assert comp.get_outputs()["h"] == pytest.approx(1.25)
    t, v = comp.get_history_arrays()
    np.testing.assert_allclose(t, [0.0, 0.2, 0.5])
    np.testing.assert_allclose(v["h"], [1.0, 1.1, 1.25])
    np.testing.assert_allclose(v["overflow"], [1.0, 1.6, 1.75])
    assert v["mode"].tolist() == ["idle", "filling", "filling"]
    assert v["count"].dtype == np.int64
    hist = comp.get_history(["h"], units={"h": "cm"})
    np.testing.assert_allclose(hist["h"]["values"], [100.0, 110.0, 125.0])
    assert hist["h"]["unit"] == "cm"


@pytest.mark.parametrize("dt", [0.0, -0.1, float("nan")])
def test_non_positive_step_raises(dt):
    comp = Integrator("int")
    comp.initialize(0.0)
    with pytest.raises(ValueError, match="step size must be positive"):
        comp.do_step(0.0, dt)
    assert comp.t == 0.0
    assert len(comp.history.get_port_history("y")) == 1


def test_record_history_off():
    comp = Integrator("int")
    comp.record_history = False
    comp.initialize(0.0)
    comp.do_step(0.0, 0.1)
    assert len(comp.history.get_port_history("y")) == 0


def test_reset_then_initialize_at_other_t0():
    comp = Tank()
    comp.initialize(0.0)
    comp.set_inputs({"q_in": 1.0}, t=0.0)
    comp.do_step(0.0, 1.0)
    assert comp.get_outputs()["h"] == pytest.approx(2.0)
    comp.report_internal_event("x", 0.1, 0.2)
    comp.reset()
    assert not comp.is_initialized and comp.t == 0.0
    assert len(comp.history) == 0
    assert comp.inputs["q_in"].get() == 0.0 and comp.inputs["q_in"].t_last is None
    assert comp.internal_event_hints == []
    comp.set_parameters(h0=4.0)
    comp.initialize(5.0)
    assert comp.t == 5.0
    t, v = comp.get_history_arrays()
    np.testing.assert_array_equal(t, [5.0])
    np.testing.assert_array_equal(v["h"], [4.0])
    comp.do_step(5.0, 0.5)
    np.testing.assert_array_equal(comp.get_history_arrays()[0], [5.0, 5.5])


# ---------------------------------------------------------------- parameters and I/O
def test_set_parameters_unknown_name_suggests():
    comp = Gain()
    with pytest.raises(KeyError, match=r"unknown parameter 'kk'.*did you mean 'k'"):
        comp.set_parameters(kk=3.0)
    with pytest.raises(KeyError, match="'mas'"):
        comp.get_parameters("mas")


def test_set_parameters_is_all_or_nothing_on_unknown_name():
    comp = Gain()
    with pytest.raises(KeyError):
        comp.set_parameters(k=5.0, nope=1)
    assert comp.parameters["k"] == 2.0


def test_validate_parameter_hook():
    comp = Gain()
    with pytest.raises(ValueError, match="mass must be positive"):
        comp.set_parameters(mass=-1.0)
    assert comp.parameters["mass"] == 1.0
    comp.set_parameters(k=3, mass=2.5)
    assert comp.get_parameters("k") == {"k": 3.0}
    assert type(comp.parameters["k"]) is float  # the hook's coerced value is stored
    params = comp.get_parameters()
    assert params == {"k": 3.0, "mass": 2.5}
    params["k"] = 99.0
    assert comp.parameters["k"] == 3.0  # a copy


def test_set_inputs_unknown_port_and_validation():
    comp = Gain()
    comp.initialize(0.0)
    with pytest.raises(KeyError, match=r"unknown input 'v'.*\(known: u\)"):
        comp.set_inputs({"v": 1.0})
    with pytest.raises(TypeError):
        comp.set_inputs({"u": "x"})
    comp.set_inputs({"u": np.float64(1.5)}, t=0.3)
    assert comp.inputs["u"].get() == 1.5 and comp.inputs["u"].t_last == 0.3


def test_set_inputs_before_initialize_explains():
    comp = Gain()
    with pytest.raises(RuntimeError, match="initialize"):
        comp.set_inputs({"u": 1.0})
    with pytest.raises(KeyError, match="unknown input 'v'"):
        comp.set_inputs({"v": 1.0})


def test_get_outputs_and_evaluate_outputs():
    comp = Gain(k=4.0)
    comp.initialize(0.0)
    assert comp.get_outputs() == {"y": 0.0}
    assert comp.evaluate_outputs({"u": 2.0}) == {"y": 8.0}
    assert comp.t == 0.0
    assert len(comp.history.get_port_history("y")) == 1  # evaluation records nothing
    comp.outputs["y"].value = None
    assert comp.get_outputs() == {}


# ---------------------------------------------------------------- rollback
def test_supports_rollback_detected_from_overrides():
    assert Tank().supports_rollback
    assert not Integrator("i").supports_rollback

    class OnlySnapshot(Integrator):
        def snapshot_state(self):
            return self._state

    assert not OnlySnapshot("o").supports_rollback
    with pytest.raises(NotImplementedError):
        Integrator("i").snapshot_state()
    with pytest.raises(NotImplementedError):
        Integrator("i").restore_state(None, 0.0)


def test_snapshot_restore_roundtrip():
    comp = Tank()
    comp.initialize(0.0)
    comp.set_inputs({"q_in": 2.0})
    snap = comp.snapshot_state()
    comp.do_step(0.0, 1.0)
    comp.restore_state(snap, 0.0)
    assert comp.t == 0.0 and comp.h == 1.0


# ---------------------------------------------------------------- event indicators
def test_add_event_indicator_requires_rollback():
    with pytest.raises(RuntimeError, match="rollback"):
        Integrator("i").add_event_indicator("zero", lambda c: c._state)


def test_add_event_indicator_duplicate_and_direction():
    comp = Tank()
    comp.add_event_indicator("empty", lambda c: c.h, direction=-1)
    with pytest.raises(KeyError, match="'empty'"):
        comp.add_event_indicator("empty", lambda c: c.h)
    with pytest.raises(ValueError, match="direction"):
        comp.add_event_indicator("full", lambda c: c.h - 2.0, direction=2)
    assert list(comp.event_indicators) == ["empty"]
    assert comp.event_indicators["empty"].direction == -1
    assert comp.has_state_events


def test_event_indicator_name_clashing_with_output_is_rejected_cleanly():
    comp = Tank()
    with pytest.raises(ValueError, match="clashes"):
        comp.add_event_indicator("h", lambda c: c.h)
    assert "h" not in comp.event_indicators
    comp.initialize(0.0)  # still initializes fine
    assert comp.output_specs["h"].type is PortType.REAL


def test_event_port_created_at_initialize():
    comp = Tank()
    comp.add_event_indicator("empty", lambda c: c.h, direction=-1)
    assert "empty" not in comp.outputs
    comp.initialize(0.0)
    spec = comp.output_specs["empty"]
    assert (spec.type, spec.direction, spec.unit) == (PortType.EVENT, "out", None)
    assert comp.outputs["empty"].get() is False
    assert comp.history.get_port_history("empty").values.tolist() == [False]


def test_event_port_created_after_initialize_shares_time_axis():
    comp = Tank()
    comp.initialize(0.0)
    comp.do_step(0.0, 0.5)
    comp.add_event_indicator("empty", lambda c: c.h, direction=-1)
    assert comp.output_specs["empty"].type is PortType.EVENT
    assert comp.outputs["empty"].get() is False
    comp.do_step(0.5, 0.5)
    t, v = comp.get_history_arrays()
    np.testing.assert_array_equal(t, [0.0, 0.5, 1.0])
    assert v["empty"].tolist() == [False, False, False]
    comp.handle_event(["empty"], 1.0)
    assert comp.get_outputs()["empty"] is True
    assert comp.history.get_port_history("empty").values.tolist() == [False, False, False, True]


def test_evaluate_and_detect_crossings():
    comp = Tank()
    comp.add_event_indicator("empty", lambda c: c.h, direction=-1)
    comp.add_event_indicator("full", lambda c: c.h - 2.0, direction=1)
    comp.add_event_indicator("half", lambda c: c.h - 0.5, direction=0)
    comp.initialize(0.0)
    assert comp.evaluate_event_indicators() == {"empty": 1.0, "full": -1.0, "half": 0.5}

    # falling through 0 and 0.5
    prev, cur = {"empty": 1.0, "full": -1.0, "half": 0.5}, {"empty": -0.1, "full": -2.1, "half": -0.6}
    assert comp.detect_event_crossings(prev, cur) == ["empty", "half"]
    # rising: 'empty' only fires when falling, 'full' only when rising
    prev, cur = {"empty": -1.0, "full": -0.5, "half": -1.0}, {"empty": 1.0, "full": 0.5, "half": 1.0}
    assert comp.detect_event_crossings(prev, cur) == ["full", "half"]
    # any strictly signed start counts (no band by default); starting on the surface never fires
    assert comp.detect_event_crossings({"half": 1e-12}, {"half": -1.0}) == ["half"]
    assert comp.detect_event_crossings({"half": 0.0}, {"half": -1.0}) == []
    assert comp.detect_event_crossings({"half": 1e-3}, {"half": -1.0}, sign_tolerance=1e-2) == []
    assert comp.detect_event_crossings({"half": 1e-3}, {"half": -1.0}, sign_tolerance=1e-4) == ["half"]
    # indicators missing from either dict are skipped
    assert comp.detect_event_crossings({"empty": 1.0}, {}) == []


def test_internal_event_hints_are_cleared_on_read():
    comp = Tank()
    comp.report_internal_event("empty", 0.1, 0.2, 0.05, -0.05)
    comp.report_internal_event("full", 0.3, 0.35)
    hints = comp.get_internal_event_hints()
    assert [h.event_name for h in hints] == ["empty", "full"]
    assert isinstance(hints[0], InternalEventInfo)
    assert hints[0].interval_width == pytest.approx(0.1)
    assert (hints[0].indicator_before, hints[0].indicator_after) == (0.05, -0.05)
    assert hints[1].indicator_before is None
    assert comp.get_internal_event_hints() == []


def test_subscribe_event_rules():
    comp = Tank()
    assert not comp.has_event_subscriptions
    comp.subscribe_event(Event("high_temp", "sensor_1"))
    assert comp.has_event_subscriptions
    comp.subscribe_event(Event("high_temp", "sensor_2"))  # other source: fine
    comp.subscribe_event(Event("low_temp", "sensor_1"))
    with pytest.raises(KeyError, match="sensor_1.high_temp"):
        comp.subscribe_event(Event("high_temp", "sensor_1"))
    from cosimrun.core.events import DenseTime

    with pytest.raises(ValueError, match="time"):
        comp.subscribe_event(Event("x", "s", time=DenseTime(1.0)))
    assert len(comp.event_subscriptions) == 3


def test_handle_event_records_post_event_sample_and_pulses_port():
    comp = Tank()
    comp.add_event_indicator("empty", lambda c: c.h, direction=-1)
    comp.initialize(0.0)
    comp.set_inputs({"q_in": -1.0})
    comp.do_step(0.0, 0.5)
    assert comp.get_outputs()["h"] == pytest.approx(0.5)

    comp.handle_event(["empty"], 0.5)
    assert comp.handled == [(["empty"], 0.5)]
    assert comp.t == 0.5
    assert comp.get_outputs()["h"] == 0.0
    assert comp.get_outputs()["empty"] is True

    hist = comp.history.get_port_history("h")
    np.testing.assert_array_equal(hist.time, [0.0, 0.5, 0.5])
    np.testing.assert_array_equal(hist.micro, [0, 0, 1])
    np.testing.assert_array_equal(hist.values, [1.0, 0.5, 0.0])
    ev = comp.history.get_port_history("empty")
    assert ev.values.tolist() == [False, False, True]
    np.testing.assert_array_equal(ev.micro, [0, 0, 1])

    comp.set_inputs({"q_in": 0.0})
    comp.do_step(0.5, 0.5)
    assert comp.get_outputs()["empty"] is False
    assert ev.values.tolist() == [False, False, True, False]
    np.testing.assert_array_equal(ev.micro, [0, 0, 1, 0])
    t, v = comp.get_history_arrays()  # all ports still share one time axis
    np.testing.assert_array_equal(t, [0.0, 0.5, 0.5, 1.0])


def test_handle_subscribed_event_without_port():
    comp = Tank()
    comp.subscribe_event(Event("alarm", "other"))
    comp.initialize(0.0)
    comp.handle_event(["alarm"], 0.0, micro=2)
    assert comp.handled == [(["alarm"], 0.0)]
    np.testing.assert_array_equal(comp.history.get_port_history("h").micro, [0, 2])


# ---------------------------------------------------------------- direct feedthrough
def test_gain_feedthrough_detected():
    comp = Gain()
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"y": {"u"}}
    assert comp.has_direct_feedthrough
    assert comp.reactive_inputs == {"u"}
    # detection leaves the ports as they were
    assert comp.inputs["u"].get() == 0.0 and comp.inputs["u"].t_last is None
    assert comp.outputs["y"].get() == 0.0
    np.testing.assert_array_equal(comp.history.get_port_history("y").values, [0.0])


def test_integrator_has_no_feedthrough():
    comp = Integrator("int")
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"y": set()}
    assert not comp.has_direct_feedthrough
    assert comp.reactive_inputs == set()


def test_detection_per_output_and_leaves_state_untouched():
    comp = Tank()
    comp.set_parameters(h0=2.0)
    comp.initialize(0.0)
    ft = comp.direct_feedthrough
    assert ft["h"] == set()
    assert ft["overflow"] == {"q_in"}
    assert ft["mode"] == {"q_in"}  # 'idle' -> 'filling' when q_in is perturbed up
    assert ft["count"] == set()  # the update counter is internal state, restored by rollback
    assert comp.reactive_inputs == {"q_in"}
    # internal state as left by initialize's own output update, not by a trial input
    assert comp.last_q == 0.0
    assert comp.n_updates == 1
    assert comp.h == 2.0
    assert comp.inputs["q_in"].get() == 0.0 and comp.inputs["flag"].get() is False
    assert comp.get_outputs() == {"h": 2.0, "overflow": 2.0, "mode": "idle", "count": 1}


def test_explicit_feedthrough_is_kept():
    comp = Gain()
    comp.direct_feedthrough = {"y": set()}  # declared: no feedthrough (e.g. a sampled gain)
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"y": set()}
    assert not comp.has_direct_feedthrough

    t = Tank()
    declared = {"overflow": {"q_in", "flag"}, "h": set()}
    t.direct_feedthrough = declared
    t.initialize(0.0)
    assert t.direct_feedthrough is declared
    assert t.reactive_inputs == {"q_in", "flag"}


def test_detected_feedthrough_redone_after_reset():
    comp = Gain(k=0.0)  # numerically no dependence while k == 0
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"y": set()}
    comp.reset()
    comp.set_parameters(k=3.0)
    comp.initialize(0.0)
    assert comp.direct_feedthrough == {"y": {"u"}}


def test_reactive_inputs_from_declared_map():
    comp = Gain()
    comp.direct_feedthrough = {"y": {"u", "v"}, "z": {"u"}, "w": set()}
    assert comp.reactive_inputs == {"u", "v"}
    assert comp.has_direct_feedthrough
    comp.direct_feedthrough = {}
    assert comp.reactive_inputs == set()
    assert not comp.has_direct_feedthrough
