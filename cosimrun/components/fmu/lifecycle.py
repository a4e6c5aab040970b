"""The FMI life cycle of the FMU component: load, instantiate, initialize, FMU states, physical state, free."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pint

from cosimrun.components.fmu.base import FMUBase
from cosimrun.core.units import Q_
from cosimrun.errors import MissingNameError, UnknownNameError
from cosimrun.fmi import fmi3
from cosimrun.fmi.description import FMUVariable
from cosimrun.fmi.errors import FMUError, status_name
from cosimrun.fmi.extraction import Extraction, acquire_extraction, release_extraction
from cosimrun.fmi.fmi2 import (
    C_TYPES,
    FMI2_TYPES,
    GETTERS,
    SETTERS,
    Instance,
    Snapshot,
    callbacks,
    from_c,
    raw_functions,
)

_INSTANTIATE3 = {"cs": "fmi3InstantiateCoSimulation", "me": "fmi3InstantiateModelExchange"}
"""The FMI 3.0 instantiate function of each interface kind."""


class FMULifecycle(FMUBase):
    """The FMU's library and instance: ``initialize`` instantiates, ``reset`` and ``free`` let go of it.

    The library is loaded once and kept until ``free`` (or another ``path``);
    an instance lives from ``initialize`` to ``reset``/``free`` and is made
    afresh by ``set_state``.
    """

    may_request_stop = True
    """An FMU may ask to terminate the simulation (:attr:`stop_requested`, see :meth:`_request_stop`)."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._slave: Any = None
        self._functions: dict[str, Any] = {}
        self._extraction: Extraction | None = None
        self._instance: Instance | None = None
        self._cb: Any = None
        self._snapshot_ports: tuple[Any, ...] = ()
        """The ports whose values a snapshot keeps, in its order (set when the instance starts)."""

    def _initialize_component(self, t0: float) -> None:
        if self.model is None:
            raise ValueError(f"component {self.name!r} (type fmu): parameter 'path' is not set; "
                             "name an FMU file (params: {path: model.fmu})")
        self._start_instance(t0)

    def _load(self, t0: float) -> None:
        """Extract the FMU (the shared cache entry, or a private copy) and load the library of its
        :attr:`INTERFACE` once."""
        if self._slave is not None:
            return
        model = self.model
        assert model is not None
        interface = model.interface(self.INTERFACE)
        try:
            self._extraction = acquire_extraction(model.path, once_per_process=interface.only_once_per_process,
                                                  private=self.parameters["private_copy"])
        except FMUError as exc:  # the same class (a size limit's fields stay), placed at this component
            error = copy.copy(exc)
            error.args = (f"{self._where()}: {exc}",)
            error.message, error.component, error.time = error.args[0], self.name, t0
            raise error from exc
        try:
            self._open_library(str(self._extraction.directory), interface.identifier)
        except Exception as exc:
            release_extraction(self._extraction)
            self._extraction = None
            raise FMUError(f"{self._where()}: cannot load the FMU's shared library: {exc}",
                           component=self.name, time=t0) from exc

    def _open_library(self, directory: str, identifier: str) -> None:
        """Load the co-simulation library *identifier* of the FMU extracted to *directory* into ``_slave`` (FMPy's
        object) and bind the functions cosimrun calls into ``_functions``."""
        assert self.model is not None
        if self.is_fmi3:
            from fmpy.fmi3 import FMU3Slave

            self._slave = FMU3Slave(guid=self.model.guid, unzipDirectory=directory, modelIdentifier=identifier,
                                    instanceName=self.name)
            self._functions = fmi3.raw_functions(self._slave.dll)
        else:
            from fmpy.fmi2 import FMU2Slave

            self._slave = FMU2Slave(guid=self.model.guid, unzipDirectory=directory, modelIdentifier=identifier,
                                    instanceName=self.name)
            self._functions = raw_functions(self._slave.dll)

    def _unload(self, finalizing: bool = False) -> None:
        """Free the instance, unload the library and release the extraction (without waiting for its lock when
        *finalizing*: see :func:`release_extraction`)."""
        self._free_instance()
        if self._slave is not None:
            with contextlib.suppress(Exception):
                self._slave.freeLibrary()
            self._slave = None
            self._functions = {}
        if self._extraction is not None:
            release_extraction(self._extraction, wait=not finalizing)
            self._extraction = None

    def _free_instance(self) -> None:
        self._unbind()
        inst, self._instance = self._instance, None
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

    def _call(self, name: str, t: float, *args: Any) -> None:
        """Call the FMI function *name* on the instance at simulation time *t*; a failure raises FMUError."""
        inst = self._instance
        assert inst is not None
        status = inst.f[name](inst.c, *args)
        if status > 1:
            raise self._error(f"{name} returned {self._status(status)} at t={t:.12g}", t)

    def _start_instance(self, t0: float, states: Mapping[str, float] | None = None) -> None:
        """Instantiate the :attr:`INTERFACE` at *t0*, set parameters, start values, *states* and inputs, leave
        initialization mode and finish with :meth:`_initialized`."""
        model = self.model
        assert model is not None
        self._load(t0)
        self._free_instance()
        self.pending_event = None  # a new instance has no event of the old one to handle
        self.stop_requested = None  # nor its request to terminate
        if self._cb is None:
            self._cb = callbacks(self._env)
        functions = self._functions
        if self.is_fmi3:
            resources = str(self._extraction.directory / "resources") + os.sep  # type: ignore[union-attr]
            instance = self._instantiate3(resources)
            if instance is None:
                raise self._error(f"{_INSTANTIATE3[self.INTERFACE]} failed", t0)
            self._instance = instance
        else:
            resources = (self._extraction.directory / "resources").as_uri()  # type: ignore[union-attr]
            handle = functions["fmi2Instantiate"](
                self.name.encode(), FMI2_TYPES[self.INTERFACE], model.guid.encode(), resources.encode(),
                ctypes.addressof(self._cb), 0, 1 if self.parameters["logging"] else 0,
            )
            if not handle:
                raise self._error("fmi2Instantiate failed", t0)
            self._instance = Instance(functions, handle)
        tol = self.parameters["tolerance"]
        if not self.is_fmi3:
            self._call("fmi2SetupExperiment", t0, 1 if tol is not None else 0, tol or 0.0, float(t0), 0, 0.0)
        values: dict[str, tuple[FMUVariable, Any]] = {}
        for name, value in self._start_values.items():
            values[name] = (model.variables[name], value)
        for name, value in self._fmu_values.items():
            values[name] = (model.variables[name], value)
        for name, value in (states or {}).items():
            values[name] = (model.variables[name], value)
        self._set_values(list(values.values()), t0)
        if self.is_fmi3:
            self._call("fmi3EnterInitializationMode", t0, tol is not None, tol or 0.0, float(t0), False, 0.0)
        else:
            self._call("fmi2EnterInitializationMode", t0)
        self._snapshot_ports = (*self.inputs.values(), *self.outputs.values())
        self._bind()
        self._push_inputs()
        self._call("fmi3ExitInitializationMode" if self.is_fmi3 else "fmi2ExitInitializationMode", t0)
        self._initialized(t0)

    def _instantiate3(self, resources: str) -> fmi3.Instance | None:
        """``fmi3InstantiateCoSimulation`` (early return allowed with event mode); ``None`` when it fails."""
        assert self.model is not None
        return fmi3.instantiate(self._functions, self.name, self.model.guid, resources, self._env,
                                self.parameters["logging"], self._event_mode)

    def _request_stop(self, how: str) -> None:
        """The FMU asks to terminate the simulation at the component's time; *how*: the FMI call that said so."""
        self.stop_requested = f"asked to terminate ({how})"

    def _stepped_after_stop(self, t: float) -> FMUError:
        """The error of a step from *t* after the FMU asked to terminate (:attr:`stop_requested`): a master that
        does not end the run there, or an FMU inside a multi-model component."""
        return self._error(f"asked to step from t={t:.12g} after it {self.stop_requested}; a run ends where an FMU "
                           "asks to terminate only when the FMU is a component of the system itself (not a mode of "
                           "a multi-model component)", t)

    def _push_inputs(self) -> None:
        """Set every input from its port."""
        self._push_all()

    def _initialized(self, t0: float) -> None:
        """Initialization mode has ended: with event mode used, an FMI 3 FMU is in event mode, settled here."""
        if self.is_fmi3 and self._event_mode:
            self._settle_events(t0)

    def _set_values(self, items: list[tuple[FMUVariable, Any]], t: float) -> None:
        """Set variables through ``fmi2Set*``/``fmi3Set*``, grouped by type, at simulation time *t*."""
        inst = self._instance
        assert inst is not None
        if self.is_fmi3:
            for fname, vrs, buf, names in fmi3.value_groups(self._whole_arrays(items)):
                status = inst.f[fname](inst.c, vrs, len(vrs), buf, len(buf))
                if status > 1:
                    raise self._error(f"{fname} of {', '.join(names)} returned {self._status(status)}", t)
            return
        for type_name in ("Real", "Integer", "Boolean", "String"):
            chosen = [(v, x) for v, x in items if v.type == type_name or (type_name == "Integer"
                                                                            and v.type == "Enumeration")]
            if not chosen:
                continue
            n = len(chosen)
            vr = (ctypes.c_uint * n)(*(v.vr for v, _ in chosen))
            raw = [x.encode() if type_name == "String" else x for _, x in chosen]
            buf = (C_TYPES[type_name] * n)(*raw)
            status = inst.f[SETTERS[type_name]](inst.c, vr, n, buf)
            if status > 1:
                names = ", ".join(v.name for v, _ in chosen)
                raise self._error(f"{SETTERS[type_name]} of {names} returned {status_name(status)}", t)

    def _whole_arrays(self, items: list[tuple[FMUVariable, Any]]) -> list[tuple[FMUVariable, Any]]:
        """*items* completed with the other elements of each FMI 3 array among them (FMI 3 sets arrays whole):
        their current parameter values, else their start values."""
        assert self.model is not None
        given = {v.slot for v, _ in items}
        extra = []
        for var in {v.vr: v for v, _ in items if v.index is not None}.values():
            for other in self.model.variables.values():
                if other.vr == var.vr and other.slot not in given and other.fmi_type == var.fmi_type \
                        and other.alias_of is None:
                    value = self.parameters.get(other.name, self._start_values.get(other.name, other.start))
                    extra.append((other, value))
        return [*items, *extra]

    def _get_values(self, variables: Sequence[FMUVariable]) -> list[Any]:
        """The current values of *variables*, one ``fmi2Get*``/``fmi3Get*`` call each."""
        inst = self._instance
        assert inst is not None
        out = []
        for var in variables:
            if self.is_fmi3:
                status, value = fmi3.read_value(inst, var)
                fname = fmi3.GETTERS[var.fmi_type]
            else:
                vr = (ctypes.c_uint * 1)(var.vr)
                buf = (C_TYPES[var.type] * 1)()
                fname = GETTERS[var.type]
                status = inst.f[fname](inst.c, vr, 1, buf)
                value = from_c(var.type, buf[0])
            if status > 1:
                raise self._error(f"{fname} of {var.name} returned {self._status(status)}", self.t)
            out.append(value)
        return out

    # ------------------------------------------------------------------ rollback
    def snapshot_state(self) -> Any:
        """Capture the FMU state (``fmi2GetFMUstate``), the time and the port values."""
        if not self.supports_rollback:
            raise NotImplementedError(
                f"{self._where()} does not support rollback (canGetAndSetFMUstate is false)")
        inst = self._instance
        if inst is None:
            raise RuntimeError(f"{self._where()}: call initialize(t0) before snapshot_state")
        state = inst.spare_state()
        fname = "fmi3GetFMUState" if self.is_fmi3 else "fmi2GetFMUstate"
        status = inst.f[fname](inst.c, ctypes.byref(state))
        if status > 1:
            inst.free_state(state)
            raise self._error(f"{fname} returned {self._status(status)} at t={self.t:.12g}", self.t)
        return Snapshot(inst, state, self.t, [p.value for p in self._snapshot_ports])

    def restore_state(self, snapshot: Any, t: float) -> None:
        """Return exactly to *snapshot* (``fmi2SetFMUstate``); ports get their values of that time."""
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"{self._where()}: not a snapshot of an FMU component: {snapshot!r}")
        inst = self._instance
        if snapshot.instance is not inst:
            raise ValueError(f"{self._where()}: the snapshot belongs to another FMU instance (taken before a "
                             "reset, set_state or free, or by another component); it cannot be restored")
        fname = "fmi3SetFMUState" if self.is_fmi3 else "fmi2SetFMUstate"
        status = inst.f[fname](inst.c, snapshot.state)
        if status > 1:
            raise self._error(f"{fname} returned {self._status(status)} at t={t:.12g}", t)
        for port, value in zip(self._snapshot_ports, snapshot.values, strict=True):
            port.value = value
        self.t = snapshot.t
        self.pending_event = None
        self.stop_requested = None  # the masters step nothing past a stop: a snapshot is from before it

    # ------------------------------------------------------------------ physical state
    def get_state(self) -> dict[str, Any]:
        """``{state: {'value', 'unit'}}`` of the state variables (read from the FMU once initialized)."""
        names = [name for name, _ in self._state_vars]
        variables = [v for _, v in self._state_vars]
        if self._instance is not None:
            values = self._get_values(variables)
        else:
            values = [self._start_values.get(v.name, v.start) for v in variables]
        return {n: {"value": None if x is None else float(x), "unit": v.unit}
                for n, v, x in zip(names, variables, values, strict=True)}

    def set_state(self, state: Mapping[str, Any], t: float) -> None:
        """Set every state variable (``{name: {'value', 'unit'}}``, numbers or quantities) at time *t*.

        Once initialized this re-instantiates the FMU at *t* with the states as
        start values (FMI 2.0 lets a co-simulation master set them only before
        initialization); snapshots taken before cannot be restored afterwards.
        """
        if not isinstance(state, Mapping):
            raise TypeError(f"{self._where()}: set_state expects a mapping, got {type(state).__name__}")
        known = dict(self._state_vars)
        for key in state:
            if key not in known:
                raise UnknownNameError("state", key, known, f"of {self._where()}")
        missing = [n for n in known if n not in state]
        if missing:
            raise MissingNameError(f"{self._where()}: set_state is missing state(s) {', '.join(missing)} "
                                   f"(expected: {', '.join(known)})")
        values: dict[str, float] = {}
        for name, var in self._state_vars:
            entry = state[name]
            if isinstance(entry, Mapping):
                if "value" not in entry:
                    raise ValueError(f"{self._where()}: state {name!r} entry has no 'value'")
                value, unit = entry["value"], entry.get("unit")
                if unit is not None and not isinstance(value, (str, pint.Quantity)):
                    value = Q_(float(value), unit)
                entry = value
            values[var.name] = self._convert(var, entry, f"state {name!r}")
        if not self._is_initialized:  # they become start values, like the 'start' setting
            self._start_values.update(values)
            return
        self._start_instance(t, values)
        self.t = float(t)
        self._read_outputs()

    # ------------------------------------------------------------------ end of life
    def reset(self) -> None:
        """Forget time and history; the FMU instance is freed and re-created by the next initialize."""
        super().reset()
        self._free_instance()
        for name, port in self.inputs.items():
            var = self._port_vars.get(name)
            if var is not None and var.start is not None:
                port.value = self._start_values.get(var.name, var.start)

    def free(self) -> None:
        """Terminate and free the FMU instance, unload its library and release the extracted files.

        Histories stay readable; the component can be initialized again later.
        """
        self._unload()
        self._is_initialized = False

    def __del__(self) -> None:
        try:
            if self._extraction is not None:
                self._unload(finalizing=True)
        except Exception:  # never raise from a finalizer
            pass
