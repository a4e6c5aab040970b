"""One FMU as cosimrun runs it: :class:`FMUInstance`, composed of a part per concern.

* :class:`Library`: the extracted files and the shared library of one
  interface, loaded once until unloaded;
* :class:`~cosimrun.fmi.ports.PortMap`: the ports, feedthrough and state
  from the model description and the ``aliases``/``states`` settings;
* :class:`~cosimrun.fmi.parameters.ParameterValues`: the parameter and start
  values given, in the FMU's units;
* per instantiation, the instance handle (:class:`~cosimrun.fmi.fmi2.Instance`)
  with its runtime: a :class:`~cosimrun.fmi.step.Stepper` (co-simulation) or an
  :class:`~cosimrun.fmi.exchange.Exchange` (model exchange), built by the
  component's *bind* function from what the instance hands it;
* :class:`~cosimrun.fmi.step.Requests`: an event to handle, the end of the run;
* :class:`~cosimrun.fmi.errors.FMULog`: the FMU's last messages and its errors.

Each part is given only what it needs; the component (``cosimrun.components.fmu``)
holds one ``FMUInstance`` per FMU file and delegates to it.

A warm sweep worker runs many jobs of one FMU in one process; after
:func:`keep_instances` an FMU let go of at the end of a run keeps its library,
extraction and terminated instance, and the next run of that FMU by a
component of that name starts on it after ``fmi2Reset``/``fmi3Reset``
(:data:`REUSE` counts what happened). A fresh instance is made when the reset
fails or the instantiation settings differ; :func:`drop_kept_instances` frees
them all (the worker calls it after a job that did not complete).
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import ctypes
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cosimrun.core.ports import PortState
from cosimrun.errors import ConfigError, FMUError, FMUFileError
from cosimrun.fmi import fmi3
from cosimrun.fmi.errors import FMULog
from cosimrun.fmi.extraction import Extraction, acquire_extraction, release_extraction
from cosimrun.fmi.fmi2 import FMI2_TYPES, Instance, Snapshot, callbacks, raw_functions
from cosimrun.fmi.me import FMI2_API, FMI3_API, instantiate3, model_exchange_functions
from cosimrun.fmi.model import INTERFACE_NAMES, FMUInterface, FMUModel, FMUVariable
from cosimrun.fmi.parameters import ParameterValues
from cosimrun.fmi.ports import PortMap, ValuePorts
from cosimrun.fmi.step import Requests
from cosimrun.fmi.values import get_values, set_values

INSTANTIATE3 = {"cs": "fmi3InstantiateCoSimulation", "me": "fmi3InstantiateModelExchange"}
"""The FMI 3.0 instantiate function of each interface kind."""


def choose_interface(model: FMUModel, kind: str, requested: str | None, where: str, runner: str) -> FMUInterface:
    """The interface *kind* of *model* that class *runner* runs; ``ConfigError`` when *requested* (the ``interface``
    setting) asks for the other one, the FMU does not offer it or needs what cosimrun does not run (clocks)."""
    if requested is not None and requested != kind:
        raise ConfigError(None, f"{where}: parameter 'interface' is {requested!r}, but {runner} runs "
                                f"{INTERFACE_NAMES[kind]} ({kind!r}); in a config, type: fmu picks the class from "
                                "'interface'")
    if kind not in model.interfaces:
        other = next(iter(model.interfaces))
        raise ConfigError(None, f"{model.label} is a {INTERFACE_NAMES[other].replace(' ', '-')}-only FMU (no "
                                f"{INTERFACE_NAMES[kind]} interface in its modelDescription.xml); type: fmu runs it "
                                f"as {INTERFACE_NAMES[other]} (interface: {other})")
    model.check_supported()
    return model.interface(kind)


class Library:
    """The extracted files and shared library of *interface* of *model* (FMPy's object in ``slave``, the FMI
    functions cosimrun calls in ``functions``), for instances named *name*."""

    def __init__(self, model: FMUModel, interface: FMUInterface, name: str) -> None:
        self.model, self.interface, self.name = model, interface, name
        self.slave: Any = None
        self.functions: dict[str, Any] = {}
        self.extraction: Extraction | None = None
        self.fmi3 = model.fmi_version == "3.0"

    @property
    def loaded(self) -> bool:
        return self.slave is not None

    def load(self, private: bool) -> None:
        """Extract the FMU (the shared cache entry, or a *private* copy) and load the library (once).

        :class:`~cosimrun.errors.FMUFileError` when the extraction is refused or the library does not load.
        """
        if self.slave is not None:
            return
        interface = self.interface
        self.extraction = acquire_extraction(self.model.path, once_per_process=interface.only_once_per_process,
                                             private=private)
        directory, cwd = str(self.extraction.directory), os.getcwd()
        try:
            self._open(directory, interface.identifier)
        except Exception as exc:
            release_extraction(self.extraction)
            self.extraction = None
            raise FMUFileError(self._load_problem(exc, directory)) from exc
        finally:
            os.chdir(cwd)  # FMPy changes into the library's directory and stays there when the library fails to load

    def _load_problem(self, exc: Exception, directory: str) -> str:
        """What is wrong with the library, from the error *exc* of loading it from the FMU extracted to *directory*
        (paths shown relative to the FMU)."""
        binary, kind = self.interface.binary, INTERFACE_NAMES[self.interface.kind]
        text = str(exc).replace(directory + os.sep, "")
        missing = re.search(r"(?:undefined symbol:|does not export) (\w+)", text)
        if missing is not None:
            other, probe = ("co-simulation", "DoStep") if self.interface.kind == "me" else \
                ("model exchange", "GetDerivatives" if not self.fmi3 else "GetContinuousStateDerivatives")
            try:  # loaded already (a symbol is missing): this only looks at it
                built_for_other = hasattr(ctypes.CDLL(os.path.join(directory, binary)),
                                          f"fmi{3 if self.fmi3 else 2}{probe}")
            except OSError:
                built_for_other = False
            hint = f": it is a {other} library, but the FMU declares {kind}" if built_for_other else ""
            return (f"its shared library {binary} does not export {missing[1]}, which FMI {self.model.fmi_version} "
                    f"{kind} needs{hint}")
        if f"{binary}: " in text:
            return f"its shared library {binary} does not load: {text.rsplit(f'{binary}: ', 1)[1]}"
        return f"cannot load its shared library {binary}: {text}"

    def _open(self, directory: str, identifier: str) -> None:
        """Load library *identifier* of the FMU extracted to *directory* and bind the functions cosimrun calls."""
        guid, name = self.model.guid, self.name
        if self.interface.kind == "me":
            from fmpy.fmi2 import FMU2Model
            from fmpy.fmi3 import FMU3Model

            loader = FMU3Model if self.fmi3 else FMU2Model
            self.slave = loader(guid=guid, unzipDirectory=directory, modelIdentifier=identifier, instanceName=name)
            self.functions = model_exchange_functions(self.slave.dll, FMI3_API if self.fmi3 else FMI2_API)
        elif self.fmi3:
            from fmpy.fmi3 import FMU3Slave

            self.slave = FMU3Slave(guid=guid, unzipDirectory=directory, modelIdentifier=identifier, instanceName=name)
            self.functions = fmi3.raw_functions(self.slave.dll)
        else:
            from fmpy.fmi2 import FMU2Slave

            self.slave = FMU2Slave(guid=guid, unzipDirectory=directory, modelIdentifier=identifier, instanceName=name)
            self.functions = raw_functions(self.slave.dll)

    def instantiate(self, env: int, logging: bool, event_mode: bool, callbacks2: Any) -> Instance | None:
        """A new instance (``None`` when the FMU refuses): logging through sink *env* (*callbacks2*: FMI 2's
        callback struct), FMI 3 co-simulation with event mode and early return when *event_mode*."""
        assert self.extraction is not None
        kind, functions = self.interface.kind, self.functions
        if self.fmi3:
            resources = str(self.extraction.directory / "resources") + os.sep
            if kind == "me":
                return instantiate3(functions, self.name, self.model.guid, resources, env, logging)
            return fmi3.instantiate(functions, self.name, self.model.guid, resources, env, logging, event_mode)
        resources = (self.extraction.directory / "resources").as_uri()
        handle = functions["fmi2Instantiate"](self.name.encode(), FMI2_TYPES[kind], self.model.guid.encode(),
                                              resources.encode(), ctypes.addressof(callbacks2), 0,
                                              1 if logging else 0)
        return Instance(functions, handle) if handle else None

    @property
    def shared(self) -> bool:
        """Whether the library runs from the shared cache entry (not a private copy)."""
        return self.extraction is not None and self.extraction.shared

    def unload(self, finalizing: bool = False) -> None:
        """Unload the library and release the extraction (without waiting for its lock when *finalizing*: see
        :func:`~cosimrun.fmi.extraction.release_extraction`)."""
        if self.slave is not None:
            with contextlib.suppress(Exception):
                self.slave.freeLibrary()
            self.slave = None
            self.functions = {}
        if self.extraction is not None:
            release_extraction(self.extraction, wait=not finalizing)
            self.extraction = None


class Runtime(Protocol):
    """What an instance runs by: a :class:`~cosimrun.fmi.step.Stepper` or an
    :class:`~cosimrun.fmi.exchange.Exchange`."""

    def push_inputs(self, t: float) -> None: ...

    def initialized(self, t0: float) -> None: ...

    def unbind(self) -> None: ...


Bind = Callable[[Instance, Any, ValuePorts], Runtime]
"""Builds the runtime of a new instance from the handle, the library (FMPy's object) and the ports behind the
FMU's values."""


class FMUInstance:
    """One FMU file run as interface *interface* (``cs``/``me``) by the component *name*: library, ports,
    parameter values and, from :meth:`start` to :meth:`free_instance`, an instance with its runtime.

    *now* gives the component's time (for errors of calls between steps).
    """

    def __init__(self, name: str, model: FMUModel, interface: FMUInterface, now: Callable[[], float]) -> None:
        self.name, self.model, self.interface, self.now = name, model, interface, now
        self.fmi3 = model.fmi_version == "3.0"
        self.log = FMULog(name, model.label, self.fmi3)
        self.library = Library(model, interface, name)
        self.values = ParameterValues(model)
        self.ports: PortMap | None = None
        self.requests = Requests()
        self.handle: Instance | None = None
        self.runtime: Any = None
        """The :class:`Runtime` of the current instance (``None`` without one)."""
        self.initializing: float | None = None
        """The start time while the instance is in Initialization Mode (``None`` otherwise)."""
        self.snapshot_ports: tuple[PortState, ...] = ()
        """The ports whose values a snapshot keeps, in its order (set when the instance starts)."""
        self._callbacks: Any = None
        self._settings: tuple[bool, bool] = (False, False)
        """``(logging, event mode)`` the current instance was made with."""
        self._touched: set[str] = set()
        """The variables set on the current instance (a kept instance's next run sets those it leaves to their
        start values)."""

    @property
    def where(self) -> str:
        return self.log.where

    @property
    def event_mode(self) -> bool:
        """Whether the FMU hands its events to cosimrun (FMI 3 co-simulation ``hasEventMode``)."""
        return self.fmi3 and self.interface.has_event_mode

    def rebuild_ports(self, aliases: Mapping[str, Any], states: Sequence[str] | None) -> PortMap:
        """The ports under the ``aliases`` and ``states`` settings (:class:`~cosimrun.fmi.ports.PortMap`)."""
        self.ports = PortMap(self.model, self.where, aliases, states)
        return self.ports

    # ------------------------------------------------------------------ life cycle
    def load(self, private: bool, t0: float) -> None:
        """Load the library (see :meth:`Library.load`); an error names the component, at time *t0*."""
        try:
            self.library.load(private)
        except FMUError as exc:  # the same class (a size limit's fields stay), placed at this component
            error = copy.copy(exc)
            error.args = (f"{self.where}: {exc}",)
            error.message, error.component, error.time = error.args[0], self.name, t0
            raise error from exc

    def start(self, t0: float, values: list[tuple[FMUVariable, Any]], inputs: Mapping[str, PortState],
              outputs: Mapping[str, PortState], bind: Bind, *, tolerance: float | None, logging: bool,
              private: bool, hold: bool = False) -> None:
        """Instantiate at *t0*, set *values* (parameters, start values, states), enter initialization mode, bind
        the runtime to the ports, set the inputs, leave initialization mode; with *hold* the instance stays in
        Initialization Mode until :meth:`exit_initialization` (outputs may be read and inputs set there: FMI 2.0
        and 3.0 allow both, the ``InitialUnknowns`` saying what depends on what)."""
        assert self.ports is not None
        left = self._take_kept(private, logging)
        self.load(private, t0)
        self.requests.clear()  # a new instance has no event or request of the old one
        if left is None:
            self.free_instance()
            if self._callbacks is None and not self.fmi3:
                self._callbacks = callbacks(self.log.env)
            handle = self.library.instantiate(self.log.env, logging, self.event_mode, self._callbacks)
            if handle is None:
                fname = INSTANTIATE3[self.interface.kind] if self.fmi3 else "fmi2Instantiate"
                raise self.log.error(f"{fname} failed", t0)
            self.handle = handle
            self._settings, self._touched = (logging, self.event_mode), set()
        else:  # a kept instance, reset: what the last run set and this one does not goes back to its start value
            given = {var.name for var, _ in values}
            variables = self.model.variables
            values = [(variables[name], variables[name].start) for name in sorted(left - given)
                      if variables[name].start is not None] + values
            handle = self.handle
            assert handle is not None
        if not self.fmi3:
            self.call("fmi2SetupExperiment", t0, 1 if tolerance is not None else 0, tolerance or 0.0, float(t0), 0,
                      0.0)
        self.set_values(values, t0)
        if self.fmi3:
            self.call("fmi3EnterInitializationMode", t0, tolerance is not None, tolerance or 0.0, float(t0), False,
                      0.0)
        else:
            self.call("fmi2EnterInitializationMode", t0)
        self.snapshot_ports = (*inputs.values(), *outputs.values())
        self.runtime = runtime = bind(handle, self.library.slave.dll, self.ports.value_ports(inputs, outputs))
        self.initializing = t0
        if hold:
            runtime.push_inputs(t0)
        else:
            self.exit_initialization()

    def exit_initialization(self) -> None:
        """Leave the Initialization Mode :meth:`start` entered (with the inputs the ports hold now: they are set
        first), then let the runtime settle what follows it."""
        t0 = self.initializing
        assert t0 is not None and self.runtime is not None
        self.initializing = None
        self.runtime.push_inputs(t0)
        self.call("fmi3ExitInitializationMode" if self.fmi3 else "fmi2ExitInitializationMode", t0)
        self.runtime.initialized(t0)

    def call(self, name: str, t: float, *args: Any) -> None:
        """Call the FMI function *name* on the instance at simulation time *t*; a failure raises FMUError."""
        inst = self.handle
        assert inst is not None
        status = inst.f[name](inst.c, *args)
        if status > 1:
            raise self.log.error(f"{name} returned {self.log.status(status)} at t={t:.12g}", t)

    def free_instance(self) -> None:
        """Terminate and free the instance (the runtime first), if there is one."""
        runtime, self.runtime = self.runtime, None
        self.initializing = None
        if runtime is not None:
            runtime.unbind()
        inst, self.handle = self.handle, None
        if inst is None:
            return
        inst.free_spares()
        if isinstance(inst, fmi3.Instance):
            fmi3.free(inst)
            return
        inst.alive = False
        with contextlib.suppress(Exception):
            inst.f["fmi2Terminate"](inst.c)
        with contextlib.suppress(Exception):
            inst.f["fmi2FreeInstance"](inst.c)

    def unload(self, finalizing: bool = False) -> None:
        """Free the instance, unload the library and release the extraction (see :meth:`Library.unload`); kept
        for the next run instead while :func:`keep_instances` is on (see :meth:`_keep`)."""
        if not finalizing and self._keep():
            return
        self.free_instance()
        self.library.unload(finalizing)

    def _keep(self) -> bool:
        """Terminate the instance and keep it with the library for the next run of this FMU by a component of this
        name (see :func:`keep_instances`); False when it is not kept (off, a private copy, terminate failed)."""
        inst = self.handle
        key = _kept_key(self.model, self.interface, self.name)
        if not _keeping or inst is None or not self.library.shared or key in _KEPT or len(_KEPT) >= MAX_KEPT:
            return False
        runtime, self.runtime = self.runtime, None
        self.initializing = None
        if runtime is not None:
            runtime.unbind()
        inst.free_spares()
        terminate = "fmi3Terminate" if self.fmi3 else "fmi2Terminate"
        try:
            status = inst.f[terminate](inst.c)
        except Exception:  # noqa: BLE001 - not kept, freed as without reuse
            status = 3
        if status > 1:
            return False
        self.handle = None
        _KEPT[key] = _Kept(self.library, inst, self.log, self._callbacks, self._settings, self._touched)
        self.library = Library(self.model, self.interface, self.name)
        self._callbacks, self._touched = None, set()
        REUSE.kept += 1
        return True

    def _take_kept(self, private: bool, logging: bool) -> set[str] | None:
        """Start on the kept instance of this FMU and name, reset (see :func:`keep_instances`): the variables its
        last run set, or ``None`` when there is none to start on (a fresh instance is made; a kept library is
        taken over all the same)."""
        if not _keeping or private or self.library.loaded or self.handle is not None:
            return None
        kept = _KEPT.pop(_kept_key(self.model, self.interface, self.name), None)
        if kept is None:
            return None
        if kept.library.model is not self.model or kept.library.interface is not self.interface:
            kept.free()  # the file changed since
            return None
        self.library = kept.library
        inst = kept.handle
        if kept.settings != (logging, self.event_mode) or _reset(kept.library, inst) > 1:
            kept.free_handle()
            REUSE.fresh += 1
            return None
        self.log, self._callbacks = kept.log, kept.callbacks  # the instance logs through them
        self.log.messages.clear()
        self.handle = type(inst)(inst.f, inst.c.value)  # snapshots of the last run do not belong to this one
        inst.alive = False
        self._settings, self._touched = kept.settings, set()
        REUSE.reused += 1
        return kept.touched

    def __del__(self) -> None:
        try:
            if self.library.extraction is not None:
                self.unload(finalizing=True)
        except Exception:  # never raise from a finalizer
            pass

    # ------------------------------------------------------------------ values
    def set_values(self, items: list[tuple[FMUVariable, Any]], t: float,
                   parameters: Mapping[str, Any] | None = None) -> None:
        """Set variables at simulation time *t* (an FMI 3 array whole: its other elements from *parameters*, else
        their start values)."""
        assert self.handle is not None
        if self.fmi3:
            items = self.values.whole_arrays(items, parameters or {})
        self._touched.update(var.name for var, _ in items)
        set_values(self.handle, items, t, self.log)

    def get_values(self, variables: Sequence[FMUVariable]) -> list[Any]:
        """The current values of *variables*."""
        assert self.handle is not None
        return get_values(self.handle, variables, self.now(), self.log)

    # ------------------------------------------------------------------ FMU states
    def snapshot(self, t: float) -> Snapshot:
        """The FMU state (``fmi2GetFMUstate``), time *t* and the port values (see :attr:`snapshot_ports`)."""
        inst = self.handle
        if inst is None:
            raise FMUError(f"{self.where}: call initialize(t0) before snapshot_state", component=self.name, time=t)
        state = inst.spare_state()
        fname = "fmi3GetFMUState" if self.fmi3 else "fmi2GetFMUstate"
        status = inst.f[fname](inst.c, ctypes.byref(state))
        if status > 1:
            inst.free_state(state)
            raise self.log.error(f"{fname} returned {self.log.status(status)} at t={t:.12g}", t)
        return Snapshot(inst, state, t, [p.value for p in self.snapshot_ports])

    def restore(self, snapshot: Any, t: float) -> float:
        """Return exactly to *snapshot* (``fmi2SetFMUstate``); ports get their values of that time, which is
        returned. Events and stop requests made after it are forgotten."""
        if not isinstance(snapshot, Snapshot):
            raise ConfigError(None, f"{self.where}: not a snapshot of an FMU component: {snapshot!r}")
        inst = self.handle
        if snapshot.instance is not inst or inst is None:
            raise ConfigError(None, f"{self.where}: the snapshot belongs to another FMU instance (taken before a "
                                    "reset, set_state or free, or by another component); it cannot be restored")
        fname = "fmi3SetFMUState" if self.fmi3 else "fmi2SetFMUstate"
        status = inst.f[fname](inst.c, snapshot.state)
        if status > 1:
            raise self.log.error(f"{fname} returned {self.log.status(status)} at t={t:.12g}", t)
        for port, value in zip(self.snapshot_ports, snapshot.values, strict=True):
            port.value = value
        self.requests.clear()  # the masters step nothing past a stop: a snapshot is from before it
        return snapshot.t


# ------------------------------------------------------------------ instances kept between runs
@dataclass
class ReuseCounts:
    """What :func:`keep_instances` did in this process."""

    kept: int = 0
    """Instances kept at the end of a run."""
    reused: int = 0
    """Runs that started on a kept instance after a successful reset."""
    fresh: int = 0
    """Kept instances not started on (the reset failed or the instantiation settings differed): freed, and a fresh
    instance made from the kept library."""


REUSE = ReuseCounts()
"""The counts of this process (see :class:`ReuseCounts`)."""
MAX_KEPT = 64
"""The most instances kept at once (one per FMU file, interface and component name)."""


class _Kept:
    """A terminated instance with its library, logger and settings, waiting for the next run."""

    __slots__ = ("library", "handle", "log", "callbacks", "settings", "touched")

    def __init__(self, library: Library, handle: Instance, log: FMULog, callbacks2: Any, settings: tuple[bool, bool],
                 touched: set[str]) -> None:
        self.library, self.handle, self.log, self.callbacks = library, handle, log, callbacks2
        self.settings, self.touched = settings, touched

    def free_handle(self) -> None:
        """Free the instance (terminated already)."""
        inst = self.handle
        inst.alive = False
        with contextlib.suppress(Exception):
            inst.f["fmi3FreeInstance" if self.library.fmi3 else "fmi2FreeInstance"](inst.c)

    def free(self, finalizing: bool = False) -> None:
        """Free the instance, unload the library and release the extraction."""
        self.free_handle()
        self.library.unload(finalizing)


_KEPT: dict[tuple[str, str, str], _Kept] = {}
_keeping = False
_dropped_at_exit = False
"""Whether :func:`drop_kept_instances` runs at the exit of this process (registered once)."""


def _kept_key(model: FMUModel, interface: FMUInterface, name: str) -> tuple[str, str, str]:
    return str(model.path), interface.kind, name


def _reset(library: Library, inst: Instance) -> int:
    """``fmi2Reset``/``fmi3Reset`` of *inst* of *library*: its status (3, an error, when the library does not
    export it)."""
    try:
        function = library.slave.dll["fmi3Reset" if library.fmi3 else "fmi2Reset"]
        function.restype, function.argtypes = ctypes.c_int, [ctypes.c_void_p]
        return int(function(inst.c))
    except Exception:  # noqa: BLE001 - a reset that is not there or cannot be called failed
        return 3


def keep_instances(enabled: bool = True) -> None:
    """Keep each FMU's library and instance at the end of a run in this process, for the next run of that FMU by a
    component of that name (``fmi2Reset``/``fmi3Reset``, then its parameters and start values): a warm sweep worker
    then pays the extraction, loading and instantiation once. *enabled* false frees what is kept and stops keeping.

    Results equal those of a fresh instance for an FMU whose reset behaves as the standard says (back to the state
    after instantiation); what the last run set and the next leaves alone is set back to its start value as well.
    The caller drops the kept instances (:func:`drop_kept_instances`) after a run that did not complete.
    """
    global _keeping, _dropped_at_exit
    if enabled and not _dropped_at_exit:
        atexit.register(drop_kept_instances, finalizing=True)
        _dropped_at_exit = True
    elif not enabled:
        drop_kept_instances()
    _keeping = enabled


def drop_kept_instances(finalizing: bool = False) -> None:
    """Free every kept instance and unload its library (see :func:`keep_instances`)."""
    while _KEPT:
        _KEPT.popitem()[1].free(finalizing)
