"""A sweep of many trivial jobs on the local cluster, checked whole, with its throughput; and its resume.

    python benchmarks/sweep_large.py [--jobs 10000] [--workers 2] [--resume] [--rerun 0.1] [--sweep DIR]

Each job is one step of a sine into a gain (``k.y = k * src.y``) with its own
gain ``k = 1 .. jobs``. The script runs the sweep end to end (``cosimrun -m``
on the dask launcher) and checks what the issue of sweeps at scale asks of it:
every job complete, each final value the gain times the same sine value (one
rounding), job folders sharded by thousands (no directory with more than about
a thousand entries), and the index read back by ``load_sweep`` in order. It
prints the wall time, jobs per second, the driver's peak RSS and the load average. This runs minutes
on 2 cores, too long for the test suite, whose sweep tests stay small.

With ``--resume`` the jobs run as ordinary jobs (``storage.allow_nonfinite=true``
keeps them from running as ensembles, whose members a resume takes over from
the ensemble's file, :class:`cosimrun.runner.ensembles.Finished`), and the
finished sweep is then resumed twice (``hydra.launcher.resume=true``): once
with every job finished (all taken over: the driver's cost of a resume alone),
once after the results files of a share ``--rerun`` of the jobs were deleted
(as an interrupted sweep leaves them: those run again). Each resume is checked
like the sweep and printed with its wall time and the jobs it took over; the
first also with the driver's time per job (the launch loop's time, which the
launcher logs at debug level, divided by the jobs; the command's start-up is
not in it). With ``--sweep DIR`` the sweep is kept in *DIR* (its experiment
file in ``DIR.conf``) and, when *DIR* holds one already, not run again: a
sweep made by an earlier version of cosimrun can be resumed by this one.
"""

from __future__ import annotations

import argparse
import math
import os
import re
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
DRIVER_LINE = re.compile(r"resume took over (\d+) of (\d+) jobs; the launch loop took ([0-9.]+) s")
"""The launcher's debug line after a resumed launch (``hydra_plugins/cosimrun_dask_launcher/_core.py``)."""


DRIVER = """
import atexit, os, resource, sys
atexit.register(lambda: open(os.environ["COSIMRUN_BENCH_RSS"], "w").write(
    str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)))
from cosimrun.cli import main
sys.argv = ["cosimrun", *sys.argv[1:]]
main()
"""
"""``cosimrun`` that writes its peak RSS (kB) to the file ``COSIMRUN_BENCH_RSS`` names when it exits: the
driver's alone, not its workers'."""


def sweep(conf: Path, sweep_dir: Path, n: int, workers: int, *extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                                                     float, float]:
    """Run the sweep of *n* jobs into *sweep_dir* (with *extra* arguments); ``(process, wall time, the driver's
    peak RSS in MB)``."""
    rss = sweep_dir.with_name(f"{sweep_dir.name}.rss")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, "-m", f"--config-dir={conf}", "+experiment=tiny",
         f"components.k.params.k=range(1,{n + 1})", "hydra/launcher=dask",
         f"hydra.launcher.n_workers={workers}", "hydra.launcher.progress=false", f"hydra.sweep.dir={sweep_dir}",
         *extra],
        capture_output=True, text=True, check=False, env={**os.environ, "COSIMRUN_BENCH_RSS": str(rss)})
    wall = time.perf_counter() - start
    peak = int(rss.read_text()) / 1024 if rss.exists() else math.nan
    rss.unlink(missing_ok=True)
    return proc, wall, peak


def check(proc: subprocess.CompletedProcess[str], sweep_dir: Path, n: int, reused: int | None = None) -> int:
    """Exit with what is wrong with the sweep *proc* left in *sweep_dir*; the most entries of one directory."""
    counts = f"sweep: {n} jobs, {n} complete{f' ({reused} reused)' if reused else ''}, 0 failed"
    if proc.returncode != 0 or counts not in proc.stdout:
        sys.exit(f"the sweep did not complete as expected ({counts!r}, exit {proc.returncode}): "
                 f"{proc.stdout[-1000:]}{proc.stderr[-2000:]}")
    df = load_sweep(sweep_dir)
    k = df["components.k.params.k"].to_numpy()
    y, u = df["final.k.y"].to_numpy(), df["final.src.y"].to_numpy()
    problems = []
    if list(df.index) != list(range(n)) or not (df["status"] == "complete").all():
        problems.append("the index is not every job, complete, in order")
    if list(k) != list(range(1, n + 1)) or not np.all(u == u[0]) or not np.array_equal(y, k * u[0]):
        problems.append("a final value is not the gain times the sine's value")
    if reused is not None and int(df["reused"].sum()) != reused:
        problems.append(f"{int(df['reused'].sum())} jobs reused, not {reused}")
    entries = max(len(dirs) + len(files) for _, dirs, files in os.walk(sweep_dir))
    if entries > 1000 + n // 1000 + 10:  # a thousand job folders, the shards' folders, the sweep's own files
        problems.append(f"a directory holds {entries} entries")
    if problems:
        sys.exit("; ".join(problems))
    return entries


def resume(conf: Path, sweep_dir: Path, n: int, workers: int, rerun: list[int], what: str, *extra: str) -> None:
    """Delete the results files of jobs *rerun*, resume the sweep, check it and print its figures."""
    df = load_sweep(sweep_dir)
    for num in rerun:
        (sweep_dir / str(df["path"].iloc[num])).unlink()
    proc, wall, peak = sweep(conf, sweep_dir, n, workers, *extra, "hydra.launcher.resume=true",
                             "hydra.verbose=hydra_plugins.cosimrun_dask_launcher._core")
    check(proc, sweep_dir, n, reused=n - len(rerun))
    found = DRIVER_LINE.search(proc.stdout + proc.stderr)
    line = (f"resume, {what}: {wall:.1f} s wall, driver peak RSS {peak:.0f} MB, {n - len(rerun)} taken over, "
            f"{len(rerun)} run again")
    if not rerun:  # the launch loop is then the driver's work on the jobs taken over alone
        per_job = f"{float(found[3]) / max(int(found[1]), 1) * 1e3:.3f} ms" if found else "not logged"
        line += f"; the driver's launch loop per job {per_job}, wall per job {wall / n * 1e3:.2f} ms"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--resume", action="store_true", help="resume the finished sweep, then after deletions")
    parser.add_argument("--rerun", type=float, default=0.1, help="share of jobs whose results a resume runs again")
    parser.add_argument("--sweep", type=Path, help="keep the sweep here; an existing one is resumed, not run")
    opts = parser.parse_args()
    n = opts.jobs
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sweep_dir = opts.sweep.absolute() if opts.sweep else tmp / "sweep"
        conf = sweep_dir.with_name(f"{sweep_dir.name}.conf")  # the same experiment file for every resume of it
        (conf / "experiment").mkdir(parents=True, exist_ok=True)
        (conf / "experiment" / "tiny.yaml").write_text("# @package _global_\n" + yaml.safe_dump(TINY),
                                                        encoding="utf-8")
        # jobs that cannot run as ensembles: a resume takes an ensemble's members over from its file instead
        jobs = ["storage.allow_nonfinite=true"] if opts.resume else []
        if not (sweep_dir / "index.h5").exists():
            proc, wall, peak = sweep(conf, sweep_dir, n, opts.workers, *jobs)
            entries = check(proc, sweep_dir, n)
            print(f"{n} jobs on {opts.workers} workers: {wall:.1f} s wall, {n / wall:.1f} jobs/s, "
                  f"driver peak RSS {peak:.0f} MB, largest directory {entries} entries, "
                  f"load {os.getloadavg()[0]:.1f}")
            print("checked: every job complete with its value, folders sharded, index in order")
        if opts.resume:
            resume(conf, sweep_dir, n, opts.workers, [], "every job finished", *jobs)
            step = max(1, round(1 / opts.rerun)) if opts.rerun > 0 else n + 1
            resume(conf, sweep_dir, n, opts.workers, list(range(0, n, step)), f"{opts.rerun:.0%} deleted", *jobs)
            print("checked: every resumed job complete with its value, the finished ones taken over")


if __name__ == "__main__":
    main()
