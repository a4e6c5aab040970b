"""A damaged or hostile results file is refused before it is read; the file of a running job is read.

Each file is written by :class:`HDF5Writer` (a component ``plant`` with a real
port ``x = t**2`` and a string port ``label``, 103 samples, one event) and then
damaged with h5py as a hostile or broken writer would leave it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from cosimrun.errors import ResultsReadError
from cosimrun.storage import HDF5Writer, load_results
from cosimrun.storage.results import MAX_EXPANSION
from cosimrun.storage.summary import final_values

N = 103
HUGE = 2**40
FINAL = {"plant.x": 1.02**2, "plant.label": f"s{N - 1}"}
"""The final values of the file as written."""


def write(path: Path, *, close: bool = True) -> HDF5Writer:
    """A results file of N samples of ``plant`` (closed ``complete`` unless *close* is false)."""
    writer = HDF5Writer(path, experiment="demo")
    writer.add_component("plant", {"x": ("m", "real"), "label": (None, "string")})
    t = np.linspace(0.0, 1.02, N)
    writer.append("plant", t, np.zeros(N, dtype=np.int32), {"x": t**2, "label": [f"s{i}" for i in range(N)]})
    writer.write_events([(0.5, "plant", "hit")])
    if close:
        writer.close()
    return writer


@pytest.fixture
def damaged(tmp_path: Path) -> Callable[[Callable[[h5py.File], None]], Path]:
    """``damaged(edit)``: a closed results file changed by ``edit(h5py.File)``."""

    def make(edit: Callable[[h5py.File], None]) -> Path:
        path = tmp_path / "results.h5"
        write(path)
        with h5py.File(path, "a") as f:
            edit(f)
        return path

    return make


def _resize_all(group: h5py.Group, n: int) -> None:
    for ds in group.values():
        ds.resize((n,))


def _replace(f: h5py.File, name: str, data: np.ndarray, **kwargs: object) -> None:
    """Dataset *name* replaced by *data*, keeping its port type and unit."""
    attrs = {k: v for k, v in f[name].attrs.items() if k in ("port_type", "units")}
    del f[name]
    f.create_dataset(name, data=data, **kwargs).attrs.update(attrs)


def _drop_record(f: h5py.File) -> None:
    del f.attrs["data_crc32"]


def _deflated_twice(f: h5py.File) -> None:
    """A port of 10**6 zeros deflated twice: 8 MB in under 100 bytes (gzip, once, packs 1032 times at most); a
    chunk of 2**29 samples would hold 4 GB."""
    attrs = dict(f["components/plant/x"].attrs.items())
    del f["components/plant/x"]
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((10**6,))
    dcpl.set_deflate(9)
    dcpl.set_deflate(9)
    space = h5py.h5s.create_simple((10**6,), (h5py.h5s.UNLIMITED,))
    ds = h5py.Dataset(h5py.h5d.create(f["components/plant"].id, b"x", h5py.h5t.IEEE_F64LE, space, dcpl=dcpl))
    ds[...] = 0.0
    ds.attrs["port_type"] = attrs["port_type"]
    assert ds.id.get_storage_size() < 100
    _drop_record(f)


CASES = [
    ("declared-2**40", lambda f: _resize_all(f["components/plant"], HUGE),
     rf"/components/plant/time declares {HUGE} samples but holds data for 4096$"),
    ("port-half-as-long", lambda f: f["components/plant/x"].resize((N // 2,)),
     rf"/components/plant/x has {N // 2} samples but {N} were written$"),
    ("port-half-as-long-without-record", lambda f: (f["components/plant/x"].resize((N // 2,)), _drop_record(f)),
     rf"/components/plant has datasets of different lengths \(time {N}, micro {N}, x {N // 2}, label {N}\) in a "
     r"file closed complete$"),
    ("event-table-2**40", lambda f: _resize_all(f["events"], HUGE),
     rf"/events/time declares {HUGE} samples but holds data for 4096$"),
    ("two-dimensions", lambda f: _replace(f, "components/plant/x", np.zeros((N, 2))),
     r"/components/plant/x has shape \(103, 2\), not one dimension$"),
    ("compound-dtype", lambda f: _replace(f, "components/plant/x", np.zeros(N, dtype=[("a", "f8"), ("b", "i4")])),
     r"/components/plant/x has dtype \[\('a', '<f8'\), \('b', '<i4'\)\], not a number$"),
    ("text-time", lambda f: _replace(f, "components/plant/time", np.array([b"t"] * N)),
     r"/components/plant/time has dtype \|S1, not a number$"),
    ("float-micro", lambda f: _replace(f, "components/plant/micro", np.zeros(N)),
     r"/components/plant/micro has dtype float64, not an integer$"),
    ("numbers-for-text", lambda f: _replace(f, "components/plant/label", np.zeros(N)),
     r"/components/plant/label has dtype float64, not text$"),
    ("unknown-port-type", lambda f: f["components/plant/x"].attrs.__setitem__("port_type", "matrix"),
     r"/components/plant/x has port_type 'matrix', not one of real, int, bool, string, event$"),
    ("no-micro", lambda f: f.__delitem__("components/plant/micro"),
     r"/components/plant has no dataset 'micro'$"),
    ("port-is-a-group", lambda f: f["components/plant"].create_group("y"),
     r"/components/plant/y is a group, not a dataset$"),
    ("external-link", lambda f: f["components/plant"].__setitem__("y", h5py.ExternalLink("/etc/passwd", "/")),
     r"/components/plant/y is an external link, not a dataset$"),
    ("components-a-dataset", lambda f: _replace(f, "components", np.zeros(3)),
     r"/components is not a group$"),
    ("record-not-json", lambda f: f.attrs.__setitem__("data_crc32", "{"),
     r"its data_crc32 attribute is not a JSON map of dataset lengths$"),
    ("deflated-twice", _deflated_twice,
     rf"/components/plant/x declares 1000000 samples \(8000000 bytes\) in \d+ stored bytes, more than compression "
     rf"packs \(at most {MAX_EXPANSION} times\)$"),
]


@pytest.mark.parametrize(("edit", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_damaged_file_is_refused_when_loaded_naming_the_file_and_what_is_wrong(damaged, edit, message) -> None:
    path = damaged(edit)
    with pytest.raises(ResultsReadError, match=rf"^{re.escape(str(path))} is damaged: {message}") as info:
        load_results(path)
    assert info.value.path == str(path)
    assert "\n" not in str(info.value)
    # what a sweep reads of it: nothing of a damaged component (the final values do not read the events)
    assert final_values(path) == (FINAL if message.startswith("/events") else {})


def test_a_file_damaged_after_loading_is_refused_at_the_read(tmp_path: Path) -> None:
    path = tmp_path / "results.h5"
    write(path)
    results = load_results(path)
    with h5py.File(path, "a") as f:
        _resize_all(f["components/plant"], HUGE)
        _resize_all(f["events"], HUGE)
    with pytest.raises(ResultsReadError, match=f"declares {HUGE} samples but holds data for 4096"):
        results.history("plant", ["x"])
    with pytest.raises(ResultsReadError, match=f"declares {HUGE} samples but holds data for 4096"):
        results.to_dataframe("plant")
    with pytest.raises(ResultsReadError, match=f"/events/time declares {HUGE} samples"):
        results.events  # noqa: B018


def test_an_undamaged_file_reads_every_sample(tmp_path: Path) -> None:
    path = tmp_path / "results.h5"
    write(path)
    results = load_results(path)
    t = np.linspace(0.0, 1.02, N)
    x = results.history("plant")["x"]
    np.testing.assert_array_equal(x.time, t)
    np.testing.assert_array_equal(x.values, t**2)
    assert list(results.history("plant")["label"].values) == [f"s{i}" for i in range(N)]
    assert results.events.to_dict("list") == {"time": [0.5], "micro": [0], "component": ["plant"], "event": ["hit"]}
    assert final_values(path) == FINAL


def test_a_running_file_is_read_to_the_length_its_datasets_have_in_common(tmp_path: Path) -> None:
    """A ``.partial`` file being written may have ports longer than ``time`` (a writer grows them one by one):
    it is read to the common length, as far as the data stored reaches, and never refused for it."""
    write(tmp_path / "closed.h5")
    partial = tmp_path / "run" / "results.h5.partial"
    partial.parent.mkdir()
    (tmp_path / "closed.h5").rename(partial)
    with h5py.File(partial, "a") as f:  # as the writer leaves it between two flushes: running, no record yet
        f.attrs["status"] = "running"
        _drop_record(f)
        f["components/plant/x"].resize((N + 5,))  # a port ahead of time ...
        f["components/plant/label"].resize((HUGE,))  # ... or declaring far more than the file holds
    results = load_results(tmp_path / "run")
    assert results.path == partial and results.status == "running"
    history = results.history("plant")
    t = np.linspace(0.0, 1.02, N)
    np.testing.assert_array_equal(history["x"].time, t)
    np.testing.assert_array_equal(history["x"].values, t**2)
    assert list(history["label"].values) == [f"s{i}" for i in range(N)]
    assert final_values(partial) == FINAL
    with h5py.File(partial, "a") as f:  # the run closed it so: damaged
        f.attrs["status"] = "interrupted"
    with pytest.raises(ResultsReadError, match=f"{partial} is damaged: /components/plant/label declares {HUGE} "
                                               "samples but holds data for 4096"):
        results.history("plant")



def test_storage_hdf5_cannot_read_is_damage_in_a_closed_file_and_nothing_yet_in_a_running_one(tmp_path, monkeypatch):
    """HDF5 may find a dataset's storage beyond the end its file declares (``addr overflow``): seen reading a
    ``.partial`` file between two of its writer's writes. A closed file so is damaged, in one line; a running one
    has none of that component's samples yet (its reader tries again later), instead of HDF5's RuntimeError."""
    import cosimrun.storage.results as results_module

    def unreadable(ds: h5py.Dataset, item_bytes: int) -> tuple[int, int]:
        raise RuntimeError("Unable to get storage size (addr overflow, addr = 29511, size = 2096, eoa = 25319)")

    closed = tmp_path / "results.h5"
    write(closed)
    partial = tmp_path / "run" / "results.h5.partial"
    partial.parent.mkdir()
    write(tmp_path / "copy.h5")
    (tmp_path / "copy.h5").rename(partial)
    with h5py.File(partial, "a") as f:
        f.attrs["status"] = "running"
        _drop_record(f)
    monkeypatch.setattr(results_module, "_stored", unreadable)
    with pytest.raises(ResultsReadError, match=rf"^{re.escape(str(closed))} is damaged: /components/plant/time has "
                                               r"storage HDF5 cannot read \(Unable to get storage size \(addr "
                                               r"overflow") as info:
        load_results(closed)
    assert "\n" not in str(info.value)
    history = load_results(partial).history("plant")
    assert len(history["x"].time) == 0 and len(history["label"].values) == 0

def test_a_closed_file_is_checked_once_and_a_replaced_file_anew(tmp_path, monkeypatch):
    """A closed file no longer changes, so each group is checked when the file is loaded, not at every read;
    a job run again replaces the file, and the next read checks and reads the new one whole."""
    import cosimrun.storage.results as results_module

    path = tmp_path / "results.h5"
    write(path)
    checked: list[str] = []
    check = results_module.readable_length
    monkeypatch.setattr(results_module, "readable_length", lambda p, f, g, *a: checked.append(g) or check(p, f, g, *a))
    results = load_results(path)
    at_load = len(checked)
    assert "components/plant" in checked and "events" in checked
    for _ in range(3):
        assert len(results.trajectory("plant", "x")[1]) == N
    assert len(results.events) == 1
    assert len(checked) == at_load

    again = tmp_path / "again.h5"
    with HDF5Writer(again, experiment="demo") as writer:
        writer.add_component("plant", {"x": ("m", "real"), "label": (None, "string")})
        t = np.linspace(0.0, 2.0, 2 * N)
        writer.append("plant", t, np.zeros(2 * N, dtype=np.int32), {"x": -t, "label": ["a"] * (2 * N)})
    again.replace(path)
    time, x = results.trajectory("plant", "x")
    assert len(time) == 2 * N and np.array_equal(x, -np.linspace(0.0, 2.0, 2 * N))
    assert checked[at_load:] == ["/components/plant"]
