"""State events and mode switches per member under the fixed-step masters (``jacobi``, ``gauss_seidel``, ``ijcsa``).

Every member is on the shared grid of communication points. At each one, the members whose indicators crossed
zero over the step (each compared with its armed side, or without one with the side the integrator saw it leave:
``StateEvents.reference``) have their events handled there, as ``ExplicitRun._handle_events`` handles them: in
micro steps while indicators cross again (:meth:`~cosimrun.ensemble.events.MemberEvents.handle`, a cascade that
does not settle fails its member alone), then the ``multi`` components' mode switches at that point
(``Schedule.switch_modes``), then the indicators re-armed with the side each departs towards, from a departure
probe of the event sources (a trial step of ``PROBE_FRACTION * h``, growing ``PROBE_GROWTH`` times up to ``h``
while an indicator stays on its surface, rolled back). A member without events at a point switches modes and
arms its indicators there. As a scalar run's multi component switches at the start of its own ``do_step``,
every member switches at the start of each step too (:meth:`UnlocatedEvents.before_step`).

What a member's scalar run does that the shared grid cannot is its own communication point at the end of a dwell
window that holds a switch back: a member whose window ends inside a step fails there with that cause (a sweep
runs it again as its own job). Each member's coupling-error estimate is its run's: at a point where it handled
events, its values before them end its step and those after them start the next, and its micro steps' count
towards the inputs' ranges (:class:`~cosimrun.ensemble.coupling.SharedGridEstimate`). Each member's samples are
its run's (:class:`~cosimrun.ensemble.samples.SampleLog`): at every point its values before the events there, then
where it handled events its values after each micro step, its event ports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.core.ode import OdeComponent
from cosimrun.ensemble.events import MemberEvents, Saved
from cosimrun.ensemble.members import OdeMember, reference_sides
from cosimrun.ensemble.modes import is_multi, timed_ok
from cosimrun.errors import ConfigError
from cosimrun.masters.events import PROBE_GROWTH
from cosimrun.masters.explicit import PROBE_FRACTION
from cosimrun.masters.plan import fixed_step_only

if TYPE_CHECKING:
    from cosimrun.ensemble.coupling import SharedGridEstimate
    from cosimrun.ensemble.run import _EnsembleRun
    from cosimrun.masters.base import Master
    from cosimrun.masters.stepsize import Clock
    from cosimrun.system.system import System

EVENT_COUNT = "events"
"""The statistic kept per member (``member_stats``): the events handled, as the scalar run's ``stats.events``."""


def refuse_unlocated(system: System, master: Master) -> None:
    """Refuse, keyed by what is at fault, a system with state events or a ``multi`` component that an ensemble
    under a fixed-step master cannot handle per member."""
    sources = [name for name, comp in system.components.items() if is_multi(comp) or comp.has_state_events]
    if not sources:
        return
    if getattr(master, "iterate_steps", False):
        raise ConfigError("master.iterate_steps", f"component {sources[0]!r} has state events or switches modes, "
                                                  "which ensembles handle per member under ijcsa without "
                                                  "iterate_steps only (iterate_steps=false, or master=hybrid)")
    if system.event_connections:
        raise ConfigError("events", "ensembles do not run event subscriptions (run the members as separate jobs)")
    for name, comp in system.components.items():
        if not (is_multi(comp) or isinstance(comp, OdeComponent) or timed_ok(comp)):
            raise ConfigError(f"components.{name}", f"component {name!r} ({type(comp).__name__}) is neither an ODE "
                                                    "component nor memoryless; ensembles handle state events and "
                                                    "mode switches per member beside ODE components, memoryless "
                                                    "ones and multi components of ODE modes only")


def unlocated_events(run: _EnsembleRun, master: Master) -> UnlocatedEvents | None:
    """The per-member events of *run* under a fixed-step master (``None`` without event sources)."""
    if not any(is_multi(c) or c.has_state_events for c in run.order):
        return None
    return UnlocatedEvents(run, master)


class UnlocatedEvents(MemberEvents):
    """The members' events and mode switches at the communication points of a fixed-step master's ensemble run."""

    def __init__(self, run: _EnsembleRun, master: Master) -> None:
        super().__init__(run, master, (EVENT_COUNT,), 0.0, 0)  # no Zeno guard, as ExplicitRun's StateEvents
        comps = [st.comp for st in self.sources]
        probing = all(c.can_always_roll_back and not fixed_step_only(c) for c in comps)
        self.probe_plan = run.schedule.stepping_plan(comps, fresh=False)[0] if probing else None
        """The sources stepped by a departure probe (``ExplicitRun._probe_plan``; ``None``: they cannot roll back)."""
        members = run.members
        self.armed = np.zeros((members, len(self.columns)))
        self.estimate: SharedGridEstimate | None = None
        """The run's coupling-error estimate (:meth:`watch`)."""
        self.hit = np.zeros(members, dtype=bool)
        self.fired = np.zeros((members, len(self.columns)), dtype=bool)
        self.step: tuple[float, float, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]
        """The step being closed: its start and end, the loop's states at its start, frozen states, samples."""

    # ------------------------------------------------------------------ the run's hooks
    def watch(self, coupling: SharedGridEstimate | None) -> None:
        """Hand *coupling*, the run's coupling-error estimate, the values before the events at each point and (as
        :attr:`coupling`, which :meth:`handle` gives them to) the samples of the micro steps there."""
        self.estimate = coupling
        self.coupling = coupling  # type: ignore[assignment]
        self.coupled = [] if coupling is None else [lk.src for lk in coupling.links]

    def begin(self, t0: float, dt: float) -> None:
        """``ExplicitRun.begin``: the members placed in their switch regions, every indicator armed with its
        departure at *t0* (a probe over ``PROBE_FRACTION * dt`` for those on their surface)."""
        for st in self.multis:
            st.start()
        everyone = np.ones(len(self.ids), dtype=bool)
        self.depart(t0, self.indicator(t0), np.zeros_like(self.fired), everyone, dt)

    def before_step(self, clock: Clock, t: float, t1: float, x_prev: dict[str, np.ndarray],
                    frozen: dict[str, np.ndarray], previous: dict[str, np.ndarray]) -> None:
        """The start of the step from *t* to *t1*: a member whose dwell window ends inside it (its scalar run's own
        communication point) fails; the others' multi components switch as their ``do_step`` does first."""
        if not self.multis:
            return
        run = self.run
        now = np.full(len(self.ids), t)
        eps = clock.snap * clock.tick
        for st in self.multis:
            ends = st.dwell_end(now, st.value(), run.alive)
            own = run.alive & (ends > t + eps) & (ends < t1 - eps)
            for m in np.flatnonzero(own).tolist():
                run._fail(np.array([m]), t, t, st.comp.name, "mode",
                          f"a mode switch held back by the dwell window until t={ends[m]:.12g}, inside the step "
                          f"from t={t:.12g} (a communication point of its own, which ensembles under the fixed-step "
                          "masters do not take; master=hybrid takes it)", x_prev, frozen, previous)
        for st in self.multis:
            st.apply_switch(run.alive.copy(), now, self.switch_logger(st))

    def at_point(self, t: float, t1: float, x_prev: dict[str, np.ndarray], frozen: dict[str, np.ndarray],
                 previous: dict[str, np.ndarray]) -> None:
        """The events of the step from *t* to *t1*, handled at *t1* per member (``StateEvents.handle``); the
        samples are taken after this."""
        run = self.run
        g = self.indicator(t1)
        crossing = self.crossed(reference_sides(self.armed, self.hints()[0], self.tol), g)
        crossing &= run.alive[:, None]
        self.hit = crossing.any(axis=1)
        if not self.hit.any():
            return
        self.step = (t, t1, x_prev, frozen, previous)
        if self.estimate is not None:
            self.estimate.end({key: run._sample(run.outputs[key]) for key in self.estimate.sources})
        _, self.fired = self.handle(np.full(len(self.ids), t1), crossing)
        odes = [st for st in run.steppers.values() if isinstance(st, OdeMember)]
        run._check_members(t, t1, odes, x_prev, frozen, previous)

    def after_point(self, t1: float, h: float) -> None:
        """After the samples at *t1*: the members' mode switches there, then their indicators armed (departing,
        for those that handled events, after a step *h*)."""
        run = self.run
        alive = run.alive.copy()
        if self.multis:
            now = np.full(len(self.ids), t1)
            switched = np.zeros(len(self.ids), dtype=bool)
            for st in self.multis:
                switched |= st.apply_switch(alive, now, self.switch_logger(st))
            if switched.any():
                run.settle(t1)
        g = self.indicator(t1)
        hit = self.hit & alive
        self.arm(alive & ~hit, g)
        if hit.any():
            self.depart(t1, g, self.fired, hit, h)
        self.hit[:] = False

    def fail(self, i: int, t_e: float, column: int, cause: str) -> None:
        """Member *i* stops at the communication point *t_e* with *cause*: frozen at the start of the step."""
        t, _, x_prev, frozen, previous = self.step
        col = self.columns[column]
        self.run._fail(np.array([int(self.ids[i])]), t, t_e, col.st.comp.name, col.name, cause, x_prev, frozen,
                       previous)

    def tables(self) -> dict[str, Any]:
        """What the result holds of the events: the tables of events and switches."""
        return {"events": self.table(), "switches": self.switch_table()}

    # ------------------------------------------------------------------ departure
    def depart(self, t: float, g_now: np.ndarray, fired: np.ndarray, mask: np.ndarray, h: float) -> None:
        """``StateEvents.depart`` for members *mask* at *t*: armed with *g_now*; their indicators that *fired* or
        sit on their surface probed forwards (``PROBE_FRACTION * h``, growing up to *h*) and armed with the side
        each departs towards (``StateEvents._departure``, within a window *h*)."""
        tol = self.tol
        self.arm(mask, g_now)
        on_surface = np.abs(g_now) <= tol
        keys = mask[:, None] & (fired | on_surface)
        todo = keys.any(axis=1)
        if not todo.any():
            return
        if self.probe_plan is None:
            self.armed[keys & on_surface] = 0.0
            return
        saved = Saved(self.odes, self.ports)
        probe = np.zeros_like(g_now)
        lengths = np.zeros(len(self.ids))
        length = PROBE_FRACTION * h
        for st in self.sources:
            st.tracking = False
        try:
            while True:
                self.run.step_plan(self.probe_plan, t, length)
                g = self.indicator(t + length)
                saved.load()
                probe[todo], lengths[todo] = g[todo], length
                todo &= ~((np.abs(g) > tol) | ~keys).all(axis=1)
                if length >= h or not todo.any():
                    break
                length = min(h, length * PROBE_GROWTH)
        finally:
            for st in self.sources:
                st.tracking = True
        side = self.departure(g_now, probe, lengths[:, None], h)
        self.armed[keys] = side[keys]


__all__ = ["EVENT_COUNT", "UnlocatedEvents", "refuse_unlocated", "unlocated_events"]

