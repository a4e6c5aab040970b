"""Mechanical models: pendulum (nonlinear, linearized, Cartesian DAE), bouncing ball, mass-spring-dampers.

All but the Cartesian pendulum (a :class:`~cosimrun.core.dae.DaeComponent`)
are :class:`~cosimrun.core.ode.OdeComponent` models; all are in SI units and
support rollback, physical state transfer and the solver parameters;
initial values are the parameters ``<state>0`` (numbers in the state's unit or
quantities like ``"30 deg"``). Impacts (end stop, floor) are state events whose
update is applied by ``handle_event`` (the hybrid master locates them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cosimrun.components._base import OdeBlock, UnitParameters, parameter_error
from cosimrun.core.component import CoSimComponent
from cosimrun.core.dae import DaeComponent
from cosimrun.core.parameters import Parameter


def check_q0_within_end_stop(comp: CoSimComponent) -> None:
    """Raise when the initial angle ``q0`` lies beyond the end stop ``q_max`` (of either pendulum form)."""
    p = comp.parameters
    if p["q_max"] is not None and abs(p["q0"]) > p["q_max"]:
        raise parameter_error(comp, "q0", f"must lie within the end stop |q0| <= q_max = {p['q_max']!r}", p["q0"])


def end_stop_distance(q_max: float | None, q: float) -> float:
    """The end-stop indicator ``|q| - q_max`` (constant -1 without an end stop)."""
    return -1.0 if q_max is None else abs(q) - q_max


def end_stop_rebound(parameters: Mapping[str, Any], q: Any, omega: Any) -> tuple[Any, Any]:
    """The end stop's impact: ``q`` on the stop, ``omega -> -restitution * omega`` (of each member for arrays)."""
    if isinstance(q, np.ndarray):
        return np.copysign(parameters["q_max"], q), -parameters["restitution"] * omega
    return math.copysign(parameters["q_max"], q), -parameters["restitution"] * omega


class Pendulum(OdeBlock):
    """Nonlinear pendulum driven by a torque, with an optional end stop (torque -> q, omega).

    ``m L^2 q'' = -m g L sin(q) - damping * q' + torque`` with ``q`` measured
    from the downward vertical. With ``q_max`` set, the event ``end_stop``
    (indicator ``|q| - q_max``, rising) puts ``q`` on the stop and reverses the
    velocity: ``omega -> -restitution * omega``. The stop does not model
    sticking contact: with ``restitution = 0`` and a torque pushing into the
    stop the pendulum passes through it. The indicator and its EVENT port exist
    always (constant -1 without an end stop), so every pendulum variant exposes
    the same ports. Vectorizable (an ensemble's members: arrays of angles and parameters).
    """

    vectorizable = True

    PARAMETERS = {
        "mass": Parameter(float, unit="kg", default=1.0, gt=0, doc="point mass at the end of the rod"),
        "length": Parameter(float, unit="m", default=1.0, gt=0, doc="rod length L"),
        "damping": Parameter(float, unit="N*m*s/rad", default=0.0, ge=0, doc="viscous damping at the pivot"),
        "g": Parameter(float, unit="m/s**2", default=9.81, ge=0, doc="gravitational acceleration"),
        "q_max": Parameter(float, unit="rad", gt=0, doc="end stop at |q| = q_max (null: none)"),
        "restitution": Parameter(float, default=0.5, ge=0, le=1, doc="end stop: omega -> -restitution * omega"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("q", "rad", 0.0, "angle from the downward vertical")
        self.add_state("omega", "rad/s", 0.0, "angular velocity")
        self.add_input("torque", "N*m", 0.0, "torque applied at the pivot")
        self.add_state_event("end_stop", self._end_stop_indicator, direction=1, update=self._end_stop_update)
        self._refresh()

    @staticmethod
    def restoring(q: float) -> float:
        """The gravity term's angle function: ``sin(q)`` (of each member's angle for an array)."""
        return np.sin(q) if isinstance(q, np.ndarray) else math.sin(q)

    def check_parameters(self) -> None:
        super().check_parameters()
        check_q0_within_end_stop(self)

    def _refresh(self) -> None:
        p = self.parameters
        inertia = p["mass"] * p["length"] ** 2
        self._a = p["g"] / p["length"]
        self._b = p["damping"] / inertia
        self._c = 1.0 / inertia

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        q, w = x
        return np.array([w, -self._a * self.restoring(q) - self._b * w + self._c * u[0]])

    def energy(self) -> float:
        """Kinetic plus potential energy [J] of the current state (zero hanging at rest)."""
        p = self.parameters
        q, w = self.x
        m, length = p["mass"], p["length"]
        return 0.5 * m * length**2 * w**2 + m * p["g"] * length * (1.0 - math.cos(q))

    def _end_stop_indicator(self, t: float, x: np.ndarray, u: np.ndarray) -> float:
        return end_stop_distance(self.parameters["q_max"], x[0])

    def _end_stop_update(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        if self.parameters["q_max"] is None:
            return x
        return np.array(end_stop_rebound(self.parameters, x[0], x[1]))


class LinearPendulum(Pendulum):
    """Linearized pendulum (sin q ~ q) driven by a torque; same ports, parameters and state as ``pendulum``.

    ``m L^2 q'' = -m g L q - damping * q' + torque``; valid for small angles.
    Shares :meth:`get_state`/:meth:`set_state` with :class:`Pendulum`, so a
    multi-model component can switch between the two.
    """

    @staticmethod
    def restoring(q: float) -> float:
        """The linearized angle function: ``q``."""
        return q

    def energy(self) -> float:
        """Energy [J] of the linear model (potential ``m g L q^2 / 2``)."""
        p = self.parameters
        q, w = self.x
        m, length = p["mass"], p["length"]
        return 0.5 * m * length**2 * w**2 + 0.5 * m * p["g"] * length * q**2


class BouncingBall(OdeBlock):
    """Ball falling under gravity and bouncing on the floor h = 0 (outputs h, v).

    ``h' = v, v' = -g``; the event ``bounce`` (indicator ``h``, falling)
    reverses and damps the impact velocity, ``v -> -e * v``. The event is
    handled a little after the impact (up to ``time_tolerance`` under the hybrid
    master, up to one step under the others), with the ball below the floor;
    the update traces the flight back to the impact and gives the state the
    rebound has at the instant of handling (after further bounces, when the
    rebound flights are shorter than the delay), so handling late shifts no
    later bounce. When the rebound speed is below ``v_rest`` the ball comes to rest
    on the floor (its rest state, ending the Zeno accumulation of ever shorter
    bounces; with ``v_rest = 0`` the hybrid master stops the run with a
    ``ZenoError`` instead), and so it does when the delay is longer than all the
    remaining flights together (``flight / (1 - e)``: the accumulation point
    passed within it). Vectorizable: in an ensemble ``resting`` holds one
    flag per member (``member_state``).
    """

    vectorizable = True
    member_state = ("resting",)
    """Discrete state an ensemble keeps per member, beside the states (see ``docs/how-to/ensembles.md``)."""

    PARAMETERS = {
        "g": Parameter(float, unit="m/s**2", default=9.81, gt=0, doc="gravitational acceleration"),
        "e": Parameter(float, default=0.8, ge=0, le=1, doc="coefficient of restitution"),
        "v_rest": Parameter(float, unit="m/s", default=1e-3, ge=0, doc="below this rebound speed the ball rests"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("h", "m", 1.0, "height above the floor")
        self.add_state("v", "m/s", 0.0, "vertical velocity (up positive)")
        self.add_state_event("bounce", lambda t, x, u: x[0], direction=-1, update=self._bounce)
        self.resting = False

    def check_parameters(self) -> None:
        super().check_parameters()
        p = self.parameters
        if p["h0"] < 0:
            raise parameter_error(self, "h0", "must be >= 0 (above the floor)", p["h0"])
        if p["h0"] == 0 and p["v0"] < 0:
            raise parameter_error(self, "v0", "must be >= 0 when the ball starts on the floor (h0 = 0)", p["v0"])

    def _initialize_component(self, t0: float) -> None:
        super()._initialize_component(t0)
        self.resting = self.parameters["h0"] == 0 and self.parameters["v0"] == 0

    def start_members(self, x: np.ndarray) -> None:
        """An ensemble's start from the members' states *x* ``(2, M)``: a member starting on the floor at rest rests."""
        self.resting = (x[0] <= 0.0) & (x[1] == 0.0)

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        resting = self.resting
        if np.ndim(resting):
            slope = np.empty(x.shape)
            slope[0] = x[1]
            slope[1] = -self.parameters["g"]
            if resting.any():
                np.copyto(slope, 0.0, where=resting)
            return slope
        if self.resting:
            return np.zeros(2)
        return np.array([x[1], -self.parameters["g"]])

    def _bounce(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        if np.ndim(x) == 2:
            return self._bounce_members(x)
        g = self.parameters["g"]
        h, v = float(x[0]), float(x[1])
        if not (math.isfinite(h) and math.isfinite(v)):
            return np.array(x, dtype=float)  # an overflowed state has no rebound; the run stops at its value
        v_impact = -math.sqrt(max(v * v + 2.0 * g * min(h, 0.0), 0.0))
        late = max((v_impact - v) / g, 0.0)
        while True:
            v_rebound = -self.parameters["e"] * v_impact
            if v_rebound <= self.parameters["v_rest"]:
                self.resting = True
                return np.zeros(2)
            flight = 2.0 * v_rebound / g
            if flight >= late:
                return np.array([v_rebound * late - 0.5 * g * late * late, v_rebound - g * late])
            if late * (1.0 - self.parameters["e"]) >= flight:  # every later flight ends before late: at rest
                self.resting = True
                return np.zeros(2)
            late -= flight
            v_impact = -v_rebound

    def _bounce_members(self, x: np.ndarray) -> np.ndarray:
        """:meth:`_bounce` for the members' states *x* ``(2, M)``, each member's column as its scalar call gives it."""
        p = self.parameters
        g, e, v_rest = (np.broadcast_to(p[name], x[0].shape) for name in ("g", "e", "v_rest"))
        h, v = x[0], x[1]
        v_impact = -np.sqrt(np.maximum(v * v + 2.0 * g * np.minimum(h, 0.0), 0.0))
        late = np.maximum((v_impact - v) / g, 0.0)
        out = np.array(x, dtype=float)
        resting = np.array(self.resting, dtype=bool)
        open_ = np.isfinite(x).all(axis=0)
        while open_.any():
            v_rebound = -e * v_impact
            rest = open_ & (v_rebound <= v_rest)
            resting |= rest
            out[:, rest] = 0.0
            open_ &= ~rest
            flight = 2.0 * v_rebound / g
            land = open_ & (flight >= late)
            out[0, land] = (v_rebound * late - 0.5 * g * late * late)[land]
            out[1, land] = (v_rebound - g * late)[land]
            open_ &= ~land
            settled = open_ & (late * (1.0 - e) >= flight)
            resting |= settled
            out[:, settled] = 0.0
            open_ &= ~settled
            late = np.where(open_, late - flight, late)
            v_impact = np.where(open_, -v_rebound, v_impact)
        self.resting = resting
        return out

    def _snapshot_extra(self) -> Any:
        return self.resting

    def _restore_extra(self, extra: Any) -> None:
        self.resting = bool(extra)

    def _after_set_state(self, t: float) -> None:
        h, v = self._x
        self.resting = h <= 0 and v == 0


class MassSpringDamper(OdeBlock):
    """Mass on a spring-damper to ground, driven by a force (force -> x, v).

    ``m x'' = -stiffness * x - damping * x' + force``. The force-in /
    position-out side of a two-mass co-simulation; pair it with
    ``mass_spring_damper_force``. Vectorizable.
    """

    vectorizable = True

    PARAMETERS = {
        "mass": Parameter(float, unit="kg", default=1.0, gt=0, doc="mass m"),
        "stiffness": Parameter(float, unit="N/m", default=1.0, ge=0, doc="spring to ground"),
        "damping": Parameter(float, unit="N*s/m", default=0.0, ge=0, doc="damper to ground"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("x", "m", 0.0, "position from the spring's rest position")
        self.add_state("v", "m/s", 0.0, "velocity")
        self.add_input("force", "N", 0.0, "external force on the mass")
        self._refresh()

    def _refresh(self) -> None:
        p = self.parameters
        self._k, self._d, self._inv_m = p["stiffness"], p["damping"], 1.0 / p["mass"]

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([x[1], (u[0] - self._k * x[0] - self._d * x[1]) * self._inv_m])


class MassSpringDamperForce(OdeBlock):
    """Mass-spring-damper coupled to another mass by a spring-damper (x_in, v_in -> force, x, v).

    The coupling element acts between this mass (``x, v``) and the other one
    (inputs ``x_in, v_in``, positions from their rest positions)::

        force = coupling_stiffness * (x - x_in) + coupling_damping * (v - v_in)
        m x'' = -stiffness * x - damping * x' - force

    ``force`` is the force on the other mass (direct feedthrough from x_in and
    v_in), to be connected to its ``force`` input: the position-in / force-out
    side of a two-mass co-simulation. Vectorizable.
    """

    vectorizable = True

    PARAMETERS = {
        **MassSpringDamper.PARAMETERS,
        "coupling_stiffness": Parameter(float, unit="N/m", default=1.0, ge=0, doc="spring to the other mass"),
        "coupling_damping": Parameter(float, unit="N*s/m", default=0.0, ge=0, doc="damper to the other mass"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.add_state("x", "m", 0.0, "position from the spring's rest position")
        self.add_state("v", "m/s", 0.0, "velocity")
        self.add_input("x_in", "m", 0.0, "position of the other mass")
        self.add_input("v_in", "m/s", 0.0, "velocity of the other mass")
        self.add_output("force", "N", "coupling force on the other mass", feedthrough=("x_in", "v_in"))
        self._refresh()

    def _refresh(self) -> None:
        p = self.parameters
        self._k, self._d, self._inv_m = p["stiffness"], p["damping"], 1.0 / p["mass"]
        self._kc, self._dc = p["coupling_stiffness"], p["coupling_damping"]

    def _force(self, x: np.ndarray, u: np.ndarray) -> float:
        return self._kc * (x[0] - u[0]) + self._dc * (x[1] - u[1])

    def derivatives(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.array([x[1], -(self._k * x[0] + self._d * x[1] + self._force(x, u)) * self._inv_m])

    def compute_outputs(self, t: float, x: np.ndarray, u: np.ndarray) -> Sequence[float]:
        return (self._force(x, u),)


class CartesianPendulum(UnitParameters, DaeComponent):
    """Pendulum in Cartesian coordinates as an index-1 DAE (torque -> q, omega); a drop-in twin of ``pendulum``.

    The mass at ``(x, y)`` (pivot at the origin, y up, velocity ``(vx, vy)``)
    hangs on a rod of length ``L`` that pulls it towards the pivot with the
    force ``F`` (tension; the algebraic state)::

        x' = vx                      m vx' = -F x / L - s y
        y' = vy                      m vy' = -F y / L - m g + s x
        0  = x vx' + y vy' + vx^2 + vy^2

    where ``s = (torque - damping * omega) / L^2`` turns the pivot torque into
    a force normal to the rod. The last equation is the rod constraint
    ``x^2 + y^2 = L^2`` differentiated twice (index reduction to index 1 at the
    acceleration level); the position and velocity constraints are not
    enforced, so they drift at the level of the tolerances
    (:meth:`constraint_residuals`). Ports, parameters, the end stop and the
    physical state (``q`` from the downward vertical, ``omega``) are those of
    ``pendulum``, so either can stand in for the other as a mode of a multi component.
    """

    PARAMETERS = {
        **Pendulum.PARAMETERS,
        "q0": Parameter(float, unit="rad", default=0.0, doc="initial angle from the downward vertical"),
        "omega0": Parameter(float, unit="rad/s", default=0.0, doc="initial angular velocity"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        for state, unit, description in (("x", "m", "horizontal position of the mass"),
                                         ("y", "m", "vertical position of the mass (pivot at 0, up positive)"),
                                         ("vx", "m/s", "horizontal velocity"), ("vy", "m/s", "vertical velocity")):
            self.add_state(state, unit, 0.0, description, output=False, parameter=False)
        self.add_state("force", "N", 0.0, "rod tension", output=False, parameter=False, algebraic=True)
        self.add_input("torque", "N*m", 0.0, "torque applied at the pivot")
        self.add_output("q", "rad", "angle from the downward vertical", feedthrough=False)
        self.add_output("omega", "rad/s", "angular velocity", feedthrough=False)
        self.add_state_event("end_stop", self._end_stop_indicator, direction=1, update=self._end_stop_update)
        self._angle_specs = [self.output_specs["q"], self.output_specs["omega"]]
        self._q_ref = 0.0
        self._refresh()

    def set_parameters(self, **parameters: Any) -> None:
        super().set_parameters(**parameters)
        self._refresh()

    def check_parameters(self) -> None:
        super().check_parameters()
        check_q0_within_end_stop(self)

    def _refresh(self) -> None:
        p = self.parameters
        self._m, self._length, self._g, self._d = p["mass"], p["length"], p["g"], p["damping"]
        self._inv_l2 = 1.0 / self._length**2

    def _initialize_component(self, t0: float) -> None:
        self.check_parameters()
        self._refresh()
        self._q_ref = self.parameters["q0"]
        super()._initialize_component(t0)

    # ------------------------------------------------------------------ angle form <-> Cartesian form
    def angle_state(self, y: np.ndarray) -> tuple[float, float]:
        """``(q, omega)`` of the Cartesian state *y*; ``q`` continues the last reported angle (no wrap at pi)."""
        x, z, vx, vy = y[:4].tolist()
        q = self._q_ref + math.remainder(math.atan2(x, -z) - self._q_ref, math.tau)
        return q, (x * vy - z * vx) / (x * x + z * z)

    def cartesian_state(self, q: float, omega: float) -> np.ndarray:
        """The consistent Cartesian state (on the rod, rod tension included) of the angle-form state."""
        length, s, c = self._length, math.sin(q), math.cos(q)
        force = self._m * (length * omega * omega + self._g * c)
        return np.array([length * s, -length * c, length * omega * c, length * omega * s, force])

    def constraint_residuals(self) -> tuple[float, float]:
        """``(x^2 + y^2 - L^2, x vx + y vy)``: the drift of the position and velocity constraints."""
        x, z, vx, vy = self.x[:4].tolist()
        return x * x + z * z - self._length**2, x * vx + z * vy

    def _initial_state(self) -> np.ndarray:
        return self.cartesian_state(self.parameters["q0"], self.parameters["omega0"])

    def get_state(self) -> dict[str, Any]:
        """``{'q': ..., 'omega': ...}`` as for ``pendulum`` (rad, rad/s)."""
        q, omega = self.angle_state(self.x) if self.is_initialized else (self.parameters["q0"],
                                                                           self.parameters["omega0"])
        return self._physical_state(self._angle_specs, (q, omega))

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set ``q`` and ``omega`` (the angle form's physical state); before ``initialize`` they become q0, omega0."""
        q, omega = self._state_values(state, self._angle_specs)
        if not self.is_initialized:
            self.parameters.update(q0=q, omega0=omega)
            return
        self._q_ref = q
        self._jump(self.cartesian_state(q, omega), t)

    # ------------------------------------------------------------------ model
    def residuals(self, t: float, y: np.ndarray, yp: np.ndarray, u: np.ndarray, res: np.ndarray) -> None:
        x, z, vx, vy, force = y.tolist()
        xd, zd, ax, ay, _ = yp.tolist()
        m, inv_l2 = self._m, self._inv_l2
        s = (float(u[0]) - self._d * (x * vy - z * vx) * inv_l2) * inv_l2
        pull = force / self._length
        res[:] = (xd - vx, zd - vy, m * ax + pull * x + s * z, m * ay + pull * z + m * self._g - s * x,
                  x * ax + z * ay + vx * vx + vy * vy)

    def compute_outputs(self, t: float, x: np.ndarray, u: np.ndarray) -> Sequence[float]:
        q, omega = self.angle_state(x)
        self._q_ref = q
        return q, omega

    def _end_stop_indicator(self, t: float, x: np.ndarray, u: np.ndarray) -> float:
        return end_stop_distance(self.parameters["q_max"], self.angle_state(x)[0])

    def _end_stop_update(self, t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        if self.parameters["q_max"] is None:
            return x
        self._q_ref, omega = end_stop_rebound(self.parameters, *self.angle_state(x))
        return self.cartesian_state(self._q_ref, omega)

    def _snapshot_extra(self) -> Any:
        return self._q_ref

    def _restore_extra(self, extra: Any) -> None:
        self._q_ref = float(extra)
