"""Ensembles of systems the vectorized engine does not step (FMUs, implicit integrators, DAE components, ...):
each member runs as its own scalar run does (``System.run``, recorded as a run's recorder records it), one after
the other in one process, and the members' histories are laid out as an ensemble's (:class:`EnsembleResult`).

A member costs its build and its run, nothing of a job's folder, config files, log or results file: for a sweep
of a small FMU that is most of a job's cost (an instance kept between members is reset, not loaded again, see
:func:`~cosimrun.fmi.instance.keep_instances`). Each member's histories, final values, events, mode switches,
statistics and coupling-error estimates are its run's. What an ensemble file does not hold makes the member
``failed`` here (a sweep runs it again as its own job): a run a component stopped early, a run whose samples
differ between components.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.core.ports import PortType
from cosimrun.ensemble.run import COMPLETE, FAILED, EnsembleResult, EnsembleStats, MemberFailure
from cosimrun.ensemble.samples import PAD_MICRO
from cosimrun.errors import SimulationError
from cosimrun.masters.coupling_error import CouplingError, MemberCouplingErrors
from cosimrun.system.recorder import PortLayout, Recorder

if TYPE_CHECKING:
    from cosimrun.masters.base import Master
    from cosimrun.system.system import System

RUN_TIME = "wall_time_s"
"""The per-member statistic holding each member's own ``System.run`` wall time, in seconds (as a run's ``/stats``
has it)."""
RECORDED = (PortType.REAL.value, PortType.EVENT.value)
"""The port types an ensemble's file records (an event port as 1.0 where true, 0.0 where false)."""


class Unrecordable(Exception):
    """A member's run gave something an ensemble's file does not hold."""


@dataclass
class MemberRun:
    """What one member's run recorded: its samples (shared by its recorded ports), final values, tables and
    statistics."""

    time: np.ndarray
    micro: np.ndarray
    values: dict[str, np.ndarray]
    """``component.port`` -> the samples (event ports as 1.0/0.0)."""
    units: dict[str, str | None]
    kinds: dict[str, str]
    """``component.port`` -> its port type (``real``, ``event``)."""
    final: dict[str, float]
    """The last sample of each real port (as a run's summary has it)."""
    events: list[tuple[float, int, str, str]] = field(default_factory=list)
    switches: list[tuple[float, str, str, str]] = field(default_factory=list)
    stats: dict[str, float | str] = field(default_factory=dict)
    """The master's statistics: its numbers (``macro_steps``, ``events``, ...) and texts (``event_handling``, ...),
    and :data:`RUN_TIME`, the member's ``System.run``."""
    coupling: list[CouplingError] = field(default_factory=list)
    """The coupling-error estimates in the order of the system's connections."""


class _Blocks:
    """A recorder's sink keeping one run's blocks of samples per component in memory, as arrays."""

    def __init__(self) -> None:
        self.layout: dict[str, PortLayout] = {}
        self.blocks: dict[str, list[tuple[np.ndarray, np.ndarray | None, Mapping[str, np.ndarray]]]] = {}
        self.events: list[Any] = []

    def add_component(self, name: str, ports: PortLayout) -> None:
        for port, (_, kind) in ports.items():
            if kind not in RECORDED:
                raise Unrecordable(f"{name}.{port} is a {kind} port, which an ensemble's file does not record")
        self.layout[name] = dict(ports)
        self.blocks[name] = []

    def append(self, component: str, time: np.ndarray, micro: np.ndarray | None, values: Mapping[str, np.ndarray],
               *, flush: bool = True) -> None:
        self.blocks[component].append((np.array(time, dtype=float), None if micro is None else np.array(micro),
                                       {port: np.array(column) for port, column in values.items()}))

    def write_events(self, rows: Iterable[Any], *, flush: bool = True) -> int:
        before = len(self.events)
        self.events.extend(rows)
        return len(self.events) - before

    def n_samples(self, component: str) -> int:
        return sum(len(block[0]) for block in self.blocks[component])

    def n_events(self) -> int:
        return len(self.events)

    def flush(self) -> None:
        """Nothing to do: the blocks are in memory."""

    def samples(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(time, micro, {component.port: values})`` of every recorded port, whose components must share their
        samples."""
        time: np.ndarray | None = None
        micro = np.zeros(0, dtype=np.int32)
        values = {}
        for comp, blocks in self.blocks.items():
            t = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0)
            m = np.concatenate([np.zeros(len(b[0]), dtype=np.int32) if b[1] is None else b[1].astype(np.int32)
                                for b in blocks]) if blocks else np.zeros(0, dtype=np.int32)
            if time is None:
                time, micro = t, m
            elif not (np.array_equal(t, time) and np.array_equal(m, micro)):
                raise Unrecordable(f"the samples of {comp} are not those of the other components")
            for port in self.layout[comp]:
                column = np.concatenate([b[2][port] for b in blocks]) if blocks else np.zeros(0)
                values[f"{comp}.{port}"] = column.astype(float)
        return (np.zeros(0) if time is None else time), micro, values


def run_member(system: System, master: Master, *, t0: float, tf: float, dt: float,
               recorded: Mapping[str, Sequence[str]], record_every: int = 1) -> MemberRun:
    """Run *system* (built and initialized with one member's parameters) as ``cosimrun`` runs an experiment,
    recording the ports *recorded* (``{component: [port, ...]}``) every *record_every*-th communication point;
    raise :class:`Unrecordable` for a run an ensemble's file cannot hold, and what the run raises."""
    sink = _Blocks()
    recorder = Recorder(sink, decimate=record_every)
    recorder.attach(system.components, {name: list(ports) for name, ports in recorded.items()})
    with np.errstate(all="ignore"):  # the recorder ends the run at the first non-finite value and names it
        result = system.run(t0, tf, dt, master=master, recorder=recorder)
    if result.stopped is not None:
        raise Unrecordable(f"{result.stopped.component} asked to stop the run ({result.stopped.reason}), which an "
                           "ensemble's file does not record")  # the member's failure says where
    time, micro, values = sink.samples()
    units = {f"{comp}.{port}": unit for comp, ports in sink.layout.items() for port, (unit, _) in ports.items()}
    kinds = {f"{comp}.{port}": kind for comp, ports in sink.layout.items() for port, (_, kind) in ports.items()}
    final = {key: float(column[-1]) for key, column in values.items() if kinds[key] != PortType.EVENT.value
             and len(column)}
    stats = {name: value for name, value in result.stats.as_dict().items()
             if isinstance(value, int | float | str) and not isinstance(value, bool)}
    stats[RUN_TIME] = result.wall_time_s
    events = []
    for row in sink.events:
        when, component, event = row
        events.append((float(getattr(when, "t", when)), int(getattr(when, "micro", 0)), component, event))
    switches = [(s.time, s.component, s.from_mode, s.to_mode) for s in result.mode_switches]
    return MemberRun(time, micro, values, units, kinds, final, events, switches, stats, _in_link_order(
        result.coupling_errors, system))


def _in_link_order(errors: Sequence[CouplingError], system: System) -> list[CouplingError]:
    """A run's coupling-error estimates (largest relative first) in the order of the system's connections, as an
    ensemble's file lays them out: a member read back sorts them as its run did, ties in that order."""
    order = {str(link.connection): i for i, link in enumerate(system.links)}
    return sorted(errors, key=lambda e: order.get(e.connection, len(order)))


def run_serially(build: Callable[[int], tuple[System, Master]], members: int,
                 parameters: Mapping[str, Sequence[Any]], *, t0: float, tf: float, dt: float,
                 recorded: Mapping[str, Sequence[str]], record_every: int = 1) -> EnsembleResult:
    """Run *members* members one after the other, member *m* on the system and master ``build(m)`` gives (built
    and initialized with its *parameters*, ``component.parameter`` -> one value per member), freed after its run;
    their results laid out as an ensemble's (see the module). A member whose build or run raises is ``failed``
    with the cause (no samples); no FMU instance it failed in starts the next member."""
    from cosimrun.fmi.instance import drop_kept_instances

    start = _time.perf_counter()
    runs: list[MemberRun | None] = []
    failures: dict[int, MemberFailure] = {}
    name = master_name = ""
    settings: dict[str, Any] = {}
    for m in range(members):
        system: System | None = None
        try:
            system, master = build(m)
            name, master_name, settings = system.name, master.name, master.settings()
            runs.append(run_member(system, master, t0=t0, tf=tf, dt=dt, recorded=recorded,
                                   record_every=record_every))
        except (Exception, SystemExit, GeneratorExit) as exc:  # a component's exit fails its run, as in a job
            when = exc.time if isinstance(exc, SimulationError) and exc.time is not None else (
                max((c.t for c in system.components.values()), default=t0) if system is not None else t0)
            failures[m] = MemberFailure(m, float(when), "", "", f"{type(exc).__name__}: {exc}", float(when))
            runs.append(None)
        finally:
            if system is not None:
                system.free()
        if runs[-1] is None:  # freed, its FMU instances were kept: none of them starts the next member
            drop_kept_instances()
    return _laid_out(runs, failures, dict(parameters), name, master_name, settings, t0, tf, dt, record_every,
                     _time.perf_counter() - start)


def _laid_out(runs: list[MemberRun | None], failures: dict[int, MemberFailure], parameters: dict[str, Any],
              system: str, master: str, settings: dict[str, Any], t0: float, tf: float, dt: float,
              record_every: int, wall: float) -> EnsembleResult:
    """The members' runs as one :class:`EnsembleResult`: one ``time`` for all when every member that ran has the
    same samples at micro step 0, else each member's own (``(sample, member)``, padded)."""
    members = len(runs)
    done = [run for run in runs if run is not None]
    keys = list(done[0].values) if done else []
    kinds = {} if not done else {key: kind for key, kind in done[0].kinds.items() if kind != PortType.REAL.value}
    shared = bool(done) and all(np.array_equal(run.time, done[0].time) for run in done) and not any(
        run.micro.any() for run in done)
    rows = len(done[0].time) if shared else max((len(run.time) for run in done), default=0)
    history = {key: np.full((rows, members), np.nan) for key in keys}
    final = {key: np.full(members, np.nan) for key in done[0].final} if done else {}
    time = done[0].time if shared else np.full((rows, members), np.nan)
    micro = None if shared else np.full((rows, members), PAD_MICRO, dtype=np.int32)
    stat_names = sorted({name for run in done for name in run.stats})
    floats = {name for run in done for name, value in run.stats.items() if isinstance(value, float)}
    texts = {name for run in done for name, value in run.stats.items() if isinstance(value, str)}
    member_stats = {name: np.full(members, "", dtype=object) if name in texts else np.full(members, np.nan)
                    for name in stat_names}
    events: dict[str, list[Any]] = {c: [] for c in ("member", "time", "micro", "component", "event")}
    switches: dict[str, list[Any]] = {c: [] for c in ("member", "time", "component", "from_mode", "to_mode")}
    for m, run in enumerate(runs):
        if run is None:
            continue
        n = len(run.time)
        for key in keys:
            history[key][:n, m] = run.values[key]
        if not shared:
            time[:n, m] = run.time  # type: ignore[index]
            micro[:n, m] = run.micro  # type: ignore[index]
        for key, value in run.final.items():
            final[key][m] = value
        for stat, value in run.stats.items():
            member_stats[stat][m] = value
        for row in run.events:
            for column, value in zip(events, (m, *row), strict=True):
                events[column].append(value)
        for row in run.switches:
            for column, value in zip(switches, (m, *row), strict=True):
                switches[column].append(value)
    status = np.array([COMPLETE if run is not None else FAILED for run in runs], dtype=object)
    stats = EnsembleStats(members, len(done), members - len(done),
                          int(max((run.stats.get("macro_steps", 0) for run in done), default=0)), rows, wall,
                          sum(float(run.stats[RUN_TIME]) for run in done))
    units = dict(done[0].units) if done else {}
    return EnsembleResult(
        system, master, t0, tf, dt, record_every, members, {k: np.asarray(v) for k, v in parameters.items()},
        status, failures, time, history, units, final, stats, settings,
        {name: values if name in floats | texts else _counts(values) for name, values in member_stats.items()},
        MemberCouplingErrors.of_runs([None if run is None else run.coupling for run in runs]),
        _table(events), _table(switches), micro, kinds)


def _counts(values: np.ndarray) -> np.ndarray:
    """Per-member counts as integers where every member has one (a member that did not run has none: NaN)."""
    whole = np.isfinite(values).all() and np.array_equal(values, np.round(values))
    return values.astype(np.int64) if whole else values


def _table(columns: dict[str, list[Any]]) -> dict[str, np.ndarray]:
    """A table's columns as arrays (no table without rows)."""
    if not columns["member"]:
        return {}
    return {name: np.asarray(values, dtype=object if isinstance(values[0], str) else None)
            for name, values in columns.items()}
