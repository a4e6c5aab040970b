"""Results files and chunk groups made from a layout image (``HDF5Writer(..., components=...)``) equal those made
object by object: data, attributes and dimension scales, also one job after another in one process, after a job
that failed half-way and with two layouts taking turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr

from cosimrun.errors import ResultsStateError
from cosimrun.storage import hdf5
from cosimrun.storage.chunkfile import ChunkFile
from cosimrun.storage.hdf5 import HDF5Writer, set_attr
from cosimrun.storage.results import load_results
from cosimrun.storage.verify import verify_results

LAYOUT = {"src": {"y": ("m", "real")}, "k": {"u": ("m", "real"), "n": (None, "int"), "on": (None, "bool"),
                                              "label": (None, "string")}}
CLOCKS = {"started", "finished", "wall_time_s", "data_crc32"}


def write(path: Path, declared: bool, config: str, gain: float, *, t0: Any = 0.0) -> Path:
    """A results file of two components, its layout declared up front or not; values depend on *gain*."""
    writer = HDF5Writer(path, experiment="tiny", attrs={"config_yaml": config, "overrides": f"k={gain}", "t0": t0,
                                                        "dt": 0.01, "master": "jacobi"},
                        components=LAYOUT if declared else None)
    for name, ports in LAYOUT.items():
        writer.add_component(name, ports)
    t = np.array([0.0, 0.01, 0.02])
    writer.append("src", t, None, {"y": np.sin(t)}, flush=False)
    writer.append("k", t, [0, 1, 0], {"u": np.sin(t), "n": np.array([1, 2, 3]) * int(gain),
                                      "on": np.array([True, False, True]), "label": np.array(["a", "b", str(gain)])})
    writer.write_events([])
    writer.write_stats({"steps": 2, "gain": gain, "method": "jacobi"})
    writer.set_attrs(system="s", tf=0.02)
    return writer.close("complete")


def contents(path: Path) -> list[tuple[Any, ...]]:
    """:func:`tree` of the file *path*."""
    with h5py.File(path, "r") as f:
        return tree(f)


def tree(root: h5py.Group) -> list[tuple[Any, ...]]:
    """Every object under *root* (a file, or a run's group of a chunk file) in order: kind, type, shape, storage
    settings, data (numbers by their bytes) and attributes in creation order (name, HDF5 type class, shape, value),
    each dataset's dimension scale and each scale's datasets by their path under *root*; clock attributes left
    out."""
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


def test_a_file_from_the_layout_image_equals_one_made_object_by_object(tmp_path: Path) -> None:
    plain = write(tmp_path / "plain.h5", False, "a: 1", 2.0)
    first = write(tmp_path / "first.h5", True, "a: 1", 2.0)  # makes the image
    again = write(tmp_path / "again.h5", True, "a: 1", 2.0)  # reuses it
    assert contents(first) == contents(plain)
    assert contents(again) == contents(plain)
    for path in (plain, first, again):
        assert verify_results(path) == []
    with xr.open_dataset(again, engine="h5netcdf", group="components/k") as ds:
        assert ds["n"].values.tolist() == [2, 4, 6]
        assert ds["on"].values.tolist() == [True, False, True]
        assert ds["u"].attrs["units"] == "m"


def test_a_file_from_the_image_keeps_nothing_of_the_job_before(tmp_path: Path) -> None:
    write(tmp_path / "a.h5", True, "first: job\n" * 40, 7.0)
    second = write(tmp_path / "b.h5", True, "b: 2", 3.0)
    assert contents(second) == contents(write(tmp_path / "plain.h5", False, "b: 2", 3.0))
    with h5py.File(second, "r") as f:
        assert f.attrs["config_yaml"] == "b: 2"
        assert f.attrs["overrides"] == "k=3.0"
        assert f.attrs["status"] == "complete"
        assert f["components/k/n"][...].tolist() == [3, 6, 9]


def test_attribute_types_make_images_of_their_own(tmp_path: Path) -> None:
    """A root attribute given as an int in one run and a float in the next is stored as each: the image of one is
    not the other's."""
    as_int = write(tmp_path / "int.h5", True, "a: 1", 2.0, t0=0)
    as_float = write(tmp_path / "float.h5", True, "a: 1", 2.0, t0=0.0)
    with h5py.File(as_int, "r") as fi, h5py.File(as_float, "r") as ff:
        assert fi.attrs["t0"].dtype == np.int64
        assert ff.attrs["t0"].dtype == np.float64
    assert contents(as_int) == contents(write(tmp_path / "plain.h5", False, "a: 1", 2.0, t0=0))


def test_images_are_kept_for_a_bounded_number_of_layouts(tmp_path: Path) -> None:
    hdf5._LAYOUTS.clear()
    for k in range(hdf5._LAYOUTS_KEPT + 3):
        layout = {f"c{k}": {"y": (None, "real")}}
        writer = HDF5Writer(tmp_path / f"{k}.h5", experiment="x", components=layout)
        writer.add_component(f"c{k}", layout[f"c{k}"])
        writer.close("complete")
    assert len(hdf5._LAYOUTS) == hdf5._LAYOUTS_KEPT


def test_a_component_named_with_other_ports_than_declared_is_refused(tmp_path: Path) -> None:
    writer = HDF5Writer(tmp_path / "r.h5", experiment="x", components={"c": {"y": ("m", "real")}})
    with pytest.raises(ResultsStateError, match="'c' was declared with other ports"):
        writer.add_component("c", {"y": ("s", "real")})
    writer.close("failed", "refused")
    with h5py.File(tmp_path / "r.h5", "r") as f:
        assert f.attrs["status"] == "failed"


@pytest.mark.parametrize("value", ["héllo", "", 1.5, 3, -1, 2**40, np.int8(1), np.int32(7), np.float32(2.5),
                                   np.array([1, 2], dtype=np.int32), np.array([[1.0, 2.0]]), True, [1, 2],
                                   np.bytes_(b"raw")])
def test_set_attr_stores_a_value_as_h5py_does(tmp_path: Path, value: Any) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        theirs, ours = f.create_group("theirs"), f.create_group("ours")
        theirs.attrs["v"] = value
        set_attr(ours, "v", value)
        set_attr(ours, "v", value)  # again: an existing attribute is overwritten
        a, b = h5py.h5a.open(theirs.id, b"v"), h5py.h5a.open(ours.id, b"v")
        assert a.get_type() == b.get_type()
        assert a.shape == b.shape
        assert type(theirs.attrs["v"]) is type(ours.attrs["v"])
        assert np.array_equal(theirs.attrs["v"], ours.attrs["v"])


@pytest.mark.parametrize(("dtype", "data"), [
    (np.float64, np.array([0.1, -2.5])), (np.float64, np.array([1, 2**53 + 1])), (np.float32, np.array([0.1, 1e40])),
    (np.int64, np.array([3, -4])), (np.int8, np.array([True, False])), (np.int32, np.array([7], dtype=np.int16)),
    (h5py.string_dtype("utf-8"), np.array(["a", "héllo", ""], dtype=object))])
def test_appended_samples_are_stored_as_h5py_stores_them(tmp_path: Path, dtype: Any, data: np.ndarray) -> None:
    """The writer's appends go to HDF5 directly (``_write_at``): the same stored values as h5py's slice assignment,
    conversions included."""
    with h5py.File(tmp_path / "a.h5", "w") as f:
        theirs, ours = (f.create_dataset(name, shape=(1,), maxshape=(None,), dtype=dtype, chunks=(4,),
                                         compression="gzip") for name in ("theirs", "ours"))
        for ds in (theirs, ours):
            ds.resize((1 + len(data),))
        theirs[1:] = data
        hdf5._write_at(ours.id, 1, data)
        assert np.array_equal(theirs[...], ours[...])
        if theirs.dtype.kind != "O":  # numbers: the same bits
            assert theirs[...].tobytes() == ours[...].tobytes()


@pytest.mark.parametrize("value", ["héllo", 1.5, 3, np.int8(1), np.float32(2.5), np.array([1, 2], dtype=np.int32)])
def test_modify_attr_writes_in_place_as_h5py_does(tmp_path: Path, value: Any) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        theirs, ours = f.create_group("theirs"), f.create_group("ours")
        for group in (theirs, ours):
            set_attr(group, "v", hdf5._placeholder(value))
        theirs.attrs.modify("v", value)
        hdf5.modify_attr(ours, "v", value)
        a, b = h5py.h5a.open(theirs.id, b"v"), h5py.h5a.open(ours.id, b"v")
        assert a.get_type() == b.get_type() and a.shape == b.shape
        assert type(theirs.attrs["v"]) is type(ours.attrs["v"])
        assert np.array_equal(theirs.attrs["v"], ours.attrs["v"])


def _compact(obj: h5py.HLObject) -> bool:
    """Whether *obj*'s attributes are messages of its object header (compact), not a B-tree and heap (dense)."""
    return h5py.h5o.get_info(obj.id).hdr.nmesgs > len(obj.attrs)


@pytest.mark.parametrize("declared", [True, False])
def test_the_root_and_stats_keep_their_attributes_compact_in_creation_order(tmp_path: Path, declared: bool) -> None:
    path = write(tmp_path / "r.h5", declared, "a: 1", 2.0)
    with h5py.File(path, "r") as f:
        assert len(f.attrs) > 8 and _compact(f) and _compact(f["stats"])
        assert list(f.attrs)[:3] == ["_NCProperties", "format", "format_version"]
        assert list(f["stats"].attrs) == ["steps", "gain", "method"]


def test_attributes_beyond_the_compact_limit_or_too_large_for_a_header_keep_their_order(tmp_path: Path) -> None:
    writer = HDF5Writer(tmp_path / "big.h5", experiment="x")
    stats = {f"s{k}": k for k in range(hdf5.COMPACT_ATTRS + 2)}
    writer.write_stats({"first": np.arange(20_000.0), **stats})  # 160 kB: over an object header message's 64 kB
    writer.close("complete")
    with h5py.File(tmp_path / "big.h5", "r") as f:
        assert list(f["stats"].attrs) == ["first", *stats]
        assert f["stats"].attrs["first"][-1] == 19_999.0
        assert f["stats"].attrs[f"s{hdf5.COMPACT_ATTRS + 1}"] == hdf5.COMPACT_ATTRS + 1
        assert f.attrs["status"] == "complete"


TURNS = {
    "a": {"src": {"y": ("m", "real")}, "k": {"u": ("m", "real"), "n": (None, "int"), "label": (None, "string")}},
    "b": {"p": {"q": ("rad", "real"), "on": (None, "bool"), "hit": (None, "event")}},
}


class Connection:
    """A coupling error estimate as ``/coupling_error`` stores it."""

    def __init__(self, connection: str, value: float) -> None:
        self.connection, self.unit = connection, "m"
        self.max = self.rms = self.range = self.relative = value
        self.time_of_max = 0.02


def write_run(writer: HDF5Writer, layout: str, gain: float) -> Path:
    """One run of *layout* into *writer*, its values depending on *gain*, closed ``complete``."""
    t = np.array([0.0, 0.01, 0.02])
    for name, ports in TURNS[layout].items():
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
        name, ports = next(iter(TURNS[layout].items()))
        writer.add_component(name, ports)
        writer.append(name, [0.0], None, {port: ["x"] if kind == "string" else [1] for port, (_, kind)
                                          in ports.items()})
        raise RuntimeError("half-way")


def new_writer(path: Path, layout: str, gain: float, declared: bool, chunk: ChunkFile | None = None) -> HDF5Writer:
    """A writer of *layout* at *path*, or in the group of the job *chunk* runs now; made from the layout's image when
    *declared*."""
    shared = {} if chunk is None else {"file": chunk.file(), "group": chunk.group}
    return HDF5Writer(path, experiment=layout, attrs={"config_yaml": f"{layout}: {gain}", "t0": 0.0, "dt": 0.01},
                      chunk_size=64, components=TURNS[layout] if declared else None, **shared)


def plain(tmp_path: Path, layout: str, gain: float) -> list[tuple[Any, ...]]:
    """The contents of the run made object by object, in a file of its own."""
    path = write_run(new_writer(tmp_path / f"plain-{layout}-{gain}.h5", layout, gain, declared=False), layout, gain)
    return contents(path)


JOBS = [("a", 2.0), ("b", 3.0), ("a", 5.0), ("b", 7.0)]
"""Two layouts taking turns, each job with values of its own."""


def test_files_of_two_layouts_taking_turns_after_a_failed_job_equal_files_made_anew(tmp_path: Path) -> None:
    fail_half_way(new_writer(tmp_path / "failed.h5", "a", 1.0, declared=True), "a")
    with h5py.File(tmp_path / "failed.h5", "r") as f:
        assert f.attrs["status"] == "failed" and f["components/src/y"].shape == (1,)
        assert "k" not in f["components"] or f["components/k/u"].shape == (0,)
    for num, (layout, gain) in enumerate(JOBS):
        path = write_run(new_writer(tmp_path / f"{num}.h5", layout, gain, declared=True), layout, gain)
        assert contents(path) == plain(tmp_path, layout, gain), (num, layout)
        assert verify_results(path) == []


def test_chunk_groups_of_two_layouts_taking_turns_after_a_failed_job_equal_files_made_anew(tmp_path: Path) -> None:
    chunk = ChunkFile(tmp_path / "chunk.h5")
    chunk.num = 0
    fail_half_way(new_writer(chunk.path, "b", 1.0, declared=True, chunk=chunk), "b")
    for num, (layout, gain) in enumerate(JOBS, start=1):
        chunk.num = num
        write_run(new_writer(chunk.path, layout, gain, declared=True, chunk=chunk), layout, gain)
    chunk.close()
    with h5py.File(chunk.path, "r") as f:
        assert f["runs/0"].attrs["status"] == "failed" and f["runs/0/components/p/q"].shape == (1,)
        for num, (layout, gain) in enumerate(JOBS, start=1):
            assert tree(f[f"runs/{num}"]) == plain(tmp_path, layout, gain), (num, layout)
    for num, (_, gain) in enumerate(JOBS, start=1):
        address = f"{chunk.path}::/runs/{num}"
        assert verify_results(address) == []
        assert load_results(address).stats["gain"] == gain


@pytest.mark.parametrize("declared", [True, False])
def test_a_run_group_of_a_chunk_file_keeps_its_attributes_compact(tmp_path: Path, declared: bool) -> None:
    chunk = ChunkFile(tmp_path / "chunk.h5")
    chunk.num = 0
    write_run(new_writer(chunk.path, "a", 2.0, declared, chunk), "a", 2.0)
    chunk.close()
    with h5py.File(chunk.path, "r") as f:
        run = f["runs/0"]
        assert len(run.attrs) > 8 and _compact(run) and _compact(run["stats"])
        assert run.attrs["status"] == "complete" and run["stats"].attrs["gain"] == 2.0
