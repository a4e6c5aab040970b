"""Sweep bookkeeping at scale: index write cost and per-job overhead of tiny jobs.

    python benchmarks/sweep_overhead.py [--index 1000,10000] [--jobs 1000] [--workers 2] [--skip-sweep]

Two parts, each printed as a table:

- *index*: the driver's ledger (:class:`cosimrun.runner.ledger.SweepLedger`)
  takes N job outcomes (three swept parameters, two summaries) and writes the
  index every 100 outcomes, as it does while jobs finish, then once at the end.
  Printed: the total time spent writing the index, the time of the last write
  while jobs finish and of the final one. A rewrite of the whole index grows
  with the sweep (quadratic in total); appending grows with the new rows.
- *sweep*: ``cosimrun -m`` of N jobs of a trivial experiment (a sine into a
  gain, one step) on the dask launcher with ``--workers`` workers. Printed:
  command wall time, jobs per second, the overhead per job beyond the
  simulation (``(workers * jobs wall time - sum of simulation wall times) /
  jobs``), the driver's peak RSS and the largest number of entries in one
  directory of the sweep.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

_CLI = "from cosimrun.cli import main; main()"

TINY = """# @package _global_
name: tiny
run: {t0: 0.0, tf: 0.01, dt: 0.01}
components:
  src: {type: sine, params: {amplitude: 1.0, frequency: 1.0}}
  k: {type: gain, params: {k: 2.0}}
connections:
  - src.y -> k.u
"""


def index_cost(n: int, every: int = 100) -> tuple[float, float, float]:
    """``(total, last write while running, final write)`` seconds for *n* outcomes into a fresh ledger."""
    from cosimrun.runner.ledger import SweepLedger
    from cosimrun.runner.outcome import JobOutcome

    with tempfile.TemporaryDirectory(prefix="bench_index_") as tmp:
        ledger = SweepLedger(tmp)
        overrides = [[f"+experiment=x", f"a.k={i * 0.5}", f"b.n={i}", f"master={'jacobi' if i % 2 else 'hybrid'}"]
                     for i in range(n)]
        for i in range(n):
            ledger.add_pending(i, overrides[i])
        total = last = 0.0
        for i in range(n):
            ledger.enter(JobOutcome(i, "complete", overrides[i], path=f"{tmp}/{i}/results.h5", wall_time_s=1e-3,
                                    job_time_s=2e-3, summaries={"k.y": 0.1 * i, "src.y": float(i)}, worker="w"))
            if (i + 1) % every == 0:
                ledger._dirty = True
                start = time.perf_counter()
                ledger.flush()
                last = time.perf_counter() - start
                total += last
        start = time.perf_counter()
        finish = getattr(ledger, "close", ledger.flush)
        finish()
        final = time.perf_counter() - start
        total += final
        from cosimrun.runner.load import load_sweep

        df = load_sweep(tmp)
        assert len(df) == n and (df["status"] == "complete").all(), "the index lost rows"
    return total, last, final


def largest_directory(root: Path) -> int:
    return max((len(files) + len(dirs) for _, dirs, files in os.walk(root)), default=0)


def sweep(tmp: Path, n: int, workers: int) -> dict[str, float]:
    conf = tmp / "conf"
    (conf / "experiment").mkdir(parents=True, exist_ok=True)
    (conf / "experiment" / "tiny.yaml").write_text(TINY)
    sweep_dir = tmp / f"sweep{n}"
    cmd = [sys.executable, "-c", _CLI, "-m", f"--config-dir={conf}", "+experiment=tiny",
           f"components.k.params.k=range(0,{n})", "hydra/launcher=dask", f"hydra.launcher.n_workers={workers}",
           "hydra.launcher.progress=false", f"hydra.sweep.dir={sweep_dir}"]
    log = tmp / f"sweep{n}.log"
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"sweep of {n} failed ({proc.returncode}):\n{log.read_text()[-3000:]}")
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    with h5py.File(sweep_dir / "index.h5", "r") as f:
        sim = f["wall_time_s"][...]
        jobs_wall = float(f.attrs["jobs_wall_time_s"])
        status = f["status"].asstr()[...]
    if (status != "complete").any():
        sys.exit(f"sweep of {n}: {(status != 'complete').sum()} jobs did not complete")
    return {
        "wall": wall,
        "rate": n / wall,
        "overhead_ms": (workers * jobs_wall - float(np.sum(sim))) / n * 1e3,
        "rss_mb": rss,
        "dir": largest_directory(sweep_dir),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="1000,10000", help="sweep sizes of the index part, comma separated")
    parser.add_argument("--jobs", default="1000", help="sweep sizes of the sweep part, comma separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-sweep", action="store_true")
    opts = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'index: jobs':14}{'total write [s]':>18}{'last running [ms]':>20}{'final [ms]':>14}")
    for n in (int(x) for x in opts.index.split(",") if x):
        total, last, final = index_cost(n)
        print(f"{n:<14d}{total:18.3f}{last * 1e3:20.2f}{final * 1e3:14.2f}")
    if opts.skip_sweep:
        return
    print(f"{'sweep: jobs':14}{'wall [s]':>10}{'jobs/s':>10}{'overhead/job [ms]':>20}{'driver RSS [MB]':>17}"
          f"{'largest dir':>13}")
    with tempfile.TemporaryDirectory(prefix="bench_sweep_overhead_") as tmp_name:
        for n in (int(x) for x in opts.jobs.split(",") if x):
            r = sweep(Path(tmp_name), n, opts.workers)
            print(f"{n:<14d}{r['wall']:10.1f}{r['rate']:10.1f}{r['overhead_ms']:20.2f}{r['rss_mb']:17.0f}"
                  f"{r['dir']:13d}")
    print("overhead per job = (workers x jobs wall time - sum of simulation wall times) / jobs; driver RSS is the "
          "largest child process's peak")


if __name__ == "__main__":
    main()
