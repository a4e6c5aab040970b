"""Long runs keep bounded memory and put their samples in the results file while they run.

The same ``coupled_oscillators`` run (every port recorded) for 1e4 and for
8e4 macro steps, each a child of a small wrapper that reports the child's
peak RSS: the longer run records 4.4 MB more samples, and its peak RSS must not
grow by half of that, as it would if the samples stayed in memory. While the
longer one runs, this test process reads the ``.partial`` results file and
sees it grow. ``benchmarks/bench_long_run.py`` runs the long form (2e6 steps)
and prints the figures.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest

pytestmark = pytest.mark.slow

SHORT, LONG = 10_000, 80_000
"""Macro steps of the two runs."""

MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run([sys.executable, '-c', 'from cosimrun.cli import main; main()', *sys.argv[1:]]).returncode\n"
    "print('peak_rss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run_args(steps: int, run_dir: str) -> list[str]:
    """``coupled_oscillators`` for *steps* macro steps of 1 ms, every port recorded.

    One RK4 sub-step per macro step keeps the step cheap; what is measured is
    the recording, not the integrator.
    """
    return [
        "+experiment=coupled_oscillators",
        f"run.tf={steps / 1000:g}",
        "+components.mass1.params.substeps=1",
        "+components.mass2.params.substeps=1",
        f"hydra.run.dir={run_dir}",
    ]


def start(steps: int, run_dir: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", MEASURED, *run_args(steps, run_dir)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def peak_rss_kb(output: str) -> int:
    return int(next(line.split()[1] for line in output.splitlines() if line.startswith("peak_rss_kb")))


def samples_in(partial: Path) -> tuple[int, str] | None:
    """``(samples of mass1, status)`` read from the file being written, or ``None`` if not readable yet."""
    try:
        with h5py.File(partial, "r", locking=False) as f:
            return f["components/mass1/time"].shape[0], str(f.attrs["status"])
    except (OSError, KeyError, RuntimeError, ValueError):  # caught mid-write: try again later
        return None


def recorded_bytes(path: Path) -> int:
    """Bytes of every sample array in a results file (what a run would hold if it kept its samples in memory)."""
    sizes: list[int] = []
    with h5py.File(path, "r") as f:
        f["components"].visititems(lambda _, x: sizes.append(x.nbytes) if isinstance(x, h5py.Dataset) else None)
    return sum(sizes)


def test_a_long_run_has_bounded_memory_and_a_file_that_grows_while_it_runs(tmp_path: Path) -> None:
    short = start(SHORT, "short", tmp_path)
    short_out, _ = short.communicate(timeout=600)
    assert short.returncode == 0, short_out

    long = start(LONG, "long", tmp_path)
    partial = tmp_path / "long" / "results.h5.partial"
    seen: list[int] = []
    deadline = time.monotonic() + 1200
    while long.poll() is None and time.monotonic() < deadline:
        reading = samples_in(partial)
        if reading is not None:
            n, status = reading
            # "complete" is written into the .partial just before its rename, with every sample there
            assert status == "running" or (status == "complete" and n == LONG + 1), (status, n)
            if status == "running" and (not seen or n > seen[-1]):
                seen.append(n)
        time.sleep(0.2)
    long_out, _ = long.communicate(timeout=60)
    assert long.returncode == 0, long_out
    # read while running: three sizes with samples, rising (so two short of the end); the file lists its
    # components from its creation, so a first reading may find none yet
    assert len([n for n in seen if n > 0]) >= 3, seen

    with h5py.File(tmp_path / "long" / "results.h5", "r") as f:
        assert f.attrs["status"] == "complete"
        assert f["components/mass1/time"].shape == (LONG + 1,)
        assert sorted(f["components"]) == ["mass1", "mass2"]
    more_kb = (recorded_bytes(tmp_path / "long" / "results.h5") - recorded_bytes(tmp_path / "short" / "results.h5"))
    more_kb //= 1024
    assert more_kb > 4_000  # the samples the longer run holds in its file and not in memory
    short_kb, long_kb = peak_rss_kb(short_out), peak_rss_kb(long_out)
    assert long_kb - short_kb < more_kb / 2, (
        f"peak RSS {long_kb} kB for {LONG} steps vs {short_kb} kB for {SHORT}: {more_kb} kB more samples")
