"""verify_results: a whole complete file passes; every kind of damage is named."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from test_hdf5 import make_history, make_result

from cosimrun.errors import ResultsReadError
from cosimrun.storage import HDF5Writer, load_results, verify_results, write_run_result
from cosimrun.storage.hdf5 import CHECKSUMS_ATTR, crc32

MARK = 1234.5678125  # a float whose bytes occur once in the file (uncompressed)


def write(path: Path, *, compression: str | None = None, status: str = "complete") -> Path:
    with HDF5Writer(path, experiment="e", compression=compression) as w:
        write_run_result(w, make_result(make_history()))
        w.add_component("probe", {"v": ("m", "real")})
        w.append("probe", np.arange(4.0), None, {"v": np.full(4, MARK)})
        if status != "complete":
            w.close(status, error="RuntimeError: boom")
    return path


def test_a_whole_complete_file_has_no_problems_and_every_dataset_is_summed(tmp_path):
    path = write(tmp_path / "r.h5")
    assert verify_results(path) == []
    with h5py.File(path, "r") as f:
        sums = json.loads(f.attrs[CHECKSUMS_ATTR])
    assert {"/components/plant/mode", "/components/plant/x", "/components/probe/v", "/events/event"} <= sums.keys()
    assert sums["/components/probe/v"][0] == 4
    assert sums["/mode_switches/to_mode"][0] == 2


def test_the_compressed_file_passes_too(tmp_path):
    assert verify_results(write(tmp_path / "r.h5", compression="gzip")) == []


@pytest.mark.parametrize("status", ["failed", "interrupted"])
def test_a_file_that_did_not_complete_is_not_trusted(tmp_path, status):
    assert verify_results(write(tmp_path / "r.h5", status=status)) == [f"status is {status}, not complete"]


def test_a_flipped_byte_in_the_data_is_a_checksum_mismatch_naming_the_dataset(tmp_path):
    path = write(tmp_path / "r.h5")
    raw = bytearray(path.read_bytes())
    at = raw.find(np.float64(MARK).tobytes())
    assert at > 0 and raw.find(np.float64(MARK).tobytes(), at + 8 * 4) == -1
    raw[at + 3] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert verify_results(path) == ["/components/probe/v: CRC-32 mismatch (the data changed after it was written)"]


def test_damage_inside_compressed_chunks_is_found(tmp_path):
    path = write(tmp_path / "r.h5", compression="gzip")
    with h5py.File(path, "r") as f:
        offset = f["components/plant/x"].id.get_chunk_info(0).byte_offset
    raw = bytearray(path.read_bytes())
    for k in range(8, 24):
        raw[offset + k] ^= 0x5A
    path.write_bytes(bytes(raw))
    problems = verify_results(path)
    assert len(problems) == 1
    assert problems[0].startswith(("unreadable: OSError", "/components/plant/x: CRC-32 mismatch")), problems


def test_a_truncated_dataset_is_named_once(tmp_path):
    path = write(tmp_path / "r.h5")
    with h5py.File(path, "r+") as f:
        f["components/probe/v"].resize((3,))
    assert verify_results(path) == ["/components/probe/v has 3 samples but 4 were written"]


def test_unequal_lengths_in_a_group_are_named_even_when_the_record_agrees(tmp_path):
    path = write(tmp_path / "r.h5")
    with h5py.File(path, "r+") as f:
        f["components/probe/v"].resize((3,))
        sums = json.loads(f.attrs[CHECKSUMS_ATTR])
        sums["/components/probe/v"] = [3, crc32(f["components/probe/v"][:])]
        f.attrs[CHECKSUMS_ATTR] = json.dumps(sums)
    assert verify_results(path) == [
        "/components/probe has datasets of different lengths (time 4, micro 4, v 3) in a file closed complete"]


def test_a_dataset_of_the_wrong_kind_is_named_as_every_read_names_it(tmp_path):
    """verify_results and the readers share one checker (group_damage): a port stored as text is damage to
    both, named the same way."""
    path = write(tmp_path / "r.h5")
    with h5py.File(path, "r+") as f:
        del f["components/probe/v"]
        f["components/probe"].create_dataset("v", data=np.array([b"a", b"b", b"c", b"d"], dtype=h5py.string_dtype()))
        f["components/probe/v"].attrs["port_type"] = "real"
    (problem,) = verify_results(path)
    assert problem.startswith("/components/probe/v has dtype object, not a number")
    with pytest.raises(ResultsReadError) as caught:
        load_results(path)
    assert str(caught.value) == f"{path} is damaged: {problem}"


def test_missing_checksums_garbage_and_foreign_files(tmp_path):
    path = write(tmp_path / "r.h5")
    with h5py.File(path, "r+") as f:
        del f.attrs[CHECKSUMS_ATTR]
    assert verify_results(path) == ["no checksums (the file was not closed by a cosimrun that writes them)"]
    garbage = tmp_path / "g.h5"
    garbage.write_bytes(b"\0" * 1000)
    (problem,) = verify_results(garbage)
    assert problem.startswith("unreadable: OSError")
    assert verify_results(tmp_path / "missing.h5")[0].startswith("unreadable: FileNotFoundError")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = [1.0]
    assert verify_results(tmp_path / "other.h5") == ["not a cosimrun results file"]


def test_a_deleted_dataset_is_missing(tmp_path):
    path = write(tmp_path / "r.h5")
    with h5py.File(path, "r+") as f:
        del f["components/probe/v"]
    assert verify_results(path) == ["/components/probe/v: missing"]
