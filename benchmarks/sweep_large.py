"""A sweep of many trivial jobs on the local cluster, checked whole, with its throughput.

    python benchmarks/sweep_large.py [--jobs 10000] [--workers 2]

Each job is one step of a sine into a gain (``k.y = k * src.y``) with its own
gain ``k = 1 .. jobs``. The script runs the sweep end to end (``cosimrun -m``
on the dask launcher) and checks what the issue of sweeps at scale asks of it:
every job complete, each final value the gain times the same sine value (one
rounding), job folders sharded by thousands (no directory with more than about
a thousand entries), and the index read back by ``load_sweep`` in order. It
prints the wall time, jobs per second and the load average. This runs minutes
on 2 cores, too long for the test suite, whose sweep tests stay small.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from cosimrun.runner.load import load_sweep

TINY = {
    "name": "tiny",
    "run": {"t0": 0.0, "tf": 0.01, "dt": 0.01},
    "components": {"src": {"type": "sine", "params": {"amplitude": 1.0, "frequency": 1.0}},
                   "k": {"type": "gain", "params": {"k": 2.0}}},
    "connections": ["src.y -> k.u"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    opts = parser.parse_args()
    n = opts.jobs
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        conf = tmp / "conf" / "experiment"
        conf.mkdir(parents=True)
        (conf / "tiny.yaml").write_text("# @package _global_\n" + yaml.safe_dump(TINY), encoding="utf-8")
        sweep = tmp / "sweep"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "cosimrun", "-m", f"--config-dir={tmp / 'conf'}", "+experiment=tiny",
             f"components.k.params.k=range(1,{n + 1})", "hydra/launcher=dask",
             f"hydra.launcher.n_workers={opts.workers}", "hydra.launcher.progress=false", f"hydra.sweep.dir={sweep}"],
            capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if proc.returncode != 0 or f"sweep: {n} jobs, {n} complete, 0 failed" not in proc.stdout:
            sys.exit(f"the sweep did not complete (exit {proc.returncode}): {proc.stderr[-2000:]}")
        df = load_sweep(sweep)
        k = df["components.k.params.k"].to_numpy()
        y, u = df["final.k.y"].to_numpy(), df["final.src.y"].to_numpy()
        problems = []
        if list(df.index) != list(range(n)) or not (df["status"] == "complete").all():
            problems.append("the index is not every job, complete, in order")
        if list(k) != list(range(1, n + 1)) or not np.all(u == u[0]) or not np.array_equal(y, k * u[0]):
            problems.append("a final value is not the gain times the sine's value")
        entries = max(len(dirs) + len(files) for _, dirs, files in os.walk(sweep))
        if entries > 1010:
            problems.append(f"a directory holds {entries} entries")
    print(f"{n} jobs on {opts.workers} workers: {wall:.1f} s wall, {n / wall:.1f} jobs/s, "
          f"largest directory {entries} entries, load {os.getloadavg()[0]:.1f}")
    if problems:
        sys.exit("; ".join(problems))
    print("checked: every job complete with its value, folders sharded, index in order")


if __name__ == "__main__":
    main()
