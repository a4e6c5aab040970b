"""Memory and speed of long runs: ``coupled_oscillators`` for 2e5 and 2e6 macro steps, one port recorded.

    python benchmarks/bench_long_run.py [--steps 200000 2000000] [--record mass1.x]

The long form of ``tests/runner/test_long_runs.py`` (which runs 1e4 and 1.5e5
steps with every port recorded): each run is a child of a small wrapper that
reports its peak RSS. Prints, per run, the wall and CPU time, the CPU
microseconds per macro step (start-up included), the peak RSS and the samples in the results file. Bounded
memory shows as a peak RSS that stays the same while the steps grow tenfold.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py

MEASURED = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run([sys.executable, '-c', 'from cosimrun.cli import main; main()', *sys.argv[1:]]).returncode\n"
    "print('peak_rss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(code)\n"
)


def run(steps: int, record: list[str], cwd: Path) -> dict[str, float]:
    """One run of *steps* macro steps of 1 ms (one RK4 sub-step each); its figures."""
    args = ["+experiment=coupled_oscillators", f"run.tf={steps / 1000:g}", "+components.mass1.params.substeps=1",
            "+components.mass2.params.substeps=1", f"hydra.run.dir=run{steps}"]
    if record:
        args.append(f"storage.record=[{','.join(record)}]")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MEASURED, *args], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"run of {steps} steps failed:\n{proc.stdout}{proc.stderr}")
    peak = int(next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("peak_rss_kb")))
    with h5py.File(cwd / f"run{steps}" / "results.h5", "r") as f:
        samples = f["components/mass1/time"].shape[0]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"steps": steps, "wall_s": wall, "cpu_s": cpu, "us_per_step": 1e6 * cpu / steps, "peak_rss_mb": peak / 1024,
            "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--record", nargs="*", default=["mass1.x"], help="ports to record (none: every port)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run(steps, args.record, Path(tmp)) for steps in args.steps]
    print(f"{'steps':>10} {'wall s':>8} {'cpu s':>8} {'us/step':>8} {'peak RSS MB':>12} {'samples':>10}")
    for r in rows:
        print(f"{r['steps']:>10} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['us_per_step']:>8.1f} "
              f"{r['peak_rss_mb']:>12.1f} {r['samples']:>10}")
    if len(rows) > 1:
        print(f"peak RSS grew by {rows[-1]['peak_rss_mb'] - rows[0]['peak_rss_mb']:+.1f} MB from {rows[0]['steps']} "
              f"to {rows[-1]['steps']} steps")


if __name__ == "__main__":
    main()
