"""An interrupt that lands anywhere in a recorder's flush to a results file, and the flush at close after
it: every sample and event is in the file once, in time order, and the file passes its own checks."""

from __future__ import annotations

from collections.abc import Callable

import h5py
import numpy as np
import pytest
from helpers import Ramp

from cosimrun.masters import Jacobi
from cosimrun.storage import HDF5Writer, load_results, verify_results
from cosimrun.system import Recorder, System

BLOCK = 5
N = 23  # four full blocks handed over, three samples buffered at close
TIMES = 0.1 * np.arange(N)


class Stop(KeyboardInterrupt):
    """The interrupt the test injects (a KeyboardInterrupt, as SIGINT and SIGTERM raise)."""


def after(method: Callable, calls: int) -> Callable:
    """*method*, raising :class:`Stop` once it returned for the *calls*-th time (its work is done)."""
    count = 0

    def wrapped(*args, **kwargs):
        nonlocal count
        out = method(*args, **kwargs)
        count += 1
        if count == calls:
            raise Stop
        return out

    return wrapped


def before(method: Callable, calls: int) -> Callable:
    """*method*, raising :class:`Stop` instead of its *calls*-th call (nothing of that call is done)."""
    count = 0

    def wrapped(*args, **kwargs):
        nonlocal count
        count += 1
        if count == calls:
            raise Stop
        return method(*args, **kwargs)

    return wrapped


def inject(writer: HDF5Writer, where: str) -> None:
    """Make the writer raise :class:`Stop` at *where* during the second block's flush."""
    if where == "after the first component's block":
        writer.append = after(writer.append, 3)  # blocks 1 of a and b, then block 2 of a
    elif where == "after the second component's block":
        writer.append = after(writer.append, 4)
    elif where == "before the second component's block":
        writer.append = before(writer.append, 4)
    elif where == "after the events":
        writer.write_events = after(writer.write_events, 2)
    elif where == "inside an append, after its data":  # the block is written, not yet committed: undone
        # the first flush: y, micro, time of a and b, four event columns; the second: a's three, then b's time
        writer._extend = after(writer._extend, 2 * 3 + 4 + 2 * 3)
    elif where == "in the flush to disk":
        writer.flush = before(writer.flush, 2)
    else:
        raise AssertionError(where)


WHERE = [
    "after the first component's block",
    "after the second component's block",
    "before the second component's block",
    "after the events",
    "inside an append, after its data",
    "in the flush to disk",
]


def record_until_interrupted(path, where: str, **recorder_settings) -> int | None:
    """Two ramps recorded into *path* (two events a block: fewer than a flush interval) until the interrupt
    injected *where* lands; then the flush the master does as the run ends, the interrupt propagating, and the
    close. The sample at which the interrupt landed (None: it did not)."""
    system = System("s")
    system.add_component(Ramp("a", slope=1.0))
    system.add_component(Ramp("b", slope=2.0))
    system.initialize(0.0, Jacobi())
    writer = HDF5Writer(path, experiment="e")
    recorder = Recorder(writer, flush_interval=BLOCK, **recorder_settings)
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
    recorder.flush()
    writer.close("interrupted", "interrupted by the user")
    return interrupted_at


@pytest.mark.parametrize("where", WHERE)
def test_an_interrupted_flush_stores_each_sample_once_in_time_order(tmp_path, where):
    path = tmp_path / "r.h5"
    interrupted_at = record_until_interrupted(path, where)
    assert interrupted_at == 2 * BLOCK - 1  # the second block's flush

    kept = TIMES[: interrupted_at + 1]
    res = load_results(path)
    assert res.status == "interrupted"
    for name, slope in (("a", 1.0), ("b", 2.0)):
        t, y = res.history(name)["y"]
        np.testing.assert_array_equal(t, kept)
        np.testing.assert_array_equal(y, slope * kept)
    np.testing.assert_array_equal(res.events["time"].to_numpy(), [t for k, t in enumerate(kept) if k % BLOCK in (0, 2)])
    assert (res.events["event"] == "tick").all()
    with h5py.File(path, "r+") as f:  # the same file marked complete passes the whole check
        f.attrs["status"] = "complete"
    assert verify_results(path) == []


def test_verify_names_a_time_axis_that_goes_back(tmp_path):
    """The shape an interrupted flush used to leave: a block stored twice, its time running backwards."""
    path = tmp_path / "r.h5"
    with HDF5Writer(path, experiment="e") as writer:
        writer.add_component("c", {"y": (None, "real")})
        writer.append("c", [0.0, 0.1, 0.2], None, {"y": [0.0, 1.0, 2.0]})
        writer.append("c", [0.0, 0.1, 0.2], None, {"y": [0.0, 1.0, 2.0]})
        writer.append("c", [0.2, 0.3], [1, 0], {"y": [2.0, 3.0]})  # an instant's micro step repeats its time
    assert verify_results(path) == ["/components/c/time: time goes back from 0.2 to 0 at sample 3"]


def test_equal_times_of_micro_steps_pass(tmp_path):
    path = tmp_path / "r.h5"
    with HDF5Writer(path, experiment="e") as writer:
        writer.add_component("c", {"y": (None, "real")})
        writer.append("c", [0.0, 0.1, 0.1, 0.1, 0.2], [0, 0, 1, 2, 0], {"y": [0.0, 1.0, 2.0, 3.0, 4.0]})
        writer.write_events([(0.1, 0, "c", "e"), (0.1, 1, "c", "e")])
    assert verify_results(path) == []
