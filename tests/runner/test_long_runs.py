"""Long runs keep bounded memory and put their samples in the results file while they run.

One ``coupled_oscillators`` run of 2e6 macro steps (one component recorded) runs
as a child of a small wrapper that reports the child's peak RSS; while it runs,
this test process reads the ``.partial`` results file and sees it grow. Its
peak RSS is compared with the same run of 2e5 steps.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest

pytestmark = pytest.mark.slow

MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run([sys.executable, '-c', 'from cosimrun.cli import main; main()', *sys.argv[1:]]).returncode\n"
    "print('peak_rss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run_args(steps: int, run_dir: str) -> list[str]:
    """``coupled_oscillators`` for *steps* macro steps of 1 ms, recording ``mass1.x`` only.

    One RK4 sub-step per macro step keeps the step cheap; what is measured is
    the recording, not the integrator.
    """
    return [
        "+experiment=coupled_oscillators",
        f"run.tf={steps / 1000:g}",
        "storage.record=[mass1.x]",
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


def test_a_long_run_has_bounded_memory_and_a_file_that_grows_while_it_runs(tmp_path: Path) -> None:
    short = start(200_000, "short", tmp_path)
    short_out, _ = short.communicate(timeout=1200)
    assert short.returncode == 0, short_out

    long = start(2_000_000, "long", tmp_path)
    partial = tmp_path / "long" / "results.h5.partial"
    seen: list[int] = []
    deadline = time.monotonic() + 3000
    while long.poll() is None and time.monotonic() < deadline:
        reading = samples_in(partial)
        if reading is not None:
            n, status = reading
            # "complete" is written into the .partial just before its rename, with every sample there
            assert status == "running" or (status == "complete" and n == 2_000_001), (status, n)
            if not seen or n > seen[-1]:
                seen.append(n)
        time.sleep(0.5)
    long_out, _ = long.communicate(timeout=60)
    assert long.returncode == 0, long_out
    assert len(seen) >= 3 and 0 < seen[0] < seen[-1] < 2_000_001, seen  # grew while the run was under way

    with h5py.File(tmp_path / "long" / "results.h5", "r") as f:
        assert f.attrs["status"] == "complete"
        assert f["components/mass1/time"].shape == (2_000_001,)
        assert list(f["components"]) == ["mass1"]
    short_kb, long_kb = peak_rss_kb(short_out), peak_rss_kb(long_out)
    assert long_kb <= 1.2 * short_kb, f"peak RSS {long_kb} kB for 2e6 steps vs {short_kb} kB for 2e5"
