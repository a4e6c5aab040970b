"""A system compiled for a run: links as port pairs, input pushing, re-evaluation, stepping plans, checkpoints.

:class:`Schedule` is built once per run from a
:class:`~cosimrun.system.System` whose graph was analysed: links become
``(dst, src)`` port pairs with their unit scale and offset, components that
need ``set_inputs`` calls are marked, and the re-evaluation schedule of
direct-feedthrough components and algebraic loops is fixed. A step then only
moves plain numbers. A *stepping plan* (:meth:`Schedule.stepping_plan`) says
what stepping components in one order needs (:data:`Step`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortType
from cosimrun.core.switching import ModeSwitching
from cosimrun.masters.loops import LoopSettings, LoopSolver

if TYPE_CHECKING:
    from cosimrun.masters.stats import MasterStats
    from cosimrun.system.connection import Link
    from cosimrun.system.system import System

Pusher = Callable[[float], None] | None
Checkpoint = tuple[list[tuple[CoSimComponent, Any]], list[Any]]
"""Component snapshots and port values to roll back to (see :meth:`Schedule.checkpoint`)."""
Step = tuple[CoSimComponent, Pusher, list[tuple[Any, Any, float | None, float, bool]]]
"""A component, its input pusher and the ``(dst, src, scale, offset, line)`` links it reads before stepping
(``line``: as the line from the value at the step start, see :meth:`Schedule.stepping_plan`; ``scale``
``None``: copied as it is)."""


def may_discard(comp: CoSimComponent) -> bool:
    """Whether *comp*'s ``do_step`` may end early with :class:`~cosimrun.errors.StepEndedEarly` (it declares
    ``may_discard``)."""
    return comp.may_discard is True


def fixed_step_only(comp: CoSimComponent) -> bool:
    """Whether *comp* must always step by one step size (``fixed_step_only``, why: ``fixed_step_reason``)."""
    return comp.fixed_step_only is True


def cut_guard(plan: list[Step]) -> list[CoSimComponent]:
    """The components of *plan* a step must checkpoint so that it can be cut where a component ends it early.

    Those stepped before the last component that may end its step early, and
    that component itself when it reads fresh outputs of components stepped
    before it (Gauss-Seidel): it is stepped again with the inputs of the
    shorter step. Only those that can roll back; the others fail the run if a
    cut needs them back.
    """
    last = max((i for i, (c, _, _) in enumerate(plan) if may_discard(c)), default=-1)
    before = plan[:last + 1] if last >= 0 and plan[last][2] else plan[:max(last, 0)]
    return [c for c, _, _ in before if c.can_always_roll_back]


def step_serially(plan: list[Step], t: float, h: float) -> None:
    """Step every component of *plan* in order from *t* to *t + h*, reading its fresh links first (see
    :meth:`Schedule.stepping_plan`: the end value, or the line to it from the value at the step start)."""
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


def _resolve(resolution: list[tuple[Callable[[float], None], list[Link]]], t: float) -> None:
    """Run each re-evaluation or loop solve of *resolution* at *t*, passing its outputs on after it."""
    for run, outward in resolution:
        run(t)
        for lk in outward:
            lk.transfer()


class Schedule:
    """A system's links, input pushing and re-evaluation schedule, compiled for one run.

    *stats* counts the rollbacks (and, through the loop solvers, the loop
    solves) of the run; *loops* are the loop settings of the master.
    """

    def __init__(self, system: System, loops: LoopSettings, stats: MasterStats) -> None:
        assert system.analysis is not None
        self.system = system
        self.stats = stats
        comps = system.components
        self.order: list[CoSimComponent] = [comps[n] for n in system.analysis.order]
        self.pushers: dict[str, Pusher] = {n: input_pusher(c) for n, c in comps.items()}
        link_of = {link.connection: link for link in system.links}
        self._identity = [(lk.dst, lk.src) for lk in system.links if lk.conversion.is_identity]
        self._scaled = [(lk.dst, lk.src, lk.conversion.scale, lk.conversion.offset)
                        for lk in system.links if not lk.conversion.is_identity]
        self._pushed = [p for p in self.pushers.values() if p is not None]
        links_from: dict[str, list[Link]] = {n: [] for n in comps}
        for lk in system.links:
            links_from[lk.connection.src_component].append(lk)
        self.resolution: list[tuple[Callable[[float], None], list[Link]]] = []
        self.initial_resolution: list[tuple[Callable[[float], None], list[Link]]] = []
        """:attr:`resolution` with each loop found from its start guesses (:meth:`LoopSolver.solve_initial`), while
        the components initialize (not counted in the statistics)."""
        self.start_resolution: list[tuple[Callable[[float], None], list[Link]]] = []
        """:attr:`resolution` with each loop solved as by :attr:`initial_resolution` (counted): at *t0*, once the
        components initialized, from the consistent point (where a loop that fixed point diverges on would fail
        on rounding errors under the master's solver)."""
        late: list[CoSimComponent] = []
        for item in system.analysis.resolution:
            if isinstance(item, str):
                comp = comps[item]
                self.resolution.append((self.evaluator(comp), links_from[item]))
                self.initial_resolution.append(self.resolution[-1])
                self.start_resolution.append(self.resolution[-1])
                late.append(comp)
            else:
                evaluators = {n: self.evaluator(comps[n]) for n in item.components}
                solver = LoopSolver(item, link_of, evaluators, loops, stats)
                members = set(item.components)
                outward = [lk for n in item.components for lk in links_from[n]
                           if lk.connection.dst_component not in members or lk.connection in solver.tear_set]
                self.resolution.append((solver.solve, outward))
                self.initial_resolution.append((functools.partial(solver.solve_initial, counted=False), outward))
                self.start_resolution.append((solver.solve_initial, outward))
                late.extend(comps[n] for n in item.components)
        self.late = list(dict.fromkeys(late))
        """Components re-evaluated at a communication point (direct feedthrough, loops), in that order."""
        self.ports = [p for c in comps.values() for p in (*c.inputs.values(), *c.outputs.values())]
        self.switchers = [c for c in comps.values() if isinstance(c, ModeSwitching)]
        self.real_links = [lk for lk in system.links if lk.dst.spec.type is PortType.REAL]
        """The links into real inputs: those whose coupling error is estimated (and controlled)."""

    def evaluator(self, comp: CoSimComponent) -> Callable[[float], None]:
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
        """Exchange, then re-evaluate direct feedthrough and solve loops at *t* (after a step or a discontinuity)."""
        self.exchange()
        if self.resolution:
            self.resolve(t)

    def push_all(self, t: float) -> None:
        """Push input port values into components that take inputs through ``set_inputs``."""
        for push in self._pushed:
            push(t)

    def resolve(self, t: float) -> None:
        """Re-evaluate direct-feedthrough outputs and solve algebraic loops at *t*."""
        _resolve(self.resolution, t)

    def initialize_outputs(self, t0: float) -> None:
        """Make inputs and outputs consistent at *t0*, the components still initializing (coupled initialization).

        With algebraic loops, every output is passed on and every loop solved while the components are in their
        initialization phase (FMUs in Initialization Mode together), the tear inputs' values (initial values, else
        start values) the start guesses; an unsolvable loop is an
        :class:`~cosimrun.errors.InitializationError`. Then every component leaves that phase and the outputs are
        passed on and re-evaluated again, as after every step. Without loops the components leave it first, so
        that they initialize with the inputs they start with, as they would alone.
        """
        tears = {c for loop in self.system.analysis.loops for c in loop.tears}
        if tears:
            self._transfer_except(tears)
            _resolve(self.initial_resolution, t0)
        for comp in self.system.components.values():
            comp.exit_initialization(t0)
        self._transfer_except(tears)
        _resolve(self.start_resolution if tears else self.resolution, t0)
        self.push_all(t0)

    def _transfer_except(self, tears: set[Any]) -> None:
        """Pass every output on to the inputs it drives, except over the connections *tears*."""
        for lk in self.system.links:
            if lk.connection not in tears:
                lk.transfer()

    # ------------------------------------------------------------------ stepping plans
    def stepping_plan(self, components: list[CoSimComponent], fresh: bool,
                      interpolate: bool = False) -> tuple[list[Step], list[Link]]:
        """What stepping *components* in order needs, and the links that lag.

        With *fresh*, each component first reads the links from components
        stepped before it (Gauss-Seidel); every other link lags, holding the
        value of the last exchange. With *interpolate*, a component that
        interpolates inputs gets a fresh input as the line from its value at the
        step start to the producer's at the step end, instead of the end value held.
        """
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

    # ------------------------------------------------------------------ rollback and mode switches
    def checkpoint(self, components: list[CoSimComponent]) -> Checkpoint:
        """Snapshots of *components* plus every port value of the system."""
        return [(c, c.snapshot_state()) for c in components], [p.value for p in self.ports]

    def roll_back(self, checkpoint: Checkpoint, t: float) -> None:
        """Return the components and ports to *checkpoint*, taken at time *t*."""
        snaps, values = checkpoint
        for comp, snap in snaps:
            comp.restore_state(snap, t)
        self.restore_ports(values)
        self.stats.rollbacks += 1

    def restore_ports(self, values: list[Any]) -> None:
        """Give every port of the system its value in *values* (a checkpoint's)."""
        for port, value in zip(self.ports, values, strict=True):
            port.value = value

    def hold_mode_switches(self, hold: bool) -> None:
        """Stop (or allow again) multi-model components switching inside their steps.

        Masters that step tentatively switch modes only at accepted points,
        through :meth:`switch_modes`, so snapshots stay valid.
        """
        for comp in self.switchers:
            comp.hold_mode_switches(hold)

    def switch_modes(self, t: float) -> bool:
        """Let multi-model components switch at the accepted point *t*; re-exchange if any did."""
        switched = False
        for comp in self.switchers:
            switched = comp.apply_mode_switch(t) or switched
        if switched:
            self.settle(t)
        return switched
