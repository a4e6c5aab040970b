"""An interrupt anywhere in the flush of a decimating recorder (one that keeps a row back for the next block),
then the flush at close: the file holds exactly the samples ``decimate`` keeps, once each, in time order."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from test_interrupted_flush import BLOCK, TIMES, WHERE, record_until_interrupted

from cosimrun.storage import load_results, verify_results

DECIMATE = 3


@pytest.mark.parametrize("where", WHERE)
def test_an_interrupted_flush_keeps_the_decimated_samples_once(tmp_path, where):
    path = tmp_path / "r.h5"
    interrupted_at = record_until_interrupted(path, where, decimate=DECIMATE)
    # the first flush (at k=4) keeps k=4 back, so the second block is full at k=8, which is kept back in turn
    assert interrupted_at == 2 * BLOCK - 2

    kept = TIMES[[0, 3, 6, 8]]  # every third point from t0, and the last one taken
    res = load_results(path)
    for name, slope in (("a", 1.0), ("b", 2.0)):
        t, y = res.history(name)["y"]
        np.testing.assert_array_equal(t, kept)
        np.testing.assert_array_equal(y, slope * kept)
    events = [t for k, t in enumerate(TIMES[: interrupted_at + 1]) if k % BLOCK in (0, 2)]
    np.testing.assert_array_equal(res.events["time"].to_numpy(), events)
    with h5py.File(path, "r+") as f:
        f.attrs["status"] = "complete"
    assert verify_results(path) == []
