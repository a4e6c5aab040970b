"""MultiComponent: port unification, mode switching, state transfer, switch regions, rollback."""

import math

import numpy as np
import pytest

from cosimrun.core.component import CoSimComponent
from cosimrun.core.multi import Hysteresis, MultiComponent, StateAdapter, SwitchRegions
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.units import compile_conversion

G = 9.81


# ---------------------------------------------------------------------------- test models
class Pendulum(CoSimComponent):
    """Damped pendulum driven by a torque, integrated with fixed-step RK4 (``substeps`` per step).

    The state (q, omega) is kept in rad and rad/s; the ports may use other units.
    """

    linear = False

    def __init__(self, name, q0=0.0, omega0=0.0, length=1.0, mass=1.0, damping=0.0, substeps=2,
                 q_unit="rad", torque_unit="N*m"):
        super().__init__(name)
        self.input_specs = {"torque": PortSpec("torque", PortType.REAL, "in", torque_unit)}
        self.output_specs = {
            "q": PortSpec("q", PortType.REAL, "out", q_unit),
            "omega": PortSpec("omega", PortType.REAL, "out", "rad/s"),
        }
        self.parameters = {"q0": q0, "omega0": omega0, "length": length, "mass": mass, "damping": damping}
        self.substeps = substeps
        self.q_unit, self.torque_unit = q_unit, torque_unit
        self._q = self._w = 0.0

    def _initialize_component(self, t0):
        self._q_out = compile_conversion("rad", self.q_unit)
        self._torque_in = compile_conversion(self.torque_unit, "N*m")
        self._q, self._w = self.parameters["q0"], self.parameters["omega0"]

    def _accel(self, q, w, u):
        p = self.parameters
        s = q if self.linear else math.sin(q)
        return -(G / p["length"]) * s - p["damping"] * w + u / (p["mass"] * p["length"] ** 2)

    def _do_step_internal(self, t, dt):
        u = self._torque_in(self.inputs["torque"].value)
        h = dt / self.substeps
        q, w = self._q, self._w
        for _ in range(self.substeps):
            k1q, k1w = w, self._accel(q, w, u)
            k2q, k2w = w + 0.5 * h * k1w, self._accel(q + 0.5 * h * k1q, w + 0.5 * h * k1w, u)
            k3q, k3w = w + 0.5 * h * k2w, self._accel(q + 0.5 * h * k2q, w + 0.5 * h * k2w, u)
            k4q, k4w = w + h * k3w, self._accel(q + h * k3q, w + h * k3w, u)
            q += h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
            w += h / 6 * (k1w + 2 * k2w + 2 * k3w + k4w)
        self._q, self._w = q, w

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["q"].set(self._q_out(self._q), t)
        self.outputs["omega"].set(self._w, t)

    def get_state(self):
        return {"q": {"value": self._q, "unit": "rad"}, "omega": {"value": self._w, "unit": "rad/s"}}

    def set_state(self, state, t):
        self._q, self._w = state["q"]["value"], state["omega"]["value"]

    def snapshot_state(self):
        return (self._q, self._w)

    def restore_state(self, snapshot, t):
        self._q, self._w = snapshot


class LinearPendulum(Pendulum):
    linear = True


class SignalNoRollback(CoSimComponent):
    """Outputs ``y = f(t)`` (in m) and its own name as ``label``; logs the events it handles."""

    def __init__(self, name, f):
        super().__init__(name)
        self.f = f
        self.output_specs = {
            "y": PortSpec("y", PortType.REAL, "out", "m"),
            "label": PortSpec("label", PortType.STRING, "out"),
        }
        self.handled = []
        self.freed = False

    def _initialize_component(self, t0):
        self.handled = []

    def _do_step_internal(self, t, dt):
        pass

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].set(self.f(self.t if t is None else t), t)
        self.outputs["label"].set(self.name, t)

    def get_state(self):
        return {}

    def set_state(self, state, t):
        pass

    def _handle_events_internal(self, event_names, t):
        self.handled.append((t, list(event_names)))

    def free(self):
        self.freed = True


class Signal(SignalNoRollback):
    def snapshot_state(self):
        return self.t

    def restore_state(self, snapshot, t):
        self.t = t


class Follower(CoSimComponent):
    """``y = u`` at once (direct feedthrough) or ``y = x`` with ``x`` following ``u`` (lag)."""

    def __init__(self, name, feedthrough):
        super().__init__(name)
        self.feedthrough = feedthrough
        self.input_specs = {"u": PortSpec("u", PortType.REAL, "in")}
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out")}
        self._x = 0.0

    def _initialize_component(self, t0):
        self._x = 0.0

    def _do_step_internal(self, t, dt):
        self._x = self.inputs["u"].value

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].set(self.inputs["u"].value if self.feedthrough else self._x, t)

    def get_state(self):
        return {"x": {"value": self._x, "unit": None}}

    def set_state(self, state, t):
        self._x = state["x"]["value"]


# ---------------------------------------------------------------------------- helpers
def pendulum_multi(initial="linear", nonlinear=None, **kw):
    models = {"linear": LinearPendulum("lin", **kw), "nonlinear": nonlinear or Pendulum("nl", **kw)}
    return MultiComponent("pend", models, initial)


def signal_multi(f, initial="low", cls=Signal, regions=None):
    multi = MultiComponent("sig", {"low": cls("low", f), "high": cls("high", f)}, initial)
    if regions is not None:
        multi.set_switch_regions(regions)
    return multi


def torque(t):
    return 0.5 * math.sin(3.0 * t)


def run(comp, t0, n, dt, inputs=None):
    """Step *comp* n times from t0 on the grid t0 + k dt (initializing it first)."""
    comp.initialize(t0)
    for k in range(n):
        t = t0 + k * dt
        if inputs is not None:
            comp.set_inputs(inputs(t), t)
        comp.do_step(t, dt)


def truncate(comp, n):
    for h in comp.history.get_all_histories().values():
        h.truncate(n)


def run_hybrid(comp, t0, n, dt, tol=1e-10):
    """A minimal event-locating master: trial steps with switching disabled, bisection of crossings,
    ``handle_event`` at the located instant, ``apply_mode_switch`` on accepted points."""
    comp.initialize(t0)
    comp._allow_mode_switching = False
    switched_at_points = [t0] if comp.apply_mode_switch(t0) else []
    events = []
    t, k = t0, 1
    while k <= n:
        t_end = t0 + k * dt
        prev = comp.evaluate_event_indicators()
        snap, n_hist = comp.snapshot_state(), len(comp.history)
        comp.do_step(t, t_end - t)
        names = comp.detect_event_crossings(prev, comp.evaluate_event_indicators())
        if names:
            lo, hi = t, t_end
            while hi - lo > tol:
                mid = 0.5 * (lo + hi)
                comp.restore_state(snap, t)
                truncate(comp, n_hist)
                comp.do_step(t, mid - t)
                if comp.detect_event_crossings(prev, comp.evaluate_event_indicators()):
                    hi = mid
                else:
                    lo = mid
            comp.restore_state(snap, t)
            truncate(comp, n_hist)
            comp.do_step(t, hi - t)
            names = comp.detect_event_crossings(prev, comp.evaluate_event_indicators())
            comp.handle_event(names, hi)
            events.append((hi, names))
            t = hi
            if t_end - t > tol:
                continue
        t, k = t_end, k + 1
        if comp.apply_mode_switch(t):
            switched_at_points.append(t)
    return events, switched_at_points


def switch_times(multi):
    return [rec["time"] for rec in multi.sync_events]


# ---------------------------------------------------------------------------- construction and ports
def test_constructor_validates_models_and_initial_mode():
    with pytest.raises(ValueError, match="non-empty"):
        MultiComponent("m", {}, "a")
    with pytest.raises(ValueError, match=r"'linaer'.*did you mean 'linear'.*known: linear, nonlinear"):
        pendulum_multi(initial="linaer")
    with pytest.raises(TypeError, match="'b' must be a CoSimComponent"):
        MultiComponent("m", {"a": Pendulum("a"), "b": object()}, "a")
    p = Pendulum("p")
    with pytest.raises(ValueError, match="share one instance"):
        MultiComponent("m", {"a": p, "b": p}, "a")


def test_ports_are_adopted_from_the_initial_mode():
    multi = pendulum_multi(initial="nonlinear")
    assert multi.input_specs == multi.models["nonlinear"].input_specs
    assert multi.output_specs == multi.models["nonlinear"].output_specs
    assert multi.active_mode == "nonlinear" and multi.active_comp is multi.models["nonlinear"]


@pytest.mark.parametrize(
    ("spoil", "pattern"),
    [
        (lambda m: m.input_specs.pop("torque"), r"model 'bad' lacks input port\(s\) 'torque'"),
        (lambda m: m.output_specs.update(energy=PortSpec("energy", PortType.REAL, "out", "J")),
         r"model 'bad' has output port\(s\) 'energy'"),
        (lambda m: m.output_specs.update(q=PortSpec("q", PortType.INT, "out")),
         r"model 'bad': port 'q' has type int, the reference model declares real"),
        (lambda m: m.output_specs.update(q=PortSpec("q", PortType.REAL, "out", "m")),
         r"model 'bad': port 'q' has unit m, incompatible with unit rad"),
    ],
)
def test_port_mismatch_names_model_and_port(spoil, pattern):
    bad = Pendulum("bad")
    spoil(bad)
    with pytest.raises(ValueError, match=pattern) as info:
        MultiComponent("pend", {"good": LinearPendulum("good"), "bad": bad}, "good")
    assert "MultiComponent 'pend'" in str(info.value)


# ---------------------------------------------------------------------------- switching
def test_time_selector_switches_once_and_carries_the_state_exactly():
    dt, n = 0.01, 100
    multi = pendulum_multi(q0=0.4, damping=0.2)
    multi.mode_selector = lambda t: "linear" if t < 0.5 - 1e-9 else "nonlinear"
    run(multi, 0.0, n, dt, inputs=lambda t: {"torque": torque(t)})

    assert switch_times(multi) == [pytest.approx(0.5, abs=1e-12)]
    assert multi.sync_events[0] == {"time": multi.sync_events[0]["time"], "from_mode": "linear",
                                    "to_mode": "nonlinear"}
    assert multi.active_mode == "nonlinear"
    # the outgoing model stops at the switch, the incoming one is brought to it and runs on
    lin, nl = multi.models["linear"], multi.models["nonlinear"]
    assert lin.t == pytest.approx(0.5) and nl.t == pytest.approx(1.0)
    assert nl.history.get_port_history("q").time[1] == pytest.approx(0.5)

    # reference: the linear model alone up to 0.5, then the nonlinear one from its exact state
    ref_lin, ref_nl = LinearPendulum("rl", q0=0.4, damping=0.2), Pendulum("rn", q0=0.4, damping=0.2)
    run(ref_lin, 0.0, 50, dt, inputs=lambda t: {"torque": torque(t)})
    ref_nl.initialize(0.0)
    ref_nl.set_state(ref_lin.get_state(), 0.5)
    for k in range(50, n):
        t = k * dt
        ref_nl.set_inputs({"torque": torque(t)}, t)
        ref_nl.do_step(t, dt)
    _, got = multi.get_history_arrays()
    _, want_lin = ref_lin.get_history_arrays()
    _, want_nl = ref_nl.get_history_arrays()
    for port in ("q", "omega"):
        np.testing.assert_array_equal(got[port][:51], want_lin[port])
        np.testing.assert_array_equal(got[port][51:], want_nl[port][1:])
    assert len(multi.get_history_arrays()[0]) == n + 1


def test_switch_state_record_and_continuity():
    multi = pendulum_multi(q0=0.3)
    multi.record_switch_state = True
    run(multi, 0.0, 30, 0.01)
    before = multi.get_state()
    multi.mode_selector = lambda t: "nonlinear"
    assert multi.apply_mode_switch(0.3) is True
    rec = multi.sync_events[-1]
    assert set(rec) == {"time", "from_mode", "to_mode", "retrieved", "now"}
    assert rec["retrieved"] == before
    assert rec["now"] == before == multi.models["nonlinear"].get_state()
    # outputs refreshed from the incoming model, which sits at the switch time
    assert multi.outputs["q"].value == before["q"]["value"]
    assert multi.models["nonlinear"].t == pytest.approx(0.3)
    assert multi.apply_mode_switch(0.3) is False


def test_latest_inputs_are_replayed_onto_the_incoming_model_in_its_units():
    nl = Pendulum("nl", q_unit="deg", torque_unit="N*cm")
    multi = pendulum_multi(nonlinear=nl, q0=0.2)
    multi.initialize(0.0)
    multi.set_inputs({"torque": 1.5}, 0.0)
    multi.do_step(0.0, 0.01)
    assert nl.inputs["torque"].value == 0.0  # inactive models receive nothing
    multi.mode_selector = lambda t: "nonlinear"
    multi.apply_mode_switch(0.01)
    assert nl.inputs["torque"].value == pytest.approx(150.0)  # N*m -> N*cm
    q_rad = multi.models["linear"].get_state()["q"]["value"]
    assert nl.outputs["q"].value == pytest.approx(math.degrees(q_rad))
    assert multi.outputs["q"].value == pytest.approx(q_rad, rel=1e-14)  # back in the multi's rad
    multi.do_step(0.01, 0.01)
    multi.set_inputs({"torque": 2.0}, 0.02)
    assert nl.inputs["torque"].value == pytest.approx(200.0)
    assert multi.models["linear"].inputs["torque"].value == 1.5


def test_initial_input_values_reach_every_model():
    # A System assigns initial input values (torn loops) as port states before initialize.
    nl = Pendulum("nl", torque_unit="N*cm")
    multi = pendulum_multi(nonlinear=nl)
    multi.inputs["torque"] = PortState(multi.input_specs["torque"], 2.0)
    multi.initialize(0.0)
    assert multi.models["linear"].inputs["torque"].value == 2.0
    assert nl.inputs["torque"].value == pytest.approx(200.0)


def test_dwell_window_is_never_violated_and_switches_happen_at_its_end():
    dt = 0.01
    multi = pendulum_multi(q0=0.2)
    multi.mode_selector = lambda t: "nonlinear" if round(t / dt) % 2 else "linear"
    multi.hysteresis = Hysteresis(dwell_time=0.05)
    run(multi, 0.0, 40, dt)
    times = switch_times(multi)
    assert times == pytest.approx([0.01, 0.06, 0.11, 0.16, 0.21, 0.26, 0.31, 0.36])
    assert min(np.diff(times)) >= 0.05 - 1e-12
    assert [r["to_mode"] for r in multi.sync_events][:3] == ["nonlinear", "linear", "nonlinear"]


def test_hysteresis_dwell_window():
    h = Hysteresis(dwell_time=0.05)
    assert h.last_switch_time == -math.inf and not h.in_dwell_window(0.02)
    h.record_switch(0.10)
    assert h.in_dwell_window(0.12) and not h.in_dwell_window(0.20)
    assert not h.in_dwell_window(0.10 + 0.05)
    h.reset()
    assert not h.in_dwell_window(0.11)
    with pytest.raises(ValueError, match="dwell_time"):
        Hysteresis(-1.0)


def test_next_time_event_points_at_the_dwell_end_when_a_switch_waits_and_max_step_delegates():
    multi = pendulum_multi()
    multi.hysteresis = Hysteresis(0.05)
    multi.initialize(0.0)
    assert multi.next_time_event(0.0) is None
    multi.mode_selector = lambda t: "nonlinear"
    multi.apply_mode_switch(0.01)
    assert multi.next_time_event(0.02) is None  # no switch pending
    multi.mode_selector = lambda t: "linear"
    assert multi.next_time_event(0.02) == multi.hysteresis.window_end == pytest.approx(0.06)
    assert multi.apply_mode_switch(0.05) is False
    assert multi.apply_mode_switch(multi.hysteresis.window_end) is True

    assert multi.max_step is None
    multi.models["nonlinear"].max_step = 0.005
    multi.models["linear"].max_step = 0.5
    assert multi.max_step == 0.5
    multi._switch_mode("nonlinear", 0.2)
    assert multi.max_step == 0.005
    multi.max_step = 0.002
    assert multi.max_step == 0.002


def test_disabled_switching_defers_to_apply_mode_switch():
    multi = pendulum_multi(q0=0.3)
    multi.mode_selector = lambda t: "linear" if t < 0.1 else "nonlinear"
    multi._allow_mode_switching = False
    run(multi, 0.0, 30, 0.01)
    assert multi.active_mode == "linear" and multi.sync_events == []
    assert multi.apply_mode_switch(0.3) is True
    assert multi.active_mode == "nonlinear" and switch_times(multi) == [0.3]
    assert multi.apply_mode_switch(0.3) is False
    multi.mode_selector = lambda t: "nonlinaer"
    with pytest.raises(ValueError, match="did you mean 'nonlinear'"):
        multi.apply_mode_switch(0.3)


# ---------------------------------------------------------------------------- switch regions as selector
def test_band_never_chatters_inside_it_but_a_zero_band_does():
    def f(t):
        return 0.3 + 0.04 * math.sin(2 * math.pi * 3 * t)

    multi = signal_multi(f, regions=SwitchRegions.threshold("y", "low", "high", lower=0.25, upper=0.35))
    run(multi, 0.0, 1000, 0.002)
    assert multi.sync_events == [] and multi.active_mode == "low"

    naive = signal_multi(f, regions=SwitchRegions.threshold("y", "low", "high", lower=0.3, upper=0.3))
    run(naive, 0.0, 1000, 0.002)
    assert len(naive.sync_events) >= 10


def test_band_switches_exactly_once_per_full_crossing():
    dt = 0.001
    multi = signal_multi(lambda t: 0.3 + 0.1 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", lower=0.25, upper=0.35))
    run(multi, 0.0, 3000, dt)
    crossings = sorted([n + 1 / 12 for n in range(3)] + [n + 7 / 12 for n in range(3)])
    times = switch_times(multi)
    assert len(times) == 6
    for ts, tc in zip(times, crossings, strict=True):
        assert 0.0 < ts - tc <= dt + 1e-12  # first grid point past the threshold
    assert [r["to_mode"] for r in multi.sync_events] == ["high", "low"] * 3
    t, values = multi.get_history_arrays(["label"])
    assert values["label"][-1] == multi.active_comp.name


def test_regions_jump_over_several_boundaries_and_use_abs():
    def step_signal(t):
        return 0.0 if t < 0.5 else (3.0 if t < 1.0 else 1.5)

    regions = SwitchRegions("y", ["a", "b", "c"], [(0.9, 1.1), (1.9, 2.1)])
    models = {m: Signal(m, step_signal) for m in "abc"}
    multi = MultiComponent("sig", models, "a")
    multi.set_switch_regions(regions)
    run(multi, 0.0, 150, 0.01)
    assert [(round(r["time"], 9), r["from_mode"], r["to_mode"]) for r in multi.sync_events] == [
        (0.5, "a", "c"), (1.0, "c", "b")]

    multi = signal_multi(lambda t: 0.5 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", 0.2, 0.3, use_abs=True))
    run(multi, 0.0, 1000, 0.001)
    assert [r["to_mode"] for r in multi.sync_events] == ["high", "low"] * 2


def test_regions_with_a_repeated_mode_track_the_region_without_switching():
    def jump(t):
        return -1.0 if t < 0.5 else (1.0 if t < 1.0 else 0.0)

    regions = SwitchRegions("y", ["far", "near", "far"], [(-0.35, -0.25), (0.25, 0.35)])
    multi = MultiComponent("sig", {"far": Signal("far", jump), "near": Signal("near", jump)}, "far")
    multi.set_switch_regions(regions)
    run(multi, 0.0, 60, 0.01)
    assert multi.sync_events == []
    ind = multi.evaluate_event_indicators()
    assert ind["y_down1"] == pytest.approx(0.25 - 1.0) and ind["y_up0"] == -1.0 and ind["y_up1"] == -1.0
    for k in range(60, 110):
        multi.do_step(k * 0.01, 0.01)
    assert [(round(r["time"], 9), r["to_mode"]) for r in multi.sync_events] == [(1.0, "near")]


def test_regions_without_rollback_are_a_selector_only():
    multi = signal_multi(lambda t: 0.3 + 0.1 * math.sin(2 * math.pi * t), cls=SignalNoRollback,
                         regions=SwitchRegions.threshold("y", "low", "high", 0.25, 0.35))
    assert multi.event_indicators == {} and not multi.has_state_events
    run(multi, 0.0, 1000, 0.001)
    assert len(multi.sync_events) == 2
    assert not multi.supports_rollback


# ---------------------------------------------------------------------------- boundary event indicators
def test_boundary_indicators_are_constant_unless_relevant():
    multi = signal_multi(lambda t: 0.3 + 0.04 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", 0.25, 0.35))
    assert set(multi.event_indicators) == {"y_up0", "y_down0"}
    multi.initialize(0.0)
    assert multi.has_state_events and multi.supports_rollback
    for k in range(100):
        ind = multi.evaluate_event_indicators()
        assert ind["y_down0"] == -1.0
        assert ind["y_up0"] == pytest.approx(multi.outputs["y"].value - 0.35)
        multi.do_step(k * 0.01, 0.01)
    multi._switch_mode("high", 1.0)
    ind = multi.evaluate_event_indicators()
    assert ind["y_up0"] == -1.0 and ind["y_down0"] == pytest.approx(0.25 - multi.outputs["y"].value)


def test_values_from_before_a_boundary_switch_never_cross_values_after_it():
    # A master may compare indicator values cached before handling an event with later ones.
    multi = signal_multi(lambda t: 0.3 + 0.1 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", 0.25, 0.35))
    multi.initialize(0.0)
    multi._allow_mode_switching = False
    start = multi.evaluate_event_indicators()
    for k in range(10):
        multi.do_step(k * 0.01, 0.01)
    before = multi.evaluate_event_indicators()
    assert multi.detect_event_crossings(start, before) == ["y_up0"]
    multi.handle_event(["y_up0"], 0.1)
    assert multi.active_mode == "high" and switch_times(multi) == [0.1]
    multi.do_step(0.1, 0.01)
    after = multi.evaluate_event_indicators()
    assert after["y_up0"] == -1.0 and after["y_down0"] < 0.0
    assert multi.detect_event_crossings(before, after) == []


def test_hybrid_master_switches_at_located_crossings_without_spurious_events():
    multi = signal_multi(lambda t: 0.3 + 0.1 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", 0.25, 0.35))
    events, at_points = run_hybrid(multi, 0.0, 200, 0.01)
    crossings = [1 / 12, 7 / 12, 1 + 1 / 12, 1 + 7 / 12]
    assert [names for _, names in events] == [["y_up0"], ["y_down0"]] * 2
    assert [t for t, _ in events] == pytest.approx(crossings, abs=1e-8)
    assert switch_times(multi) == [t for t, _ in events]
    assert at_points == []
    # the event ports of the multi's own history are true exactly at the post-event samples
    h = multi.history.get_port_history("y_up0")
    assert h.time[h.values] == pytest.approx([crossings[0], crossings[2]], abs=1e-8)
    assert set(h.micro[h.values]) == {1}
    # the sub-models never saw the boundary events
    assert multi.models["low"].handled == [] and multi.models["high"].handled == []


def test_hybrid_master_with_pendulum_switches_on_the_band_edges():
    multi = pendulum_multi(q0=0.6, damping=0.5)
    multi.set_switch_regions(SwitchRegions.threshold("q", "linear", "nonlinear", 0.25, 0.35, use_abs=True))
    events, at_points = run_hybrid(multi, 0.0, 400, 0.01)
    assert at_points == [0.0]  # the initial value lies in the nonlinear region
    assert len(events) >= 4
    for rec, (t, names) in zip(multi.sync_events[1:], events, strict=True):
        assert rec["time"] == t
        idx = np.searchsorted(multi.history.get_port_history("q").time, t)
        q = abs(multi.history.get_port_history("q").values[idx])
        assert q == pytest.approx(0.35 if rec["to_mode"] == "nonlinear" else 0.25, abs=1e-6)
        assert names == (["q_up0"] if rec["to_mode"] == "nonlinear" else ["q_down0"])


def test_boundary_event_honors_dwell_and_other_events_go_to_the_active_model():
    multi = signal_multi(lambda t: 0.3 + 0.1 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", 0.25, 0.35))
    multi.hysteresis = Hysteresis(0.2)
    multi.initialize(0.0)
    multi.hysteresis.record_switch(0.0)
    multi._allow_mode_switching = False
    for k in range(10):
        multi.do_step(k * 0.01, 0.01)
    multi.handle_event(["y_up0", "kick"], 0.1)
    assert multi.active_mode == "low" and multi.sync_events == []
    assert multi.models["low"].handled == [(0.1, ["kick"])]
    assert multi.next_time_event(0.1) == pytest.approx(0.2)
    for k in range(10, 20):
        multi.do_step(k * 0.01, 0.01)
    assert multi.apply_mode_switch(0.2) is True and switch_times(multi) == [0.2]
    multi.handle_event(["kick"], 0.2)
    assert multi.models["high"].handled == [(0.2, ["kick"])]


def test_add_event_indicator_is_forwarded_to_every_rollback_model():
    multi = pendulum_multi(q0=0.3)
    multi.add_event_indicator("q_zero", lambda c: c.outputs["q"].value, direction=-1)
    assert all("q_zero" in m.event_indicators for m in multi.models.values())
    with pytest.raises(KeyError, match="already has"):
        multi.add_event_indicator("q_zero", lambda c: 0.0)
    multi.initialize(0.0)
    assert multi.output_specs["q_zero"].type is PortType.EVENT
    assert multi.evaluate_event_indicators() == {"q_zero": pytest.approx(0.3)}
    multi.handle_event(["q_zero"], 0.0)
    assert multi.history.get_port_history("q_zero").values.tolist() == [False, True]
    assert multi.models["linear"].history.get_port_history("q_zero").values.tolist() == [False, True]

    multi.do_step(0.0, 0.01)
    multi.add_event_indicator("late", lambda c: 1.0)  # after initialize: backfilled, common time axis
    assert multi.history.get_port_history("late").values.tolist() == [False, False, False]
    assert multi.models["nonlinear"].history.get_port_history("late").values.tolist() == [False]

    plain = signal_multi(lambda t: t, cls=SignalNoRollback)
    with pytest.raises(RuntimeError, match="none of its models supports rollback"):
        plain.add_event_indicator("e", lambda c: 1.0)


# ---------------------------------------------------------------------------- rollback
def test_snapshot_restore_is_bit_for_bit_and_checks_the_mode():
    dt = 0.01
    multi = pendulum_multi(q0=0.4, damping=0.1)
    multi.mode_selector = lambda t: "linear" if t < 0.2 else "nonlinear"
    run(multi, 0.0, 30, dt, inputs=lambda t: {"torque": torque(t)})
    assert multi.active_mode == "nonlinear" and multi.supports_rollback
    multi._allow_mode_switching = False

    def segment():
        out = []
        for k in range(30, 50):
            t = k * dt
            multi.set_inputs({"torque": torque(t)}, t)
            multi.do_step(t, dt)
            out.append((multi.outputs["q"].value, multi.outputs["omega"].value, multi.get_state()))
        return out

    snap, n_hist = multi.snapshot_state(), len(multi.history)
    n_sub = len(multi.models["nonlinear"].history)
    first = segment()
    multi.restore_state(snap, 0.3)
    truncate(multi, n_hist)
    assert len(multi.models["nonlinear"].history) == n_sub
    assert multi.models["nonlinear"].t == 0.3
    second = segment()
    assert first == second

    multi.mode_selector = lambda t: "linear"
    snap = multi.snapshot_state()
    multi.apply_mode_switch(0.5)
    with pytest.raises(ValueError, match="taken in mode 'nonlinear' but the active mode is 'linear'"):
        multi.restore_state(snap, 0.5)
    with pytest.raises(TypeError):
        multi.restore_state((0.0, 0.0), 0.5)


def test_restore_after_switching_back_forgets_the_switches():
    multi = pendulum_multi(q0=0.4)
    multi.hysteresis = Hysteresis(0.0)
    run(multi, 0.0, 10, 0.01)
    snap = multi.snapshot_state()
    state = multi.get_state()
    multi._switch_mode("nonlinear", 0.1)
    multi.do_step(0.1, 0.01)
    multi._switch_mode("linear", 0.11)
    multi.do_step(0.11, 0.01)
    assert len(multi.sync_events) == 2
    multi.restore_state(snap, 0.1)
    assert multi.sync_events == [] and multi.hysteresis.last_switch_time == -math.inf
    assert multi.get_state() == state
    assert multi.models["nonlinear"].history.get_port_history("q").time.tolist() == [0.0]


# ---------------------------------------------------------------------------- delegation and lifecycle
def test_state_outputs_and_evaluate_outputs_delegate_to_the_active_model():
    class Renaming:
        def adapt_state(self, source_state, target_component):
            return {"q": {"value": 2 * source_state["q"]["value"], "unit": "rad"}, "omega": source_state["omega"]}

    assert isinstance(Renaming(), StateAdapter)
    multi = pendulum_multi(q0=0.1)
    multi.state_adapters["nonlinear"] = Renaming()
    multi.initialize(0.0)
    multi.set_state({"q": {"value": 0.2, "unit": "rad"}, "omega": {"value": 1.0, "unit": "rad/s"}}, 0.0)
    assert multi.models["linear"].get_state()["q"]["value"] == 0.2
    multi._switch_mode("nonlinear", 0.0)
    assert multi.get_state()["q"]["value"] == pytest.approx(0.4)
    out = multi.evaluate_outputs({"torque": 3.0}, 0.0)
    assert out == {"q": pytest.approx(0.4), "omega": 1.0}
    assert multi.models["nonlinear"].inputs["torque"].value == 3.0
    assert multi.direct_feedthrough == {"q": set(), "omega": set()}
    with pytest.raises(KeyError, match="torqe"):
        multi.set_inputs({"torqe": 1.0})


def test_direct_feedthrough_must_agree_unless_declared():
    multi = MultiComponent("f", {"direct": Follower("d", True), "lag": Follower("l", False)}, "direct")
    with pytest.raises(ValueError, match=r"disagree on direct feedthrough to output 'y'.*'direct'.*'lag'"):
        multi.initialize(0.0)
    multi = MultiComponent("f", {"direct": Follower("d", True), "lag": Follower("l", False)}, "direct")
    multi.direct_feedthrough = {"y": {"u"}}
    multi.initialize(0.0)
    assert multi.direct_feedthrough == {"y": {"u"}}
    same = MultiComponent("f", {"a": Follower("a", True), "b": Follower("b", True)}, "a")
    same.initialize(0.0)
    assert same.direct_feedthrough == {"y": {"u"}}


def test_reset_returns_to_the_initial_mode_and_reruns_identically():
    multi = signal_multi(lambda t: 0.3 + 0.1 * math.sin(2 * math.pi * t),
                         regions=SwitchRegions.threshold("y", "low", "high", 0.25, 0.35))
    multi.hysteresis = Hysteresis(0.01)
    run(multi, 0.0, 500, 0.001)
    first = (switch_times(multi), multi.get_history_arrays(["y"])[1]["y"].copy())
    assert multi.active_mode == "high" and first[0]
    multi.reset()
    assert multi.active_mode == "low" and multi.active_comp is multi.models["low"]
    assert multi.sync_events == [] and len(multi.history) == 0
    assert multi.hysteresis.last_switch_time == -math.inf
    assert not any(m.is_initialized for m in multi.models.values())
    assert multi._latest_inputs is None
    run(multi, 0.0, 500, 0.001)
    assert switch_times(multi) == first[0]
    np.testing.assert_array_equal(multi.get_history_arrays(["y"])[1]["y"], first[1])
    multi.free()
    assert all(m.freed for m in multi.models.values())


# ---------------------------------------------------------------------------- SwitchRegions validation
@pytest.mark.parametrize(
    ("args", "kwargs", "pattern"),
    [
        (("", ["a", "b"], [(0, 1)]), {}, "port must be a non-empty string"),
        (("y", ["a"], []), {}, "at least two modes"),
        (("y", "ab", [(0, 1)]), {}, "modes must be a list"),
        (("y", ["a", ""], [(0, 1)]), {}, r"modes\[1\] must be a non-empty string"),
        (("y", ["a", "a"], [(0, 1)]), {}, "adjacent regions 0 and 1 both select mode 'a'"),
        (("y", ["a", "b", "c"], [(0, 1)]), {}, "3 modes need 2"),
        (("y", ["a", "b"], [(1,)]), {}, r"bounds\[0\] must be a \(lower, upper\) pair"),
        (("y", ["a", "b"], [(0, math.nan)]), {}, r"bounds\[0\] upper must be a finite number"),
        (("y", ["a", "b"], [("0", 1)]), {}, r"bounds\[0\] lower must be a finite number"),
        (("y", ["a", "b"], [(2, 1)]), {}, r"bounds\[0\] has lower 2.0 > upper 1.0"),
        (("y", ["a", "b", "c"], [(0, 1), (0.5, 2)]), {}, "bounds must increase"),
        (("y", ["a", "b"], [(0, 1)]), {"use_abs": True}, "lowest lower bound must be > 0"),
        (("y", ["a", "b"], [(0, 1)]), {"use_abs": 1}, "use_abs must be True or False"),
    ],
)
def test_switch_regions_validation(args, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        SwitchRegions(*args, **kwargs)


def test_switch_regions_threshold_and_helpers():
    r = SwitchRegions.threshold("q", below="linear", above="nonlinear", lower=0.25, upper=0.35)
    assert r.modes == ("linear", "nonlinear") and r.bounds == ((0.25, 0.35),) and not r.use_abs
    assert r.indicator_names() == {"q_up0": ("up", 0), "q_down0": ("down", 0)}
    assert r.next_region(0, 0.34) == 0 and r.next_region(0, 0.36) == 1
    assert r.next_region(1, 0.26) == 1 and r.next_region(1, 0.24) == 0
    assert r.classify(0.3, "nonlinear") == 1 and r.classify(0.3, "linear") == 0 and r.classify(0.3) == 0
    assert r.classify(0.1, "nonlinear") == 0


def test_attaching_switch_regions_is_validated():
    multi = signal_multi(lambda t: t)
    with pytest.raises(ValueError, match="unknown output port 'z'.*known: label, y"):
        multi.set_switch_regions(SwitchRegions.threshold("z", "low", "high", 0.1, 0.2))
    with pytest.raises(ValueError, match="numeric output, port 'label' is string"):
        multi.set_switch_regions(SwitchRegions.threshold("label", "low", "high", 0.1, 0.2))
    with pytest.raises(ValueError, match="unknown mode 'hihg'.*did you mean 'high'"):
        multi.set_switch_regions(SwitchRegions.threshold("y", "low", "hihg", 0.1, 0.2))
    with pytest.raises(TypeError, match="expected SwitchRegions"):
        multi.set_switch_regions({"port": "y"})
    clash = signal_multi(lambda t: t)
    clash.models["low"].output_specs["y_up0"] = PortSpec("y_up0", PortType.EVENT, "out")
    with pytest.raises(ValueError, match="'y_up0' clashes"):
        clash.set_switch_regions(SwitchRegions.threshold("y", "low", "high", 0.1, 0.2))

    multi.set_switch_regions(SwitchRegions.threshold("y", "low", "high", 0.1, 0.2))
    multi.set_switch_regions(SwitchRegions("y", ["low", "high", "low"], [(0.1, 0.2), (0.5, 0.6)]))
    assert set(multi.event_indicators) == {"y_up0", "y_down0", "y_up1", "y_down1"}
    multi.set_switch_regions(None)
    assert multi.event_indicators == {} and multi.mode_selector is None
    multi.set_switch_regions(SwitchRegions.threshold("y", "low", "high", 0.1, 0.2))
    multi.initialize(0.0)
    with pytest.raises(RuntimeError, match="before initialize"):
        multi.set_switch_regions(None)


def test_a_model_as_the_mode_of_a_multi_component_gets_the_input_polynomials_it_would_alone():
    """Under extrapolation a model that interpolates inputs gets each input's value and derivatives over the step;
    wrapped as a mode it must get the same, so that its results are bitwise those of the model alone, not those
    of the input's mean held over the step."""
    from cosimrun.components.mechanics import MassSpringDamper
    from cosimrun.components.sources import Sine
    from cosimrun.masters import Jacobi
    from cosimrun.system import System

    def run(wrapped):
        system = System("driven")
        source = Sine("force")
        source.set_parameters(amplitude=1.0, frequency=0.2, unit="N")
        models = []
        for name in ("a", "b"):
            model = MassSpringDamper(name)
            model.set_parameters(mass=1.0, stiffness=40.0, x0=0.0, v0=0.0)
            models.append(model)
        mass = MultiComponent("mass", {"a": models[0], "b": models[1]}, initial_mode="a") if wrapped else models[0]
        if not wrapped:
            mass.name = "mass"
        system.add_component(source)
        system.add_component(mass)
        system.connect("force.y -> mass.force")
        system.run(0.0, 5.0, 0.05, master=Jacobi(extrapolation=2))
        return system.history.get_port_trajectory("mass", "x")

    (t_alone, x_alone), (t_mode, x_mode) = run(False), run(True)
    assert np.array_equal(t_alone, t_mode)
    assert np.array_equal(x_alone, x_mode)
