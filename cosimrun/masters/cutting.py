"""Steps ended early, and components that take one step size only: where a run's steps are cut, or cannot be.

A component that ends its step early raises
:class:`~cosimrun.errors.StepEndedEarly` with the instant it ``reached``; the
master makes that instant the communication point of every component
(:meth:`StepCutter.cut`). A component that declares ``fixed_step_only`` (its
``fixed_step_reason`` says why) must always step by the run's step ``dt``: a
run that would certainly cut its steps is refused before it starts
(:func:`refuse_fixed_steps`), one that would cut them on the way fails there
(:meth:`StepCutter.require_fixed_step`, :func:`variable_step_error`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ConfigError, SimulationError, StepEndedEarly
from cosimrun.masters.plan import Checkpoint, Step, fixed_step_only, may_discard

if TYPE_CHECKING:
    from cosimrun.masters.plan import Schedule
    from cosimrun.masters.stepsize import Clock

DISCARD_EVENT = "discard"
"""The event recorded where a component ended a step early and the step was cut there (unless it names its own)."""


class StepCut(Exception):
    """Raised from inside a tentative step to take the step again from its start up to ``tick``.

    The hybrid master signals so when a component ends a trial step early:
    :meth:`~cosimrun.masters.base.MasterRun.run` then advances again over the
    shorter interval, with everything rolled back to the step's start.
    """

    def __init__(self, tick: int) -> None:
        super().__init__(tick)
        self.tick = tick


def off_grid(clock: Clock, a: int, b: int) -> bool:
    """Whether the step between ticks *a* and *b* is not one grid interval (to one tick)."""
    res = clock.resolution
    r = a % res
    return min(r, res - r) > 1 or abs(b - a - res) > 1


def _fixed_head(comp: CoSimComponent) -> str:
    return f"component {comp.name!r} cannot handle variable communication step sizes ({comp.fixed_step_reason})"


def refuse_fixed_steps(fixed: list[CoSimComponent], order: list[CoSimComponent], clock: Clock) -> None:
    """Refuse, before the first step, a run that would certainly step a component of *fixed* by another step size.

    Such a component steps by ``dt`` only: the end time must be on the grid and
    no component of *order* may split the steps (``max_step``). Whatever else
    would cut a step (a time event, a state event the master locates, another
    component's early end) fails the run at that moment.
    """
    if not fixed:
        return
    head = f"{_fixed_head(fixed[0])}, so every step must be dt={clock.dt:.12g}"
    if off_grid(clock, clock.end - clock.resolution, clock.end):
        t_end = clock.time(clock.end)
        last = t_end - clock.time(clock.grid_index(clock.end) * clock.resolution)
        raise ConfigError(None, f"{head}, but tf={t_end:.12g} is not on the grid t0 + k*dt (the last step would be "
                                f"{last:.6g}); choose tf on the grid")
    for comp in order:
        if comp.max_step is not None and comp.max_step < clock.dt * (1.0 - 1e-9):
            raise ConfigError(None, f"{head}, but component {comp.name!r} steps by at most "
                                    f"max_step={comp.max_step:.12g}; choose dt <= {comp.max_step:.12g}")


def variable_step_error(comp: CoSimComponent, clock: Clock, t: float, t1: float, why: str) -> SimulationError:
    """The one-line failure of a step from *t* to *t1* that fixed-step *comp* cannot take (*why*: the cause)."""
    return SimulationError(f"{_fixed_head(comp)} and steps by dt={clock.dt:.12g} only, but {why} would step it from "
                           f"t={t:.12g} to {t1:.12g}", component=comp.name, time=t)


class StepCutter:
    """Cuts a run's steps where a component ended one early, or fails the run saying why it cannot.

    *schedule* restores ports and counts rollbacks, *clock* is the run's,
    *step* steps a plan (serially or in parallel), *extrapolate* gives the
    lagging inputs their extrapolation over a shorter step (``None``: none
    lag). :attr:`events` holds the event to record at each component's latest
    cut.
    """

    def __init__(self, schedule: Schedule, clock: Clock, step: Callable[[list[Step], float, float], None],
                 extrapolate: Callable[[float, float], None] | None = None) -> None:
        self.schedule = schedule
        self.clock = clock
        self.step = step
        self.extrapolate = extrapolate
        self.fixed = [c for c in schedule.order if fixed_step_only(c)]
        """The components that take one step size only."""
        self.events: dict[str, str] = {}
        """The event name to record at each component's latest cut: ``discard``, or its own
        (:attr:`StepEndedEarly.event`)."""

    def cut(self, plan: list[Step], t: float, t_end: float, exc: StepEndedEarly, saved: Checkpoint | None,
            *, extrapolate: bool = False) -> tuple[int, float, str]:
        """Cut a step of *plan* from *t* to *t_end* at the instant the component that ended it early reached (*exc*).

        That instant becomes the communication point of every component of
        *plan*: the components stepped before that component are rolled back
        to *saved* (taken at *t*) and, like those not stepped yet, stepped from
        *t* to it (lagging inputs extrapolated again over the shorter step with
        *extrapolate*). The component stays where it stopped, unless it read
        fresh outputs of components rolled back (Gauss-Seidel) and is in
        *saved*: it is then stepped again with the others, from their outputs
        of the shorter step. Another component that ends its step early on the
        way cuts the step again (the first is then rolled back too, and takes
        up its own early end in a later step). Returns the tick and time
        reached and the name of the component that stopped there; a component
        that would have to roll back and cannot, or one that only takes fixed
        steps, ends the run with one line saying why (see
        :func:`~cosimrun.masters.plan.cut_guard`).
        """
        schedule = self.schedule
        snaps = {id(c): snap for c, snap in saved[0]} if saved is not None else {}
        rest, moved_before, reached = plan, [], t_end
        while True:
            k = self.ender([c for c, _, _ in rest], exc)
            ender, fresh, target = rest[k][0], rest[k][2], exc.reached
            moved = [*moved_before, *(c for c, _, _ in rest[:k])]
            tick = self.check(ender, exc, reached, moved, snaps)
            stays = not (moved and fresh and id(ender) in snaps)
            back = moved if stays else [*moved, ender]
            if back:
                assert saved is not None
                for comp in back:
                    try:
                        comp.restore_state(snaps[id(comp)], t)
                    except (ValueError, NotImplementedError) as err:
                        raise self.error(ender, exc, reached, f"component {comp.name!r} cannot roll back to "
                                                              f"t={t:.12g} ({err})") from exc
                schedule.restore_ports(saved[1])
                if stays:
                    ender.refresh_outputs(target)
                schedule.stats.rollbacks += 1
            if extrapolate and self.extrapolate is not None:
                self.extrapolate(t, target - t)
            rest = [step for step in plan if step[0] is not ender] if stays else plan
            try:
                self.step(rest, t, target - t)
                return tick, target, ender.name
            except StepEndedEarly as again:
                exc, moved_before, reached = again, [ender] if stays else [], target

    @staticmethod
    def ender(components: list[CoSimComponent], exc: StepEndedEarly) -> int:
        """Position among *components* of the one that raised *exc*; one not among them fails the run."""
        for i, comp in enumerate(components):
            if comp.name == exc.component and may_discard(comp):
                return i
        raise SimulationError(f"{exc}; the run cannot continue: the instant a step ended early at becomes the "
                              "communication point only for components of the system itself (not one inside a "
                              "multi-model component)", component=exc.component, time=exc.time) from exc

    def check(self, ender: CoSimComponent, exc: StepEndedEarly, reached: float, moved: list[CoSimComponent],
              snaps: dict[int, Any]) -> int:
        """The tick of the instant *exc* reached, if every component can be brought there; else fail the run.

        *moved* were stepped to *reached* already and must roll back (their
        snapshots are in *snaps*).
        """
        target = exc.reached
        self.events[ender.name] = exc.event or DISCARD_EVENT
        for comp in moved:
            if id(comp) not in snaps:
                raise self.error(ender, exc, reached, (
                    f"component {comp.name!r} was already stepped to t={reached:.12g} and cannot roll back "
                    f"(supports_rollback is False) to be stepped to t={target:.12g} with the others"))
        for comp in self.fixed:
            if comp is ender:  # already there: a fixed-step component cuts a step only to end the run
                continue
            raise self.error(ender, exc, reached, f"{_fixed_head(comp)}, so it cannot be stepped to t={target:.12g} "
                                                  "with the others")
        clock = self.clock
        tick = clock.mark(target)
        if tick <= clock.ticks(exc.time):
            raise self.error(ender, exc, reached, "that is the step's start to the clock's resolution")
        return tick

    @staticmethod
    def error(ender: CoSimComponent, exc: StepEndedEarly, end: float, why: str) -> SimulationError:
        """The one-line failure of a step that cannot be cut where *exc* ended it."""
        return SimulationError(
            f"component {ender.name!r} ended the step from t={exc.time:.12g} to {end:.12g} early at "
            f"t={exc.reached:.12g}; the run cannot continue: {why}", component=ender.name, time=exc.time)

    def require_fixed_step(self, components: list[CoSimComponent], t: float, t1: float, why: str) -> None:
        """Fail the run if stepping *components* from *t* to *t1* is not a grid step for a fixed-step one among them."""
        clock = self.clock
        fixed = [c for c in components if fixed_step_only(c)]
        if fixed and off_grid(clock, clock.ticks(t), clock.ticks(t1)):
            raise variable_step_error(fixed[0], clock, t, t1, why)
