"""Sweep bookkeeping at scale: index write cost and per-job overhead of tiny jobs.

    python benchmarks/sweep_overhead.py [--index 1000,10000] [--jobs 1000] [--workers 2] [--baseline DIR]

With ``--baseline DIR`` (a source tree of cosimrun to compare with, e.g. from
``git archive <commit> | tar -x -C DIR``) every figure is measured for that
code too (put first on ``PYTHONPATH``) and printed beside this tree's. Two
parts, each printed as a table:

- *index*: the driver's ledger (:class:`cosimrun.runner.ledger.SweepLedger`)
  takes N job outcomes (three swept parameters, two summaries) and writes the
  index every 100 outcomes, as it does while jobs finish, then once at the end.
  Printed: the driver's CPU time spent writing the index in all, for the last
  write while jobs finish and for the final one. A rewrite of the whole index grows
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
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_sweep import run_sweep

FLAT = "SWEEP_OVERHEAD_FLAT_LAYOUT"

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
        overrides = [["+experiment=x", f"a.k={i * 0.5}", f"b.n={i}", f"master={'jacobi' if i % 2 else 'hybrid'}"]
                     for i in range(n)]
        for i in range(n):
            ledger.add_pending(i, overrides[i])
        total = last = 0.0
        for i in range(n):
            ledger.enter(JobOutcome(i, "complete", overrides[i], path=f"{tmp}/{i}/results.h5", wall_time_s=1e-3,
                                    job_time_s=2e-3, summaries={"k.y": 0.1 * i, "src.y": float(i)}, worker="w"))
            if (i + 1) % every == 0:
                ledger._dirty = True
                start = time.process_time()
                ledger.flush()
                last = time.process_time() - start
                total += last
        start = time.process_time()
        finish = getattr(ledger, "close", ledger.flush)
        finish()
        final = time.process_time() - start
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
    args = [f"--config-dir={conf}", "+experiment=tiny", f"components.k.params.k=range(0,{n})", "hydra/launcher=dask",
            f"hydra.launcher.n_workers={workers}", "hydra.launcher.progress=false"]
    if os.environ.get(FLAT):
        args.append("hydra.sweep.subdir=${hydra.job.num}")
    wall, info = run_sweep(tmp, f"sweep{n}", args)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    status = np.array(info["status"])
    if (status != "complete").any():
        sys.exit(f"sweep of {n}: {(status != 'complete').sum()} jobs did not complete")
    return {
        "wall": wall,
        "rate": n / wall,
        "overhead_ms": (workers * info["jobs_wall"] - float(np.sum(info["sim"]))) / n * 1e3,
        "rss_mb": rss,
        "dir": largest_directory(tmp / f"sweep{n}"),
    }


def _measure(part: str, n: int, workers: int, baseline: str | None) -> dict[str, float]:
    """Run one measurement in a new interpreter (on the *baseline* tree when given); its figures."""
    env = dict(os.environ)
    if baseline:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(baseline).absolute()), env.get("PYTHONPATH")]))
        env[FLAT] = "1"  # cosimrun.conf comes from the installed tree, whose job layout the baseline may not know
    cmd = [sys.executable, __file__, "--one", part, str(n), str(workers)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{part} {n} ({baseline or 'this tree'}) failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _one(part: str, n: int, workers: int) -> None:
    if part == "index":
        total, last, final = index_cost(n)
        print(json.dumps({"total": total, "last": last, "final": final}))
    else:
        with tempfile.TemporaryDirectory(prefix="bench_sweep_overhead_") as tmp_name:
            print(json.dumps(sweep(Path(tmp_name), n, workers)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="1000,10000", help="sweep sizes of the index part, comma separated")
    parser.add_argument("--jobs", default="1000", help="sweep sizes of the sweep part, comma separated ('': none)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline", help="a cosimrun source tree to measure beside this one")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.one:
        _one(opts.one[0], int(opts.one[1]), int(opts.one[2]))
        return
    trees = [("baseline", opts.baseline), ("this tree", None)] if opts.baseline else [("this tree", None)]
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start")
    print(f"{'index: jobs':14}{'code':>11}{'CPU writing [s]':>17}{'last running [ms]':>19}{'final [ms]':>12}")
    for n in (int(x) for x in opts.index.split(",") if x):
        for label, tree in trees:
            r = _measure("index", n, opts.workers, tree)
            print(f"{n:<14d}{label:>11}{r['total']:17.3f}{r['last'] * 1e3:19.2f}{r['final'] * 1e3:12.2f}")
    jobs = [int(x) for x in opts.jobs.split(",") if x]
    if jobs:
        print(f"{'sweep: jobs':14}{'code':>11}{'wall [s]':>10}{'jobs/s':>9}{'overhead/job [ms]':>19}"
              f"{'driver RSS [MB]':>17}{'largest dir':>13}")
    for n in jobs:
        for label, tree in trees:
            r = _measure("sweep", n, opts.workers, tree)
            print(f"{n:<14d}{label:>11}{r['wall']:10.1f}{r['rate']:9.1f}{r['overhead_ms']:19.2f}{r['rss_mb']:17.0f}"
                  f"{r['dir']:13d}")
    print(f"load {os.getloadavg()[0]:.2f} at the end; overhead per job = (workers x jobs wall time - sum of "
          "simulation wall times) / jobs; driver RSS: the largest peak of the sweep's processes")


if __name__ == "__main__":
    main()
