"""The ``/checkpoints`` group of a results file, and the parent a restarted run continues.

Layout::

    /checkpoints/<000000>/      one group per checkpoint, in the order taken
        attrs: time, checksum (SHA-256 of the state, see SystemState.checksum)
        <entry>                 one dataset per entry of the SystemState (nested groups for ``/``):
                                numbers as float64 / int64 / bool arrays, strings as UTF-8 strings

A run restarted from a checkpoint (``run.restart=PATH[@t]``) reads its parent (:func:`read_parent`): the
checkpoint (its checksum checked), the samples and events the file held when it was taken, and the
checkpoints before it. The new results hold all of them (:class:`ContinuingSink`), so they are those of the
uninterrupted run; the root attributes ``parent_path``, ``parent_time`` and ``parent_fingerprint`` name the
parent. The new file may be the parent's own path: the parent is read whole before it is replaced.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from cosimrun.checkpoint.state import SystemState
from cosimrun.errors import ConfigError
from cosimrun.storage.hdf5 import HDF5Writer, partial_path

GROUP = "checkpoints"
_STR = h5py.string_dtype("utf-8")


def write_checkpoint(writer: HDF5Writer, state: SystemState) -> str:
    """Write *state* as the next group of ``/checkpoints`` of *writer*'s file and flush it; the group's path."""
    f = writer.file
    root = f.require_group(GROUP)
    name = f"{len(root):06d}"
    group = root.create_group(name)
    try:
        for key, value in state.entries.items():
            if isinstance(value, str):
                group.create_dataset(key, data=value, dtype=_STR)
            else:
                group.create_dataset(key, data=np.asarray(value))
        group.attrs["time"] = state.time
        group.attrs["checksum"] = state.checksum()
    except BaseException:
        del root[name]  # whole or not at all
        raise
    f.flush()
    return group.name


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint of a results file."""

    name: str
    time: float
    checksum: str


def list_checkpoints(f: h5py.File) -> list[CheckpointInfo]:
    """The checkpoints of an open results file, in the order taken."""
    root = f.get(GROUP)
    if root is None:
        return []
    return [CheckpointInfo(name, float(g.attrs["time"]), str(g.attrs["checksum"])) for name, g in root.items()]


def read_state(group: h5py.Group) -> SystemState:
    """The :class:`SystemState` stored in checkpoint *group* (its checksum not checked)."""
    entries: dict[str, Any] = {}

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            if h5py.check_string_dtype(obj.dtype) is not None:
                entries[name] = obj.asstr()[()]
            else:
                entries[name] = np.asarray(obj[()])

    group.visititems(visit)
    return SystemState(entries)


@dataclass
class Parent:
    """What a restarted run takes from its parent's results file (see the module)."""

    path: Path
    state: SystemState
    checkpoints: list[SystemState]
    """The parent's checkpoints up to and including :attr:`state`."""
    samples: dict[str, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = field(default_factory=dict)
    """Per component: times, micro steps and ``{port: values}`` up to the checkpoint."""
    events: list[tuple[float, int, str, str]] = field(default_factory=list)

    @property
    def attrs(self) -> dict[str, Any]:
        """The root attributes that name the parent in the new results."""
        return {"parent_path": str(self.path), "parent_time": self.state.time,
                "parent_fingerprint": hashlib.sha256(self.state.fingerprint.encode()).hexdigest()}


def read_parent(reference: str | os.PathLike[str], at: float | None, key: str = "run.restart") -> Parent:
    """The checkpoint of the results file *reference* at time *at* (the last one for ``None``), with the samples,
    events and earlier checkpoints of the file up to it; one-line :class:`ConfigError` (keyed *key*) for a
    missing file, a file without checkpoints, an unknown time or a damaged checkpoint (checksum)."""
    path = Path(reference).expanduser()
    if not path.is_file() and partial_path(path).is_file():
        path = partial_path(path)
    if not path.is_file():
        raise ConfigError(key, f"{reference}: no such results file")
    try:
        f = h5py.File(path, "r", locking=False)
    except OSError as exc:
        raise ConfigError(key, f"{path}: not a readable results file ({exc})") from None
    with f:
        infos = list_checkpoints(f)
        if not infos:
            raise ConfigError(key, f"{path} holds no checkpoints (run it with run.checkpoint set)")
        if at is None:
            chosen = len(infos) - 1
        else:
            matches = [i for i, info in enumerate(infos) if abs(info.time - at) <= 1e-9 * max(1.0, abs(at))]
            if not matches:
                times = ", ".join(f"{info.time:.12g}" for info in infos)
                raise ConfigError(key, f"{path} has no checkpoint at t={at:.12g} (checkpoints at t={times})")
            chosen = matches[-1]
        states = []
        for info in infos[:chosen + 1]:
            state = read_state(f[GROUP][info.name])
            found = state.checksum()
            if found != info.checksum:
                raise ConfigError(key, f"the checkpoint at t={info.time:.12g} of {path} is damaged: its checksum is "
                                       f"{found[:16]}..., stored {info.checksum[:16]}...")
            states.append(state)
        state = states[-1]
        position = state.recorder()
        parent = Parent(path, state, states)
        for name, n in position.get("samples", {}).items():
            group = f["components"][name]
            ports = {p: group[p][:n] for p in group if p not in ("time", "micro")}
            parent.samples[name] = (group["time"][:n], group["micro"][:n], ports)
        m = position.get("events", 0)
        events = f["events"]
        parent.events = list(zip(events["time"][:m].tolist(), events["micro"][:m].tolist(),
                                 events["component"].asstr()[:m].tolist(), events["event"].asstr()[:m].tolist(),
                                 strict=True))
    return parent


class ContinuingSink:
    """The sink of a restarted run's recorder: the results writer, given the parent's samples of each component
    as the recorder declares it (and the parent's events and checkpoints at once), so the new file continues the
    parent's."""

    def __init__(self, writer: HDF5Writer, parent: Parent) -> None:
        self.writer = writer
        self.parent = parent
        if parent.events:
            writer.write_events(parent.events, flush=False)
        for state in parent.checkpoints:
            write_checkpoint(writer, state)

    def add_component(self, name: str, ports: Mapping[str, tuple[str | None, str]]) -> None:
        self.writer.add_component(name, ports)
        saved = self.parent.samples.get(name)
        if saved is None:
            raise ConfigError("storage.record", f"component {name!r} is recorded but was not in the parent "
                                                f"{self.parent.path}: record the ports the parent recorded")
        time, micro, values = saved
        if set(values) != set(ports):
            raise ConfigError("storage.record", f"the ports of {name!r} recorded differ from the parent's "
                                                f"({', '.join(sorted(values))}): record the ports the parent recorded")
        if len(time):
            decoded = {p: _decoded(v) for p, v in values.items()}
            self.writer.append(name, time, micro, decoded, flush=False)

    def append(self, component: str, time: np.ndarray, micro: np.ndarray | None,
               values: Mapping[str, np.ndarray], *, flush: bool = True) -> None:
        self.writer.append(component, time, micro, values, flush=flush)

    def write_events(self, rows: Iterable[Any], *, flush: bool = True) -> int:
        return self.writer.write_events(rows, flush=flush)

    def n_samples(self, component: str) -> int:
        return self.writer.n_samples(component)

    def n_events(self) -> int:
        return self.writer.n_events()

    def flush(self) -> None:
        self.writer.flush()


def _decoded(values: np.ndarray) -> np.ndarray:
    """Stored values as the recorder hands them over (strings decoded)."""
    if values.dtype.kind in "OS":
        return np.array([v.decode() if isinstance(v, bytes) else v for v in values], dtype=object)
    return values
