"""The saved state of a whole coupled system at a communication point (:class:`SystemState`).

A state is a flat mapping of named entries (see :mod:`cosimrun.checkpoint.form`)::

    format                     "cosimrun-state/1"
    time                       the communication point (float64)
    run/t0, run/dt             the run's start and macro step
    fingerprint                the structure and settings, one line each (:func:`fingerprint`)
    components/<name>/<key>/…  each component's ``checkpoint_state()``, one packed value per key
    master/<key>/…             the master run's ``save_state()``: tick, clock marks, statistics, step control,
                               extrapolation, coupling-error sums, state events
    recorder/…                 the recorder's position: samples per recorded component, events

Every entry is a numeric array or a string: no pickle. :meth:`SystemState.checksum` is the SHA-256 of every
entry's name, type and bytes, which a results file stores beside the state to refuse a damaged one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.checkpoint.form import Entries, Leaf, names_under, pack, unpack

if TYPE_CHECKING:
    from cosimrun.core.component import CoSimComponent

FORMAT = "cosimrun-state/1"


@dataclass(frozen=True)
class SystemState:
    """One saved state (see the module): its entries and what they say at a glance."""

    entries: Mapping[str, Leaf]

    @property
    def time(self) -> float:
        """The communication point the state was taken at."""
        return float(np.asarray(self.entries["time"]))

    @property
    def fingerprint(self) -> str:
        """The structure and settings of the system the state belongs to (:func:`fingerprint`)."""
        return str(self.entries["fingerprint"])

    @property
    def run_settings(self) -> tuple[float, float]:
        """``(t0, dt)`` of the run the state was taken in."""
        return float(np.asarray(self.entries["run/t0"])), float(np.asarray(self.entries["run/dt"]))

    def checksum(self) -> str:
        """SHA-256 (hex) of every entry's name, type, shape and bytes, in name order."""
        return checksum(self.entries)

    def component(self, name: str) -> dict[str, Any]:
        """The plain state of component *name* (as its ``checkpoint_state`` gave it)."""
        prefix = f"components/{name}"
        return {key: unpack(self.entries, f"{prefix}/{key}") for key in names_under(self.entries, prefix)}

    def master(self) -> dict[str, Any]:
        """The plain state of the master run (as its ``save_state`` gave it)."""
        return {key: unpack(self.entries, f"master/{key}") for key in names_under(self.entries, "master")}

    def recorder(self) -> dict[str, Any]:
        """The recorder's position: ``{"samples": {component: n}, "events": n}``."""
        return {key: unpack(self.entries, f"recorder/{key}") for key in names_under(self.entries, "recorder")}


def build_state(time: float, t0: float, dt: float, print_: str, components: Mapping[str, CoSimComponent],
                master: Mapping[str, Any], recorder: Mapping[str, Any]) -> SystemState:
    """The :class:`SystemState` of *components*, the master run's plain state and the recorder's position."""
    entries: Entries = {
        "format": FORMAT,
        "time": np.array(float(time)),
        "run/t0": np.array(float(t0)),
        "run/dt": np.array(float(dt)),
        "fingerprint": print_,
    }
    for name, comp in components.items():
        for key, value in comp.checkpoint_state().items():
            pack(value, f"components/{name}/{key}", entries)
    for key, value in master.items():
        pack(value, f"master/{key}", entries)
    for key, value in recorder.items():
        pack(value, f"recorder/{key}", entries)
    return SystemState(entries)


def checksum(entries: Mapping[str, Leaf]) -> str:
    """SHA-256 (hex) of *entries*: each name, its kind (dtype and shape, or ``str``) and its bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(entries):
        value = entries[name]
        digest.update(name.encode() + b"\0")
        if isinstance(value, str):
            digest.update(b"str\0" + value.encode() + b"\0")
        else:
            arr = np.ascontiguousarray(value)
            digest.update(f"{arr.dtype.str}{arr.shape}\0".encode() + arr.tobytes())
    return digest.hexdigest()


def fingerprint(components: Mapping[str, CoSimComponent], connections: Iterable[Any], events: Iterable[Any],
                initial_values: Mapping[str, Any], master: str, settings: Mapping[str, Any]) -> str:
    """The structure and settings a state belongs to, one line each: every component (and model of a multi-model
    component) with its type, ports and parameters, every connection with its transformation, event connections,
    initial values, the master and its settings. Two systems whose lines differ cannot continue each other's
    states (:func:`first_difference` names where)."""
    lines: list[str] = []

    def describe(path: str, comp: CoSimComponent) -> None:
        cls = type(comp)
        lines.append(f"component {path}: {cls.__module__}.{cls.__qualname__}")
        for kind, specs in (("input", comp.input_specs), ("output", comp.output_specs)):
            for name, spec in specs.items():
                lines.append(f"{kind} {path}.{name}: {spec.type.value} [{spec.unit_name or ''}]")
        for name in sorted(comp.parameters):
            lines.append(f"parameter {path}.{name} = {comp.parameters[name]!r}")
        for mode, model in getattr(comp, "models", {}).items():
            describe(f"{path}/{mode}", model)

    for name, comp in components.items():
        describe(name, comp)
    for conn in connections:
        lines.append(f"connection {conn} scale={conn.scale!r} offset={conn.offset!r} "
                     f"convert_units={conn.convert_units!r}")
    lines.extend(f"event {ev}" for ev in events)
    lines.extend(f"initial {port} = {value!r}" for port, value in sorted(initial_values.items()))
    lines.append(f"master {master}")
    lines.extend(f"master.{key} = {value!r}" for key, value in settings.items())
    return "\n".join(lines)


def first_difference(ours: str, theirs: str) -> str | None:
    """The first line where fingerprint *theirs* (a state's) differs from *ours* (this system's), said in words;
    ``None`` when they are equal."""
    a, b = ours.split("\n"), theirs.split("\n")
    for mine, saved in zip(a, b, strict=False):
        if mine != saved:
            return f"this system has '{mine}' where the checkpoint has '{saved}'"
    if len(a) > len(b):
        return f"this system has '{a[len(b)]}', which the checkpoint does not"
    if len(b) > len(a):
        return f"the checkpoint has '{b[len(a)]}', which this system does not"
    return None
