"""Shared machinery of the master algorithms.

A master is compiled against a :class:`~cosimrun.system.System` once
(``setup``): links become ``(dst, src)`` port pairs with their unit scale and
offset, components that need ``set_inputs`` calls are marked, and the
re-evaluation schedule of direct-feedthrough components and algebraic loops is
fixed. The step loop then only moves plain numbers.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from cosimrun.console import notice
from cosimrun.core.component import CoSimComponent, StopRequest
from cosimrun.core.ports import PortType
from cosimrun.core.steplog import StepLog
from cosimrun.core.switching import ModeSwitching
from cosimrun.errors import ConfigError, FMUError, StepDiscarded, did_you_mean, suggest
from cosimrun.masters.coupling_error import CouplingError, CouplingErrorEstimate
from cosimrun.masters.events import (
    AT_COMMUNICATION_POINTS,
    CAPPED_NOTICE,
    LOCATED,
    SHORTENED_NOTICE,
    UNLOCATED_NOTICE,
    Hints,
    Indicators,
    StateEvents,
    notice_unlocated,
)
from cosimrun.masters.extrapolation import mean_extrapolation, taylor_extrapolation
from cosimrun.masters.step_control import STEP_CONTROLS, ErrorControl
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.masters.parallel import ParallelStepper
    from cosimrun.system.connection import Link
    from cosimrun.system.recorder import Recorder
    from cosimrun.system.system import System

LOOP_SOLVERS = ("jacobi", "gauss_seidel", "newton")
PROBE_FRACTION = 1e-6
"""Length of the probe after an event under masters without localization, as a fraction of the step."""
ON_NONCONVERGENCE = ("raise", "warn")
DISCARD_EVENT = "discard"
"""The event recorded when an FMU ended a step early (``fmi2Discard``) and the step was cut there."""
VARIABLE_STEP_FLAG = "canHandleVariableCommunicationStepSize=false"
STOP_EVENT = "stop"
"""The event recorded where a component asked to end the run (:attr:`CoSimComponent.stop_requested`)."""


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
    discards: int = 0
    """Steps an FMU ended early (``fmi2Discard``), each cut at its last successful time (a ``discard`` event)."""
    parallel_threads: int = 1
    """Components that could step at once (the ``parallel`` setting; 1: serial stepping)."""
    parallel_steps: int = 0
    """Component-steps taken concurrently with others (see :mod:`cosimrun.masters.parallel`)."""
    plan_steps: int = 0
    """Component-steps of the stepping plans while ``parallel`` was on: the base of ``parallel_fraction``."""
    parallel_pool: str = "none"
    """The pool started for the C calls of parallel steps: ``native`` (native threads), ``threads`` (Python threads,
    when the native pool is not built) or ``none`` (``parallel`` off, or no batch that could step in parallel)."""
    step_control: str = "fixed"
    """How communication steps were chosen: ``fixed`` (``run.dt``) or ``error`` (see :mod:`.step_control`)."""
    step_rejection: str = "none"
    """Under ``step_control: error``: ``rollback`` (steps over the tolerance were rolled back and taken again,
    shorter) or ``none`` (a component cannot roll back: estimates only shaped the next step)."""
    rejected_steps: int = 0
    steps_over_tolerance: int = 0
    """Accepted steps whose error norm exceeded 1 (at ``min_step``, or without rollback)."""
    smallest_step: float = math.nan
    largest_step: float = math.nan
    """The shortest and longest accepted step under ``step_control: error`` (NaN under fixed steps)."""
    steps_without_estimate: int = 0
    """Accepted steps under ``step_control: error`` whose error norm was zero or not estimated (the first step, the
    first after an event, no coupled real input, inputs the extrapolation reproduces exactly): the estimate bounded
    nothing, so the next step grew to ``run.dt`` at most (see :mod:`.step_control`)."""
    event_delay: float = math.nan
    """The longest an event could be handled after its indicator crossed zero, in seconds: ``run.dt`` (or the
    longest step) at communication points, the step events are cut down to under error control with rollback
    (NaN without event indicators, and under the hybrid master, which locates them to ``time_tolerance``)."""

    @property
    def trial_steps_per_event(self) -> float:
        """Mean number of trial steps spent localizing one event."""
        return sum(self.event_trial_steps) / len(self.event_trial_steps) if self.event_trial_steps else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Scalar statistics (for storage as attributes)."""
        out = asdict(self)
        out.pop("event_trial_steps")
        out["trial_steps_per_event"] = self.trial_steps_per_event
        out["parallel_fraction"] = self.parallel_fraction
        return out

    @property
    def parallel_fraction(self) -> float:
        """Share of the plans' component-steps taken concurrently with others (0 with ``parallel`` off)."""
        return self.parallel_steps / self.plan_steps if self.plan_steps else 0.0


Pusher = Callable[[float], None] | None
Checkpoint = tuple[list[tuple[CoSimComponent, Any]], list[Any]]
"""Component snapshots and port values to roll back to (see :meth:`Master.checkpoint`)."""
Step = tuple[CoSimComponent, Pusher, list[tuple[Any, Any, float | None, float, bool]]]
"""A component, its input pusher and the ``(dst, src, scale, offset, line)`` links it reads before stepping
(``line``: as the line from the value at the step start, see :meth:`Master.stepping_plan`; ``scale`` ``None``:
copied as it is)."""


class StepCut(Exception):
    """Raised from inside a tentative step to take the step again from its start up to ``tick``.

    The hybrid master signals so when an FMU ends a trial step early
    (``fmi2Discard``): :meth:`Master.run` then advances again over the shorter
    interval, with everything rolled back to the step's start.
    """

    def __init__(self, tick: int) -> None:
        super().__init__(tick)
        self.tick = tick


def may_discard(comp: CoSimComponent) -> bool:
    """Whether *comp*'s ``do_step`` may end early with :class:`~cosimrun.errors.StepDiscarded`.

    FMU components declare it (``may_discard``); no other component ends a step early.
    """
    return comp.may_discard is True


def fixed_step_only(comp: CoSimComponent) -> bool:
    """Whether *comp* must always step by one step size (an FMU without variable communication step sizes)."""
    return comp.fixed_step_only is True


def cut_guard(plan: list[Step]) -> list[CoSimComponent]:
    """The components of *plan* a step must checkpoint so that it can be cut where an FMU ends it early.

    Those stepped before the last FMU that may discard, and that FMU itself when
    it reads fresh outputs of components stepped before it (Gauss-Seidel): it
    is stepped again with the inputs of the shorter step. Only those that can
    roll back; the others fail the run if a cut needs them back.
    """
    last = max((i for i, (c, _, _) in enumerate(plan) if may_discard(c)), default=-1)
    before = plan[:last + 1] if last >= 0 and plan[last][2] else plan[:max(last, 0)]
    return [c for c, _, _ in before if c.can_always_roll_back]


def thread_count(setting: Any) -> int | None:
    """How many components may step at once under the ``parallel`` setting *setting*; ``None`` if it is invalid.

    ``false``: 1 (serial); ``threads``: one per core (``os.cpu_count()``); an integer N >= 1: N (the main
    thread and N - 1 pool threads).
    """
    if setting is False:
        return 1
    if setting == "threads":
        return os.cpu_count() or 1
    if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        return setting
    return None


def step_serially(plan: list[Step], t: float, h: float) -> None:
    """Step every component of *plan* in order from *t* to *t + h*, reading its fresh links first (see
    :meth:`Master.stepping_plan`: the end value, or the line to it from the value at the step start)."""
    for comp, push, fresh in plan:
        for dst, src, scale, offset, line in fresh:
            if line:
                dst.derivatives = ((scale * src.value + offset - dst.value) / h,)
            elif scale is None:  # the identity: integers, booleans and strings stay what they are
                dst.value = src.value
            else:
                dst.value = scale * src.value + offset
        if push is not None:
            push(t)
        comp.do_step(t, h)


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
    sign_tolerance: float = 0.0
    """Indicator values within this distance of zero count as zero (on the surface): only for indicators
    with numerical noise around zero; events are located in time whatever it is."""
    max_micro_steps: int = 100
    """Most event iterations at one instant before the run stops (Zeno guard)."""
    parallel: bool | int | str = False
    """Step independent thread-safe components (FMUs) of one priority level concurrently: ``false``, ``threads``
    (one thread per core) or the number of threads N >= 1; results are bitwise those of serial stepping (see
    :mod:`cosimrun.masters.parallel`)."""

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
        if thread_count(self.parallel) is None:
            value, close = self.parallel, did_you_mean(str(self.parallel), ["threads"])
            raise ConfigError("parallel", f"{value!r} is not valid{suggest(str(value), ['threads'])} (valid: false, "
                                          "threads or an integer >= 1)", suggestion=close[0] if close else None)
        self.stats = self._new_stats()
        self.system: System | None = None
        self._stepper: ParallelStepper | None = None

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
        self._cut_events: dict[str, str] = {}
        """The event name to record at each FMU's latest cut: ``discard``, or the FMU's own (StepDiscarded.event)."""
        self.coupling_errors: list[CouplingError] = []
        """Estimated coupling error per coupled real input, after a run that completed its steps."""
        self._coupling: CouplingErrorEstimate | None = None
        self._ex_order = 0
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
        self._fixed = [c for c in self.order if fixed_step_only(c)]
        self._event_leavers = [c for c in self.order if c.leaves_events]
        self._stoppers = [c for c in self.order if c.may_request_stop]
        self.stopped: StopRequest | None = None
        """Set when a component asked to end the run: the run then ended normally at that instant."""
        self._step_open = False
        self._control: ErrorControl | None = None
        self._next_step = 0.0
        self._hints: Hints | None = None
        """Event hints drained while checking a controlled step for crossings, for handling its events."""
        self.step_log: StepLog | None = None
        """Every step tried under ``step_control: error`` (``None`` under fixed steps)."""
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
        assert self.system is not None
        self._lagging = [lk for lk in links if lk.dst.spec.type is PortType.REAL] if order > 0 else []
        self._ex_order = order
        self._ex_times = [t0]
        self._ex_values = [[lk.dst.value] for lk in self._lagging]
        components = self.system.components
        self._ex_taylor = [components[lk.connection.dst_component].interpolates_inputs for lk in self._lagging]

    def _extrapolate(self, t: float, h: float) -> None:
        """Give each lagging input the polynomial through its latest samples: as value and derivatives to a
        component that interpolates inputs, as its mean over the step to any other."""
        times = self._ex_times
        for lk, values, taylor in zip(self._lagging, self._ex_values, self._ex_taylor, strict=True):
            if taylor:
                lk.dst.value, lk.dst.derivatives = taylor_extrapolation(times, values)
            else:
                lk.dst.value = mean_extrapolation(times, values, t, h)

    def _sample_extrapolation(self, t: float) -> None:
        keep = self._ex_order + 1
        self._ex_times.append(t)
        del self._ex_times[:-keep]
        for lk, values in zip(self._lagging, self._ex_values, strict=True):
            values.append(lk.dst.value)
            del values[:-keep]

    # ------------------------------------------------------------------ stepping
    def stepping_plan(self, components: list[CoSimComponent], fresh: bool,
                      interpolate: bool = False) -> tuple[list[Step], list[Link]]:
        """What stepping *components* in order needs, and the links that lag.

        With *fresh*, each component first reads the links from components
        stepped before it (Gauss-Seidel); every other link lags, holding the
        value of the last exchange. With *interpolate*, a component that
        interpolates inputs gets a fresh input as the line from its value at the
        step start to the producer's at the step end, instead of the end value held.
        """
        assert self.system is not None
        position = {c.name: i for i, c in enumerate(components)}
        reads: dict[str, list[tuple[Any, Any, float | None, float, bool]]] = {c.name: [] for c in components}
        lagging = []
        for lk in self.system.links:
            src, dst = lk.connection.src_component, lk.connection.dst_component
            if fresh and src in position and dst in position and position[src] < position[dst]:
                consumer = components[position[dst]]
                line = interpolate and lk.dst.spec.type is PortType.REAL and consumer.interpolates_inputs
                scale = None if lk.conversion.is_identity and not line else lk.conversion.scale
                reads[dst].append((lk.dst, lk.src, scale, lk.conversion.offset, line))
            else:
                lagging.append(lk)
        return [(c, self.pushers[c.name], reads[c.name]) for c in components], lagging

    def step_all(self, plan: list[Step], t: float, h: float) -> None:
        """Step every component of *plan* from *t* to *t + h* (see :func:`step_serially`); with ``parallel`` on,
        independent components concurrently, with the same results (see :mod:`cosimrun.masters.parallel`)."""
        if self._stepper is None:
            step_serially(plan, t, h)
        else:
            self._stepper.step(plan, t, h)

    # ------------------------------------------------------------------ time loop
    def next_point(self, clock: Clock, a: int) -> int:
        """Next communication tick after *a*: grid (or the step error control proposes), components' max steps
        and time events, end.

        Stops closer together than ``clock.snap`` ticks (a rounding error of a float
        time) are merged, so no step is a residual of a few ulp: a grid point just
        after *a* is skipped, a time event just after *a* is ignored, and the end or
        a time event just after the chosen stop is taken instead of it. A component's
        ``max_step`` splits the step into equal parts no longer than the largest
        allowed step.
        """
        snap = clock.snap
        if self._control is None:
            grid = clock.next_grid(a)
            if grid - a <= snap:
                grid = clock.next_grid(grid)
        else:
            grid = a + max(snap + 1, round(self._next_step / clock.tick))
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
        if self._fixed and self._off_grid(clock, a, b):
            raise self._variable_step_error(self._fixed[0], clock.time(a), clock.time(b), self._cut_by(clock, a, b))
        return b

    def run(
        self, t0: float, tf: float, dt: float, recorder: Recorder, progress: Callable[[float], None] | None = None
    ) -> MasterStats:
        """Advance the (initialized) system from *t0* to *tf*, telling *recorder* every accepted sample.

        The first sample is the consistent state at *t0*; the recorder is
        flushed at the end, also when the run fails. A component that asks to
        stop ends the run at the instant it was accepted with (:attr:`stopped`).
        """
        clock = Clock(t0, dt, tf)
        self.clock = clock
        self.recorder = recorder
        a, end = 0, clock.end
        stride = max(1, end // 200)
        report = stride
        try:
            recorder.sample(t0)
            self._check_run(clock)
            self._start_parallel()
            self.begin(t0)
            self._start_coupling_estimate(t0)
            stoppers = self._stoppers
            self.stopped = None
            try:
                stop = bool(stoppers) and self._stop_at(t0)
                while a < end and not stop:
                    b = self.next_point(clock, a)
                    self._step_open = True
                    try:
                        a = self.advance(clock, a, b)
                    except StepCut as cut:
                        a = self._advance_cut(clock, a, cut)
                    self.stats.macro_steps += 1
                    stop = bool(stoppers) and self._stop_at(clock.time(a))
                    if progress is not None and a >= report:
                        report = a + stride
                        progress(clock.time(a))
            finally:
                self.finish()
        finally:
            self._stop_parallel()
            recorder.flush()
        if self._coupling is not None:
            self.coupling_errors = self._coupling.result()
        return self.stats

    def stop_pending(self) -> bool:
        """Whether a component asked to end the run at the current instant (see :meth:`_stop_at`)."""
        return any(c.stop_requested is not None for c in self._stoppers)

    def _stop_at(self, t: float) -> bool:
        """Whether a component asked to end the run at the accepted instant *t* (:attr:`stop_requested`): the
        run then ends there, normally, with :attr:`stopped` and a ``stop`` event of the component at *t*."""
        for comp in self._stoppers:
            reason = comp.stop_requested
            if reason is not None:
                self.stopped = StopRequest(t, comp.name, reason)
                self.recorder.event(t, 0, comp.name, STOP_EVENT)
                return True
        return False

    def _start_parallel(self) -> None:
        """Start the run's threads when ``parallel`` allows more than one (see :meth:`step_all`)."""
        threads = thread_count(self.parallel)
        if threads is not None and threads > 1:
            from cosimrun.masters.parallel import ParallelStepper

            self._stepper = ParallelStepper(threads, self.stats)

    def _stop_parallel(self) -> None:
        """Stop the run's threads and wait for them (at the end of every run, also one that failed)."""
        stepper, self._stepper = self._stepper, None
        if stepper is not None:
            stepper.close()

    def _start_coupling_estimate(self, t0: float) -> None:
        """Estimate the coupling error of every connection into a real input (see :mod:`.coupling_error`)."""
        assert self.system is not None
        real = [lk for lk in self.system.links if lk.dst.spec.type is PortType.REAL]
        self._coupling = CouplingErrorEstimate(real, self._coupling_kinds(real), self._ex_order) if real else None
        if self._coupling is not None:
            self.recorder.watch(self._coupling.take)

    def _coupling_kinds(self, links: list[Link]) -> list[str]:
        """How each of *links* reaches its consumer over a step (see :mod:`.coupling_error`): held here."""
        return ["held"] * len(links)

    def _advance_cut(self, clock: Clock, a: int, cut: StepCut) -> int:
        """Advance from *a* again, up to the tick of *cut* (and shorter again if another cut comes)."""
        while True:
            self._step_open = True
            try:
                return self.advance(clock, a, cut.tick)
            except StepCut as again:
                cut = again

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

    # ------------------------------------------------------------------ steps ended early (fmi2Discard)
    def _cut_step(
        self, plan: list[Step], t: float, t_end: float, exc: StepDiscarded, saved: Checkpoint | None,
        *, extrapolate: bool = False,
    ) -> tuple[int, float, str]:
        """Cut a step of *plan* from *t* to *t_end* at the last successful time of the FMU that discarded (*exc*).

        As FMI 2.0 describes, that instant becomes the communication point of
        every component of *plan*: the components stepped before the FMU are
        rolled back to *saved* (taken at *t*) and, like those not stepped yet,
        stepped from *t* to it (lagging inputs extrapolated again over the
        shorter step with *extrapolate*). The FMU stays where it stopped, unless
        it read fresh outputs of components rolled back (Gauss-Seidel) and is
        in *saved*: it is then stepped again with the others, from their
        outputs of the shorter step. Another FMU that discards on the way cuts
        the step again (the first is then rolled back too, and takes up its own
        discard in a later step). Returns the tick and time reached and the
        name of the FMU whose last successful time that is; a component that
        would have to roll back and cannot, or one that only takes fixed steps,
        ends the run with one line saying why (see :func:`cut_guard`).
        """
        snaps = {id(c): snap for c, snap in saved[0]} if saved is not None else {}
        rest, moved_before, reached = plan, [], t_end
        while True:
            k = self._discarder([c for c, _, _ in rest], exc)
            fmu, fresh, target = rest[k][0], rest[k][2], exc.last_successful_time
            moved = [*moved_before, *(c for c, _, _ in rest[:k])]
            tick = self._check_cut(fmu, exc, reached, moved, snaps)
            stays = not (moved and fresh and id(fmu) in snaps)
            back = moved if stays else [*moved, fmu]
            if back:
                assert saved is not None
                for comp in back:
                    try:
                        comp.restore_state(snaps[id(comp)], t)
                    except (ValueError, NotImplementedError) as err:
                        raise self._cut_error(fmu, exc, reached, f"component {comp.name!r} cannot roll back to "
                                                                 f"t={t:.12g} ({err})") from exc
                for port, value in zip(self._ports, saved[1], strict=True):
                    port.value = value
                if stays:
                    fmu.refresh_outputs(target)
                self.stats.rollbacks += 1
            if extrapolate and self._lagging:
                self._extrapolate(t, target - t)
            rest = [step for step in plan if step[0] is not fmu] if stays else plan
            try:
                self.step_all(rest, t, target - t)
                return tick, target, fmu.name
            except StepDiscarded as again:
                exc, moved_before, reached = again, [fmu] if stays else [], target

    @staticmethod
    def _discarder(components: list[CoSimComponent], exc: StepDiscarded) -> int:
        """Position among *components* of the FMU that raised *exc*; one not among them fails the run."""
        for i, comp in enumerate(components):
            if comp.name == exc.component and may_discard(comp):
                return i
        raise FMUError(f"{exc}; the run cannot continue: cosimrun makes an FMU's last successful time the "
                       "communication point only for FMU components of the system itself (not one inside a "
                       "multi-model component)", component=exc.component, time=exc.time) from exc

    def _check_cut(self, fmu: CoSimComponent, exc: StepDiscarded, reached: float, moved: list[CoSimComponent],
                   snaps: dict[int, Any]) -> int:
        """The tick of *exc*'s last successful time, if every component can be brought there; else fail the run."""
        target = exc.last_successful_time
        self._cut_events[fmu.name] = exc.event or DISCARD_EVENT
        for comp in moved:
            if id(comp) not in snaps:
                raise self._cut_error(fmu, exc, reached, (
                    f"component {comp.name!r} was already stepped to t={reached:.12g} and cannot roll back "
                    f"(supports_rollback is False) to be stepped to t={target:.12g} with the others"))
        for comp in self._fixed:
            if comp is fmu:  # already there: a fixed-step FMU cuts a step only to end the run (stop_requested)
                continue
            raise self._cut_error(fmu, exc, reached, (
                f"FMU component {comp.name!r} cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}), "
                f"so it cannot be stepped to t={target:.12g} with the others"))
        clock = self.clock
        tick = clock.mark(target)
        if tick <= clock.ticks(exc.time):
            raise self._cut_error(fmu, exc, reached, "that is the step's start to the clock's resolution")
        return tick

    @staticmethod
    def _cut_error(fmu: CoSimComponent, exc: StepDiscarded, end: float, why: str) -> FMUError:
        """The one-line failure of a step that cannot be cut at *exc*'s last successful time."""
        return FMUError(
            f"FMU component {fmu.name!r} ended the step from t={exc.time:.12g} to {end:.12g} early at "
            f"t={exc.last_successful_time:.12g} (fmi2Discard, its last successful time); the run cannot continue: "
            f"{why}", component=fmu.name, time=exc.time)

    def _end_events(self, t: float, discarded: str | None) -> None:
        """After the sample at the accepted instant *t*: record the cut by the FMU named *discarded* (if the step
        was cut at its last successful time: a ``discard`` event, or the FMU's own, an FMI 3 ``early_return``),
        then handle the events components ended their steps on
        (:attr:`~cosimrun.core.component.CoSimComponent.pending_event`): each is recorded at micro 0 (that of
        the FMU named *discarded* already is), handled, and the sample after them is taken at micro 1."""
        if discarded is not None:
            self.recorder.event(t, 0, discarded, self._cut_events.get(discarded, DISCARD_EVENT))
            self.stats.discards += 1
        pending = [(c, c.pending_event) for c in self._event_leavers if c.pending_event is not None]
        if not pending:
            return
        for comp, event in pending:
            if comp.name != discarded:
                self.recorder.event(t, 0, comp.name, event)
                self.stats.events += 1
            comp.handle_event([event], t, 1)
        self.settle(t)
        self.recorder.sample(t, 1)

    def check_run(self, t0: float, tf: float, dt: float) -> None:
        """Refuse, before the run, a run from *t0* to *tf* by *dt* that this (set-up) master cannot take with this
        system: a :class:`ConfigError` keyed by the master setting at fault, if any (:meth:`run` checks the same
        before its first step)."""
        self._check_run(Clock(t0, dt, tf))

    def _check_run(self, clock: Clock) -> None:
        """:meth:`check_run` on the run's *clock*."""
        self._check_fixed_steps(clock)

    # ------------------------------------------------------------------ FMUs that take fixed steps only
    def _check_fixed_steps(self, clock: Clock) -> None:
        """Refuse, before the first step, a run that would certainly step a fixed-step FMU by another step size.

        Such an FMU (``canHandleVariableCommunicationStepSize`` false) steps by
        ``run.dt`` only: the end time must be on the grid and no component may
        split the steps (``max_step``). Whatever else would cut a step (a time
        event, a state event the master locates, another FMU's discard) fails
        the run at that moment (:meth:`_variable_step_error`).
        """
        if not self._fixed:
            return
        head = (f"FMU component {self._fixed[0].name!r} cannot handle variable communication step sizes "
                f"({VARIABLE_STEP_FLAG}), so every step must be run.dt={clock.dt:.12g}")
        if self._off_grid(clock, clock.end - clock.resolution, clock.end):
            t_end = clock.time(clock.end)
            last = t_end - clock.time(clock.grid_index(clock.end) * clock.resolution)
            raise ConfigError(None, f"{head}, but run.tf={t_end:.12g} is not on the grid run.t0 + k*run.dt (the last "
                                    f"step would be {last:.6g}); choose run.tf on the grid")
        for comp in self.order:
            if comp.max_step is not None and comp.max_step < clock.dt * (1.0 - 1e-9):
                raise ConfigError(None, f"{head}, but component {comp.name!r} steps by at most "
                                        f"max_step={comp.max_step:.12g}; choose run.dt <= {comp.max_step:.12g}")

    @staticmethod
    def _off_grid(clock: Clock, a: int, b: int) -> bool:
        """Whether the step between ticks *a* and *b* is not one grid interval (to one tick)."""
        res = clock.resolution
        r = a % res
        return min(r, res - r) > 1 or abs(b - a - res) > 1

    def _cut_by(self, clock: Clock, a: int, b: int) -> str:
        """What makes the step from tick *a* end at *b* (for :meth:`_variable_step_error`)."""
        t = clock.time(a)
        for comp in self._timed:
            te = comp.next_time_event(t)
            if te is not None and abs(clock.ticks(te) - b) <= clock.snap:
                return f"the time event of component {comp.name!r} at t={te:.12g}"
        return "the master's step schedule"

    def _require_fixed_step(self, components: list[CoSimComponent], t: float, t1: float, why: str) -> None:
        """Fail the run if stepping *components* from *t* to *t1* is not a grid step for a fixed-step FMU among them."""
        clock = self.clock
        fixed = [c for c in components if fixed_step_only(c)]
        if fixed and self._off_grid(clock, clock.ticks(t), clock.ticks(t1)):
            raise self._variable_step_error(fixed[0], t, t1, why)

    def _variable_step_error(self, comp: CoSimComponent, t: float, t1: float, why: str) -> FMUError:
        """The one-line failure of a step from *t* to *t1* that fixed-step FMU *comp* cannot take (*why*: the cause)."""
        name = comp.name
        return FMUError(
            f"FMU component {name!r} cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}) and "
            f"steps by run.dt={self.clock.dt:.12g} only, but {why} would step it from t={t:.12g} to {t1:.12g}",
            component=name, time=t)

    def advance(self, clock: Clock, a: int, b: int) -> int:
        """Advance from tick *a* towards *b*; return the tick reached."""
        raise NotImplementedError


@dataclass
class ExplicitMaster(Master):
    """Non-iterative masters: one pass over the components per macro step.

    ``extrapolation`` (0, 1 or 2) replaces each lagging real input by the
    polynomial through its latest 1, 2 or 3 communication-point values: a
    component that interpolates inputs (ODE, DAE and equation components)
    evaluates it inside its integrator, any other gets its mean over the step.
    The global coupling error is then of order ``p + 1`` in ``dt`` (held
    inputs: order ``p + 1`` for ``p <= 1``). With ``extrapolation >= 1`` under
    Gauss-Seidel, a fresh input is the line from its value at the step start to
    the producer's at the step end (order 2) instead of the end value held.

    ``step_control: error`` chooses each communication step from the coupling
    error estimated over the last one (``rtol``, ``atol``, ``min_step``,
    ``max_step``; the first step is ``rtol * run.dt``; without evidence of the
    estimate, and while components have event indicators, steps stay within
    ``run.dt``; see :mod:`.step_control`).
    """

    extrapolation: int = 0
    step_control: str = "fixed"
    """``fixed`` (every step ``run.dt``) or ``error`` (steps chosen from the estimated coupling error)."""
    rtol: float = 1e-4
    """Under ``step_control: error``: relative tolerance of each input's local coupling error (to its magnitude)."""
    atol: float = 1e-8
    """Under ``step_control: error``: absolute tolerance of each input's local coupling error, in its unit."""
    min_step: float | None = None
    """Under ``step_control: error``: the shortest step (default ``1e-6 * run.dt``); a step this short stands
    whatever its error."""
    max_step: float | None = None
    """Under ``step_control: error``: the longest step (default: the whole run; ``run.dt`` at most while components
    have event indicators)."""

    fresh_outputs: ClassVar[bool] = False
    """Whether a component reads the outputs of components stepped before it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_choice("extrapolation", self.extrapolation, (0, 1, 2))
        self._check_choice("step_control", self.step_control, STEP_CONTROLS)
        for key in ("rtol", "atol"):
            value = getattr(self, key)
            self._check(key, isinstance(value, int | float) and math.isfinite(value) and value >= 0, "must be >= 0")
        self._check("rtol", self.rtol > 0 or self.atol > 0, "and atol must not both be 0")
        for key in ("min_step", "max_step"):
            value = getattr(self, key)
            self._check(key, value is None or (isinstance(value, int | float) and math.isfinite(value) and value > 0),
                        "must be a positive number (or null for its default)")
        if self.min_step is not None and self.max_step is not None:
            self._check("min_step", self.min_step <= self.max_step, f"must not exceed max_step={self.max_step!r}")

    def begin(self, t0: float) -> None:
        self._plan, lagging = self.stepping_plan(self._step_order(), self.fresh_outputs,
                                                 interpolate=self.extrapolation >= 1)
        self._guarded = cut_guard(self._plan)
        self._start_extrapolation(self.extrapolation, lagging, t0)
        sources = [c for c in self.order if c.has_state_events]
        lateness = UNLOCATED_NOTICE
        self.stats.event_delay = self.clock.dt if sources else math.nan
        if self.step_control == "error":
            lateness = self._start_error_control(t0, bool(sources))
        self._events = StateEvents(self, sources) if sources else None
        if self._events is not None:
            notice_unlocated(sources, lateness)
            probing = all(c.can_always_roll_back and not fixed_step_only(c) for c in sources)
            self._probe_plan = self.stepping_plan(sources, fresh=False)[0] if probing else None
            self._probe_guarded = cut_guard(self._probe_plan) if probing else []
            self._depart(t0, self._events.indicators(), self.clock.dt)

    def _step_order(self) -> list[CoSimComponent]:
        """The order components step in: the priority order, with fresh outputs (Gauss-Seidel).

        Without them (Jacobi) every component steps from the last exchange, so
        the order changes no result: FMUs that may end a step early go first,
        and nothing stepped before one of them needs a checkpoint (only FMUs
        stepped before a second such FMU).
        """
        if self.fresh_outputs:
            return list(self.order)
        return sorted(self.order, key=lambda c: not may_discard(c))

    def advance(self, clock: Clock, a: int, b: int) -> int:
        if self._control is not None:
            return self._advance_controlled(clock, a, b)
        t = clock.time(a)
        saved = self.checkpoint(self._guarded) if self._guarded else None
        b, t1, discarded = self._step_to(t, clock.time(b), b, saved)
        self._close_step(t1, t1 - t, discarded)
        if self._lagging:
            self._sample_extrapolation(t1)
        return b

    def _step_to(self, t: float, t1: float, b: int, saved: Checkpoint | None) -> tuple[int, float, str | None]:
        """Step the plan from *t* to *t1* (tick *b*) and exchange there; cut short where an FMU ends it early."""
        h = t1 - t
        if self._lagging:
            self._extrapolate(t, h)
        discarded = None
        try:
            self.step_all(self._plan, t, h)
        except StepDiscarded as exc:
            b, t1, discarded = self._cut_step(self._plan, t, t1, exc, saved, extrapolate=True)
        self._exchange_at(t1)
        return b, t1, discarded

    # ------------------------------------------------------------------ error-controlled steps
    def _check_run(self, clock: Clock) -> None:
        super()._check_run(clock)
        if self.step_control == "error" and self._fixed:
            raise ConfigError("step_control", (
                f"'error' cannot be used: FMU component {self._fixed[0].name!r} cannot handle variable "
                f"communication step sizes ({VARIABLE_STEP_FLAG}); use step_control=fixed"))

    def _start_error_control(self, t0: float, events: bool) -> str:
        """Set up ``step_control: error`` at *t0* (see :mod:`.step_control`); *events*: whether components have
        event indicators. Returns the notice on how late events are handled.

        Without rollback, and always while components have event indicators, no step is longer than
        ``run.dt``; with rollback a step in which an indicator crosses zero is taken again up to just before
        the crossing, so that the step the event is handled at is at most the first step's length (see
        :meth:`_advance_controlled`). Components keep their internal steps as at ``run.dt``
        (:meth:`~cosimrun.core.component.CoSimComponent.bound_internal_steps`).
        """
        assert self.system is not None
        clock = self.clock
        span = clock.time(clock.end) - t0
        min_step = self.min_step if self.min_step is not None else 1e-6 * clock.dt
        max_step = self.max_step if self.max_step is not None else max(span, clock.dt)
        blind = min(max_step, max(min_step, clock.dt))
        if events:
            max_step = blind
        real = [lk for lk in self.system.links if lk.dst.spec.type is PortType.REAL]
        if not real:
            notice(f"step control has no coupled real input to estimate an error from; steps are limited to "
                   f"{blind:.3g} s ({'run.dt' if blind == clock.dt else 'max_step'})", stacklevel=4)
        self._control = ErrorControl(real, self._coupling_kinds(real), self._ex_order, rtol=self.rtol,
                                     atol=self.atol, min_step=min_step, max_step=max_step, blind_step=blind)
        self._control.start(t0)
        self._first_step = min(max_step, max(min_step, self.rtol * clock.dt if self.rtol > 0 else clock.dt))
        self._next_step = self._first_step
        self._event_step = max(self._first_step, (clock.snap + 1) * clock.tick)
        """The longest step an event is handled at, with rollback: the first step, or the clock's shortest."""
        self._rejects = all(c.can_always_roll_back for c in self.order)
        self.step_log = self._control.log
        self.stats.step_control = "error"
        self.stats.step_rejection = "rollback" if self._rejects else "none"
        for comp in self.order:
            comp.bound_internal_steps(clock.dt)
        if self._rejects:
            self.hold_mode_switches(True)
            self.switch_modes(t0)
            self.stats.event_delay = self._event_step if events else math.nan
            return SHORTENED_NOTICE.format(resolution=self._event_step)
        self.stats.event_delay = blind if events else math.nan
        return CAPPED_NOTICE.format(limit=blind)

    def _advance_controlled(self, clock: Clock, a: int, b: int) -> int:
        """One accepted step from *a* towards *b* under error control: steps whose error norm exceeds 1 are
        rolled back and taken again, shorter, while every component can roll back.

        With rollback, a step longer than the first step in which an event indicator crosses zero (seen at its
        end or reported inside it by a component's integrator) is rolled back too and taken again up to half a
        first step before the crossing's estimated instant (at most 0.9 of it); the step after that is at most
        one first step past that instant. The step the event is handled at is thus at most a first step long,
        and the controller starts again after it.
        """
        control = self._control
        assert control is not None
        t = clock.time(a)
        rejects = self._rejects
        events = self._events if rejects else None
        resolution = self._event_step
        due = None
        while True:
            t1 = clock.time(b)
            saved = self.checkpoint(self.order) if rejects else (
                self.checkpoint(self._guarded) if self._guarded else None)
            b, t1, discarded = self._step_to(t, t1, b, saved)
            h = t1 - t
            norm = control.estimate(t1)
            shortest = b - a <= clock.snap + 1  # the clock cannot take it shorter
            crossing = None
            if events is not None:
                self._hints = events.drain_hints(events.sources)
                if h > resolution * (1.0 + 1e-9) and discarded is None and not shortest:
                    crossing = events.earliest_crossing(t, t1, self._hints)
            accepted = crossing is None and (not norm > 1.0 or not rejects or discarded is not None or shortest
                                             or h <= control.min_step * (1.0 + 1e-9))
            control.log.append(t, h, norm, accepted)
            if accepted:
                break
            assert saved is not None
            self.roll_back(saved, t)
            self.stats.rejected_steps += 1
            if crossing is not None:
                due = crossing + 0.5 * resolution
                shorter = min(0.9 * h, max(crossing - t - 0.5 * resolution, resolution))
            else:
                shorter = control.next_step(h, norm, accepted=False)
            b = a + max(clock.snap + 1, min(b - a - 1, round(shorter / clock.tick)))
        if norm > 1.0:
            self.stats.steps_over_tolerance += 1
        stats = self.stats
        stats.smallest_step = h if not stats.smallest_step <= h else stats.smallest_step
        stats.largest_step = h if not stats.largest_step >= h else stats.largest_step
        if not norm > 0.0:
            stats.steps_without_estimate += 1
        self._next_step = control.next_step(h, norm, accepted=True)
        if due is not None:
            self._next_step = min(self._next_step, max(due - t1, resolution))
        before = stats.events
        self._close_step(t1, h, discarded)
        if rejects:
            self.switch_modes(t1)
        if stats.events > before:
            control.restart(t1)
            self._next_step = self._first_step
        else:
            control.accept(t1)
        if self._lagging:
            self._sample_extrapolation(t1)
        return b

    def finish(self) -> None:
        super().finish()
        if self._control is not None:
            for comp in self.order:
                comp.bound_internal_steps(None)
            if self._rejects:
                self.hold_mode_switches(False)

    def _end_step(self, t1: float, h: float, discarded: str | None) -> None:
        """After the components stepped to *t1* (by *h*): exchange, record the sample, note a discard by the FMU
        named *discarded*, handle the events seen over the step."""
        self._exchange_at(t1)
        self._close_step(t1, h, discarded)

    def _exchange_at(self, t1: float) -> None:
        """Exchange the outputs at *t1* and re-evaluate direct feedthrough and loops there."""
        self.exchange()
        if self._resolution:
            self.resolve(t1)

    def _close_step(self, t1: float, h: float, discarded: str | None) -> None:
        """Record the accepted sample at *t1*, note a discard by the FMU named *discarded*, handle the events seen
        over the step (of length *h*)."""
        self.recorder.sample(t1)
        if discarded is not None or self._event_leavers:
            self._end_events(t1, discarded)
        if self._events is not None:
            self._handle_events(t1, h)

    def _coupling_kinds(self, links: list[Link]) -> list[str]:
        """Fresh inputs: ``line`` or ``held`` (their end value); lagging ones: ``taylor``/``mean`` when
        extrapolated, else ``held``."""
        fresh = {id(entry[0]): entry[4] for _, _, reads in self._plan for entry in reads}
        taylor = {id(lk.dst): use for lk, use in zip(self._lagging, self._ex_taylor, strict=True)}
        kinds = []
        for lk in links:
            key = id(lk.dst)
            if key in fresh:
                kinds.append("line" if fresh[key] else "held")
            elif key in taylor:
                kinds.append("taylor" if taylor[key] else "mean")
            else:
                kinds.append("held")
        return kinds

    def _handle_events(self, t: float, h: float) -> None:
        """Handle the events whose indicators crossed over the step of length *h* ending at *t*.

        Modes may switch after the events; the indicators are then re-armed
        with the side each departs towards (see :meth:`StateEvents.depart`), so
        that leaving and crossing back within the next step is still seen.
        """
        events = self._events
        assert events is not None
        hints, self._hints = self._hints, None
        g_ref = events.reference(events.drain_hints(events.sources) if hints is None else hints)
        g = events.indicators()
        crossings = events.crossings(g_ref, g)
        if crossings:
            g = events.handle(t, crossings)
        if self.switch_modes(t):
            g = events.indicators()
        if crossings:
            self._depart(t, g, h)
        else:
            events.arm(g)

    def _depart(self, t: float, g: Indicators, h: float) -> None:
        """Re-arm the indicators at *t*, probing over ``PROBE_FRACTION * h`` when the sources can roll back."""
        assert self._events is not None
        trial = None if self._probe_plan is None else (lambda t1: self._probe_step(t, t1))
        self._events.depart(t, g, self._events.sources, trial, PROBE_FRACTION * h, h, h)

    def _probe_step(self, t: float, t1: float) -> Indicators:
        """Step the event sources from *t* to *t1* for a probe (cut short where an FMU ends it early)."""
        assert self._events is not None
        saved = self.checkpoint(self._probe_guarded) if self._probe_guarded else None
        try:
            self.step_all(self._probe_plan, t, t1 - t)
        except StepDiscarded as exc:
            self._cut_step(self._probe_plan, t, t1, exc, saved)
        return self._events.indicators()
