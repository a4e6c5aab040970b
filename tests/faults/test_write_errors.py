"""Write errors (a full disk, a file-size limit): one line, exit 1, a readable file, never a crash.

A file-size limit (``ulimit -f``, set with ``setrlimit`` in the child; Python ignores SIGXFSZ, so
writes fail with EFBIG) stands in for a full disk in subprocesses; in-process tests make the free
space run out. Each test checks the exit status, stderr and the file left behind: its name, status,
error and the samples it keeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest

from cosimrun.errors import ResultsWriteError
from cosimrun.runner.load import load_sweep
from cosimrun.storage import HDF5Writer, load_results
from cosimrun.storage.verify import verify_results

RUN_CLI = Path(__file__).parents[1] / "support" / "run_cli.py"
LIMIT = 1_000_000
"""The file-size limit of the subprocesses: a few blocks of the big run below."""
BIG = ["+experiment=coupled_oscillators", "storage.compression=null", "storage.flush_interval=1000"]


def limited(limit: int = LIMIT):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def cosimrun(tmp_path: Path, *args: str, timeout: float = 180, limit: int | None = LIMIT
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN_CLI), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout, preexec_fn=None if limit is None else limited(limit))


def blocks(n: int, width: int = 100) -> list[np.ndarray]:
    return [np.arange(k * width, (k + 1) * width) * 1e-3 for k in range(n)]


# ---------------------------------------------------------------------- the writer
def test_a_full_disk_fails_before_writing_and_the_file_keeps_its_last_flush(tmp_path, monkeypatch) -> None:
    path = tmp_path / "r.h5"
    writer = HDF5Writer(path, compression=None)
    writer.add_component("a", {"x": ("m", "real")})
    for t in blocks(3):
        writer.append("a", t, None, {"x": 2 * t})
    writer.append("a", blocks(4)[3], None, {"x": 2 * blocks(4)[3]}, flush=False)  # added, not flushed
    monkeypatch.setattr(os, "statvfs", lambda p: SimpleNamespace(f_bavail=0, f_frsize=4096))
    with pytest.raises(ResultsWriteError) as caught:
        writer.append("a", blocks(5)[4], None, {"x": 2 * blocks(5)[4]})
    error = caught.value
    assert str(error) == f"cannot write results to {writer.partial_path}: [Errno 28] No space left on device"
    assert error.errno == 28 and isinstance(error, OSError)
    with pytest.raises(ResultsWriteError):  # nothing more is written
        writer.flush()
    monkeypatch.undo()
    assert writer.close("complete") == path  # never complete after a write error
    assert not writer.damaged and not writer.partial_path.exists()
    res = load_results(path)
    assert res.status == "failed" and res.attrs["error"] == f"ResultsWriteError: {error}"
    t, x = res.history("a")["x"]
    np.testing.assert_array_equal(t, np.concatenate(blocks(3)))  # the last flushed block, no more
    np.testing.assert_array_equal(x, 2 * t)
    assert verify_results(path) == ["status is failed, not complete"]  # lengths and checksums agree
    assert writer.final_values() == {"a.x": x[-1]}


def test_without_room_to_close_the_file_stays_partial_and_running(tmp_path, monkeypatch) -> None:
    writer = HDF5Writer(tmp_path / "r.h5")
    writer.add_component("a", {"x": (None, "real")})
    writer.append("a", [0.0, 1.0], None, {"x": [1.0, 2.0]})
    monkeypatch.setattr(os, "statvfs", lambda p: SimpleNamespace(f_bavail=0, f_frsize=4096))
    with pytest.raises(ResultsWriteError):
        writer.append("a", [2.0], None, {"x": [3.0]})
    assert writer.close("failed", error="boom") == writer.partial_path
    monkeypatch.undo()
    res = load_results(writer.partial_path)
    assert res.status == "running" and len(res.history("a")["x"].time) == 2


def test_an_append_interrupted_half_way_is_undone(tmp_path, monkeypatch) -> None:
    path = tmp_path / "r.h5"
    writer = HDF5Writer(path)
    writer.add_component("a", {"x": (None, "real"), "y": (None, "real")})
    writer.append("a", [0.0, 1.0], None, {"x": [1.0, 2.0], "y": [3.0, 4.0]})
    extend, calls = HDF5Writer._extend, []

    def interrupted(self, *args):
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        extend(self, *args)

    monkeypatch.setattr(HDF5Writer, "_extend", interrupted)
    with pytest.raises(KeyboardInterrupt):
        writer.append("a", [2.0], None, {"x": [5.0], "y": [6.0]})
    monkeypatch.undo()
    writer.close("interrupted", error="interrupted by the user")
    with h5py.File(path, "r") as f:
        assert {name: f["components/a"][name].shape[0] for name in ("time", "micro", "x", "y")} == dict.fromkeys(
            ("time", "micro", "x", "y"), 2)
    assert verify_results(path) == ["status is interrupted, not complete"]


@pytest.mark.slow
def test_when_hdf5_itself_fails_to_write_the_process_neither_crashes_nor_spews(tmp_path) -> None:
    """Without the room check HDF5's own write fails: the file is released unwritten, no segfault at exit."""
    script = f"""
import numpy as np
from cosimrun.errors import ResultsWriteError
from cosimrun.storage import HDF5Writer
w = HDF5Writer({str(tmp_path / "r.h5")!r}, compression=None)
w._check_room = lambda n: None
w.add_component("a", {{"x": (None, "real")}})
try:
    for k in range(1000):
        w.append("a", np.arange(4096.0) + 4096 * k, None, {{"x": np.arange(4096.0)}})
except ResultsWriteError as exc:
    print(exc)
    print(w.close("failed", exc), w.damaged)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=limited(300_000))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    partial = tmp_path / "r.h5.partial"
    assert proc.stdout.splitlines() == [
        f"cannot write results to {partial}: [Errno 27] File too large",
        f"{partial} True",
    ]
    assert not (tmp_path / "r.h5").exists()
    with contextlib.suppress(OSError):  # as HDF5's failed flush left it: unreadable, or readable and running
        assert load_results(partial).status == "running"


# ---------------------------------------------------------------------- the command
@pytest.mark.slow
def test_a_file_size_limit_ends_a_run_with_one_line_and_a_readable_failed_file(tmp_path) -> None:
    proc = cosimrun(tmp_path, *BIG, "run.tf=100", "hydra.run.dir=out")
    path = tmp_path / "out" / "results.h5"
    assert proc.returncode == 1, proc.stderr
    error = f"cannot write results to {path}.partial: [Errno 27] File too large"
    assert proc.stderr.splitlines() == [
        f"cosimrun: error: {error}; results up to the last flush kept in {path} (status failed)"
    ]
    res = load_results(path)
    assert res.status == "failed" and res.attrs["error"] == error
    assert "Traceback" in res.attrs["traceback"]
    t, x = res.history("mass1")["x"]
    assert len(t) > 0 and len(t) % 1000 == 0  # whole blocks
    assert np.all(np.diff(t) > 0) and len(res.history("mass2")["force"].time) == len(t)
    assert verify_results(path) == ["status is failed, not complete"]
    assert not (tmp_path / "out" / "results.h5.partial").exists()


@pytest.mark.slow
def test_under_a_small_file_size_limit_the_compressed_blocks_that_fit_are_kept(tmp_path) -> None:
    """``ulimit -f 200`` on a run whose compressed file grows to about 250 kB: its first block of 2000 samples
    fits (counted at its compressed size, not its raw 137 kB), the second does not; the file is failed with the
    first block, equal to what the unlimited run computed."""
    reference = cosimrun(tmp_path, "+experiment=coupled_oscillators", "hydra.run.dir=ref", limit=None)
    assert reference.returncode == 0, reference.stderr
    full = load_results(tmp_path / "ref" / "results.h5")
    assert os.path.getsize(tmp_path / "ref" / "results.h5") > 200 * 1024
    proc = cosimrun(tmp_path, "+experiment=coupled_oscillators", "hydra.run.dir=out", limit=200 * 1024)
    path = tmp_path / "out" / "results.h5"
    error = f"cannot write results to {path}.partial: [Errno 27] File too large"
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [
        f"cosimrun: error: {error}; results up to the last flush kept in {path} (status failed)"
    ]
    res = load_results(path)
    assert res.status == "failed" and res.attrs["error"] == error
    for comp in ("mass1", "mass2"):
        kept, whole = res.history(comp), full.history(comp)
        assert set(kept) == set(whole)
        for port in whole:
            t, v = kept[port]
            assert len(t) == 2000  # the first block, all of it
            np.testing.assert_array_equal(t, whole[port].time[:2000])
            np.testing.assert_array_equal(v, whole[port].values[:2000])
    assert verify_results(path) == ["status is failed, not complete"]


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "dask"])
def test_in_a_sweep_a_write_error_fails_the_job_and_the_sweep_goes_on(tmp_path, launcher) -> None:
    sweep = tmp_path / "sweep"
    proc = cosimrun(tmp_path, "-m", *BIG, "run.tf=100,0.5", f"hydra/launcher={launcher}", f"hydra.sweep.dir={sweep}",
                    *(["hydra.launcher.progress=false"] if launcher == "dask" else []))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Segmentation" not in proc.stderr, proc.stderr
    job = sweep / "0" / "results.h5"
    error = f"cannot write results to {job}.partial: [Errno 27] File too large"
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("[")]
    assert lines[-3:] == [
        "sweep: 2 jobs, 1 complete, 1 failed",
        f"  #0 failed: {' '.join(BIG)} run.tf=100: {error}",
        f"index: {sweep / 'index.h5'}",
    ]
    index = load_sweep(sweep)
    assert list(index["status"]) == ["failed", "complete"]
    assert index["error"][0] == error
    assert load_results(job).status == "failed" and load_results(sweep / "1" / "results.h5").status == "complete"


# ---------------------------------------------------------------------- the sweep index
DRIVER = """
import io, json, sys
from cosimrun.runner import ledger as ledgers
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage.sweep_index import index_generation
sweep = sys.argv[1]
ledger = ledgers.ledger_for(sweep)
ledger.min_interval = 0.0
for num in range(int(sys.argv[2])):
    ledger.enter(JobOutcome(num, "failed", ["+experiment=x", f"a.k={num}"], error=f"E{num}:" + "x" * 5000,
                            attempts=1))
    ledger.flush()
    print(json.dumps([num, str(ledger.write_error or ""), index_generation(ledger.index_path)]))
out = io.StringIO()
print(json.dumps(["finish", ledgers.finish(out), out.getvalue()]))
"""


def drive_ledger(sweep: Path, jobs: int, limit: int) -> tuple[list[list], subprocess.CompletedProcess[str]]:
    """Run a driver's ledger under a file-size limit: a job of 5 kB of error text entered and flushed at a time."""
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(sweep), str(jobs)], capture_output=True, text=True,
                          timeout=60, preexec_fn=limited(limit))
    return [json.loads(line) for line in proc.stdout.splitlines()], proc


def phases(steps: list[list]) -> list[str]:
    """Each flush's outcome: ``append`` (rows appended to the store), ``whole`` (the index written whole), ``error``."""
    return ["error" if error else "append" if generation else "whole" for _, error, generation in steps]


def test_when_the_index_store_cannot_grow_the_index_is_written_whole_and_then_kept_as_it_was(tmp_path) -> None:
    """Under a 250 kB limit the row store (about 120 kB made, 5 kB a job) fills first: the ledger writes the index
    whole from then on, until that no longer fits either. No crash, one error, the last whole index kept."""
    sweep = tmp_path / "sweep"
    steps, proc = drive_ledger(sweep, 60, 250_000)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    *steps, (_, code, summary) = steps
    seen = phases(steps)
    first_whole, first_error = seen.index("whole"), seen.index("error")
    assert 0 < first_whole < first_error
    assert seen == ["append"] * first_whole + ["whole"] * (first_error - first_whole) + ["error"] * (60 - first_error)
    index = sweep / "index.h5"
    error = f"cannot write results to {index}: [Errno 27] File too large"
    assert {e for _, e, _ in steps[first_error:]} == {error}
    assert code == 1
    assert summary.splitlines()[-2:] == [
        f"index: {index} lacks the jobs entered last: {error}",
        f"to finish it, run the same command with hydra.sweep.dir={sweep} hydra.launcher.resume=true",
    ]
    assert sorted(p.name for p in sweep.iterdir()) == ["index.h5"]  # no store, no temporary file
    table = load_sweep(sweep)  # the last index that was written whole: every job up to it
    assert list(table.index) == list(range(first_error))
    assert list(table["error"]) == [f"E{num}:" + "x" * 5000 for num in range(first_error)]
    assert set(table["status"]) == {"failed"}


def test_an_index_that_never_fits_is_reported_and_nothing_is_left(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    steps, proc = drive_ledger(sweep, 3, 20_000)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    *steps, (_, code, summary) = steps
    assert phases(steps) == ["error"] * 3
    error = f"cannot write results to {sweep / 'index.h5'}: [Errno 27] File too large"
    assert code == 1 and summary.splitlines()[-2] == f"index: not written: {error}"
    assert list(sweep.iterdir()) == []


@pytest.mark.slow
def test_a_sweep_whose_index_store_does_not_fit_writes_its_index_whole(tmp_path) -> None:
    """A limit of 112 kB: each job's results file fits, the index's row store (about 120 kB) does not. The sweep
    completes with a whole index, as without the limit."""
    sweep = tmp_path / "sweep"
    proc = cosimrun(tmp_path, "-m", "+experiment=coupled_oscillators", "run.tf=0.5",
                    "components.mass1.params.mass=1.0,2.0", "hydra/launcher=basic", f"hydra.sweep.dir={sweep}",
                    limit=112_000)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Segmentation" not in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["sweep: 2 jobs, 2 complete, 0 failed", f"index: {sweep / 'index.h5'}"]
    assert not (sweep / "index.parts").exists()
    table = load_sweep(sweep)
    assert list(table["status"]) == ["complete", "complete"]
    assert list(table["components.mass1.params.mass"]) == [1.0, 2.0]
    for num in (0, 1):
        assert load_results(sweep / str(num) / "results.h5").status == "complete"
