"""The ``/checkpoints`` group of a results file, and the parent a restarted run continues.

Layout::

    /checkpoints/<000000>/      one group per checkpoint, in the order taken
        attrs: time, checksum (SHA-256 of the state, see SystemState.checksum)
        names, kinds, shapes    every entry of the SystemState: its name, ``str`` or dtype, shape (JSON)
        offsets                 where its data starts in the dataset of its kind
        strings                 the string entries (UTF-8)
        float64, int64, bool, uint8   the numeric entries of each dtype, one after the other

A run restarted from a checkpoint (``run.restart=PATH[@t]``) reads its parent (:func:`read_parent`): the
checkpoint (its checksum checked), the samples and events the file held when it was taken, and the
checkpoints before it. The new results hold all of them (:class:`ContinuingSink`), so they are those of the
uninterrupted run; the root attributes ``parent_path``, ``parent_time`` and ``parent_fingerprint`` name the
parent. The new file may be the parent's own path: the parent is read whole before it is replaced.
"""

from __future__ import annotations

import hashlib
import json
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


KINDS = ("float64", "int64", "bool", "uint8")
"""The numeric dtypes of state entries; each has one dataset per checkpoint, the entries one after the other."""


def write_checkpoint(writer: HDF5Writer, state: SystemState) -> str:
    """Write *state* as the next group of ``/checkpoints`` of *writer*'s file and flush it; the group's path.

    The entries are stored by type, a few datasets per checkpoint whatever the number of entries (creating a
    dataset costs far more than its bytes): ``names`` (every entry's name, in order), ``kinds`` (``str`` or
    its dtype), ``shapes`` (JSON, ``[]`` for a scalar), ``offsets`` (where its data starts in the dataset of its kind),
    ``strings`` and one dataset per numeric dtype (:data:`KINDS`)."""
    names, kinds, shapes, offsets = [], [], [], []
    data: dict[str, list[np.ndarray]] = {kind: [] for kind in KINDS}
    sizes = dict.fromkeys(KINDS, 0)
    strings: list[str] = []
    for name, value in state.entries.items():
        names.append(name)
        if isinstance(value, str):
            kinds.append("str")
            shapes.append("[]")
            offsets.append(len(strings))
            strings.append(value)
            continue
        arr = np.asarray(value)
        kind = arr.dtype.name
        if kind not in data:
            raise ConfigError(None, f"checkpoint entry {name!r}: a {kind} array cannot be stored")
        kinds.append(kind)
        shapes.append(json.dumps(list(arr.shape)))
        offsets.append(sizes[kind])
        data[kind].append(arr.reshape(-1))
        sizes[kind] += arr.size
    f = writer.file
    root = f.require_group(GROUP)
    name = f"{len(root):06d}"
    group = root.create_group(name)
    try:
        group.create_dataset("names", data=np.array(names, dtype=object), dtype=_STR)
        group.create_dataset("kinds", data=np.array(kinds, dtype=object), dtype=_STR)
        group.create_dataset("shapes", data=np.array(shapes, dtype=object), dtype=_STR)
        group.create_dataset("offsets", data=np.array(offsets, dtype=np.int64))
        group.create_dataset("strings", data=np.array(strings, dtype=object), dtype=_STR)
        for kind in KINDS:
            parts = data[kind]
            group.create_dataset(kind, data=np.concatenate(parts) if parts else np.zeros(0, dtype=kind))
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
    names = group["names"].asstr()[:].tolist()
    kinds = group["kinds"].asstr()[:].tolist()
    shapes = [tuple(json.loads(text)) for text in group["shapes"].asstr()[:].tolist()]
    offsets = group["offsets"][:].tolist()
    strings = group["strings"].asstr()[:].tolist()
    data = {kind: group[kind][:] for kind in KINDS}
    entries: dict[str, Any] = {}
    for name, kind, shape, offset in zip(names, kinds, shapes, offsets, strict=True):
        if kind == "str":
            entries[name] = strings[offset]
        else:
            size = int(np.prod(shape, dtype=np.int64))
            entries[name] = data[kind][offset:offset + size].reshape(shape).copy()
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
