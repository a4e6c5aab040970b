"""The writer keeps each dataset it writes open until the file closes: opened once, flushed whole at every flush."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections import Counter
from pathlib import Path

import h5py
import numpy as np

from cosimrun.storage.hdf5 import HDF5Writer, partial_path
from cosimrun.storage.verify import verify_results

PORTS = {"y": ("m", "real"), "n": (None, "int")}


def blocks(k: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The *k*-th block of three samples."""
    t = np.arange(3.0) + 3 * k
    return t, {"y": np.sin(t), "n": np.arange(3) + 3 * k}


def test_each_dataset_is_opened_once_however_often_the_file_is_flushed(tmp_path: Path, monkeypatch) -> None:
    opened: Counter[bytes] = Counter()
    open_dataset = h5py.h5d.open

    def counting(loc: h5py.h5g.GroupID, name: bytes, *args: object) -> h5py.h5d.DatasetID:
        opened[name] += 1
        return open_dataset(loc, name, *args)

    monkeypatch.setattr(h5py.h5d, "open", counting)
    writer = HDF5Writer(tmp_path / "r.h5", experiment="x", components={"c": PORTS})
    writer.add_component("c", PORTS)
    for k in range(4):  # each append flushes
        t, values = blocks(k)
        writer.append("c", t, None, values)
        writer.write_events([(float(k), "c", "tick")])
        assert writer.n_events() == k + 1
    path = writer.close("complete")
    monkeypatch.undo()
    assert opened and set(opened.values()) == {1}, opened
    assert verify_results(path) == []
    with h5py.File(path, "r") as f:
        assert f["components/c/time"][...].tolist() == list(np.arange(12.0))
        assert f["components/c/n"][...].tolist() == list(range(12))
        assert f["events/time"][...].tolist() == [0.0, 1.0, 2.0, 3.0]


_CRASH = """
import os, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from test_writer_handles import PORTS, blocks
from cosimrun.storage.hdf5 import HDF5Writer
writer = HDF5Writer(sys.argv[1], experiment="x", components={"c": PORTS})
writer.add_component("c", PORTS)
for k in range(4):
    t, values = blocks(k)
    writer.append("c", t, None, values, flush=k < 3)  # the last block is not flushed
os._exit(0)  # a crash: nothing closes the file
"""


def test_a_crash_keeps_every_flushed_block_of_the_datasets_kept_open(tmp_path: Path) -> None:
    path = tmp_path / "r.h5"
    subprocess.run([sys.executable, "-c", _CRASH, str(path), str(Path(__file__).parent)], check=True)
    with h5py.File(partial_path(path), "r") as f:
        assert f.attrs["status"] == "running"
        expected = [blocks(k) for k in range(3)]
        assert f["components/c/time"][...].tolist() == np.concatenate([t for t, _ in expected]).tolist()
        assert f["components/c/y"][...].tolist() == np.concatenate([v["y"] for _, v in expected]).tolist()
        assert f["components/c/n"][...].tolist() == list(range(9))


def test_a_closed_writer_holds_no_dataset(tmp_path: Path) -> None:
    """A writer kept after its file is closed (a job's run may be freed only by the garbage collector) lets go of
    the datasets it kept open."""
    writer = HDF5Writer(tmp_path / "r.h5", experiment="x", components={"c": PORTS})
    writer.add_component("c", PORTS)
    t, values = blocks(0)
    writer.append("c", t, None, values)
    kept = [weakref.ref(dsid) for dsid in writer._datasets.values()]
    assert len(kept) == 2 + len(PORTS) and all(ref() is not None for ref in kept)
    writer.close("complete")
    gc.collect()
    assert [ref() for ref in kept] == [None] * len(kept)
