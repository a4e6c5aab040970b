"""Parallel stepping benchmark: wall time of ``parallel: threads`` against serial stepping, side by side.

2, 4 and 8 FMUs in one priority level (no connections between them), each
doing a fixed amount of C work per ``fmi2DoStep`` (a busy loop of
floating-point operations, ``benchmarks/fmus/busy.c``; the iterations per µs
are calibrated first), stepped by Jacobi. Each cell runs serially and with
``parallel: threads`` on each pool of :mod:`cosimrun.fmi.pool` in turn
(``native``: the native threads of the C extension; ``threads``: the Python
threads that stand in for it when it is not built), best of ``--repeat``, and
checks that all recorded exactly the same values. Columns:

* ``µs/step``: the measured wall time of one FMU step run serially (C work plus
  cosimrun's own cost per step, a few µs);
* ``serial``, ``<pool> ms``: wall time of the run, in ms;
* ``<pool> x``: the speedup, serial / parallel;
* ``in parallel``: the share of component-steps the stepper ran concurrently in the
  fastest parallel run of the first pool (``stats.parallel_fraction``): batches too short
  to gain stay serial;
* ``bound``: the best speedup the machine allows: the serial run with as much of the FMUs'
  C work overlapped as the threads (at most one per core) can overlap (the rest of a step,
  cosimrun's part, stays on the main thread), plus one hand-off of the first pool per macro
  step (measured first, see below).

The header gives the cost of one hand-off of each pool: the pool running a batch of
empty jobs, one per thread, after 20 µs of main-thread work (a macro step's own work
between batches). The targets are checked on the first pool.

Targets (issue 17), on 2 cores: speedup >= 1.8 for >= 200 µs per step, and at
most 10 % slower (speedup >= 0.9) for 10 µs.

Usage::

    python benchmarks/bench_parallel.py                        # 2, 4, 8 FMUs x 10, 50, 200, 1000 µs
    python benchmarks/bench_parallel.py --sizes 2 --works 200 --repeat 5
    python benchmarks/bench_parallel.py --fixed-step           # FMUs that never end a step early
    python benchmarks/bench_parallel.py --pools threads        # the Python threads' pool only
    python benchmarks/bench_parallel.py --always               # every batch in parallel: the pools' own speedup

Benchmarks are never run as tests.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.components.fmu import FMUComponent, build_c_fmu
from cosimrun.fmi.pool import ENV_POOL, KINDS, RUNNER, CStepJob
from cosimrun.masters import GaussSeidel, Jacobi, parallel
from cosimrun.masters.base import thread_count
from cosimrun.system import System

HERE = Path(__file__).resolve().parent
MASTERS = {"jacobi": Jacobi, "gauss_seidel": GaussSeidel}


def build_busy_fmu(directory: Path, variable_step: bool) -> Path:
    """``benchmarks/fmus/busy.c`` as an FMU (``canHandleVariableCommunicationStepSize`` as *variable_step*)."""
    identifier = "busy" if variable_step else "busy_fixed"
    xml = (HERE / "fmus" / "busy.xml").read_text().format(identifier=identifier, variable=str(variable_step).lower())
    return build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier, model_description=xml,
                       source=(HERE / "fmus" / "busy.c").read_text())


def busy(name: str, path: Path, iterations: int) -> FMUComponent:
    comp = FMUComponent(name)
    comp.set_parameters(path=str(path), start={"iterations": iterations})
    return comp


def step_time(path: Path, iterations: int, steps: int) -> float:
    """Wall time of one serial ``do_step`` of a busy FMU on its own, best of three, in seconds."""
    comp = busy("calibrate", path, iterations)
    comp.initialize(0.0)
    comp.record_history = False
    best = float("inf")
    try:
        for _ in range(3):
            t, start = comp.t, time.perf_counter()
            for _ in range(steps):
                comp.do_step(t, 1e-3)
                t = comp.t
            best = min(best, (time.perf_counter() - start) / steps)
    finally:
        comp.free()
    return best


def calibrate(path: Path) -> tuple[float, float]:
    """``(seconds per loop iteration, seconds per step without work)`` of the busy FMU on this machine."""
    base = step_time(path, 0, 2000)
    loaded = step_time(path, 200_000, 40)
    return (loaded - base) / 200_000, base


def use_pool(kind: str) -> None:
    """Parallel runs from now on start the pool *kind* (``native``, ``threads``)."""
    os.environ[ENV_POOL] = kind


def hand_off(threads: int, work: float = 20e-6, n: int = 4000) -> float:
    """Median time (s) of the pool :func:`use_pool` chose running one empty job per thread, *work* s apart."""
    jobs = [CStepJob(version=0) for _ in range(threads)]
    addresses = (ctypes.c_void_p * threads)(*(ctypes.addressof(j) for j in jobs))
    pool = RUNNER.start(threads - 1, parallel.SPIN_S)
    times = []
    try:
        for _ in range(n):
            start = time.perf_counter()
            pool.run(ctypes.addressof(addresses), threads)
            end = time.perf_counter()
            times.append(end - start)
            while time.perf_counter() < end + work:
                pass
    finally:
        pool.close()
    return statistics.median(times)


def run_once(path: Path, n: int, iterations: int, steps: int, master: str, parallel: Any) -> tuple[float, Any]:
    """Wall time of one run of *n* busy FMUs over *steps* steps, and its result."""
    system = System("bench")
    for i in range(n):
        system.add_component(busy(f"f{i}", path, iterations))
    dt = 1e-3
    chosen = MASTERS[master](parallel=parallel)
    try:
        system.initialize(0.0, chosen)
        start = time.perf_counter()
        result = system.run(0.0, steps * dt, dt, master=chosen)
        return time.perf_counter() - start, result
    finally:
        system.free()


def same_records(a: Any, b: Any) -> bool:
    """Whether two runs recorded exactly the same times and values."""
    for comp, history in a.history.get_all_histories().items():
        other = b.history.get_component_history(comp)
        for port, ports in history.get_all_histories().items():
            mine, theirs = ports.slice(0, len(ports)), other.get_port_history(port)
            if not all(np.array_equal(x, y) for x, y in zip(mine, theirs.slice(0, len(theirs)), strict=True)):
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2,4,8", help="numbers of FMUs (default 2,4,8)")
    parser.add_argument("--works", default="10,50,200,1000", help="C work per doStep in µs (default 10,50,200,1000)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs each way (default 3)")
    parser.add_argument("--budget", type=float, default=0.4, help="serial seconds per run, about (default 0.4)")
    parser.add_argument("--threads", default="threads", help="the parallel setting (default threads)")
    parser.add_argument("--master", default="jacobi", choices=sorted(MASTERS))
    parser.add_argument("--fixed-step", action="store_true",
                        help="FMUs with canHandleVariableCommunicationStepSize=false (no step can end early)")
    parser.add_argument("--always", action="store_true",
                        help="step every batch in parallel, without timing both ways (the pools' own speedup)")
    parser.add_argument("--pools", default=",".join(KINDS),
                        help="pools to run, the targets checked on the first (default native,threads)")
    args = parser.parse_args(argv)
    pools = args.pools.split(",")
    if any(kind not in KINDS for kind in pools):
        parser.error(f"--pools: {args.pools!r} (valid: {', '.join(KINDS)})")
    setting: Any = args.threads if args.threads == "threads" else int(args.threads)
    if args.always:
        parallel.Batch.parallel_now = lambda self: True  # type: ignore[method-assign]
    sizes = [int(s) for s in args.sizes.split(",")]
    works = [float(w) for w in args.works.split(",")]

    with tempfile.TemporaryDirectory(prefix="cosimrun-bench-parallel-") as tmp:
        os.environ.setdefault("COSIMRUN_FMU_CACHE", str(Path(tmp) / "cache"))
        path = build_busy_fmu(Path(tmp), variable_step=not args.fixed_step)
        per_iteration, overhead = calibrate(path)
        threads = min(thread_count(setting) or 1, os.cpu_count() or 1)
        handoffs = {}
        for kind in pools:
            use_pool(kind)
            handoffs[kind] = hand_off(threads)
        handoff = handoffs[pools[0]]
        print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}; "
              f"master {args.master}, parallel={setting}; FMUs {'fixed-step' if args.fixed_step else 'variable-step'}"
              f"; busy loop {per_iteration * 1e9:.2f} ns per iteration, FMU step without work "
              f"{overhead * 1e6:.1f} µs; best of {args.repeat}{'; every batch in parallel' if args.always else ''}")
        print(f"hand-off of a batch to {threads} threads after 20 µs of work (median): "
              + ", ".join(f"{kind} {t * 1e6:.1f} µs" for kind, t in handoffs.items()) + "\n")
        header = (f"{'FMUs':>4}  {'work µs':>7}  {'µs/step':>7}  {'steps':>6}  {'serial ms':>9}  "
                  + "".join(f"{kind + ' ms':>10}  {kind + ' x':>9}  " for kind in pools)
                  + f"{'bound':>6}  {'in parallel':>11}  {'same bits':>9}  check")
        print(header)
        print("-" * len(header))
        missed = 0
        for work in works:
            iterations = max(0, round(work * 1e-6 / per_iteration))
            for n in sizes:
                steps = int(min(20_000, max(100, args.budget / (n * (work * 1e-6 + overhead)))))
                serial = float("inf")
                walls = dict.fromkeys(pools, float("inf"))
                same, fraction = True, 0.0
                for _ in range(args.repeat):  # interleaved, so that load changes hit all alike
                    wall_s, ref = run_once(path, n, iterations, steps, args.master, False)
                    serial = min(serial, wall_s)
                    for kind in pools:
                        use_pool(kind)
                        wall_p, res = run_once(path, n, iterations, steps, args.master, setting)
                        same = same and same_records(res, ref) and res.stats.parallel_pool == kind
                        if wall_p < walls[kind]:
                            walls[kind] = wall_p
                            fraction = res.stats.parallel_fraction if kind == pools[0] else fraction
                speedup = serial / walls[pools[0]]
                c_work = min(iterations * per_iteration, serial / (n * steps))  # the part of a step that overlaps
                overlapped = (n - math.ceil(n / min(threads, n))) * c_work * steps
                bound = serial / max(serial - overlapped + handoff * steps, 1e-9)
                if work >= 200:
                    check = "ok" if speedup >= 1.8 else "MISSED (>= 1.8x)"
                elif work <= 10:
                    check = "ok" if speedup >= 0.9 else "MISSED (>= 0.9x)"
                else:
                    check = "-"
                missed += check.startswith("MISSED") or not same
                print(f"{n:>4}  {work:>7g}  {serial / (n * steps) * 1e6:>7.1f}  {steps:>6}  {serial * 1e3:>9.1f}  "
                      + "".join(f"{wall * 1e3:>10.1f}  {serial / wall:>8.2f}x  " for wall in walls.values())
                      + f"{bound:>5.2f}x  {fraction:>10.0%}  {'yes' if same else 'NO':>9}  {check}")
        print(f"\ntargets (2 cores, the {pools[0]} pool): >= 1.8x for >= 200 µs per step, >= 0.9x (at most 10 % "
              f"slower) for 10 µs; {'all met' if not missed else f'{missed} missed'}")
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
