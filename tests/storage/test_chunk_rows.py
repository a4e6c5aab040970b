"""A run's datasets are chunked for the samples it is expected to record: a short run does not compress whole
4096-row chunks, and the chunking changes nothing the file holds but its layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from cosimrun.runner import run
from cosimrun.storage.hdf5 import CHUNK_ROWS, SMALLEST_CHUNK, chunk_rows


def test_chunk_rows_hold_the_expected_samples_within_bounds() -> None:
    assert [chunk_rows(n) for n in (0, 1, 2, 64, 65, 100, 4096, 4097, 10**9)] == [
        SMALLEST_CHUNK, 64, 64, 64, 128, 128, 4096, CHUNK_ROWS, CHUNK_ROWS]


def _ball(tf: float) -> dict[str, Any]:
    """A bouncing ball under the hybrid master: each bounce records two samples beyond the grid's."""
    return {"name": "ball", "run": {"t0": 0.0, "tf": tf, "dt": 0.01},
            "components": {"b": {"type": "bouncing_ball", "params": {"h0": 1.0, "e": 0.8}}},
            "master": {"name": "hybrid"}}


def _contents(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind not in "OV":
            out[name] = obj[...]
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return out


@pytest.mark.parametrize("tf", [0.62, 3.0])  # 64 samples expected (a chunk of 64), and 302 (of 512)
def test_a_run_chunked_for_its_samples_stores_what_whole_chunks_store(tmp_path: Path, tf: float,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    sized = run.run_experiment(_ball(tf), tmp_path / "sized")
    monkeypatch.setattr(run, "chunk_rows", lambda samples: CHUNK_ROWS)
    whole = run.run_experiment(_ball(tf), tmp_path / "whole")
    assert sized.status == whole.status == "complete"
    with h5py.File(sized.path, "r") as f:
        h = f["components/b/h"]
        assert h.chunks == (chunk_rows(round(tf / 0.01) + 2),)
        assert h.shape[0] > round(tf / 0.01) + 1  # the bounces' samples beyond the grid's
        assert h.shape[0] > h.chunks[0] or tf != 0.62  # more than expected: a second chunk
    a, b = _contents(sized.path), _contents(whole.path)
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name
