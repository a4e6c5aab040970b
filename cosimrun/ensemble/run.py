"""Run M members of one system at once under a fixed-step Jacobi, Gauss-Seidel or IJCSA master, or the hybrid one.

The run repeats, over arrays of members, what :class:`~cosimrun.masters.explicit.ExplicitRun` does for one
system with fixed communication steps: the same communication points (the master run's ``next_point``: grid,
time events, ``max_step``), the same stepping plan and fresh links (Gauss-Seidel), the same extrapolation of
lagging inputs (:class:`~cosimrun.masters.extrapolation.Extrapolation`, which works on arrays), the same exchange
and re-evaluation of direct feedthrough; each component is stepped by :mod:`cosimrun.ensemble.members`. A
member whose state or outputs go non-finite is marked ``failed`` with its cause and frozen; the others run on.
Each member's state events are handled, and its modes switched, at the communication points as its scalar run
does (:class:`~cosimrun.ensemble.unlocated.UnlocatedEvents`). Under the hybrid master each step is
:class:`~cosimrun.ensemble.events.LocatedEvents`'s: every member's events located and handled on its own; under
``step_control: error`` (jacobi, gauss_seidel) :class:`~cosimrun.ensemble.controlled.ControlledSteps` steps every
member on its own clock.
"""

from __future__ import annotations

import dataclasses
import time as _time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.console import notice
from cosimrun.core.ports import PortType
from cosimrun.ensemble.controlled import ControlledSteps, padded, refuse_controlled
from cosimrun.ensemble.coupling import member_estimate
from cosimrun.ensemble.events import LocatedEvents, refuse_located
from cosimrun.ensemble.members import (
    Member,
    OdeMember,
    refresh_parameters,
    refuse,
    refuse_iterated_adaptive,
    start_member_state,
    stepper,
)
from cosimrun.ensemble.modes import is_multi, parameter_owners
from cosimrun.ensemble.parameters import MemberParameters, member_count, rows_to_arrays
from cosimrun.ensemble.samples import PAD_MICRO
from cosimrun.ensemble.unlocated import refuse_unlocated, unlocated_events
from cosimrun.errors import ConfigError, UnknownNameError
from cosimrun.masters.coupling_error import MemberCouplingErrors
from cosimrun.masters.extrapolation import Extrapolation
from cosimrun.masters.gauss_seidel import GaussSeidel
from cosimrun.masters.hybrid import Hybrid
from cosimrun.masters.ijcsa import IJCSA
from cosimrun.masters.jacobi import Jacobi
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.masters.base import Master
    from cosimrun.system.connection import Link
    from cosimrun.system.system import System

COMPLETE = "complete"
FAILED = "failed"
CHUNK = 8192
"""Members stepped together at most: a larger ensemble runs in chunks of this many, one after the other, so each
state array stays in the processor's caches (measured on the two-mass system: 5 000 to 10 000 members per chunk
take the least time per member)."""


@dataclass(frozen=True)
class MemberFailure:
    """Why member *member* failed: at communication point *time* the *variable* (a state or output) of
    *component* was *cause*; its values stay those of *last_time*, the last point it was sound at."""

    member: int
    time: float
    component: str
    variable: str
    cause: str
    last_time: float

    def __str__(self) -> str:
        where = f" in {self.component}.{self.variable}" if self.component else ""  # a run that raised: no variable
        return f"member {self.member}: {self.cause} at t={self.time:.12g}{where}"


@dataclass
class EnsembleStats:
    """What an ensemble run took: members, outcomes, macro steps, samples kept and time."""

    members: int
    complete: int
    failed: int
    macro_steps: int
    """The communication steps (under step control: the accepted steps of the member that took the most)."""
    samples: int
    wall_time_s: float
    step_time_s: float
    """Time spent in the macro steps (the loop), without building and initializing."""

    @property
    def us_per_member_step(self) -> float:
        """Loop time per member per macro step, in microseconds."""
        return 1e6 * self.step_time_s / max(1, self.members * self.macro_steps)

    def as_dict(self) -> dict[str, Any]:
        return {"members": self.members, "complete": self.complete, "failed": self.failed,
                "macro_steps": self.macro_steps, "samples": self.samples, "wall_time_s": self.wall_time_s,
                "step_time_s": self.step_time_s, "us_per_member_step": self.us_per_member_step}


@dataclass
class EnsembleResult:
    """An ensemble run: per member status, parameters and final values; the histories kept
    (``history[port]`` of shape ``(samples, members)`` at ``time``); the statistics."""

    system: str
    master: str
    t0: float
    tf: float
    dt: float
    record_every: int
    members: int
    parameters: dict[str, np.ndarray]
    """Every given parameter (``component.parameter``), one value per member."""
    status: np.ndarray
    """``complete`` or ``failed`` per member."""
    failures: dict[int, MemberFailure]
    time: np.ndarray
    """The instants of the samples kept: ``(samples,)``, shared by the members under fixed steps; under step control
    each member's own, ``(samples, members)``, NaN after its last sample."""
    history: dict[str, np.ndarray]
    """``component.port`` -> values ``(samples, members)``; a failed member's samples after its failure are NaN (with
    events, or under step control, it has none after its last sound point); :meth:`member_history` gives one
    member's."""
    units: dict[str, str | None]
    final: dict[str, np.ndarray]
    """``component.port`` -> each member's value at the end (a failed member's: at its last sound point)."""
    stats: EnsembleStats
    master_settings: dict[str, Any] = field(default_factory=dict)
    member_stats: dict[str, np.ndarray] = field(default_factory=dict)
    """Counts per member (``ijcsa`` with ``iterate_steps``: ``step_iterations``, ``newton_iterations``,
    ``unconverged_steps``; ``hybrid``: ``macro_steps``, ``trial_steps``, ``rollbacks``, ``events``; the other
    masters with state events: ``events``; with a ``multi`` component: ``mode_switches``)."""
    coupling_error: MemberCouplingErrors | None = None
    """The coupling-error estimates per connection and member, each member's as its own run gives them (NaN for
    a failed member; ``None`` without links into real inputs)."""
    events: dict[str, np.ndarray] = field(default_factory=dict)
    """With state events, every one handled, one row per event ordered by member, time and micro step:
    ``member``, ``time``, ``micro``, ``component``, ``event`` (as a run's events table, per member)."""
    switches: dict[str, np.ndarray] = field(default_factory=dict)
    """With a ``multi`` component, every mode switch, one row per switch ordered by member and time:
    ``member``, ``time``, ``component``, ``from_mode``, ``to_mode`` (as a run's mode switches, per member)."""
    micro: np.ndarray | None = None
    """With state events or a ``multi`` component, each sample's micro step, ``(samples, members)`` as ``time``
    (0 at an accepted instant, k after the k-th micro step of the events there; -1 after a member's last
    sample); ``None``: every sample is at micro step 0."""
    kinds: dict[str, str] = field(default_factory=dict)
    """``component.port`` -> port type of the recorded ports that are not real (``event``: its history holds 1.0
    in the samples it is true in, 0.0 in the others)."""

    def member_history(self, index: int, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Member *index*'s samples of ``component.port`` *key* as its run records them: ``(time, micro, values)``
        (without events every micro step is 0; with them, or under step control, its own samples, the padding
        after its last one left out)."""
        values = self.history[key][:, index]
        if self.time.ndim == 1:
            return self.time, np.zeros(len(self.time), dtype=np.int32), values
        time = self.time[:, index]
        n = int(np.count_nonzero(~np.isnan(time)))
        micro = np.zeros(n, dtype=np.int32) if self.micro is None else self.micro[:n, index]
        return time[:n], micro, values[:n]

    def member_switches(self, index: int) -> dict[str, np.ndarray]:
        """Member *index*'s mode switches: ``time``, ``component``, ``from_mode``, ``to_mode`` (empty without a
        multi component)."""
        if not self.switches:
            return {}
        rows = self.switches["member"] == index
        return {key: values[rows] for key, values in self.switches.items() if key != "member"}

    def member_events(self, index: int) -> dict[str, np.ndarray]:
        """Member *index*'s events: ``time``, ``micro``, ``component``, ``event`` (empty without events)."""
        if not self.events:
            return {}
        rows = self.events["member"] == index
        return {key: values[rows] for key, values in self.events.items() if key != "member"}

    def member(self, index: int) -> dict[str, Any]:
        """Member *index* as one row: status, parameters, final values and the failure's cause (if any)."""
        if not 0 <= index < self.members:
            raise IndexError(f"member {index} out of range (the ensemble has {self.members} members)")
        failure = self.failures.get(index)
        return {
            "member": index,
            "status": str(self.status[index]),
            "parameters": {k: _item(v[index]) for k, v in self.parameters.items()},
            "final": {k: float(v[index]) for k, v in self.final.items()},
            "stats": {k: _item(v[index]) for k, v in self.member_stats.items()},
            "failure": None if failure is None else str(failure),
        }

    def rows(self) -> list[dict[str, Any]]:
        """Every member as :meth:`member` gives it, in order."""
        return [self.member(i) for i in range(self.members)]


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def run_members(system: System, master: Master, rows: Sequence[Mapping[str, Any]], *, t0: float, tf: float,
                dt: float, record_every: int = 1, record: Sequence[str] | None = None) -> EnsembleResult:
    """:func:`run_ensemble` for members given as one parameter dict each (``{"mass1.stiffness": 10.0, ...}``,
    a sweep's jobs); row *i* of the result is member *i*."""
    return run_ensemble(system, master, rows_to_arrays(rows), t0=t0, tf=tf, dt=dt, members=len(rows),
                        record_every=record_every, record=record)


def check_master(master: Master) -> None:
    """Refuse a master (or a setting of it) that ensembles do not run, keyed by the setting."""
    if type(master) not in (Jacobi, GaussSeidel, IJCSA, Hybrid):
        raise ConfigError("master.name", f"{master.name!r}: ensembles run the jacobi, gauss_seidel, ijcsa and hybrid "
                                         "masters only (with fixed steps)")
    if getattr(master, "step_control", "fixed") != "fixed" and type(master) not in (Jacobi, GaussSeidel):
        raise ConfigError("master.step_control", f"{master.step_control!r}: ensembles under {master.name} take fixed "
                                                 "steps only (step control per member runs under jacobi and "
                                                 "gauss_seidel)")
    if getattr(master, "sweeps", 1) != 1:
        raise ConfigError("master.sweeps", f"{master.sweeps!r}: ensembles sweep each step once (sweeps=1)")


def refuse_system(system: System, master: Master) -> None:
    """Refuse, in one line keyed by what is at fault, a system that ensembles do not run under *master*: the
    master and its settings, every component (:func:`~cosimrun.ensemble.members.refuse`), adaptive integrators
    under iterated steps, then what the master's run asks (located events under the hybrid master, events and
    modes at communication points under the others, error-controlled steps). The sweep planner asks the same."""
    check_master(master)
    for comp in system.components.values():
        refuse(comp)
    refuse_iterated_adaptive(master, system.components.values())
    if isinstance(master, Hybrid):
        refuse_located(system)
    else:
        refuse_unlocated(system, master)
    if getattr(master, "step_control", "fixed") != "fixed":
        refuse_controlled(system, master)  # type: ignore[arg-type]


def run_ensemble(system: System, master: Master, parameters: Mapping[str, Any] | None = None, *, t0: float,
                 tf: float, dt: float, members: int | None = None, record_every: int = 1,
                 record: Sequence[str] | None = None, chunk: int = CHUNK) -> EnsembleResult:
    """Run the members of *system* at once, from *t0* to *tf* by communication steps *dt* under *master*.

    *parameters* maps ``component.parameter`` to one value for all members or one per member (an array of
    shape ``(M,)``; initial states are the parameters ``<state>0``); *members* is M when no parameter varies.
    Each member's results are those of ``system.run`` with its parameters. Histories keep every
    *record_every*-th communication point (and the first and last; under step control each member's own accepted
    steps, ``time`` then ``(samples, members)``); *record* selects ``component.port``
    outputs (default: every real output; event ports when named). With state events or mode switches the histories
    hold each member's samples as its scalar run records them: at every instant it accepts, the samples before and
    after each micro step of its events there, its event ports (:mod:`cosimrun.ensemble.samples`; ``time`` and
    :attr:`EnsembleResult.micro` then ``(samples, members)``, padded after a member's last sample). At most *chunk*
    members are stepped together (more run in chunks, one after the other). The system is left initialized with
    its own parameters.
    """
    start = _time.perf_counter()
    check_master(master)
    for key, value in (("record_every", record_every), ("chunk", chunk)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(key, f"must be an integer >= 1, got {value!r}")
    refuse_system(system, master)
    parameters = dict(parameters or {})
    count = member_count(parameters, members)
    if count <= chunk:
        return _run_block(system, master, parameters, count, 0, t0, tf, dt, record_every, record, start)
    blocks = []
    for first in range(0, count, chunk):
        size = min(chunk, count - first)
        part = {key: value[first:first + size] if np.ndim(value) == 1 else value for key, value in parameters.items()}
        blocks.append(_run_block(system, master, part, size, first, t0, tf, dt, record_every, record, start))
    return _merge(blocks, _time.perf_counter() - start)


def _owners(comp: Any, names: Any) -> list[tuple[Any, list[tuple[str, str]]]]:
    """The components holding *comp*'s parameters *names* (:func:`~cosimrun.ensemble.modes.parameter_owners`),
    each with the names it holds: ``(name given, its name there)``."""
    out: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
    for name in names:
        for owner, own in parameter_owners(comp, name):
            out.setdefault(id(owner), (owner, []))[1].append((name, own))
    return list(out.values())


def _merge(blocks: list[EnsembleResult], wall: float) -> EnsembleResult:
    """The chunks' results as one ensemble (members in order)."""
    first = blocks[0]
    offsets = np.cumsum([0, *(b.members for b in blocks)])
    failures = {m + int(off): dataclasses.replace(f, member=m + int(off))
                for b, off in zip(blocks, offsets, strict=False) for m, f in b.failures.items()}
    members = int(offsets[-1])

    def joined(attr: str) -> dict[str, np.ndarray]:
        return {key: np.concatenate([getattr(b, attr)[key] for b in blocks], axis=-1) for key in getattr(first, attr)}

    own_clocks = first.time.ndim == 2
    if own_clocks:  # each member's own sample times: every chunk's rows NaN-padded to the longest
        samples = max(len(b.time) for b in blocks)
        time = np.concatenate([padded(b.time, samples) for b in blocks], axis=1)
        history = {key: np.concatenate([padded(b.history[key], samples) for b in blocks], axis=1)
                   for key in first.history}
    else:
        samples, time, history = first.stats.samples, first.time, joined("history")
    micro = None
    if first.micro is not None:  # each member's micro steps, padded as its instants
        micro = np.concatenate([np.vstack([b.micro, np.full((samples - len(b.micro), b.members), PAD_MICRO,
                                                            dtype=b.micro.dtype)]) for b in blocks], axis=1)
    failed = sum(b.stats.failed for b in blocks)
    stats = EnsembleStats(members, members - failed, failed, max(b.stats.macro_steps for b in blocks), samples,
                          wall, sum(b.stats.step_time_s for b in blocks))
    return EnsembleResult(first.system, first.master, first.t0, first.tf, first.dt, first.record_every, members,
                          joined("parameters"), np.concatenate([b.status for b in blocks]), failures, time,
                          history, first.units, joined("final"), stats, first.master_settings,
                          joined("member_stats"), None if first.coupling_error is None else MemberCouplingErrors.join(
                              [b.coupling_error for b in blocks if b.coupling_error is not None]),
                          _joined_table(blocks, offsets, "events"), _joined_table(blocks, offsets, "switches"),
                          micro, first.kinds)


def _joined_table(blocks: list[EnsembleResult], offsets: np.ndarray, name: str) -> dict[str, np.ndarray]:
    """The chunks' tables *name* (``events``, ``switches``) as one, each chunk's members numbered in the whole
    ensemble."""
    if not getattr(blocks[0], name):
        return {}
    parts = [{**getattr(b, name), "member": getattr(b, name)["member"] + int(off)}
             for b, off in zip(blocks, offsets, strict=False)]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def _run_block(system: System, master: Master, parameters: dict[str, Any], count: int, first: int, t0: float,
               tf: float, dt: float, record_every: int, record: Sequence[str] | None, start: float) -> EnsembleResult:
    """Run *count* members (one chunk, from member *first* on) of *system* with *parameters* (see
    :func:`run_ensemble`)."""
    components = system.components
    checked = MemberParameters(components, parameters, count, first)
    saved = [(owner, {own: owner.parameters[own] for _, own in names}) for name, comp in components.items()
             for owner, names in _owners(comp, [*checked.shared[name], *checked.varying[name]])]
    initialized = False
    try:
        for name, comp in components.items():
            if checked.shared[name] or checked.varying[name]:
                values = checked.member(name, 0)
                for owner, names in _owners(comp, values):
                    owner.set_parameters(**{own: values[key] for key, own in names})
        refuse_system(system, master)  # again with the ensemble's settings (an integrator given for all members)
        system.initialize(t0, master)
        initialized = True
        assert system.analysis is not None
        if system.analysis.loops:
            loop = system.analysis.loops[0]
            raise ConfigError("connections", f"the algebraic loop through {', '.join(loop.components)} cannot run "
                                             "as an ensemble yet")
        run = _EnsembleRun(system, master, checked, count, record_every, record)
        return run.run(t0, tf, dt, start)
    finally:
        for comp in components.values():
            if comp.is_initialized:
                comp.reset()
        for owner, values in saved:
            owner.set_parameters(**values)
            refresh_parameters(owner)
        if initialized:
            system.initialize(t0, master)


class _EnsembleRun:
    """The state of one ensemble run: steppers, plan, extrapolation, alive members, recorded samples."""

    def __init__(self, system: System, master: Master, checked: MemberParameters, members: int, record_every: int,
                 record: Sequence[str] | None) -> None:
        self.system, self.master, self.checked = system, master, checked
        self.members, self.record_every = members, record_every
        self.scalar = system.master_run
        schedule = self.scalar.schedule  # type: ignore[union-attr]
        self.schedule = schedule
        self.order = list(schedule.order)
        self.steppers: dict[str, Member] = {}
        for comp in self.order:
            st = stepper(comp, members)
            varying = checked.varying[comp.name]
            if isinstance(st, OdeMember):
                initial = f"{comp.initial_mode}." if is_multi(comp) else ""  # type: ignore[attr-defined]
                for i, state in enumerate(st.states):
                    for key in (f"{state}0", f"{initial}{state}0"):
                        if key in varying:
                            st.set_initial(i, varying[key])
            for owner, names in _owners(comp, varying):
                for key, own in names:
                    owner.parameters[own] = varying[key]
                refresh_parameters(owner)
            if checked.switching[comp.name]:
                st.vary(checked.switching[comp.name])  # type: ignore[attr-defined]
            if isinstance(st, OdeMember):
                start_member_state(st)
            self.steppers[comp.name] = st
        links_from: dict[str, list[Link]] = {c.name: [] for c in self.order}
        for lk in system.links:
            links_from[lk.connection.src_component].append(lk)
        assert system.analysis is not None
        self.resolution = [(self.steppers[name], links_from[name]) for name in system.analysis.resolution]
        self.event_ports: list[str] = []
        """The recorded event ports (``component.port``), histories beside the real outputs' under events."""
        self.outputs = self._recorded(record)
        self.alive = np.ones(members, dtype=bool)
        self.failures: dict[int, MemberFailure] = {}
        self.last_good = {key: np.full(members, np.nan) for key in self.outputs}
        self.member_stats: dict[str, np.ndarray] = {}

    def _recorded(self, record: Sequence[str] | None) -> dict[str, Any]:
        """``component.port`` -> port of the outputs to record (all real outputs by default)."""
        ports = {f"{c.name}.{n}": p for c in self.order for n, p in c.outputs.items() if p.spec.type is PortType.REAL}
        if record is None:
            return ports
        chosen = {}
        events = {f"{c.name}.{n}" for c in self.order for n, p in c.outputs.items() if p.spec.type is PortType.EVENT}
        for key in record:
            if key in events:  # a history of its own (a run's final values leave it out)
                self.event_ports.append(key)
                continue
            if key not in ports:
                raise UnknownNameError("output", key, ports, "to record in the ensemble", key="record")
            chosen[key] = ports[key]
        return chosen

    def event_kinds(self) -> dict[str, str]:
        """:attr:`EnsembleResult.kinds` of the recorded event ports."""
        return {key: PortType.EVENT.value for key in self.event_ports}

    # ------------------------------------------------------------------ exchange
    def settle(self, t: float) -> None:
        """Exchange, then re-evaluate the direct-feedthrough components at *t* (the schedule's ``settle``)."""
        self.schedule.exchange()
        for st, outward in self.resolution:
            st.refresh(t)
            for lk in outward:
                lk.transfer()

    def step_plan(self, plan: list[Any], t: float, h: float) -> None:
        """Step the plan's components from *t* by *h*, reading their fresh links first (as ``step_serially``)."""
        steppers = self.steppers
        for comp, _push, fresh in plan:
            for dst, src, scale, offset, line in fresh:
                if line:
                    dst.derivatives = ((scale * src.value + offset - dst.value) / h,)
                elif scale is None:
                    dst.value = src.value
                else:
                    dst.value = scale * src.value + offset
            steppers[comp.name].do_step(t, h)

    # ------------------------------------------------------------------ the run
    def run(self, t0: float, tf: float, dt: float, start: float) -> EnsembleResult:
        master, members = self.master, self.members
        clock = Clock(t0, dt, tf)
        self.scalar.check(t0, tf, dt)  # type: ignore[union-attr]
        for st in self.steppers.values():
            st.refresh(t0)
        self.settle(t0)
        if isinstance(master, Hybrid):
            return LocatedEvents(self, master, clock).execute(t0, start)
        if master.step_control != "fixed":  # type: ignore[attr-defined]
            return ControlledSteps(self, master, clock).execute(t0, start)  # type: ignore[arg-type]
        plan, lagging = self.schedule.stepping_plan(self.order, master.fresh_outputs,  # type: ignore[attr-defined]
                                                    interpolate=master.extrapolation >= 1)  # type: ignore[attr-defined]
        order = master.extrapolation  # type: ignore[attr-defined]
        implicit = isinstance(master, IJCSA) and master.iterate_steps
        if implicit:
            self._start_implicit()
        lagging = [lk for lk in lagging if lk.dst.spec.type is PortType.REAL] if order > 0 and not implicit else []
        comps = self.system.components
        extrapolation = Extrapolation(lagging, [comps[lk.connection.dst_component].interpolates_inputs
                                                for lk in lagging], order, t0)
        odes = [st for st in self.steppers.values() if isinstance(st, OdeMember)]
        start_up = order == 2 and bool(lagging) and all(
            isinstance(self.steppers[c.name], OdeMember) or c.supports_rollback for c in self.order)
        events = unlocated_events(self, master)
        log = None
        if events is not None:
            log = events.keep_samples(self.record_every)
            log.point(np.arange(members), t0, {key: self._sample(port) for key, port in self.outputs.items()})
            events.begin(t0, dt)
        times = [t0]
        samples = {key: [self._sample(port)] for key, port in self.outputs.items()}
        coupling = member_estimate(self.scalar, plan, lagging, extrapolation, order, members, self.outputs)
        if coupling is not None:
            coupling.take(t0, {key: values[0] for key, values in samples.items()})
        if events is not None:
            events.watch(coupling)
        previous = {key: samples[key][0] for key in self.outputs}
        frozen = {st.comp.name: np.empty_like(st.x) for st in odes}
        x_prev = {st.comp.name: np.empty_like(st.x) for st in odes}
        next_point = self.scalar.next_point  # type: ignore[union-attr]
        a, end, steps = 0, clock.end, 0
        loop_start = _time.perf_counter()
        with np.errstate(all="ignore"):
            while a < end:
                b = next_point(clock, a)
                t, t1 = clock.time(a), clock.time(b)
                h = t1 - t
                for st in odes:
                    np.copyto(x_prev[st.comp.name], st.x)
                if events is not None:
                    events.before_step(clock, t, t1, x_prev, frozen, previous)
                if implicit:
                    self._implicit_step(t, t1, x_prev, frozen, previous)
                else:
                    if lagging:
                        extrapolation.extrapolate(t, h)
                    if start_up:
                        start_up = False
                        self._start_up(plan, extrapolation, t, t1)
                    self.step_plan(plan, t, h)
                self.settle(t1)
                steps += 1
                a = b
                self._check_members(t, t1, odes, x_prev, frozen, previous)
                if log is not None and events is not None:
                    before = {key: np.array(self._sample(port)) for key, port in self.outputs.items()}
                    events.at_point(t, t1, x_prev, frozen, previous)
                    sound = np.flatnonzero(self.alive)  # a failed member's samples end at its last sound point
                    log.point(sound, t1, {key: values[sound] for key, values in before.items()},
                              (events.hit | (a >= end))[sound])
                if not self.alive.all():
                    dead = ~self.alive
                    for st in odes:
                        st.x[:, dead] = frozen[st.comp.name][:, dead]
                current = {key: self._sample(port) for key, port in self.outputs.items()}
                if coupling is not None:
                    coupling.take(t1, current)
                if log is None and (steps % self.record_every == 0 or a >= end):
                    times.append(t1)
                    for key, values in current.items():
                        samples[key].append(values)
                previous = current
                if events is not None:
                    events.after_point(t1, h)
                if lagging:
                    extrapolation.sample(t1)
        loop_time = _time.perf_counter() - loop_start
        final = {}
        for key, values in previous.items():
            values = np.array(values)
            dead = ~self.alive
            values[dead] = self.last_good[key][dead]
            final[key] = values
        status = np.where(self.alive, COMPLETE, FAILED).astype(object)
        time, history, micro = np.array(times), {key: np.stack(values) for key, values in samples.items()}, None
        if log is not None:
            layout = log.layout()
            time, history, micro = layout.time, layout.history, layout.micro
        failed = int((~self.alive).sum())
        stats = EnsembleStats(members, members - failed, failed, steps, len(time), _time.perf_counter() - start,
                              loop_time)
        units = {key: port.spec.unit_name for key, port in self.outputs.items()}
        tables = {} if events is None else events.tables()
        return EnsembleResult(self.system.name, master.name, clock.t0, clock.time(end), dt, self.record_every,
                              members, dict(self.checked.given), status, dict(sorted(self.failures.items())),
                              time, history, units, final, stats, master.settings(),
                              dict(self.member_stats),
                              None if coupling is None else coupling.result().only(self.alive), **tables,
                              micro=micro, kinds=self.event_kinds())

    def _start_up(self, plan: list[Any], extrapolation: Extrapolation, t: float, t1: float) -> None:
        """The first step under ``extrapolation: 2`` as ``ExplicitRun._start_up_to`` takes it: stepped with the inputs
        held, rolled back, and the lagging inputs given the line to their end values (its mean to a component that
        holds inputs), for the step to be taken again."""
        h = t1 - t
        saved = self._checkpoint(t)
        self.step_plan(plan, t, h)
        self.settle(t1)
        ends = [lk.dst.value for lk in extrapolation.links]
        self._roll_back(saved, t)
        for lk, start, end, taylor in zip(extrapolation.links, extrapolation.values, ends, extrapolation.taylor,
                                          strict=True):
            if taylor:
                lk.dst.value, lk.dst.derivatives = start[-1], ((end - start[-1]) / h,)
            else:
                lk.dst.value = 0.5 * (start[-1] + end)

    # ------------------------------------------------------------------ ijcsa: implicit steps, Newton per member
    def _start_implicit(self) -> None:
        """Set up ``ijcsa`` with ``iterate_steps``: the real interface inputs, the late evaluators, the counts."""
        stuck = [c.name for c in self.order if not isinstance(self.steppers[c.name], OdeMember)
                 and not c.supports_rollback]
        if stuck:
            raise ConfigError("master.iterate_steps", f"master ijcsa with iterate_steps needs rollback in every "
                                                      f"component; {', '.join(stuck)} cannot roll back")
        self.iface = list(self.schedule.real_links)
        self.late = [self.steppers[c.name] for c in self.schedule.late]
        for name in ("step_iterations", "newton_iterations", "unconverged_steps"):
            self.member_stats[name] = np.zeros(self.members, dtype=np.int64)
        self._warned = False

    def _checkpoint(self, t: float) -> tuple[list[tuple[Member, Any]], list[Any]]:
        """Every component's state (an ODE's state array copied) and every port value of the system."""
        states = [(st, st.snapshot() if isinstance(st, OdeMember) else st.comp.snapshot_state())
                  for st in self.steppers.values()]
        return states, [p.value for p in self.schedule.ports]

    def _roll_back(self, saved: tuple[list[tuple[Member, Any]], list[Any]], t: float) -> None:
        states, values = saved
        for st, snap in states:
            if isinstance(st, OdeMember):
                st.restore(snap)
            else:
                st.comp.restore_state(snap, t)
        self.schedule.restore_ports(values)

    def _implicit_step(self, t: float, t1: float, x_prev: dict[str, np.ndarray], frozen: dict[str, np.ndarray],
                       previous: dict[str, np.ndarray]) -> None:
        """The implicit macro step of ``ijcsa`` (``IJCSARun._iterate``) for all members at once: Newton on each
        member's interface values at *t1*, every trial stepping all members from the state at *t*. A member stops
        iterating when its residual is within ``step_tolerance``; one that does not converge fails (or, under
        ``on_nonconvergence: warn``, goes on from its best iterate)."""
        master, members, iface = self.master, self.members, self.iface
        h = t1 - t
        saved = self._checkpoint(t)
        shape = (members,)
        u_now = np.array([np.broadcast_to(np.asarray(lk.dst.value, dtype=float), shape) for lk in iface])
        order = [self.steppers[c.name] for c in self.order]
        counts = self.member_stats

        def residual(x: np.ndarray) -> np.ndarray:
            self._roll_back(saved, t)
            for lk, mean in zip(iface, 0.5 * (u_now + x), strict=True):
                lk.dst.value = mean
            for st in order:
                st.do_step(t, h)
            for lk, value in zip(iface, x.copy(), strict=True):
                lk.dst.value = value
            for st in self.late:
                st.refresh(t1)
            y = np.array([np.broadcast_to(lk.conversion.scale * lk.src.value + lk.conversion.offset, shape)
                          for lk in iface])
            return y - x

        x = u_now.copy()
        if not len(iface):
            residual(x)
            return
        active = self.alive.copy()
        best_size, best_x, best_k = np.full(members, np.inf), x.copy(), np.zeros(members, dtype=np.int64)
        last = master.max_step_iterations - 1
        for k in range(master.max_step_iterations):
            r = residual(x)
            counts["step_iterations"][active] += 1
            scale = 1.0 + np.max(np.abs(x), axis=0)
            size = np.max(np.abs(r), axis=0)
            active &= ~(size <= master.step_tolerance * scale)
            if not active.any():
                return
            better = active & (size < best_size)
            best_size[better], best_x[:, better], best_k[better] = size[better], x[:, better], k
            if k == last:
                self._give_up(np.flatnonzero(active), r, size, t, t1, best_x, best_k != k, x, residual, x_prev,
                              frozen, previous)
                return
            jac = np.empty((members, len(iface), len(iface)))
            for j in range(len(iface)):
                xp = x.copy()
                step = master.fd_step * (1.0 + np.abs(x[j]))
                xp[j] += step
                jac[:, :, j] = ((residual(xp) - r) / step).T
            x[:, active] = (x - self._solve(jac, r, active, t, t1, x_prev, frozen, previous))[:, active]
            active &= self.alive
            counts["newton_iterations"][active] += 1
            if not active.any():
                residual(x)
                return

    def _solve(self, jac: np.ndarray, r: np.ndarray, active: np.ndarray, t: float, t1: float,
               x_prev: dict[str, np.ndarray], frozen: dict[str, np.ndarray],
               previous: dict[str, np.ndarray]) -> np.ndarray:
        """Each member's Newton step ``solve(jac_m, r_m)``; a member whose Jacobian is singular fails."""
        try:
            return np.linalg.solve(jac, r.T[:, :, None])[:, :, 0].T
        except np.linalg.LinAlgError:
            out = np.zeros_like(r)
            for m in np.flatnonzero(active).tolist():
                try:
                    out[:, m] = np.linalg.solve(jac[m], r[:, m])
                except np.linalg.LinAlgError:
                    comp, _, port = self.iface[0].connection.dst.partition(".")
                    self._fail(np.array([m]), t, t1, comp, port, "a singular interface Jacobian", x_prev, frozen,
                               previous)
            return out

    def _give_up(self, ms: np.ndarray, r: np.ndarray, size: np.ndarray, t: float, t1: float, best_x: np.ndarray,
                 moved: np.ndarray, x: np.ndarray, residual: Any, x_prev: dict[str, np.ndarray],
                 frozen: dict[str, np.ndarray], previous: dict[str, np.ndarray]) -> None:
        """Members *ms* did not converge in ``max_step_iterations``: they fail, or under ``warn`` go on from their
        best iterate (stepped again from it where the last iterate was not the best)."""
        master = self.master
        if master.on_nonconvergence != "warn":
            for m in ms.tolist():
                worst = int(np.argmax(np.abs(r[:, m])))
                comp, _, port = self.iface[worst].connection.dst.partition(".")
                self._fail(np.array([m]), t, t1, comp, port,
                           f"an implicit step that did not converge in {master.max_step_iterations} iterations "
                           f"(residual {size[m]:.3g})", x_prev, frozen, previous)
            return
        self.member_stats["unconverged_steps"][ms] += 1
        again = np.zeros(self.members, dtype=bool)
        again[ms] = moved[ms]
        if again.any():
            x = x.copy()
            x[:, again] = best_x[:, again]
            residual(x)
        if not self._warned:
            self._warned = True
            notice(f"implicit step t={t:.9g} -> {t1:.9g} did not converge in {master.max_step_iterations} iterations "
                   f"for {len(ms)} member(s); they go on from their best iterate (counted per member in "
                   "member_stats['unconverged_steps'])", stacklevel=3)

    def _sample(self, port: Any) -> np.ndarray:
        """The port's value for every member (a failed member's: NaN)."""
        values = np.broadcast_to(np.asarray(port.value, dtype=float), (self.members,))
        if not self.alive.all():
            values = np.where(self.alive, values, np.nan)
        return values

    def _check_members(self, t: float, t1: float, odes: list[OdeMember], x_prev: dict[str, np.ndarray],
                       frozen: dict[str, np.ndarray], previous: dict[str, np.ndarray]) -> None:
        """Fail the members whose integrator failed, or whose states or outputs went non-finite, over the step from
        *t* to *t1*."""
        for st in odes:
            for m, state, cause in st.failures():
                if self.alive[m]:
                    self._fail(np.array([m]), t, t1, st.comp.name, state, cause, x_prev, frozen, previous)
        bad = self.alive & ~self.finite(odes, self.members)
        if not bad.any():
            return
        for m in np.flatnonzero(bad).tolist():
            comp, variable = self._culprit(m, odes)
            self._fail(np.array([m]), t, t1, comp, variable, "non-finite value", x_prev, frozen, previous)

    def finite(self, odes: list[OdeMember], members: int) -> np.ndarray:
        """Which of the *members* stepped now have their states (of *odes*) and recorded outputs all finite."""
        sound = np.ones(members, dtype=bool)
        for st in odes:
            sound &= np.isfinite(st.x).all(axis=0)
        for port in self.outputs.values():
            if isinstance(port.value, np.ndarray):
                sound &= np.isfinite(port.value)
        return sound

    def _culprit(self, m: int, odes: list[OdeMember]) -> tuple[str, str]:
        """The first state (else output) of member *m* that is not finite."""
        for st in odes:
            for i, name in enumerate(st.states):
                if not np.isfinite(st.x[i, m]):
                    return st.comp.name, name
        for key, port in self.outputs.items():
            if isinstance(port.value, np.ndarray) and not np.isfinite(port.value[m]):
                comp, _, name = key.partition(".")
                return comp, name
        return "?", "?"

    def _fail(self, ms: np.ndarray, t: float, t1: float, comp: str, variable: str, cause: str,
              x_prev: dict[str, np.ndarray], frozen: dict[str, np.ndarray], previous: dict[str, np.ndarray]) -> None:
        """Mark members *ms* failed at *t1* (sound at *t*): their state is frozen at *t*'s, their final values too."""
        self.alive[ms] = False
        for name, x in x_prev.items():
            frozen[name][:, ms] = x[:, ms]
        for key, values in previous.items():
            self.last_good[key][ms] = values[ms]
        for m in ms.tolist():
            self.failures[m] = MemberFailure(m, t1, comp, variable, cause, t)
