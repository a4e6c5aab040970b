"""An interrupt anywhere in the flush of a decimating recorder (one that keeps a row back for the next block),
then the flush at close: the file holds exactly the samples ``decimate`` keeps, once each, in time order."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from helpers import Ramp
from test_interrupted_flush import BLOCK, TIMES, WHERE, Stop, inject

from cosimrun.masters import Jacobi
from cosimrun.storage import HDF5Writer, load_results, verify_results
from cosimrun.system import Recorder, System

DECIMATE = 3


@pytest.mark.parametrize("where", WHERE)
def test_an_interrupted_flush_keeps_the_decimated_samples_once(tmp_path, where):
    system = System("s")
    system.add_component(Ramp("a", slope=1.0))
    system.add_component(Ramp("b", slope=2.0))
    system.initialize(0.0, Jacobi())
    path = tmp_path / "r.h5"
    writer = HDF5Writer(path, experiment="e")
    recorder = Recorder(writer, flush_interval=BLOCK, decimate=DECIMATE)
    recorder.attach(system.components)
    inject(writer, where)
    interrupted_at = None
    for k, t in enumerate(TIMES):
        for comp in system.components.values():
            comp.refresh_outputs(t)
        if k % BLOCK in (0, 2):
            recorder.event(t, 0, "a", "tick")
        try:
            recorder.sample(t)
        except Stop:
            interrupted_at = k
            break
    # the first flush (at k=4) keeps k=4 back, so the second block is full at k=8, which is kept back in turn
    assert interrupted_at == 2 * BLOCK - 2
    recorder.flush()
    writer.close("interrupted", "interrupted by the user")

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
