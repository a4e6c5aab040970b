"""The sweep index file (``storage.sweep_index``): columns typed from Python values, written whole, read back whole."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from cosimrun.errors import ResultsReadError
from cosimrun.runner.load import load_sweep
from cosimrun.storage import HDF5Writer
from cosimrun.storage.sweep_index import INDEX_FILE, SWEEP_FORMAT, _column, read_sweep_index, write_sweep_index


def test_columns_infer_types_with_missing_values() -> None:
    assert _column([1, 2])[1] == "int"
    assert _column([1, None])[1] == "float"
    assert _column([True, False])[1] == "bool"
    data, kind = _column([True, None])
    assert kind == "float" and data[0] == 1.0 and math.isnan(data[1])
    assert _column(["a", 1])[1] == "str"
    assert _column([None, None])[1] == "float"


def test_a_written_index_reads_back_column_for_column(tmp_path: Path) -> None:
    path = tmp_path / INDEX_FILE
    columns = {
        "status": ["complete", "failed"],
        "e": [0.5, None],
        "n": [3, 4],
        "reused": [True, False],
        "wall_time_s": [1.25, math.nan],
        "note": ["", None],
    }
    written = write_sweep_index(path, [3, 1], columns, attrs={"n_jobs": 2, "experiment": "ball"}, params=["e", "n"],
                                summaries=[], links={3: "3/results.h5", 1: ""})
    assert written == path
    assert sorted(p.name for p in tmp_path.iterdir()) == [INDEX_FILE]  # the temporary file was renamed over it

    table = read_sweep_index(path)
    assert table.run.tolist() == [3, 1] and table.run.dtype == np.int64
    assert list(table.columns) == list(columns)
    assert table.columns["status"].tolist() == ["complete", "failed"]
    assert table.columns["e"][0] == 0.5 and math.isnan(table.columns["e"][1])
    assert table.columns["n"].tolist() == [3, 4] and table.columns["n"].dtype == np.int64
    assert table.columns["reused"].tolist() == [True, False] and table.columns["reused"].dtype == bool
    assert table.columns["wall_time_s"][0] == 1.25 and math.isnan(table.columns["wall_time_s"][1])
    assert table.columns["note"].tolist() == ["", ""]
    assert (table.params, table.summaries) == (["e", "n"], [])

    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == SWEEP_FORMAT and f.attrs["n_jobs"] == 2 and f.attrs["experiment"] == "ball"
        assert f["wall_time_s"].attrs["units"] == "s" and "units" not in f["e"].attrs
        assert f["reused"].dtype == np.int8 and f["reused"].attrs["dtype"] == "bool"
        assert list(f["runs"]) == ["3"]
        assert f["runs"].get("3", getlink=True).filename == "3/results.h5"


def test_a_file_that_is_not_a_sweep_index_is_refused_naming_its_format(tmp_path: Path) -> None:
    with HDF5Writer(tmp_path / "results.h5"):
        pass
    with pytest.raises(ResultsReadError, match=r"results\.h5 is not a cosimrun sweep index$") as caught:
        read_sweep_index(tmp_path / "results.h5")
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.path, error.expected, error.found) == (str(tmp_path / "results.h5"), SWEEP_FORMAT,
                                                         "cosimrun-results")
    with pytest.raises(ResultsReadError) as through_runner:
        load_sweep(tmp_path / "results.h5")
    assert through_runner.value.found == "cosimrun-results"
    with pytest.raises(FileNotFoundError, match=f"no sweep index {tmp_path / INDEX_FILE}"):
        load_sweep(tmp_path)
