"""What a sweep reads of a run's results file (``storage.summary``): how the run ended, its largest coupling error."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from cosimrun.runner.outcome import outcome_from_file
from cosimrun.storage import HDF5Writer, largest_coupling_error, read_run_status, results_attrs


def _coupling(connection: str, relative: float) -> SimpleNamespace:
    return SimpleNamespace(connection=connection, unit="m", max=2 * relative, rms=relative, time_of_max=0.5, range=2.0,
                           relative=relative)


def test_a_failed_run_reads_back_with_its_error_and_wall_time(tmp_path: Path) -> None:
    path = tmp_path / "results.h5"
    with pytest.raises(ZeroDivisionError), HDF5Writer(path):
        1 / 0  # noqa: B018
    recorded = read_run_status(path)
    assert recorded.status == "failed"
    assert recorded.error == "ZeroDivisionError: division by zero"
    assert recorded.traceback.startswith("Traceback") and "ZeroDivisionError" in recorded.traceback.splitlines()[-1]
    with h5py.File(path, "r") as f:
        assert recorded.wall_time_s == float(f.attrs["wall_time_s"]) and recorded.wall_time_s > 0


def test_a_running_file_has_no_error_and_no_wall_time_yet(tmp_path: Path) -> None:
    writer = HDF5Writer(tmp_path / "results.h5")
    recorded = read_run_status(writer.partial_path)
    assert (recorded.status, recorded.error, recorded.traceback) == ("running", "", "")
    assert math.isnan(recorded.wall_time_s)
    writer.close()


def test_a_file_without_a_status_is_taken_over_as_failed(tmp_path: Path) -> None:
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f.attrs["error"] = np.bytes_(b"bytes are decoded")
    assert read_run_status(path).status is None
    assert results_attrs(path, ("status", "error")) == {"error": "bytes are decoded"}
    outcome = outcome_from_file(4, ["a=1"], path)
    assert (outcome.num, outcome.status, outcome.error, outcome.reused, outcome.attempts) == (4, "failed",
                                                                                                "bytes are decoded",
                                                                                                True, 0)
    assert math.isnan(outcome.wall_time_s) and outcome.summaries == {}
    with pytest.raises(OSError):
        read_run_status(tmp_path / "missing.h5")


def test_the_largest_coupling_error_is_read_from_the_file_or_its_partial(tmp_path: Path) -> None:
    path = tmp_path / "results.h5"
    writer = HDF5Writer(path)
    assert math.isnan(largest_coupling_error(path))  # only the .partial exists: no estimates yet
    writer.write_coupling_error([_coupling("a.y -> b.u", 0.25), _coupling("b.y -> a.u", 0.75)])
    writer.flush()
    assert largest_coupling_error(path) == 0.75
    writer.close()
    assert largest_coupling_error(path) == 0.75
    assert math.isnan(largest_coupling_error(tmp_path / "missing.h5"))
