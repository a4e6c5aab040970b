"""Speed of ``cosimrun compare``: 20 signals x 1e5 samples each, with events, in under a second.

    python benchmarks/bench_compare.py [--samples 100000] [--signals 20] [--events 200] [--repeat 3]

Writes two results files (two components of ``signals / 2`` REAL ports each,
``samples`` samples per port including ``events`` event instants with a
sample before and after each, where every port steps by 0.5) where B is A plus noise within tolerance and
its events 1e-7 s later, then times :func:`cosimrun.post.compare.compare`
(best of ``repeat``): reading both files, matching, and comparing every
signal, tube comparisons at the events included. Also times B written as one
CSV file (a reference), read and compared, for information. Target: the
results files compared in under 1 s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from cosimrun.post.compare import compare
from cosimrun.storage import HDF5Writer

TARGET_S = 1.0


def write_run(path: Path, n: int, n_signals: int, n_events: int, *, noise: float = 0.0,
              delay: float = 0.0) -> dict[str, np.ndarray]:
    """A results file with two components; returns the columns of the first one (for the CSV)."""
    rng = np.random.default_rng(1)
    grid = np.linspace(0.0, 100.0, n - 2 * n_events)
    instants = np.sort(rng.uniform(1.0, 99.0, n_events)) + delay
    time_ = np.sort(np.concatenate((grid, instants, instants)))
    micro = np.concatenate(([0], (time_[1:] == time_[:-1]).astype(np.int32)))
    jumps = np.cumsum(micro)  # a step at each event: the post-event sample differs
    per = n_signals // 2
    first: dict[str, np.ndarray] = {}
    with HDF5Writer(path, experiment="bench") as writer:
        for c in range(2):
            ports = {f"p{k}": ("m", "real") for k in range(per)}
            writer.add_component(f"c{c}", ports)
            values = {}
            for k in range(per):
                clean = np.sin(time_ * (k + 1) / 10) + 0.5 * jumps
                values[f"p{k}"] = clean + noise * rng.standard_normal(len(time_))
            writer.append(f"c{c}", time_, micro, values)
            if c == 0:
                first = {"time": time_, **values}
    return first


def write_csv(path: Path, columns: dict[str, np.ndarray]) -> None:
    table = np.column_stack(list(columns.values()))
    header = ",".join(["time [s]", *(f"c0.{name} [m]" for name in list(columns)[1:])])
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt="%.17g")


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--signals", type=int, default=20)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b, ref = Path(tmp, "a.h5"), Path(tmp, "b.h5"), Path(tmp, "b.csv")
        write_run(a, args.samples, args.signals, args.events)
        columns = write_run(b, args.samples, args.signals, args.events, noise=1e-5, delay=1e-7)
        write_csv(ref, columns)
        seconds, result = best_of(args.repeat, lambda: compare(a, b))
        assert result.ok, "\n".join(result.lines())
        csv_seconds, csv_result = best_of(args.repeat, lambda: compare(a, ref, ports=["c0.*"]))
        assert csv_result.ok, "\n".join(csv_result.lines())
    n = len(result.signals)
    verdict = "ok" if seconds < TARGET_S else "SLOWER THAN TARGET"
    print(f"compare, results files: {n} signals x {args.samples:.0e} samples, {result.event_instants} event "
          f"instants: {seconds:.3f} s (target < {TARGET_S:g} s: {verdict})")
    print(f"compare, against a CSV:  {len(csv_result.signals)} signals x {args.samples:.0e} samples: "
          f"{csv_seconds:.3f} s (reading the CSV included)")


if __name__ == "__main__":
    main()
