"""``storage.layout: per_chunk``: the runs of a chunk of jobs as groups of one file, read as their own files are."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr

from cosimrun.config.build import build_storage
from cosimrun.errors import ConfigError
from cosimrun.runner.run import run_experiment
from cosimrun.storage.chunkfile import REF_FILE, ChunkFile, chunk_results, split_address
from cosimrun.storage.hdf5 import HDF5Writer
from cosimrun.storage.results import load_results
from cosimrun.storage.summary import final_values, read_run_status
from cosimrun.storage.verify import verify_results


def bouncing(k: float = 4.0, per_chunk: bool = True) -> dict[str, Any]:
    """A ramp into a gain and a sum: samples, statistics and coupling error estimates."""
    cfg: dict[str, Any] = {
        "name": "chunked",
        "run": {"t0": 0.0, "tf": 1.0, "dt": 0.05},
        "components": {
            "src": {"type": "ramp", "params": {"slope": 1.0}},
            "a": {"type": "gain", "params": {"k": k}},
            "s": {"type": "sum", "params": {"signs": "++"}, "initial": {"u2": 0.0}},
        },
        "connections": ["src.y -> a.u", "a.y -> s.u1", "src.y -> s.u2"],
        "master": {"name": "jacobi"},
    }
    if per_chunk:
        cfg["storage"] = {"layout": "per_chunk"}
    return cfg


VARYING_ATTRS = {"started", "finished", "wall_time_s"}
"""Root attributes that differ between two runs of one config (times)."""


def _datasets(root: h5py.Group) -> dict[str, np.ndarray]:
    found: dict[str, np.ndarray] = {}
    root.visititems(lambda name, obj: found.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return found


def _attrs(obj: h5py.HLObject) -> dict[str, Any]:
    return {k: obj.attrs[k] for k in obj.attrs if k not in VARYING_ATTRS and k not in ("DIMENSION_LIST",
                                                                                      "REFERENCE_LIST")}


def _chunk_runs(tmp_path: Path, cfgs: list[dict[str, Any]]) -> list[Any]:
    outcomes = []
    with chunk_results(tmp_path / "chunks" / "0k" / "chunk-0-t-1.h5") as chunk:
        for num, cfg in enumerate(cfgs):
            chunk.num = num
            outcomes.append(run_experiment(cfg, tmp_path / str(num)))
    return outcomes


def test_a_run_in_a_chunk_holds_what_its_own_file_holds_and_reads_the_same(tmp_path: Path) -> None:
    own = run_experiment(bouncing(per_chunk=False), tmp_path / "own")
    first, second = _chunk_runs(tmp_path, [bouncing(), bouncing(k=2.0)])
    assert own.ok and first.ok and second.ok
    file, group = split_address(second.path)
    assert file == tmp_path / "chunks" / "0k" / "chunk-0-t-1.h5" and group == "/runs/1"
    assert (tmp_path / "1" / REF_FILE).is_file() and not list((tmp_path / "1").glob("*.h5"))
    with h5py.File(own.path, "r") as mine, h5py.File(file, "r") as shared:
        assert list(shared["runs"]) == ["0", "1"]
        theirs = shared["runs/0"]
        data, other = _datasets(mine), _datasets(theirs)
        assert data.keys() == other.keys() and len(data) > 10
        for name, values in data.items():  # bit for bit, strings as strings
            same = list(values) == list(other[name]) if values.dtype == object else values.tobytes() == other[
                name].tobytes()
            assert values.dtype == other[name].dtype and same, name
        own_attrs, chunk_attrs = _attrs(mine), _attrs(theirs)
        assert own_attrs.keys() == chunk_attrs.keys() and chunk_attrs["status"] == "complete"
        for key, value in own_attrs.items():
            assert np.array_equal(value, chunk_attrs[key]), key
        for name in data:  # each dataset's dimension scale is its own group's
            ds = theirs[name]
            if "DIMENSION_LIST" in ds.attrs:
                assert ds.dims[0][0].name.startswith("/runs/0/"), name
    assert verify_results(first.path) == [] and verify_results(second.path) == []
    assert read_run_status(second.path).status == "complete"
    assert final_values(second.path) == {**final_values(own.path), "a.y": 2.0, "s.y": 3.0}

    by_address, by_folder, by_own = load_results(first.path), load_results(tmp_path / "0"), load_results(own.path)
    assert by_address.address == by_folder.address == f"{file}::/runs/0"
    for comp in by_own.components:
        for port, series in by_own.history(comp).items():
            chunked = by_folder.history(comp)[port]
            assert np.array_equal(series.time, chunked.time) and np.array_equal(series.values, chunked.values)
        xr.testing.assert_identical(by_own.to_xarray(comp), by_address.to_xarray(comp))
    assert by_address.stats.keys() == by_own.stats.keys() and by_address.status == "complete"
    assert by_address.coupling_error.equals(by_own.coupling_error) and by_address.events.equals(by_own.events)
    with xr.open_dataset(file, group="runs/1/components/s", engine="h5netcdf") as ds:
        assert ds["y"].values[-1] == 3.0 and list(ds.dims) == ["time"]


def test_a_failing_run_in_a_chunk_leaves_a_failed_group_and_the_next_runs(tmp_path: Path) -> None:
    failing = bouncing()  # s.y = ramp + 4 s.y: the loop diverges at the first step after t0
    failing["components"]["a"]["params"]["k"] = 4.0
    failing["connections"] = ["src.y -> s.u1", "a.y -> s.u2", "s.y -> a.u"]
    failing["master"] = {"name": "gauss_seidel", "on_nonconvergence": "raise"}
    broken, after = _chunk_runs(tmp_path, [failing, bouncing()])
    assert broken.status == "failed" and "diverged" in broken.error and after.ok
    failed = load_results(tmp_path / "0")
    assert failed.status == "failed" and "diverged" in failed.error and failed.attrs["traceback"]
    assert load_results(after.path).status == "complete"
    assert verify_results(broken.path) == ["status is failed, not complete"]


def test_a_worker_killed_in_a_chunk_keeps_the_runs_it_finished_and_none_falsely_complete(tmp_path: Path) -> None:
    """Two runs close their groups, the third is killed (``os._exit``) after writing some of its samples."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_chunk_layout import bouncing
        from cosimrun.runner.run import run_experiment
        from cosimrun.storage.chunkfile import chunk_results
        from cosimrun.storage.hdf5 import HDF5Writer

        flush = HDF5Writer.flush
        def dying(self):  # the third run dies at its first flush of samples, after they reach the file
            flush(self)
            if self.group == "runs/2":
                os._exit(3)
        HDF5Writer.flush = dying
        with chunk_results({str(tmp_path / 'chunk.h5')!r}) as chunk:
            for num in range(3):
                chunk.num = num
                run_experiment(bouncing(k=num + 1.0), {str(tmp_path)!r} + f"/{{num}}")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    for num in (0, 1):
        assert verify_results(tmp_path / str(num) / REF_FILE) != []  # the pointer is no results file
        assert load_results(tmp_path / str(num)).status == "complete"
        assert verify_results(f"{tmp_path / 'chunk.h5'}::/runs/{num}") == []
    killed = load_results(tmp_path / "2")
    assert killed.status == "running" and verify_results(killed.address) == ["status is running, not complete"]


def test_each_run_of_a_chunk_finds_the_file_without_the_metadata_of_the_runs_before(tmp_path: Path) -> None:
    """The file is opened anew for each job: HDF5's metadata cache then holds what one run touches, not what all
    the runs of the chunk did (a flush goes over all of it)."""
    entries = []
    with chunk_results(tmp_path / "chunk.h5") as chunk:
        for num in range(3):
            chunk.num = num
            assert run_experiment(bouncing(k=num + 1.0), tmp_path / str(num)).ok
            entries.append(chunk.file().id.get_mdc_size()[3])
    assert entries[2] <= entries[0] + 8, entries  # growing by about a run's objects each (70) without the reopening
    with h5py.File(tmp_path / "chunk.h5", "r") as f:
        assert list(f["runs"]) == ["0", "1", "2"] and not list(tmp_path.glob("chunk-*.h5"))


def test_a_run_in_a_chunk_keeps_its_datasets_open_with_the_chunk_cache_of_its_own_file(tmp_path: Path) -> None:
    """The datasets the layout's copy opens serve the run's writes, with the small chunk cache of the datasets a
    run in its own file keeps open (not HDF5's 1 MB each)."""
    ports = {"c": {"y": (None, "real"), "n": (None, "int")}}
    chunk = ChunkFile(tmp_path / "chunk.h5", num=0)
    caches = []
    for shared in ({}, {"file": chunk.file(), "group": chunk.group}):
        writer = HDF5Writer(tmp_path / "own.h5" if not shared else tmp_path / "chunk.h5", experiment="e",
                            chunk_size=64, components=ports, **shared)
        writer.add_component("c", ports["c"])
        writer.append("c", [0.0, 1.0], None, {"y": [1.0, 2.0], "n": [1, 2]})
        caches.append({path: dsid.get_access_plist().get_chunk_cache() for path, dsid in writer._datasets.items()})
        writer.close()
    chunk.close()
    own, grouped = caches
    assert own and own.items() <= grouped.items() and {c[1] for c in grouped.values()} == {2 * 64 * 16}


def test_a_chunk_file_gone_between_jobs_gives_the_next_job_a_file_beside_it(tmp_path: Path) -> None:
    with chunk_results(tmp_path / "chunk.h5") as chunk:
        chunk.num = 0
        assert run_experiment(bouncing(), tmp_path / "0").ok
        (tmp_path / "chunk.h5").unlink()
        chunk.num = 1
        second = run_experiment(bouncing(k=2.0), tmp_path / "1")
    assert second.ok and split_address(second.path) == (tmp_path / "chunk-1.h5", "/runs/1")
    assert load_results(tmp_path / "1").status == "complete"


def test_a_wrong_layout_is_one_keyed_line() -> None:
    with pytest.raises(ConfigError) as err:
        build_storage({"layout": "per_chunks"})
    assert err.value.key == "storage.layout" and "per_chunk" in str(err.value) and "\n" not in str(err.value)
    assert build_storage({"layout": "per_chunk"}).layout == "per_chunk" and build_storage({}).layout == "per_job"


def test_a_run_not_in_a_chunk_writes_its_own_file_under_per_chunk(tmp_path: Path) -> None:
    outcome = run_experiment(copy.deepcopy(bouncing()), tmp_path)
    assert outcome.ok and outcome.path == tmp_path / "results.h5" and not (tmp_path / REF_FILE).exists()


def test_a_wrong_layout_on_the_command_line_is_one_keyed_line_and_exit_2(cosimrun) -> None:
    proc = cosimrun("+experiment=bouncing_ball", "run.tf=0.1", "storage.layout=per_chunks")
    assert proc.returncode == 2 and not proc.stdout.strip()
    assert proc.stderr.strip().splitlines() == [
        "cosimrun: error: storage.layout: unknown layout 'per_chunks'; did you mean 'per_chunk'? (known: per_chunk, "
        "per_job)"]
