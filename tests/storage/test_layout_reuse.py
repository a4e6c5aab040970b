"""Files and chunk groups made from a layout's image, one job after another in one process, equal files made
object by object: after a job whose file failed half-way, and with two layouts taking turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from cosimrun.storage.chunkfile import ChunkFile
from cosimrun.storage.hdf5 import HDF5Writer
from cosimrun.storage.results import load_results
from cosimrun.storage.verify import verify_results

LAYOUTS = {
    "a": {"src": {"y": ("m", "real")}, "k": {"u": ("m", "real"), "n": (None, "int"), "label": (None, "string")}},
    "b": {"p": {"q": ("rad", "real"), "on": (None, "bool"), "hit": (None, "event")}},
}
CLOCKS = {"started", "finished", "wall_time_s", "data_crc32"}
"""Root attributes that differ between two writes of the same run (times, and checksums over them)."""


class Connection:
    """A coupling error estimate as ``/coupling_error`` stores it."""

    def __init__(self, connection: str, value: float) -> None:
        self.connection, self.unit = connection, "m"
        self.max = self.rms = self.range = self.relative = value
        self.time_of_max = 0.02


def write(writer: HDF5Writer, layout: str, gain: float) -> Path:
    """One run of *layout* into *writer*, its values depending on *gain*, closed ``complete``."""
    t = np.array([0.0, 0.01, 0.02])
    for name, ports in LAYOUTS[layout].items():
        writer.add_component(name, ports)
        values = {port: (np.array([str(gain), "b", ""]) if kind == "string" else t * gain if kind == "real"
                         else np.array([1, 0, 1]) * int(gain)) for port, (_, kind) in ports.items()}
        writer.append(name, t, [0, 1, 0], values, flush=False)
    writer.write_events([(0.01, "src", "tick")] if layout == "a" else [])
    writer.write_coupling_error([Connection(f"x{gain}.y -> k.u", gain / 3)])
    writer.write_stats({"macro_steps": 2, "gain": gain, "method": layout, "smallest_step": float("nan")})
    writer.set_attrs(system=layout, tf=0.02)
    return writer.close("complete")


def fail_half_way(writer: HDF5Writer, layout: str) -> None:
    """A run of *layout* that stops with an error after some of its samples and before its statistics."""
    with pytest.raises(RuntimeError, match="half-way"), writer:
        name, ports = next(iter(LAYOUTS[layout].items()))
        writer.add_component(name, ports)
        writer.append(name, [0.0], None, {port: ["x"] if kind == "string" else [1] for port, (_, kind)
                                          in ports.items()})
        raise RuntimeError("half-way")


def new_writer(path: Path, layout: str, gain: float, declared: bool, chunk: ChunkFile | None = None) -> HDF5Writer:
    shared = {} if chunk is None else {"file": chunk.file(), "group": chunk.group}
    return HDF5Writer(path, experiment=layout, attrs={"config_yaml": f"{layout}: {gain}", "t0": 0.0, "dt": 0.01},
                      chunk_size=64, components=LAYOUTS[layout] if declared else None, **shared)


def contents(root: h5py.Group) -> list[tuple[Any, ...]]:
    """Every object under *root* (a file, or a run's group of a chunk file) in order: kind, type, shape, storage
    settings, data and attributes in creation order (name, HDF5 type class, shape, value), each dataset's dimension
    scale and each scale's datasets by their path under *root*; clock attributes left out."""
    prefix = root.name.rstrip("/") + "/"

    def attrs(obj: h5py.HLObject) -> list[tuple[Any, ...]]:
        out = []
        for name in obj.attrs:
            if name in CLOCKS:
                continue
            attr = h5py.h5a.open(obj.id, name.encode())
            if name == "DIMENSION_LIST":
                value: Any = [scale.name.removeprefix(prefix) for scale in obj.dims[0].values()]
            elif name == "REFERENCE_LIST":
                value = [root.file[ref].name.removeprefix(prefix) for ref, _ in obj.attrs[name]]
            else:
                value = repr(obj.attrs[name])
            out.append((name, attr.get_type().get_class(), attr.shape, value))
        return out

    found: list[tuple[Any, ...]] = [("/", attrs(root))]

    def visit(name: str, obj: h5py.HLObject) -> None:
        if isinstance(obj, h5py.Dataset):
            found.append((name, str(obj.dtype), obj.shape, obj.maxshape, obj.chunks, obj.compression, obj.shuffle,
                          obj[...].tobytes() if obj.dtype.kind != "O" else repr(obj[...].tolist()), attrs(obj)))
        else:
            found.append((name, "group", attrs(obj)))

    root.visititems(visit)
    return found


def plain(tmp_path: Path, layout: str, gain: float) -> list[tuple[Any, ...]]:
    """The contents of the run made object by object, in a file of its own."""
    path = write(new_writer(tmp_path / f"plain-{layout}-{gain}.h5", layout, gain, declared=False), layout, gain)
    with h5py.File(path, "r") as f:
        return contents(f)


JOBS = [("a", 2.0), ("b", 3.0), ("a", 5.0), ("b", 7.0)]
"""Two layouts taking turns, each job with values of its own."""


def test_files_of_two_layouts_taking_turns_after_a_failed_job_equal_files_made_anew(tmp_path: Path) -> None:
    fail_half_way(new_writer(tmp_path / "failed.h5", "a", 1.0, declared=True), "a")
    with h5py.File(tmp_path / "failed.h5", "r") as f:
        assert f.attrs["status"] == "failed" and f["components/src/y"].shape == (1,)
        assert "k" not in f["components"] or f["components/k/u"].shape == (0,)
    for num, (layout, gain) in enumerate(JOBS):
        path = write(new_writer(tmp_path / f"{num}.h5", layout, gain, declared=True), layout, gain)
        with h5py.File(path, "r") as f:
            assert contents(f) == plain(tmp_path, layout, gain), (num, layout)
        assert verify_results(path) == []


def test_chunk_groups_of_two_layouts_taking_turns_after_a_failed_job_equal_files_made_anew(tmp_path: Path) -> None:
    chunk = ChunkFile(tmp_path / "chunk.h5")
    chunk.num = 0
    fail_half_way(new_writer(chunk.path, "b", 1.0, declared=True, chunk=chunk), "b")
    for num, (layout, gain) in enumerate(JOBS, start=1):
        chunk.num = num
        write(new_writer(chunk.path, layout, gain, declared=True, chunk=chunk), layout, gain)
    chunk.close()
    with h5py.File(chunk.path, "r") as f:
        assert f["runs/0"].attrs["status"] == "failed" and f["runs/0/components/p/q"].shape == (1,)
        for num, (layout, gain) in enumerate(JOBS, start=1):
            assert contents(f[f"runs/{num}"]) == plain(tmp_path, layout, gain), (num, layout)
    for num, (_, gain) in enumerate(JOBS, start=1):
        address = f"{chunk.path}::/runs/{num}"
        assert verify_results(address) == []
        assert load_results(address).stats["gain"] == gain
