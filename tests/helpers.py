"""Small test components for the system and master tests.

They are written against the plain :class:`CoSimComponent` contract (no ODE
helpers), so the system/master tests do not depend on ``cosimrun.core.ode``;
:func:`two_mass_split`, the oscillator split into builtin mechanics components,
imports them when called.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun import CoSimComponent, PortSpec, PortType


def real_in(name: str, unit: str | None = None) -> PortSpec:
    return PortSpec(name, PortType.REAL, "in", unit)


def real_out(name: str, unit: str | None = None) -> PortSpec:
    return PortSpec(name, PortType.REAL, "out", unit)


class Stateless(CoSimComponent):
    """Base of memoryless components: no state, nothing happens in a step."""

    def _initialize_component(self, t0: float) -> None:
        pass

    def _do_step_internal(self, t: float, dt: float) -> None:
        pass

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any], t: float) -> None:
        self.t = t


class Affine(Stateless):
    """``y = a*u + c + drift*t``: memoryless with direct feedthrough (detected, not declared).

    From time ``t_late`` on the gain is ``a_late`` instead of ``a``.
    """

    def __init__(self, name: str, a: float = 1.0, c: float = 0.0, unit: str | None = None, drift: float = 0.0,
                 a_late: float | None = None, t_late: float = float("inf")) -> None:
        super().__init__(name)
        self.input_specs = {"u": real_in("u", unit)}
        self.output_specs = {"y": real_out("y", unit)}
        self.parameters = {"a": a, "c": c, "drift": drift, "a_late": a_late, "t_late": t_late}

    def _update_output_states(self, t=None, event_names=()):
        p = self.parameters
        t = self.t if t is None else t
        a = p["a_late"] if p["a_late"] is not None and t >= p["t_late"] else p["a"]
        self.outputs["y"].value = a * self.inputs["u"].value + p["c"] + p["drift"] * t


class Constant(Stateless):
    """A source ``y = value`` in a given unit."""

    def __init__(self, name: str, value: float, unit: str | None = None, port_type: PortType = PortType.REAL) -> None:
        super().__init__(name)
        self.output_specs = {"y": PortSpec("y", port_type, "out", unit)}
        self.parameters = {"value": value}

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].set(self.parameters["value"])


class Ramp(Stateless):
    """A source ``y = slope * t``."""

    def __init__(self, name: str, slope: float = 1.0, unit: str | None = None) -> None:
        super().__init__(name)
        self.output_specs = {"y": real_out("y", unit)}
        self.parameters = {"slope": slope}

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = self.parameters["slope"] * (self.t if t is None else t)


class Delay(CoSimComponent):
    """Unit delay ``y(t + dt) = u(t) + increment``: the output depends on the state only."""

    def __init__(self, name: str, increment: float = 0.0, unit: str | None = None) -> None:
        super().__init__(name)
        self.input_specs = {"u": real_in("u", unit)}
        self.output_specs = {"y": real_out("y", unit)}
        self.parameters = {"increment": increment, "y0": 0.0}
        self.seen: list[tuple[float, float]] = []

    def _initialize_component(self, t0: float) -> None:
        self._y = float(self.parameters["y0"])
        self.seen = []

    def _do_step_internal(self, t: float, dt: float) -> None:
        u = self.inputs["u"].value
        self.seen.append((t, u))
        self._y = u + self.parameters["increment"]

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = self._y

    def get_state(self):
        return {"y": {"value": self._y, "unit": None}}

    def set_state(self, state, t):
        self._y = state["y"]["value"]
        self.t = t


class Probe(CoSimComponent):
    """Pass-through ``y = u`` in one unit that also logs the inputs it steps with."""

    def __init__(self, name: str, unit: str | None = None) -> None:
        super().__init__(name)
        self.input_specs = {"u": real_in("u", unit)}
        self.output_specs = {"y": real_out("y", unit)}
        self.steps: list[tuple[float, float, float]] = []

    def _initialize_component(self, t0: float) -> None:
        self.steps = []

    def _do_step_internal(self, t: float, dt: float) -> None:
        self.steps.append((t, dt, self.inputs["u"].value))

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = self.inputs["u"].value

    def get_state(self):
        return {}

    def set_state(self, state, t):
        self.t = t


class TimeEventSource(Ramp):
    """A ramp that schedules time events at the given instants."""

    def __init__(self, name: str, events: list[float]) -> None:
        super().__init__(name)
        self.event_times = sorted(events)
        self.asked: list[float] = []

    def next_time_event(self, t: float) -> float | None:
        self.asked.append(t)
        return next((te for te in self.event_times if te > t), None)


class LimitedStep(Ramp):
    """A ramp that accepts communication steps of at most *max_step*."""

    def __init__(self, name: str, max_step: float) -> None:
        super().__init__(name)
        self.max_step = max_step
        self.dts: list[float] = []

    def _do_step_internal(self, t: float, dt: float) -> None:
        self.dts.append(dt)


class StoringInputs(CoSimComponent):
    """Overrides ``set_inputs`` and keeps inputs in its own dict, never reading the input ports.

    ``y = gain * u`` (direct feedthrough) and an accumulator ``s`` (``s += u*dt``).
    """

    def __init__(self, name: str, gain: float = 1.0) -> None:
        super().__init__(name)
        self.input_specs = {"u": real_in("u")}
        self.output_specs = {"y": real_out("y"), "s": real_out("s")}
        self.parameters = {"gain": gain}
        self.store: dict[str, float] = {"u": 0.0}
        self.calls = 0

    def set_inputs(self, signals, t=None):
        self.calls += 1
        for name, value in signals.items():
            if name not in self.input_specs:
                raise KeyError(name)
            self.store[name] = float(value)

    def _initialize_component(self, t0: float) -> None:
        self._s = 0.0
        self.store = {"u": 0.0}
        self.calls = 0

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._s += self.store["u"] * dt

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = self.parameters["gain"] * self.store["u"]
        self.outputs["s"].value = self._s

    def get_state(self):
        return {"s": {"value": self._s, "unit": None}}

    def set_state(self, state, t):
        self._s = state["s"]["value"]
        self.t = t


class _RK4Mass(CoSimComponent):
    """A mass on springs integrated with many fixed RK4 sub-steps per macro step.

    Inputs are held constant over a macro step (as the master delivers them).
    """

    substeps = 40

    def _initialize_component(self, t0: float) -> None:
        self._x = float(self.parameters["x0"])
        self._v = float(self.parameters["v0"])

    def _accel(self, x: float, v: float) -> float:
        raise NotImplementedError

    def _do_step_internal(self, t: float, dt: float) -> None:
        n = self.substeps
        h = dt / n
        x, v = self._x, self._v
        acc = self._accel
        for _ in range(n):
            k1x, k1v = v, acc(x, v)
            k2x, k2v = v + 0.5 * h * k1v, acc(x + 0.5 * h * k1x, v + 0.5 * h * k1v)
            k3x, k3v = v + 0.5 * h * k2v, acc(x + 0.5 * h * k2x, v + 0.5 * h * k2v)
            k4x, k4v = v + h * k3v, acc(x + h * k3x, v + h * k3v)
            x += h / 6.0 * (k1x + 2 * k2x + 2 * k3x + k4x)
            v += h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        self._x, self._v = x, v

    def get_state(self):
        return {"x": {"value": self._x, "unit": "m"}, "v": {"value": self._v, "unit": "m/s"}}

    def set_state(self, state, t):
        self._x = state["x"]["value"]
        self._v = state["v"]["value"]
        self.t = t


class MassA(_RK4Mass):
    """``m1 x1'' = -k1 x1 + F``: input force F, outputs x1, v1 (no feedthrough)."""

    def __init__(self, name: str = "A", m1: float = 1.0, k1: float = 10.0, x0: float = 1.0, v0: float = 0.0):
        super().__init__(name)
        self.input_specs = {"F": real_in("F", "N")}
        self.output_specs = {"x1": real_out("x1", "m"), "v1": real_out("v1", "m/s")}
        self.parameters = {"m1": m1, "k1": k1, "x0": x0, "v0": v0}

    def _accel(self, x, v):
        p = self.parameters
        return (-p["k1"] * x + self.inputs["F"].value) / p["m1"]

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["x1"].value = self._x
        self.outputs["v1"].value = self._v


class MassB(_RK4Mass):
    """``m2 x2'' = -k2 x2 - F`` with the coupling force ``F = kc (x2 - x1) + dc (v2 - v1)`` on mass 1.

    Inputs x1, v1; outputs F (direct feedthrough from x1, v1) and x2.
    """

    def __init__(self, name: str = "B", m2: float = 1.0, k2: float = 20.0, kc: float = 15.0, dc: float = 0.5,
                 x0: float = 0.0, v0: float = 0.0):
        super().__init__(name)
        self.input_specs = {"x1": real_in("x1", "m"), "v1": real_in("v1", "m/s")}
        self.output_specs = {"F": real_out("F", "N"), "x2": real_out("x2", "m")}
        self.parameters = {"m2": m2, "k2": k2, "kc": kc, "dc": dc, "x0": x0, "v0": v0}

    def _force(self, x, v):
        p = self.parameters
        return p["kc"] * (x - self.inputs["x1"].value) + p["dc"] * (v - self.inputs["v1"].value)

    def _accel(self, x, v):
        p = self.parameters
        return (-p["k2"] * x - self._force(x, v)) / p["m2"]

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["F"].value = self._force(self._x, self._v)
        self.outputs["x2"].value = self._x


class StoppingClock(CoSimComponent):
    """A plain component (no FMI) that asks to stop the run once its time reaches ``t_stop``; output ``t``. It gives
    its state for checkpoints (its time)."""

    may_request_stop = True

    def __init__(self, name: str, t_stop: float) -> None:
        super().__init__(name)
        self.t_stop = t_stop
        self.output_specs["t"] = PortSpec("t", PortType.REAL, "out")

    def _initialize_component(self, t0: float) -> None:
        self.stop_requested = None

    def _do_step_internal(self, t: float, dt: float) -> None:
        if t + dt >= self.t_stop - 1e-12:
            self.stop_requested = "reached its end"

    def _update_output_states(self, t: float | None = None, event_names: Any = ()) -> None:
        self.outputs["t"].value = self.t

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any], t: float) -> None:
        self.t = t

    def checkpoint_state(self) -> dict[str, Any]:
        return {"t": np.array([self.t])}

    def restore_checkpoint(self, state: Any) -> None:
        self.t = float(state["t"][0])
        self._update_output_states()


def two_mass_split(k1: float, k2: float, kc: float, *, substeps: int, mass1: type | None = None):
    """The two-mass oscillator (both masses 1 kg, mass 1 starting at x = 1 m) split as in ``coupled_oscillators``:
    builtin ``mass_spring_damper`` (*mass1*, a subclass of it, if given) and ``mass_spring_damper_force``."""
    from cosimrun.components.mechanics import MassSpringDamper, MassSpringDamperForce
    from cosimrun.system import System

    system = System("two_mass")
    one = (mass1 or MassSpringDamper)("mass1")
    one.set_parameters(mass=1.0, stiffness=k1, x0=1.0, v0=0.0, substeps=substeps)
    two = MassSpringDamperForce("mass2")
    two.set_parameters(mass=1.0, stiffness=k2, coupling_stiffness=kc, x0=0.0, v0=0.0, substeps=substeps)
    system.add_component(one)
    system.add_component(two)
    system.connect("mass1.x -> mass2.x_in")
    system.connect("mass1.v -> mass2.v_in")
    system.connect("mass2.force -> mass1.force")
    return system


def two_mass_rhs(p: dict[str, float]):
    """Right-hand side of the monolithic 4-state two-mass oscillator ``(x1, v1, x2, v2)``."""

    def rhs(t, s):
        x1, v1, x2, v2 = s
        f = p["kc"] * (x2 - x1) + p["dc"] * (v2 - v1)
        return [v1, (-p["k1"] * x1 + f) / p["m1"], v2, (-p["k2"] * x2 - f) / p["m2"]]

    return rhs


def bounce_times(n: int, h0: float, e: float, g: float) -> list[float]:
    """Analytic instants of a ball's first *n* impacts, dropped from rest at *h0* with restitution *e*:
    t1 = sqrt(2 h0 / g), t_{k+1} = t_k + 2 e^k v1 / g."""
    v1 = math.sqrt(2 * g * h0)
    times = [math.sqrt(2 * h0 / g)]
    for k in range(1, n):
        times.append(times[-1] + 2 * e**k * v1 / g)
    return times


def replay_master(times: tuple[float, ...] | list[float], **settings: Any) -> Any:
    """A Jacobi master (*settings* as :class:`~cosimrun.masters.Jacobi`'s) stepping exactly through *times*, with
    fixed steps and no error control: the run a controlled one would be if it had taken its accepted steps
    directly (see the rollback tests of step control)."""
    from dataclasses import dataclass

    from cosimrun.masters import Jacobi
    from cosimrun.masters.explicit import ExplicitRun

    class ReplayRun(ExplicitRun):
        def next_point(self, clock: Any, a: int) -> int:
            t = clock.time(a)
            return clock.mark(next(s for s in self.master.times if s > t))

    @dataclass(frozen=True)
    class Replay(Jacobi):
        times: tuple[float, ...] = ()

        def start(self, system: Any) -> ReplayRun:
            return ReplayRun(self, system)

    return Replay(times=tuple(times), **settings)


def experiment_config(name: str, master: dict[str, Any], tf: float, storage: dict[str, Any] | None = None,
                      **run: Any) -> dict[str, Any]:
    """The shipped experiment *name* (``experiments/<name>.yaml``) as a plain config for ``run_experiment``, under
    *master*, run to *tf* with the other *run* settings, and with *storage* when given."""
    import yaml

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "experiments" / f"{name}.yaml").read_text())
    cfg.pop("defaults")
    cfg["master"] = master
    cfg["run"].update(tf=tf, **run)
    if storage is not None:
        cfg["storage"] = storage
    return cfg


def simulate(cfg: dict[str, Any], out: Path) -> Path:
    """Run *cfg* into *out* (warnings silenced), asserting it completes; its results file."""
    from cosimrun.runner.run import run_experiment

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcome = run_experiment(cfg, out)
    assert outcome.ok, outcome.error
    return outcome.path


ATTRS_OF_THE_RUN = frozenset({"started", "finished", "wall_time_s", "parent_path", "parent_time", "parent_fingerprint",
                              "data_crc32", "overrides", "config_yaml"})
"""Root attributes that differ between two runs of one experiment (when, how long, how it was asked for); the
dimension scales' object references differ between any two files too."""


def results_contents(path: Path, *, components: bool = True) -> dict[str, Any]:
    """Every dataset and attribute of a results file but the run's own root attributes (and, unless *components*,
    the recorded histories): what two runs of one experiment that should agree agree on."""
    import h5py

    out: dict[str, Any] = {}
    with h5py.File(path, "r") as f:
        out.update({f"@{k}": v for k, v in f.attrs.items() if k not in ATTRS_OF_THE_RUN})

        def visit(name: str, obj: Any) -> None:
            if not components and name.startswith("components"):
                return
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]
            for key, value in obj.attrs.items():
                if key not in ("DIMENSION_LIST", "REFERENCE_LIST") and (name != "stats" or key != "wall_time_s"):
                    out[f"{name}@{key}"] = value

        f.visititems(visit)
    return out
