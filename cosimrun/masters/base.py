"""Shared machinery of the master algorithms.

A master is compiled against a :class:`~cosimrun.system.System` once
(``setup``): links become ``(dst, src)`` port pairs with their unit scale and
offset, components that need ``set_inputs`` calls are marked, and the
re-evaluation schedule of direct-feedthrough components and algebraic loops is
fixed. The step loop then only moves plain numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortType
from cosimrun.core.switching import ModeSwitching
from cosimrun.errors import ConfigError, did_you_mean, suggest
from cosimrun.masters.events import AT_COMMUNICATION_POINTS, LOCATED, Indicators, StateEvents, notice_unlocated
from cosimrun.masters.extrapolation import mean_extrapolation
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.system.connection import Link
    from cosimrun.system.recorder import Recorder
    from cosimrun.system.system import System

LOOP_SOLVERS = ("jacobi", "gauss_seidel", "newton")
PROBE_FRACTION = 1e-6
"""Length of the probe after an event under masters without localization, as a fraction of the step."""
ON_NONCONVERGENCE = ("raise", "warn")


@dataclass
class MasterStats:
    """What a master did during one run."""

    macro_steps: int = 0
    loop_solves: int = 0
    loop_iterations: int = 0
    newton_iterations: int = 0
    step_iterations: int = 0
    rollbacks: int = 0
    events: int = 0
    trial_steps: int = 0
    unconverged_loop_solves: int = 0
    """Loop solves that went on without converging (``on_nonconvergence="warn"``); only the first warns."""
    event_trial_steps: list[int] = field(default_factory=list)
    event_handling: str = AT_COMMUNICATION_POINTS
    """Where state events are handled: ``located`` (at their instants) or ``at communication points``."""

    @property
    def trial_steps_per_event(self) -> float:
        """Mean number of trial steps spent localizing one event."""
        return sum(self.event_trial_steps) / len(self.event_trial_steps) if self.event_trial_steps else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Scalar statistics (for storage as attributes)."""
        out = asdict(self)
        out.pop("event_trial_steps")
        out["trial_steps_per_event"] = self.trial_steps_per_event
        return out


Pusher = Callable[[float], None] | None
Checkpoint = tuple[list[tuple[CoSimComponent, Any]], list[Any]]
"""Component snapshots and port values to roll back to (see :meth:`Master.checkpoint`)."""
Step = tuple[CoSimComponent, Pusher, list[tuple[Any, Any, float, float]]]
"""A component, its input pusher and the ``(dst, src, scale, offset)`` links it reads before stepping."""


def input_pusher(comp: CoSimComponent) -> Pusher:
    """``None`` when port writes suffice, else a function pushing port values through ``set_inputs``.

    Components that override ``set_inputs`` (multi-model wrappers) must see
    every input change through it.
    """
    if not comp.needs_set_inputs or not comp.inputs:
        return None
    ports = list(comp.inputs.items())

    def push(t: float) -> None:
        comp.set_inputs({name: port.value for name, port in ports}, t)

    return push


@dataclass
class Master:
    """Base class: settings as fields, compiled state set by :meth:`setup`."""

    loop_solver: str = "gauss_seidel"
    """How algebraic loops are solved at a communication point: jacobi, gauss_seidel or newton."""
    loop_tolerance: float = 1e-10
    """Value tolerance of loop iteration: ``max|residual| <= tol * (1 + max|x|)``."""
    max_loop_iterations: int = 100
    aitken: bool = False
    """Aitken dynamic relaxation of fixed-point loop iteration."""
    relaxation: float = 1.0
    """Initial (or constant, without Aitken) relaxation factor of fixed-point iteration."""
    fd_step: float = 1e-7
    """Relative finite-difference step of interface Jacobians."""
    on_nonconvergence: str = "raise"
    """``raise`` or ``warn`` when a loop does not converge: ``warn`` warns at the first such solve of a
    run and counts them all in ``stats.unconverged_loop_solves``."""
    sign_tolerance: float = 1e-12
    """Indicator values within this distance of zero count as zero (on the surface)."""
    max_micro_steps: int = 100
    """Most event iterations at one instant before the run stops (Zeno guard)."""

    name: ClassVar[str] = "master"
    locates_events: ClassVar[bool] = False
    """Whether state events are located between communication points (else handled at them)."""

    def __post_init__(self) -> None:
        self._check_choice("loop_solver", self.loop_solver, LOOP_SOLVERS)
        self._check_choice("on_nonconvergence", self.on_nonconvergence, ON_NONCONVERGENCE)
        for key in ("loop_tolerance", "fd_step", "relaxation"):
            self._check(key, getattr(self, key) > 0, "must be positive")
        self._check("max_loop_iterations", int(self.max_loop_iterations) >= 1, "must be >= 1")
        self._check("sign_tolerance", self.sign_tolerance >= 0, "must be >= 0")
        self._check("max_micro_steps", int(self.max_micro_steps) >= 1, "must be >= 1")
        self.stats = self._new_stats()
        self.system: System | None = None

    def _new_stats(self) -> MasterStats:
        return MasterStats(event_handling=LOCATED if self.locates_events else AT_COMMUNICATION_POINTS)

    def _check(self, key: str, ok: bool, requirement: str) -> None:
        """Raise :class:`ConfigError` keyed by setting *key* unless *ok*."""
        if not ok:
            raise ConfigError(key, f"{requirement}, got {getattr(self, key)!r}")

    @staticmethod
    def _check_choice(key: str, value: Any, valid: tuple[Any, ...]) -> None:
        if value not in valid:
            close = did_you_mean(str(value), map(str, valid))
            raise ConfigError(
                key,
                f"{value!r} is not valid{suggest(str(value), map(str, valid))} (valid: {', '.join(map(str, valid))})",
                suggestion=close[0] if close else None,
            )

    def settings(self) -> dict[str, Any]:
        """The master's settings by name."""
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}

    # ------------------------------------------------------------------ compilation
    def setup(self, system: System) -> None:
        """Compile the system's links, input pushing and re-evaluation schedule."""
        from cosimrun.masters.loops import LoopSolver

        assert system.analysis is not None
        self.system = system
        self.stats = self._new_stats()
        comps = system.components
        self.order: list[CoSimComponent] = [comps[n] for n in system.analysis.order]
        self.pushers: dict[str, Pusher] = {n: input_pusher(c) for n, c in comps.items()}
        self.link_of = {link.connection: link for link in system.links}
        self._identity = [(lk.dst, lk.src) for lk in system.links if lk.conversion.is_identity]
        self._scaled = [
            (lk.dst, lk.src, lk.conversion.scale, lk.conversion.offset)
            for lk in system.links
            if not lk.conversion.is_identity
        ]
        self._pushed = [(comps[n], p) for n, p in self.pushers.items() if p is not None]
        self.links_from: dict[str, list[Link]] = {n: [] for n in comps}
        for lk in system.links:
            self.links_from[lk.connection.src_component].append(lk)
        self._resolution: list[tuple[Callable[[float], None], list[Link]]] = []
        self._late: list[CoSimComponent] = []
        for item in system.analysis.resolution:
            if isinstance(item, str):
                comp = comps[item]
                self._resolution.append((self._evaluator(comp), self.links_from[item]))
                self._late.append(comp)
            else:
                solver = LoopSolver(item, self)
                members = set(item.components)
                outward = [lk for n in item.components for lk in self.links_from[n]
                           if lk.connection.dst_component not in members or lk.connection in solver.tear_set]
                self._resolution.append((solver.solve, outward))
                self._late.extend(comps[n] for n in item.components)
        self._late = list(dict.fromkeys(self._late))
        self._ports = [p for c in comps.values() for p in (*c.inputs.values(), *c.outputs.values())]
        self._switchers = [c for c in comps.values() if isinstance(c, ModeSwitching)]
        self._timed = [c for c in comps.values() if c.max_step is not None or c.has_time_events]
        self._lagging: list[Link] = []
        self._ex_times: list[float] = []
        self._ex_values: list[list[float]] = []

    def _evaluator(self, comp: CoSimComponent) -> Callable[[float], None]:
        """Re-evaluate *comp*'s outputs from its current inputs at a time ``t``."""
        push = self.pushers[comp.name]
        if push is None:
            return comp.refresh_outputs
        refresh = comp.refresh_outputs

        def evaluate(t: float) -> None:
            push(t)
            refresh(t)

        return evaluate

    # ------------------------------------------------------------------ exchange
    def exchange(self) -> None:
        """Copy every output to the inputs it drives."""
        for dst, src in self._identity:
            dst.value = src.value
        for dst, src, scale, offset in self._scaled:
            dst.value = scale * src.value + offset

    def settle(self, t: float) -> None:
        """Exchange, then re-evaluate direct feedthrough and solve loops at *t* (after a discontinuity)."""
        self.exchange()
        if self._resolution:
            self.resolve(t)

    def push_all(self, t: float) -> None:
        """Push input port values into components that take inputs through ``set_inputs``."""
        for _, push in self._pushed:
            push(t)

    def resolve(self, t: float) -> None:
        """Re-evaluate direct-feedthrough outputs and solve algebraic loops at *t*."""
        for run, outward in self._resolution:
            run(t)
            for lk in outward:
                lk.transfer()

    def initialize_outputs(self, t0: float) -> None:
        """Make inputs and outputs consistent at *t0* (tear inputs keep their initial values)."""
        assert self.system is not None
        tears = {c for loop in self.system.analysis.loops for c in loop.tears}
        for lk in self.system.links:
            if lk.connection not in tears:
                lk.transfer()
        self.resolve(t0)
        self.push_all(t0)

    # ------------------------------------------------------------------ extrapolation
    def _start_extrapolation(self, order: int, links: list[Link], t0: float) -> None:
        self._lagging = [lk for lk in links if lk.dst.spec.type is PortType.REAL] if order > 0 else []
        self._ex_order = order
        self._ex_times = [t0]
        self._ex_values = [[lk.dst.value] for lk in self._lagging]

    def _extrapolate(self, t: float, h: float) -> None:
        times = self._ex_times
        for lk, values in zip(self._lagging, self._ex_values, strict=True):
            lk.dst.value = mean_extrapolation(times, values, t, h)

    def _sample_extrapolation(self, t: float) -> None:
        keep = self._ex_order + 1
        self._ex_times.append(t)
        del self._ex_times[:-keep]
        for lk, values in zip(self._lagging, self._ex_values, strict=True):
            values.append(lk.dst.value)
            del values[:-keep]

    # ------------------------------------------------------------------ stepping
    def stepping_plan(self, components: list[CoSimComponent], fresh: bool) -> tuple[list[Step], list[Link]]:
        """What stepping *components* in order needs, and the links that lag.

        With *fresh*, each component first reads the links from components
        stepped before it (Gauss-Seidel); every other link lags, holding the
        value of the last exchange.
        """
        assert self.system is not None
        position = {c.name: i for i, c in enumerate(components)}
        reads: dict[str, list[tuple[Any, Any, float, float]]] = {c.name: [] for c in components}
        lagging = []
        for lk in self.system.links:
            src, dst = lk.connection.src_component, lk.connection.dst_component
            if fresh and src in position and dst in position and position[src] < position[dst]:
                reads[dst].append((lk.dst, lk.src, lk.conversion.scale, lk.conversion.offset))
            else:
                lagging.append(lk)
        return [(c, self.pushers[c.name], reads[c.name]) for c in components], lagging

    @staticmethod
    def step_all(plan: list[Step], t: float, h: float) -> None:
        """Step every component of *plan* from *t* to *t + h*, reading its fresh links first."""
        for comp, push, fresh in plan:
            for dst, src, scale, offset in fresh:
                dst.value = scale * src.value + offset
            if push is not None:
                push(t)
            comp.do_step(t, h)

    # ------------------------------------------------------------------ time loop
    def next_point(self, clock: Clock, a: int) -> int:
        """Next communication tick after *a*: grid, components' max steps and time events, end.

        Stops closer together than ``clock.snap`` ticks (a rounding error of a float
        time) are merged, so no step is a residual of a few ulp: a grid point just
        after *a* is skipped, a time event just after *a* is ignored, and the end or
        a time event just after the chosen stop is taken instead of it. A component's
        ``max_step`` splits the step into equal parts no longer than the largest
        allowed step.
        """
        snap = clock.snap
        grid = clock.next_grid(a)
        if grid - a <= snap:
            grid = clock.next_grid(grid)
        end = clock.end
        b = min(grid, end)
        extend = [end]
        limit = None
        if self._timed:
            t = clock.time(a)
            for comp in self._timed:
                if comp.max_step is not None:
                    limit = comp.max_step if limit is None else min(limit, comp.max_step)
                te = comp.next_time_event(t)
                if te is not None and te > t:
                    tick = clock.mark(te)
                    if a + snap < tick < end:
                        b = min(b, tick)
                        extend.append(tick)
        later = [s for s in extend if b < s <= b + snap]
        if later:
            b = max(later)
        if limit is not None:
            span, most = b - a, limit / clock.tick
            if span > most:
                parts = math.ceil(span / most * (1.0 - 1e-12))
                b = a + max(1, round(span / parts))
        return b

    def run(
        self, t0: float, tf: float, dt: float, recorder: Recorder, progress: Callable[[float], None] | None = None
    ) -> MasterStats:
        """Advance the (initialized) system from *t0* to *tf*, telling *recorder* every accepted sample.

        The first sample is the consistent state at *t0*; the recorder is
        flushed at the end, also when the run fails.
        """
        clock = Clock(t0, dt, tf)
        self.clock = clock
        self.recorder = recorder
        a, end = 0, clock.end
        stride = max(1, end // 200)
        report = stride
        try:
            recorder.sample(t0)
            self.begin(t0)
            try:
                while a < end:
                    a = self.advance(clock, a, self.next_point(clock, a))
                    self.stats.macro_steps += 1
                    if progress is not None and a >= report:
                        report = a + stride
                        progress(clock.time(a))
            finally:
                self.finish()
        finally:
            recorder.flush()
        return self.stats

    def begin(self, t0: float) -> None:  # noqa: B027 (optional hook)
        """Hook called before the first step."""

    def finish(self) -> None:  # noqa: B027 (optional hook)
        """Hook called after the last step (also on failure)."""

    # ------------------------------------------------------------------ rollback and mode switches
    def checkpoint(self, components: list[CoSimComponent]) -> Checkpoint:
        """Snapshots of *components* plus every port value of the system."""
        return [(c, c.snapshot_state()) for c in components], [p.value for p in self._ports]

    def roll_back(self, checkpoint: Checkpoint, t: float) -> None:
        """Return the components and ports to *checkpoint*, taken at time *t*."""
        snaps, values = checkpoint
        for comp, snap in snaps:
            comp.restore_state(snap, t)
        for port, value in zip(self._ports, values, strict=True):
            port.value = value
        self.stats.rollbacks += 1

    def hold_mode_switches(self, hold: bool) -> None:
        """Stop (or allow again) multi-model components switching inside their steps.

        Masters that step tentatively switch modes only at accepted points,
        through :meth:`switch_modes`, so snapshots stay valid.
        """
        for comp in self._switchers:
            comp.hold_mode_switches(hold)

    def switch_modes(self, t: float) -> bool:
        """Let multi-model components switch at the accepted point *t*; re-exchange if any did."""
        switched = False
        for comp in self._switchers:
            switched = comp.apply_mode_switch(t) or switched
        if switched:
            self.exchange()
            if self._resolution:
                self.resolve(t)
        return switched

    def advance(self, clock: Clock, a: int, b: int) -> int:
        """Advance from tick *a* towards *b*; return the tick reached."""
        raise NotImplementedError


@dataclass
class ExplicitMaster(Master):
    """Non-iterative masters: one pass over the components per macro step.

    ``extrapolation`` (0, 1 or 2) replaces each lagging real input by the mean
    over the step of the polynomial through its latest 1, 2 or 3
    communication-point values, lifting the coupling error by one order in
    ``dt`` per degree.
    """

    extrapolation: int = 0

    fresh_outputs: ClassVar[bool] = False
    """Whether a component reads the outputs of components stepped before it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choice("extrapolation", self.extrapolation, (0, 1, 2))

    def begin(self, t0: float) -> None:
        self._plan, lagging = self.stepping_plan(self.order, self.fresh_outputs)
        self._start_extrapolation(self.extrapolation, lagging, t0)
        sources = [c for c in self.order if c.has_state_events]
        self._events = StateEvents(self, sources) if sources else None
        if self._events is not None:
            notice_unlocated(sources)
            probing = all(c.can_always_roll_back for c in sources)
            self._probe_plan = self.stepping_plan(sources, fresh=False)[0] if probing else None
            self._g: Indicators = self._events.indicators()
            if self._probe_plan is not None:
                self._events.probe(t0, self._g, sources, lambda t1: self._probe_step(t0, t1),
                                   PROBE_FRACTION * self.clock.dt)

    def advance(self, clock: Clock, a: int, b: int) -> int:
        t, t1 = clock.time(a), clock.time(b)
        h = t1 - t
        if self._lagging:
            self._extrapolate(t, h)
        self.step_all(self._plan, t, h)
        self.exchange()
        if self._resolution:
            self.resolve(t1)
        self.recorder.sample(t1)
        if self._events is not None:
            self._handle_events(t1, h)
        if self._lagging:
            self._sample_extrapolation(t1)
        return b

    def _handle_events(self, t: float, h: float) -> None:
        """Handle the events whose indicators crossed over the step of length *h* ending at *t*.

        Modes may switch after the events; indicators left on their surface are
        probed (when the sources can roll back) so that leaving and crossing
        back within the next step is still seen.
        """
        events = self._events
        assert events is not None
        g_ref = events.reference(self._g, events.drain_hints(events.sources))
        g = self._g = events.indicators()
        crossings = events.crossings(g_ref, g)
        if crossings:
            g = self._g = events.handle(t, crossings)
        if self.switch_modes(t):
            g = self._g = events.indicators()
        if crossings and self._probe_plan is not None:
            events.probe(t, g, events.sources, lambda t1: self._probe_step(t, t1), PROBE_FRACTION * h)

    def _probe_step(self, t: float, t1: float) -> Indicators:
        assert self._events is not None
        self.step_all(self._probe_plan, t, t1 - t)
        return self._events.indicators()
