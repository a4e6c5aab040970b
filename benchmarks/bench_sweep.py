"""Sweep throughput: the same 32-job sweep run serially and on the dask launcher with 2 workers.

    python benchmarks/bench_sweep.py [--jobs 32] [--tf 20] [--workers 2]

Each job is the ``pendulum_switch`` experiment (about 0.5 s of simulation at
``run.tf=20``) with a different controller gain. Prints the wall time of both
commands (end to end: interpreter start, composition, cluster start and stop),
the speedup (target >= 1.8x on 2 cores) and the per-job overhead beyond the
simulation itself (target <= 50 ms): ``(workers * jobs wall time - sum of the
simulations' wall times) / jobs``, where the jobs wall time runs from the start
of the first job to the end of the last one (written to the sweep index).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

# The ``cosimrun`` command, run with this interpreter.
_CLI = "from cosimrun.cli import main; main()"


def _burn(_: int = 0) -> float:
    start = time.perf_counter()
    x = 0
    for i in range(3_000_000):
        x += i * i
    return time.perf_counter() - start


def parallel_capacity(workers: int) -> float:
    """Throughput of *workers* CPU-bound processes relative to one, measured now (ideal: *workers*).

    Other work on the machine (or vCPUs sharing a physical core) lowers it; it
    bounds what any parallel sweep can reach here.
    """
    import multiprocessing

    one = min(_burn() for _ in range(2))
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(_burn, range(workers))  # start-up
        many = max(pool.map(_burn, range(workers)))
    return workers * one / many


def run_sweep(tmp: Path, name: str, args: list[str]) -> tuple[float, dict]:
    """Run one sweep command; its wall time runs until the ``cosimrun`` process exits.

    Its output goes to a file, as to a terminal: with a pipe, the wait would
    also include the local cluster's fork server finishing after the command
    (some 0.2 s), which holds the pipe open.
    """
    sweep_dir = tmp / name
    cmd = [sys.executable, "-c", _CLI, "-m", *args, f"hydra.sweep.dir={sweep_dir}"]
    log = tmp / f"{name}.log"
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{name} sweep failed ({proc.returncode}):\n{log.read_text()}")
    with h5py.File(sweep_dir / "index.h5", "r") as f:
        info = {
            "sim": f["wall_time_s"][...],
            "job": f["job_time_s"][...],
            "jobs_wall": float(f.attrs["jobs_wall_time_s"]),
            "status": list(f["status"].asstr()[...]),
        }
    return wall, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--tf", type=float, default=20.0, help="simulated seconds per job (sets the job length)")
    parser.add_argument("--workers", type=int, default=2)
    opts = parser.parse_args()
    gains = ",".join(str(40 + k) for k in range(opts.jobs))
    args = ["+experiment=pendulum_switch", f"run.tf={opts.tf}", f"components.ctrl.params.kp={gains}"]
    load = os.getloadavg()[0]
    capacity = parallel_capacity(opts.workers)
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp_name:
        tmp = Path(tmp_name)
        t_serial, serial = run_sweep(tmp, "serial", [*args, "hydra/launcher=basic"])
        t_dask, dask = run_sweep(
            tmp, "dask", [*args, "hydra/launcher=dask", f"hydra.launcher.n_workers={opts.workers}"]
        )
    n, w = opts.jobs, opts.workers
    for label, info in (("serial", serial), ("dask", dask)):
        bad = [s for s in info["status"] if s != "complete"]
        if bad:
            sys.exit(f"{label}: {len(bad)} jobs did not complete")
    over_serial = (serial["jobs_wall"] - serial["sim"].sum()) / n
    over_dask = (w * dask["jobs_wall"] - dask["sim"].sum()) / n
    ms = 1e3
    print(f"sweep of {n} jobs (pendulum_switch, run.tf={opts.tf:g}) on {os.cpu_count()} cores, load {load:.2f}")
    print(f"{'':28}{'serial (basic)':>16}{f'dask ({w} workers)':>20}")
    rows = [
        ("simulation per job [ms]", np.mean(serial["sim"]) * ms, np.mean(dask["sim"]) * ms),
        ("job on its worker [ms]", np.mean(serial["job"]) * ms, np.mean(dask["job"]) * ms),
        ("jobs wall time [s]", serial["jobs_wall"], dask["jobs_wall"]),
        ("command wall time [s]", t_serial, t_dask),
        ("overhead per job [ms]", over_serial * ms, over_dask * ms),
    ]
    for label, a, b in rows:
        print(f"{label:28}{a:16.2f}{b:20.2f}")
    print(f"speedup {t_serial / t_dask:.2f}x end to end, {serial['jobs_wall'] / dask['jobs_wall']:.2f}x jobs only")
    print(
        f"machine: {opts.workers} CPU-bound processes ran at {capacity:.2f}x the throughput of one just before "
        f"(the bound for any {opts.workers}-worker sweep here)"
    )
    print("targets: speedup >= 1.8x on 2 cores; overhead <= 50 ms per job")
    print("overhead per job = (workers x jobs wall time - sum of simulation wall times) / jobs")


if __name__ == "__main__":
    main()
