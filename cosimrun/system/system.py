"""`System`: components, their connections, structural analysis and `run`."""

from __future__ import annotations

import dataclasses
import math
import time as _time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cosimrun.checkpoint.form import StateFormError, pack
from cosimrun.checkpoint.schedule import Checkpointer, CheckpointSettings
from cosimrun.checkpoint.state import FORMAT, SystemState, build_state, fingerprint, first_difference
from cosimrun.console import notice
from cosimrun.core.component import CoSimComponent, StopRequest
from cosimrun.core.events import DenseTime, Event
from cosimrun.core.history import ComponentHistory, SystemHistory
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.switching import ModeSwitch, ModeSwitching
from cosimrun.core.units import IDENTITY
from cosimrun.errors import (
    ComponentContractError,
    ComponentStateError,
    ConfigError,
    CosimrunError,
    DuplicateNameError,
    IncompatibleUnitsError,
    InvalidConnectionError,
    UnknownNameError,
    did_you_mean,
    unknown_name,
)
from cosimrun.system.connection import Connection, Link, split_port_path
from cosimrun.system.graph import GraphAnalysis, analyze
from cosimrun.system.recorder import MemorySink, Recorder

IDENTIFIER = "a Python identifier (letters, digits and underscores, not starting with a digit)"


def require_identifier(name: object, what: str, where: str = "") -> str:
    """*name* when it is a Python identifier (``str.isidentifier``), else a :class:`ConfigError` naming *what*
    and the value. Component names and the port names of components other than wrapped models (FMUs) must be
    identifiers: they become HDF5 paths, ``component.port`` references, column names and report headings."""
    if isinstance(name, str) and name.isidentifier():
        return name
    raise ConfigError(None, f"{what} {name!r}{where} is not {IDENTIFIER}")


class RunStatistics(Protocol):
    """What a master reports about a run (``cosimrun.masters.MasterStats``)."""

    def as_dict(self) -> dict[str, Any]:
        """Scalar statistics by name."""
        ...


class RunReport(Protocol):
    """What a master's run returns (``cosimrun.masters.RunReport``)."""

    stats: RunStatistics
    coupling_errors: list[Any]
    step_log: Any
    """Every step tried under ``step_control: error`` (``columns()``), or ``None``."""
    stopped: StopRequest | None


class MasterRunProtocol(Protocol):
    """One run of a master over a system (``cosimrun.masters.MasterRun``): all the state that changes in it."""

    stats: RunStatistics

    def initialize_outputs(self, t0: float) -> None:
        """Make inputs and outputs consistent at *t0*."""
        ...

    def check(self, t0: float, tf: float, dt: float) -> None:
        """Refuse a run the master cannot take with this system, before it starts."""
        ...

    def run(
        self, t0: float, tf: float, dt: float, recorder: Recorder, progress: Callable[[float], None] | None = None,
        *, resume: Callable[[Any], int] | None = None, checkpoints: Callable[[Any, int, bool], None] | None = None,
    ) -> RunReport:
        """Advance the system from *t0* to *tf*, telling *recorder* the accepted samples; *resume* restores a
        checkpoint before the first step, *checkpoints* is called after each accepted step (see
        ``cosimrun.masters.MasterRun.run``)."""
        ...


class MasterAlgorithm(Protocol):
    """What a :class:`System` needs of the master it is given (every ``cosimrun.masters`` master).

    The system imports no master: one is passed to :meth:`System.initialize`
    and :meth:`System.run`. A master is only settings: each run is a new run
    object (:meth:`start`), so one master can run any number of systems.
    """

    name: str

    def start(self, system: System) -> MasterRunProtocol:
        """A run of *system* (its components initialized, its graph analysed)."""
        ...


@dataclass(frozen=True, slots=True)
class EventConnection:
    """Component *subscriber* receives event *event* emitted by component *source*."""

    source: str
    event: str
    subscriber: str

    def __str__(self) -> str:
        return f"{self.source}.{self.event} => {self.subscriber}"


@dataclass
class RunResult:
    """What a run produced: statistics, mode switches and, with a memory sink, the histories and events.

    ``history`` and ``events`` are what the run's :class:`MemorySink` kept
    (empty when the recorder wrote to another sink, such as a results file).
    """

    system: str
    history: SystemHistory
    events: list[tuple[DenseTime, str, str]]
    mode_switches: list[ModeSwitch]
    stats: RunStatistics
    master: str
    t0: float
    tf: float
    dt: float
    wall_time_s: float
    extra: dict[str, Any] = field(default_factory=dict)
    coupling_errors: list[Any] = field(default_factory=list)
    """The master's estimated coupling error per coupled real input (``CouplingError``), largest first."""
    steps: dict[str, Any] | None = None
    """Every step tried under ``step_control: error`` (columns ``time, step, error, accepted``); ``None`` under
    fixed steps."""
    stopped: StopRequest | None = None
    """Set when a component asked to end the run: the run then ended normally at that instant."""
    checkpoints: list[SystemState] = field(default_factory=list)
    """The states saved under ``checkpoint`` when no ``on_checkpoint`` took them (see :meth:`System.run`)."""
    global_errors: list[Any] = field(default_factory=list)
    """Under ``global_error: estimate``: the estimated global error per recorded real output (``GlobalError``),
    largest ratio to its tolerance first; empty otherwise."""


class System:
    """A set of components and the connections between their ports."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.components: dict[str, CoSimComponent] = {}
        self.connections: list[Connection] = []
        self.event_connections: list[EventConnection] = []
        self.initial_values: dict[str, Any] = {}
        self.history = SystemHistory(name)
        self.analysis: GraphAnalysis | None = None
        self.links: list[Link] = []
        self._driven: dict[str, Connection] = {}
        self._initialized = False
        self._prepared: tuple[float, MasterAlgorithm] | None = None
        """``(t0, master)`` of an ``initialize`` that ``run`` has not used yet: ``run`` takes it over."""
        self.master_run: MasterRunProtocol | None = None
        """The run object of the latest ``initialize`` (and ``run``): its ``stats`` are what the run did so far,
        also after a failure."""
        self._resume: SystemState | None = None
        """A state :meth:`restore_state` was given, which the next :meth:`run` continues from."""
        self._changed: list[str] = []
        """The parameters that differ from :attr:`_resume`'s (a fork's, see :meth:`restore_state`)."""
        self._estimated = False
        """Whether the latest run estimated its global error (the components are in the tight run's state)."""

    def __repr__(self) -> str:
        return f"System({self.name!r}, components={list(self.components)})"

    # ------------------------------------------------------------------ building
    def add_component(self, component: CoSimComponent) -> CoSimComponent:
        """Add *component*; its name must be a unique identifier in the system, and so must the names of the
        ports it declares, unless they are named after a wrapped model's variables (an FMU's, see
        :attr:`~cosimrun.core.component.CoSimComponent.ports_named_by_model`): :class:`ConfigError` otherwise."""
        if not isinstance(component, CoSimComponent):
            raise ComponentContractError(f"expected a CoSimComponent, got {type(component).__name__}")
        require_identifier(component.name, "component name")
        if not component.ports_named_by_model:
            for port in (*component.input_specs, *component.output_specs, *component.event_indicators):
                require_identifier(port, "port name", f" of component {component.name!r}")
        if component.name in self.components:
            raise DuplicateNameError(f"system {self.name!r} already has a component named {component.name!r}",
                                     kind="component", name=component.name)
        self.components[component.name] = component
        component.record_history = False  # the run's recorder samples it from now on
        self.history.add_component(component.name, component.history)
        self._initialized = False
        return component

    def get_component(self, name: str) -> CoSimComponent:
        try:
            return self.components[name]
        except KeyError:
            raise UnknownNameError("component", name, self.components, f"in system {self.name!r}") from None

    def connect(self, src: str | Connection, dst: str | None = None, *, scale: float = 1.0, offset: float = 0.0,
                convert_units: bool = True) -> Connection:
        """Connect ``"a.y"`` to ``"b.u"`` (also accepts ``"a.y -> b.u"`` or a :class:`Connection`).

        ``b.u`` receives ``scale * y + offset``, *y* converted to ``b.u``'s unit
        unless *convert_units* is false (see :mod:`cosimrun.system.connection`).
        The connection is validated at once: ports exist, directions and types
        match, units are compatible, a transformation is on real ports only,
        and the input is not already driven.
        """
        transform = {"scale": scale, "offset": offset, "convert_units": convert_units}
        if isinstance(src, Connection):
            conn = src if (scale, offset, convert_units) == (1.0, 0.0, True) else dataclasses.replace(src, **transform)
        elif dst is None:
            conn = dataclasses.replace(Connection.parse(src), **transform)
        else:
            conn = Connection.between(src, dst, **transform)
        self._validate(conn)
        self.connections.append(conn)
        self._driven[conn.dst] = conn
        self._initialized = False
        return conn

    def connect_event(self, source: str, subscriber: str) -> EventConnection:
        """Deliver event ``"comp.event"`` to component *subscriber* (via ``handle_event``)."""
        comp_name, event = split_port_path(source, what="event source")
        comp = self.get_component(comp_name)
        sub = self.get_component(subscriber)
        if event not in comp.event_indicators:
            raise UnknownNameError("event", event, comp.event_indicators, f"of component {comp_name!r}")
        sub.subscribe_event(Event(name=event, source=comp_name))
        link = EventConnection(comp_name, event, subscriber)
        self.event_connections.append(link)
        return link

    def set_initial_value(self, port: str, value: Any) -> None:
        """Initial value of input ``"comp.port"``: where an algebraic loop is torn, the start guess of the coupled
        initialization (which finds the loop's consistent point from it)."""
        comp_name, port_name = split_port_path(port, what="initial value")
        comp = self.get_component(comp_name)
        spec = comp.input_specs.get(port_name)
        if spec is None:
            raise UnknownNameError("input", port_name, comp.input_specs, f"of component {comp_name!r}")
        self.initial_values[f"{comp_name}.{port_name}"] = spec.validate_value(value)
        self._initialized = False

    def _output_specs(self, comp: CoSimComponent) -> dict[str, PortSpec]:
        specs = dict(comp.output_specs)
        for name in comp.event_indicators:
            specs.setdefault(name, PortSpec(name, PortType.EVENT, "out"))
        return specs

    def _validate(self, conn: Connection) -> None:
        where = f"connection {conn}"
        for name in (conn.src_component, conn.dst_component):
            if name not in self.components:
                raise _unknown_in(conn, "component", name, self.components, f"in system {self.name!r}")
        src_comp = self.components[conn.src_component]
        dst_comp = self.components[conn.dst_component]
        outs = self._output_specs(src_comp)
        src = outs.get(conn.src_port)
        if src is None:
            if conn.src_port in src_comp.input_specs:
                raise InvalidConnectionError(f"{where}: {conn.src} is an input; a connection starts at an output",
                                             connection=str(conn))
            raise _unknown_in(conn, "output", conn.src_port, outs, f"of component {conn.src_component!r}")
        dst = dst_comp.input_specs.get(conn.dst_port)
        if dst is None:
            if conn.dst_port in self._output_specs(dst_comp):
                raise InvalidConnectionError(f"{where}: {conn.dst} is an output; a connection ends at an input",
                                             connection=str(conn))
            raise _unknown_in(conn, "input", conn.dst_port, dst_comp.input_specs,
                              f"of component {conn.dst_component!r}")
        src_type = PortType.BOOL if src.type is PortType.EVENT else src.type
        dst_type = PortType.BOOL if dst.type is PortType.EVENT else dst.type
        if src_type != dst_type:
            raise InvalidConnectionError(f"connection {conn}: type mismatch, {conn.src} is {src.type.value} "
                                         f"but {conn.dst} is {dst.type.value}", connection=str(conn))
        if src.type is PortType.REAL:
            try:
                conn.transform(src.unit, dst.unit)
            except IncompatibleUnitsError:
                raise InvalidConnectionError(
                    f"connection {conn}: incompatible units, {conn.src} is in {src.unit_name or 'no unit'} "
                    f"but {conn.dst} is in {dst.unit_name or 'no unit'} (convert_units=False passes the number "
                    "as it is)", connection=str(conn),
                ) from None
        elif conn.transforms:
            key = "scale" if conn.scale != 1.0 else "offset" if conn.offset != 0.0 else "convert_units"
            raise InvalidConnectionError(
                f"connection {conn}: {conn.describe_transform()} applies to real ports only; "
                f"{conn.src} is {src.type.value} (leave out scale, offset and convert_units)", connection=str(conn),
            ).within(key)
        if conn.dst in self._driven:
            raise InvalidConnectionError(f"{where}: input {conn.dst} is already driven by {self._driven[conn.dst]}",
                                         connection=str(conn))

    # ------------------------------------------------------------------ initialization
    def initialize(self, t0: float, master: MasterAlgorithm) -> None:
        """Initialize the components together at *t0*, analyse the graph and make outputs consistent for *master*.

        Every component starts its initialization (:meth:`~cosimrun.core.component.CoSimComponent.
        enter_initialization`: FMUs enter Initialization Mode together); with algebraic loops, outputs and inputs
        are then exchanged and each loop solved, the tear inputs' initial values (else their start values) the
        start guesses; then every component ends its initialization (see
        :meth:`cosimrun.masters.plan.Schedule.initialize_outputs`). A loop without a consistent point is an
        :class:`~cosimrun.errors.InitializationError` naming its inputs and the residual.
        """
        for comp in self.components.values():
            self._initialize_component(comp, t0, together=True)
        self.analysis = analyze(
            self.components, self.connections, {n: c.direct_feedthrough for n, c in self.components.items()}
        )
        self.links = [self._link(conn) for conn in self.connections]
        self.master_run = master.start(self)
        self.master_run.initialize_outputs(t0)
        self._record_initial_point(t0)
        self._initialized = True
        self._prepared = (t0, master)

    def _record_initial_point(self, t0: float) -> None:
        """Put the consistent state at *t0* into the components' histories, as a component's own
        ``initialize`` does (a run clears them and records from *t0* again, checking every value)."""
        self.history.clear()
        recorder = Recorder(MemorySink(self.history), flush_interval=1, allow_nonfinite=True)
        recorder.attach(self.components)
        recorder.sample(t0)

    def _initialize_component(self, comp: CoSimComponent, t0: float, together: bool = False) -> None:
        """(Re-)initialize *comp* at *t0* with its initial input values; *together*: only start its initialization
        (``enter_initialization``), which the system's ``initialize`` ends for all components at once."""
        if comp.is_initialized:
            comp.reset()
        for path, value in self.initial_values.items():
            c, p = split_port_path(path)
            if c == comp.name:
                comp.inputs[p] = PortState(comp.input_specs[p], value)
        if together:
            comp.enter_initialization(t0)
        else:
            comp.initialize(t0)

    def _feedthrough_for_report(self, notes: list[str]) -> dict[str, Any]:
        """Direct feedthrough of every component, as a run would see it.

        Feedthrough is detected when a component is initialized, so components not
        initialized yet are probed: initialized at t=0 and reset again (not those that declare it, or know it
        from a run).
        """
        feedthrough = {}
        for name, comp in self.components.items():
            if not comp.is_initialized and comp.input_specs and comp.output_specs and not comp.direct_feedthrough:
                try:
                    self._initialize_component(comp, 0.0)
                except Exception as exc:  # a report must not fail on a component that cannot start yet
                    notes.append(f"  {name}: direct feedthrough unknown ({type(exc).__name__}: {exc})")
                finally:
                    comp.reset()
            feedthrough[name] = {out: set(ins) for out, ins in comp.direct_feedthrough.items()}
        return feedthrough

    def _link(self, conn: Connection) -> Link:
        src = self.components[conn.src_component].outputs[conn.src_port]
        dst = self.components[conn.dst_component].inputs[conn.dst_port]
        if src.spec.type is PortType.REAL:
            conversion = conn.transform(src.spec.unit, dst.spec.unit)
        else:
            conversion = IDENTITY
        return Link(conn, src, dst, conversion)

    # ------------------------------------------------------------------ running
    def run(
        self,
        t0: float,
        tf: float,
        dt: float,
        master: MasterAlgorithm,
        progress: Callable[[float], None] | None = None,
        recorder: Recorder | None = None,
        *,
        checkpoint: CheckpointSettings | None = None,
        on_checkpoint: Callable[[SystemState], Any] | None = None,
    ) -> RunResult:
        """Simulate from *t0* to *tf* with macro step *dt* under *master* and return what was recorded.

        A system just initialized at *t0* for this *master* starts from there
        (so ``initialize`` then ``run`` does not initialize twice); otherwise
        every component is reset and initialized again. *recorder* receives
        the samples (every output unless it was attached to a selection); by
        default they go to a :class:`MemorySink` on the components'
        histories, returned as ``RunResult.history``. *progress*, when given, is called with the
        current time now and then.

        With *checkpoint* on, the state (:meth:`save_state`) is saved at the communication points it asks for
        and at the end, each handed to *on_checkpoint* (else kept in ``RunResult.checkpoints``); a component
        that cannot give its state is refused before the run starts. After :meth:`restore_state` the run
        continues from the restored state instead of starting at *t0*: *t0*, *dt* and *master* must be the
        state's, and the samples start after the state's instant.
        """
        start = _time.perf_counter()
        resume_state, self._resume = self._resume, None
        prepared, self._prepared = self._prepared, None
        if not (self._initialized and prepared is not None and prepared[0] == t0 and prepared[1] is master):
            for comp in self.components.values():
                if comp.is_initialized:
                    comp.reset()
            self.initialize(t0, master)
            self._prepared = None
        self.history.clear()
        recorder = recorder or Recorder(MemorySink(self.history))
        if not recorder.attached:
            recorder.attach(self.components)
        assert self.master_run is not None
        saved: list[SystemState] = []
        checkpoints = None
        if checkpoint is not None and checkpoint.on:
            self.check_checkpoints()
            print_ = self.fingerprint(master)  # once per run: the structure and settings do not change in it
            checkpoints = Checkpointer(checkpoint, lambda run, tick: self._state_at(run, tick, print_),
                                       on_checkpoint or saved.append, t0, dt,
                                       None if resume_state is None else resume_state.time)
        resume = None
        if resume_state is not None:
            self._check_state(resume_state, master, t0, dt, fork=bool(self._changed))
            resume = self._resumer(resume_state)
        estimate = master.global_error_estimate() if hasattr(master, "global_error_estimate") else None
        if estimate is not None:
            if resume_state is not None:
                raise ConfigError("global_error", "'estimate' cannot check a run resumed from a checkpoint (its "
                                                  "samples before the checkpoint are not this run's); use "
                                                  "master.global_error=none")
            recorder.watch(estimate.primary_samples.take)
        self._estimated = False
        report = self.master_run.run(t0, tf, dt, recorder, progress=progress, resume=resume,
                                     checkpoints=checkpoints)
        result = RunResult(
            system=self.name,
            history=self.history,
            events=self.history.event_log(),
            mode_switches=self.mode_switches(),
            stats=report.stats,
            master=master.name,
            t0=t0,
            tf=tf,
            dt=dt,
            wall_time_s=_time.perf_counter() - start,
            coupling_errors=sorted(report.coupling_errors, key=lambda e: -e.relative),
            steps=report.step_log.columns() if report.step_log is not None else None,
            stopped=report.stopped,
            checkpoints=saved,
        )
        if estimate is not None:
            result.global_errors = self._estimate_global_error(estimate, report.stats, t0, tf, dt)
        return result

    def _estimate_global_error(self, estimate: Any, stats: Any, t0: float, tf: float, dt: float) -> list[Any]:
        """After a run under ``global_error: estimate``: run the system again from *t0* under the estimate's tight
        master, stopping at every instant the run recorded, into histories of its own; the estimated global errors
        (``GlobalError``, largest ratio first), also set into the run's *stats* (see
        :mod:`cosimrun.masters.global_error`).

        The run's results stay as they were: its histories (the components get fresh ones for the tight run and
        theirs back after it), its run object (:attr:`master_run`) and statistics. The components are left in the
        tight run's final state, so :meth:`save_state` refuses. The tight run's notices are not shown (the run
        gave its own); one that fails leaves the estimate out and says so in one line.
        """
        primary_run, primary_history = self.master_run, self.history
        histories = {name: comp.history for name, comp in self.components.items()}
        self.history = SystemHistory(self.name)
        for name, comp in self.components.items():
            comp.history = ComponentHistory(name)
            self.history.add_component(name, comp.history)
        self._estimated = True
        errors: list[Any] = []
        try:
            with warnings.catch_warnings():  # what the tight run would say, the run has said already
                warnings.simplefilter("ignore", UserWarning)
                self.initialize(t0, estimate.tight)
                assert self.master_run is not None
                tight_run = self.master_run
                tight_run.forced_times = estimate.stops()  # type: ignore[attr-defined]
                recorder = Recorder(MemorySink(self.history))
                recorder.attach(self.components)
                recorder.watch(estimate.tight_samples.take)
                report = tight_run.run(t0, tf, dt, recorder)
            stats.estimate_steps = report.stats.macro_steps + getattr(report.stats, "rejected_steps", 0)
            units = {(name, port): state.spec.unit_name for name, comp in self.components.items()
                     for port, state in comp.outputs.items()}
            errors = estimate.result(units)
        except CosimrunError as exc:
            notice(f"global error not estimated: the run at rtol={estimate.tight.rtol:g} failed ({exc})", stacklevel=3)
        finally:
            for name, comp in self.components.items():
                comp.history = histories[name]
            self.history, self.master_run = primary_history, primary_run
            self._prepared = None
        stats.global_error_ratio = errors[0].ratio if errors else math.nan
        message = estimate.warning(errors)
        if message is not None:
            notice(message, stacklevel=3)
        return errors

    # ------------------------------------------------------------------ checkpoints
    def fingerprint(self, master: MasterAlgorithm | None = None) -> str:
        """The structure and settings a saved state belongs to (see :func:`cosimrun.checkpoint.fingerprint`), under
        *master* (by default the one the system was initialized for)."""
        if master is None:
            if self.master_run is None:
                raise ConfigError(None, "the fingerprint needs a master: initialize(t0, master) first")
            master = self.master_run.master  # type: ignore[attr-defined]
        settings = master.settings() if hasattr(master, "settings") else {}
        return fingerprint(self.components, self.connections, self.event_connections, self.initial_values,
                           master.name, settings)

    def save_state(self) -> SystemState:
        """The state of the whole system where its last run ended (see :mod:`cosimrun.checkpoint.state`).

        To save states during a run, give :meth:`run` a ``checkpoint``. A component that cannot give its state is
        refused in one line (:class:`~cosimrun.errors.ComponentStateError`).
        """
        run = self.master_run
        if run is None or getattr(run, "tick", None) is None:
            raise ComponentStateError("save_state needs a system whose run completed (or run(checkpoint=...) to save "
                                      "states during a run)")
        if self._estimated:
            raise ComponentStateError("save_state after a run with master.global_error=estimate would give the state "
                                      "of its tighter second run; save states during the run (run(checkpoint=...)) "
                                      "or run without the estimate")
        self.check_checkpoints()
        return self._state_at(run, run.tick)  # type: ignore[arg-type, attr-defined]

    def restore_state(self, state: SystemState, *, fork: bool = False) -> list[str]:
        """Restore *state* (:meth:`save_state`'s, or a checkpoint's): the next :meth:`run` continues from it.

        The system must be built as the one the state was taken from and initialized for the same master
        (``initialize(t0, master)``); a state of another system or settings is refused in one line naming the
        first difference (:class:`~cosimrun.errors.ConfigError`). The components take the state when the run has
        set itself up as at *t0* (the master may probe the components there), before its first step.

        With *fork*, parameters may differ from the state's where the component allows it
        (:meth:`~cosimrun.core.component.CoSimComponent.fixed_after_start`): the run goes on from the state
        with the new values (a tunable FMU parameter is set into the restored FMU); one that cannot change is
        refused in one line. Returns the parameters that differ (``component.parameter``).
        """
        if self.master_run is None or self._prepared is None:
            raise ConfigError(None, "restore_state needs an initialized system: call initialize(t0, master) first")
        t0, master = self._prepared
        changed = self._check_state(state, master, t0, state.run_settings[1], fork=fork)
        self._resume = state
        self._changed = changed
        return changed

    def check_checkpoints(self) -> None:
        """Refuse, in one line, a component that cannot give its state (:class:`ComponentStateError`), before
        anything runs or is saved."""
        for name, comp in self.components.items():
            if not comp.can_checkpoint:
                raise ComponentStateError(comp._no_checkpoint(), component=name)
            try:
                for key, value in comp.checkpoint_state().items():
                    pack(value, key, {})
            except StateFormError as exc:
                raise ComponentStateError(f"component {name!r} ({type(comp).__name__}) cannot be checkpointed: part "
                                          f"of its state is no plain value ({exc})", component=name) from None

    def _state_at(self, run: Any, tick: int, print_: str | None = None) -> SystemState:
        """The state of the system and *run* at its accepted *tick* (*print_*: the fingerprint, if known)."""
        clock = run.clock
        print_ = self.fingerprint(run.master) if print_ is None else print_
        return build_state(clock.time(tick), clock.t0, clock.dt, print_, self.components, run.save_state(tick),
                           run.recorder.position())

    def _check_state(self, state: SystemState, master: MasterAlgorithm, t0: float, dt: float, *,
                     fork: bool = False) -> list[str]:
        """Refuse a state of another system, master settings or run (one line naming the first difference); with
        *fork*, parameters may differ where their component allows it. The parameters that differ."""
        if state.entries.get("format") != FORMAT:
            raise ConfigError(None, f"not a cosimrun state (format {state.entries.get('format')!r}, expected "
                                    f"{FORMAT!r})")
        ours, theirs = self.fingerprint(master), state.fingerprint
        changed: list[str] = []
        if fork:
            ours, mine = _split_parameters(ours)
            theirs, saved = _split_parameters(theirs)
            changed = [key for key, value in mine.items() if saved.get(key, value) != value]
            for key in changed:
                path, _, name = key.partition(".")
                reason = self._component_at(path).fixed_after_start(name)
                if reason is not None:
                    raise ConfigError(None, f"parameter {key} cannot change from the checkpoint's {saved[key]} to "
                                            f"{mine[key]}: {reason}")
        difference = first_difference(ours, theirs)
        if difference is not None:
            raise ConfigError(None, f"the checkpoint belongs to another system or settings: {difference}")
        saved_t0, saved_dt = state.run_settings
        if t0 != saved_t0:
            raise ConfigError("run.t0", f"{t0!r} differs from the checkpoint's run.t0={saved_t0!r}")
        if dt != saved_dt:
            raise ConfigError("run.dt", f"{dt!r} differs from the checkpoint's run.dt={saved_dt!r}")
        return changed

    def _component_at(self, path: str) -> CoSimComponent:
        """The component (or model of a multi-model component, ``name/mode``) at a fingerprint's *path*."""
        name, *modes = path.split("/")
        comp = self.components[name]
        for mode in modes:
            comp = comp.models[mode]  # type: ignore[attr-defined]
        return comp

    def _restore_components(self, state: SystemState, changed: list[str] | None = None) -> None:
        """The components back to *state*; the *changed* parameters (a fork's) set again where the state holds
        them (a tunable FMU parameter lives in the FMU state)."""
        for name, comp in self.components.items():
            comp.restore_checkpoint(state.component(name))
        for key in changed or ():
            path, _, parameter = key.partition(".")
            comp = self._component_at(path)
            comp.set_parameters(**{parameter: comp.parameters[parameter]})

    def _resumer(self, state: SystemState) -> Callable[[Any], int]:
        """What the master run calls once set up: the components and the run back to *state*; the tick."""
        changed = self._changed

        def resume(run: Any) -> int:
            self._restore_components(state, changed)
            run.recorder.resume(state.recorder())
            return run.restore_state(state.master())

        return resume

    def check_run(self, t0: float, tf: float, dt: float) -> None:
        """Refuse, before it starts, a run from *t0* to *tf* by *dt* that the master this system was initialized
        for cannot take (a :class:`~cosimrun.errors.ConfigError` keyed by the master setting at fault, if any)."""
        if self.master_run is None:
            raise ConfigError(None, "check_run needs an initialized system: call initialize(t0, master) first")
        self.master_run.check(t0, tf, dt)

    def mode_switches(self) -> list[ModeSwitch]:
        """Mode switches of every multi-model component, in time order."""
        rows = [row for comp in self.components.values() if isinstance(comp, ModeSwitching)
                for row in comp.mode_switches()]
        return sorted(rows, key=lambda r: r.time)

    def free(self) -> None:
        """Release every component's resources."""
        for comp in self.components.values():
            comp.free()

    # ------------------------------------------------------------------ reporting
    def describe(self) -> str:
        """A text report of components, ports, connections, loops and priority levels."""
        notes: list[str] = []  # first: probing a component may add its event ports
        if self._initialized and self.analysis is not None:
            analysis = self.analysis
        else:
            analysis = analyze(self.components, self.connections, self._feedthrough_for_report(notes))
        lines = [f"System {self.name!r}: {len(self.components)} components, {len(self.connections)} connections"]
        lines.append("")
        lines.append("Components:")
        for name, comp in self.components.items():
            lines.append(f"  {name} ({type(comp).__name__})")
            for spec in comp.input_specs.values():
                lines.append(f"    in  {spec.name}: {spec.type.value}{_unit(spec)}")
            for spec in self._output_specs(comp).values():
                lines.append(f"    out {spec.name}: {spec.type.value}{_unit(spec)}")
        lines.append("")
        lines.append("Connections:")
        for conn in self.connections:
            src = self._output_specs(self.components[conn.src_component])[conn.src_port]
            dst = self.components[conn.dst_component].input_specs[conn.dst_port]
            conv = ""
            if src.type is PortType.REAL and (src.unit_name != dst.unit_name or conn.transforms):
                c = conn.transform(src.unit, dst.unit)
                what = conn.describe_transform()
                units = f"{src.unit_name or 'no unit'} -> {dst.unit_name or 'no unit'}"
                conv = f"  [{units}{'; ' + what if what else ''}: x*{c.scale:g}{c.offset:+g}]"
            lines.append(f"  {conn}{conv}")
        for ev in self.event_connections:
            lines.append(f"  {ev}")
        lines.append("")
        if notes:
            lines.append("Warnings:")
            lines.extend(notes)
        lines.append("Algebraic loops:" + ("" if analysis.loops else " none"))
        for i, loop in enumerate(analysis.loops, 1):
            lines.append(f"  loop {i}: {' -> '.join(loop.components)} (torn at {', '.join(map(str, loop.tears))})")
        lines.append("Start guesses of the torn inputs:" + ("" if analysis.needs_initial_values else " none"))
        for conn in analysis.needs_initial_values:
            have = self.initial_values.get(conn.dst)
            lines.append(f"  {conn.dst}" + (f" = {have!r}" if have is not None else "  (its start value)"))
        lines.append("Connections cut for ordering:" + ("" if analysis.removed else " none"))
        for conn in analysis.removed:
            lines.append(f"  {conn}")
        lines.append("Priority levels:")
        for i, level in enumerate(analysis.levels):
            lines.append(f"  {i}: {', '.join(level)}")
        return "\n".join(lines)


def _split_parameters(print_: str) -> tuple[str, dict[str, str]]:
    """A fingerprint without its parameter lines, and those as ``{component.parameter: value}``."""
    rest, parameters = [], {}
    for line in print_.split("\n"):
        if line.startswith("parameter "):
            key, _, value = line[len("parameter "):].partition(" = ")
            parameters[key] = value
        else:
            rest.append(line)
    return "\n".join(rest), parameters


def _unknown_in(conn: Connection, kind: str, name: str, known: Iterable[str], where: str) -> InvalidConnectionError:
    """The error of *conn* naming a component or port that does not exist (with the closest as ``suggestion``)."""
    close = did_you_mean(name, known)
    return InvalidConnectionError(f"connection {conn}: {unknown_name(kind, name, known, where)}",
                                  connection=str(conn), suggestion=close[0] if close else None)


def _unit(spec: PortSpec) -> str:
    return f" [{spec.unit_name}]" if spec.unit_name else ""
