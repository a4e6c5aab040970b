"""Storage raises the error family with fields, keeping the built-in bases callers catch."""

from __future__ import annotations

import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest

from cosimrun.core.history import ComponentHistory
from cosimrun.errors import (
    ConfigError,
    DuplicateNameError,
    MissingNameError,
    ResultsDataError,
    ResultsReadError,
    ResultsStateError,
    UnknownNameError,
)
from cosimrun.storage import FORMAT, HDF5Writer, check_name, load_results, write_history


def test_data_that_does_not_fit_names_its_component_and_port(tmp_path: Path) -> None:
    with HDF5Writer(tmp_path / "r.h5") as w:
        w.add_component("c", {"y": (None, "real")})
        with pytest.raises(ResultsDataError, match=r"^append to 'c': port 'y' has 2 values for 1 times$") as caught:
            w.append("c", [0.0], None, {"y": [1.0, 2.0]})
        assert (caught.value.component, caught.value.port) == ("c", "y")
        assert isinstance(caught.value, ValueError)
        with pytest.raises(MissingNameError, match=r"missing ports \['y'\], unknown ports \[\]"):
            w.append("c", [0.0], None, {})
        with pytest.raises(UnknownNameError, match=r"^unknown port 'z' of component 'c' \(known: y\)$") as unknown:
            w.append("c", [0.0], None, {"y": [1.0], "z": [2.0]})
        assert (unknown.value.kind, unknown.value.name, unknown.value.known) == ("port", "z", ["y"])
        with pytest.raises(ResultsDataError, match="event row must have 3 or 4 fields"):
            w.write_events([(0.0, "c")])
        with pytest.raises(ResultsDataError, match="mode switch row must have 4 fields"):
            w.write_mode_switches([(0.0, "c", "a")])
        assert w.n_samples("c") == 0
    assert load_results(tmp_path / "r.h5").status == "complete"


def test_a_bad_port_type_suggests_the_closest_and_a_second_component_of_one_name_is_refused(tmp_path: Path) -> None:
    with HDF5Writer(tmp_path / "r.h5") as w:
        with pytest.raises(UnknownNameError, match=r"^unknown port type 'reel' of port c\.y; did you mean 'real'\?"
                                                   r" \(known: bool, event, int, real, string\)$") as caught:
            w.add_component("c", {"y": (None, "reel")})
        assert caught.value.suggestion == "real"
        w.add_component("c", {"y": (None, "real")})
        with pytest.raises(DuplicateNameError, match=r"^component 'c' is already in r\.h5\.partial$"):
            w.add_component("c", {"y": (None, "real")})


def test_writer_settings_and_names_are_config_errors_keyed_by_the_argument(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as chunk:
        HDF5Writer(tmp_path / "r.h5", chunk_size=0)
    assert (chunk.value.key, str(chunk.value)) == ("chunk_size", "chunk_size: must be positive, got 0")
    with pytest.raises(ConfigError, match=r"^component name 'a/b' contains '/'") as name:
        check_name("a/b", "component name")
    assert name.value.key is None
    w = HDF5Writer(tmp_path / "r.h5")
    with pytest.raises(ConfigError) as status:
        w.close("running")
    assert (status.value.key, str(status.value)) == (
        "status", "status: must be one of complete, failed, interrupted, got 'running'")
    assert w.close("complete") == tmp_path / "r.h5"


def test_writing_after_close_and_a_shrunk_history_are_state_errors(tmp_path: Path) -> None:
    history = ComponentHistory("c")
    history.add_port("y", None)
    for i in range(3):
        history.append("y", 0.1 * i, float(i))
    w = HDF5Writer(tmp_path / "r.h5")
    assert write_history(w, {"c": history}) == 3
    history.get_port_history("y").truncate(1)
    with pytest.raises(ResultsStateError, match=r"^history of 'c' shrank to 1 samples but 3 are already") as shrank:
        write_history(w, {"c": history})
    assert shrank.value.path == str(w.partial_path) and isinstance(shrank.value, RuntimeError)
    w.close()
    with pytest.raises(ResultsStateError, match=r"r\.h5 is already closed$") as closed:
        w.flush()
    assert closed.value.path == str(tmp_path / "r.h5") and isinstance(closed.value, RuntimeError)


def test_a_file_that_is_not_a_results_file_is_a_read_error_with_its_format(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f.attrs["format"] = np.bytes_(b"something-else")
    with pytest.raises(ResultsReadError, match=r"other\.h5 is not a cosimrun results file \(format='something-else'\)"
                       ) as caught:
        load_results(tmp_path / "other.h5")
    error = caught.value
    assert (error.path, error.expected, error.found) == (str(tmp_path / "other.h5"), FORMAT, "something-else")
    copy = pickle.loads(pickle.dumps(error))  # a sweep's worker sends errors to the driver
    assert (type(copy), str(copy), copy.path, copy.found) == (ResultsReadError, str(error), error.path, error.found)
    data = pickle.loads(pickle.dumps(ResultsDataError("m", component="c", port="y")))
    assert (data.component, data.port, str(data)) == ("c", "y", "m")
