"""``load_results`` given a run's directory: its ``results.h5``, else its one results file."""

from __future__ import annotations

from pathlib import Path

import h5py
import pytest

from cosimrun.storage import HDF5Writer, load_results
from cosimrun.storage.hdf5 import partial_path


def write(path: Path, status: str | None = "complete") -> HDF5Writer:
    """A small results file at *path*; left open as ``<path>.partial`` when *status* is None."""
    writer = HDF5Writer(path, experiment=path.stem)
    writer.add_component("plant", {"x": ("m", "real")})
    writer.flush()
    if status is not None:
        writer.close(status)
    return writer


def test_a_directory_loads_its_results_h5(tmp_path: Path) -> None:
    write(tmp_path / "results.h5")
    write(tmp_path / "other.h5")
    assert load_results(tmp_path).path == tmp_path / "results.h5"


def test_a_directory_with_one_results_file_of_another_name(tmp_path: Path) -> None:
    write(tmp_path / "run.hdf5")
    with h5py.File(tmp_path / "notes.h5", "w") as f:  # HDF5, but not a results file
        f.attrs["format"] = "something-else"
    (tmp_path / "log.txt").write_text("x")
    results = load_results(tmp_path)
    assert results.path == tmp_path / "run.hdf5"
    assert results.experiment == "run"


def test_a_directory_with_a_partial_file(tmp_path: Path) -> None:
    running = [write(tmp_path / "results.h5", status=None), write(tmp_path / "sub" / "custom.h5", status=None)]
    results = load_results(tmp_path)
    assert results.path == partial_path(tmp_path / "results.h5")
    assert results.status == "running"
    assert load_results(tmp_path / "sub").path.name == "custom.h5.partial"
    for writer in running:
        writer.close("complete")
    assert load_results(tmp_path / "sub").path.name == "custom.h5"


def test_a_directory_without_a_results_file_names_what_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "cosimrun.log").write_text("x")
    with pytest.raises(FileNotFoundError, match=r"no results file in directory .*: looked for results\.h5 "
                                                r"\(or results\.h5\.partial\) and for a single cosimrun results "
                                                r"file, found none"):
        load_results(tmp_path)


def test_a_directory_with_several_results_files_is_ambiguous(tmp_path: Path) -> None:
    write(tmp_path / "a.h5")
    running = write(tmp_path / "b.h5", status=None)
    with pytest.raises(FileNotFoundError, match=r"found several: a\.h5, b\.h5$"):
        load_results(tmp_path)
    running.close("complete")
