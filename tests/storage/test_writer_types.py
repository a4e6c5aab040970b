"""A run's writer goes by types it knows without asking HDF5 for each file: the dtypes of a layout image's datasets,
memory types made once per process, the statistics it wrote; files and values as h5py stores them."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from cosimrun.errors import ResultsStateError
from cosimrun.storage import hdf5
from cosimrun.storage.hdf5 import HDF5Writer
from cosimrun.storage.verify import verify_results

LAYOUT = {"k": {"u": ("m", "real"), "n": (None, "int"), "on": (None, "bool"), "label": (None, "string")}}


def test_a_layout_image_knows_the_dtype_of_every_dataset_of_its_files(tmp_path: Path) -> None:
    writer = HDF5Writer(tmp_path / "r.h5", experiment="x", components=LAYOUT)
    found: dict[str, np.dtype] = {}
    writer.file.visititems(lambda name, obj: found.update({f"/{name}": obj.dtype})
                           if isinstance(obj, h5py.Dataset) else None)
    assert writer._dtypes == found and "/components/k/label" in found and "/coupling_error/unit" in found
    writer.close("complete")


@pytest.mark.parametrize("declared", [True, False])
def test_a_declared_file_in_a_missing_folder_makes_the_folder(tmp_path: Path, declared: bool) -> None:
    path = tmp_path / "new" / "job" / "r.h5"
    writer = HDF5Writer(path, experiment="x", components=LAYOUT if declared else None)
    writer.add_component("k", LAYOUT["k"])
    writer.append("k", [0.0], None, {"u": [1.5], "n": [2], "on": [True], "label": ["a"]})
    assert writer.close("complete") == path and verify_results(path) == []


@pytest.mark.parametrize(("dtype", "data"), [
    (np.float64, np.array([0.1, -2.5])), (np.float32, np.array([0.1, 1e40])), (np.int64, np.array([3, -4])),
    (np.int8, np.array([True, False])), (np.int8, np.array([1, -1], dtype=np.int8)),
    (np.int32, np.array([7], dtype=np.int16)), (np.int64, np.array([2.7, -2.7])),
    (h5py.string_dtype("utf-8"), np.array(["a", "héllo", ""], dtype=object))])
def test_writes_from_kept_memory_types_store_what_h5py_stores(tmp_path: Path, dtype: object, data: np.ndarray
                                                                ) -> None:
    """Twice each, with the dataset's type given: the memory types made by the first write serve the second."""
    with h5py.File(tmp_path / "a.h5", "w") as f:
        theirs, ours = (f.create_dataset(name, shape=(1,), maxshape=(None,), dtype=dtype, chunks=(4,),
                                         compression="gzip") for name in ("theirs", "ours"))
        for ds in (theirs, ours):
            ds.resize((1 + 2 * len(data),))
        theirs[1:1 + len(data)] = data
        theirs[1 + len(data):] = data
        hdf5._write_at(ours.id, 1, data, ours.dtype)
        hdf5._write_at(ours.id, 1 + len(data), data, ours.dtype)
        assert np.array_equal(theirs[...], ours[...])
        if theirs.dtype.kind != "O":  # numbers: the same bits
            assert theirs[...].tobytes() == ours[...].tobytes()


def test_statistics_written_again_replace_their_attributes_as_h5py_does(tmp_path: Path) -> None:
    """New statistics are made without asking HDF5; one written before is replaced (deleted, made anew: last in
    creation order), as h5py's assignment does."""
    writer = HDF5Writer(tmp_path / "r.h5", experiment="x", components={})
    writer.write_stats({"steps": 2, "method": "jacobi", "ratio": 0.5})
    writer.write_stats({"method": "gauss_seidel", "extra": 1})
    path = writer.close("complete")
    with h5py.File(tmp_path / "h.h5", "w") as f:
        group = f.create_group("stats", track_order=True)
        for key, value in [("steps", 2), ("method", "jacobi"), ("ratio", 0.5), ("method", "gauss_seidel"),
                           ("extra", 1)]:
            group.attrs[key] = value
        theirs = [(k, v) for k, v in group.attrs.items()]
    with h5py.File(path, "r") as f:
        ours = [(k, v) for k, v in f["stats"].attrs.items()]
    assert ours == theirs == [("steps", 2), ("ratio", 0.5), ("method", "gauss_seidel"), ("extra", 1)]


@pytest.mark.parametrize("declared", [True, False])
def test_the_number_of_events_is_the_tables_length_without_opening_it_while_empty(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: bool) -> None:
    writer = HDF5Writer(tmp_path / "r.h5", experiment="x", components=LAYOUT if declared else None)
    assert writer.n_events() == 0 and "/events/event" not in writer._datasets
    writer.write_events([])
    assert writer.n_events() == 0
    writer.write_events([(0.5, "k", "a"), (0.7, "k", "b")])
    assert writer.n_events() == 2
    extend = writer._extend

    def interrupted(path: str, start: int, data: np.ndarray) -> None:
        extend(path, start, data)
        if path == "/events/event":  # the last column: the whole append is undone
            raise KeyboardInterrupt

    monkeypatch.setattr(writer, "_extend", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writer.write_events([(0.9, "k", "c")])
    monkeypatch.undo()
    assert writer.n_events() == 2
    path = writer.close("complete")
    with pytest.raises(ResultsStateError):
        writer.n_events()
    with h5py.File(path, "r") as f:
        assert f["events/event"].asstr()[...].tolist() == ["a", "b"]
    assert verify_results(path) == []
