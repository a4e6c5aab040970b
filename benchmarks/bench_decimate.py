"""What ``storage.decimate`` saves: file size and recording time, ensemble and scalar run, for each decimate.

    python benchmarks/bench_decimate.py [--members 10000] [--tf 0.5] [--scalar-tf 20] [--decimate 1 10]

(a) One ensemble of ``--members`` coupled_oscillators members (Jacobi, dt=1e-3, to ``--tf``; the machinery of
``bench_ensemble.py``): the loop time (stepping and recording the kept samples), the histories held in memory,
the time to write the ensemble file and its size. (b) One scalar run of the experiment to ``--scalar-tf``
through ``run_experiment`` (the Recorder and the HDF5 writer): wall time and file size. Each decimate's
histories are checked equal to the undecimated ones at the kept points (bitwise).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ensemble import config, ensemble  # noqa: E402 - the benchmarks' folder is on sys.path from here on

from cosimrun.runner.run import run_experiment  # noqa: E402
from cosimrun.storage.ensemble import write_ensemble  # noqa: E402


def kept(n_points: int, decimate: int) -> np.ndarray:
    """Rows of an undecimated fixed-step history of *n_points* samples that *decimate* keeps."""
    return np.unique(np.append(np.arange(0, n_points, decimate), n_points - 1))


def ensemble_rows(members: int, tf: float, decimates: list[int], folder: Path) -> None:
    stiffness = np.random.default_rng(0).uniform(5.0, 20.0, members)
    print(f"(a) ensemble: coupled_oscillators, jacobi, {members} members, tf={tf:g} s, dt=1e-3")
    print(f"{'decimate':>9}{'samples':>9}{'loop [s]':>10}{'history [MiB]':>15}{'write [s]':>11}{'file [MiB]':>12}")
    reference = None
    for n in decimates:
        result = ensemble("jacobi", tf, stiffness, n)
        memory = sum(v.nbytes for v in result.history.values()) / 2**20
        path = folder / f"ensemble{n}.h5"
        start = time.perf_counter()
        write_ensemble(path, result)
        write = time.perf_counter() - start
        x = result.history["mass1.x"]
        if reference is None:
            reference = x
        assert np.array_equal(x, reference[kept(len(reference), n)]), n
        print(f"{n:9d}{len(result.time):9d}{result.stats.step_time_s:10.2f}{memory:15.1f}{write:11.2f}"
              f"{path.stat().st_size / 2**20:12.2f}")


def scalar_rows(tf: float, decimates: list[int], folder: Path) -> None:
    cfg = config("jacobi", tf)
    print(f"(b) scalar run: coupled_oscillators, jacobi, tf={tf:g} s, dt=1e-3, run_experiment (recorder + file)")
    print(f"{'decimate':>9}{'samples':>9}{'wall [s]':>10}{'file [KiB]':>12}")
    reference = None
    for n in decimates:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome = run_experiment({**cfg, "storage": {"decimate": n}}, folder / f"scalar{n}")
        assert outcome.ok, outcome.error
        with h5py.File(outcome.path, "r") as f:
            x = f["components/mass1/x"][()]
        if reference is None:
            reference = x
        assert np.array_equal(x, reference[kept(len(reference), n)]), n
        print(f"{n:9d}{len(x):9d}{outcome.wall_time_s:10.2f}{outcome.path.stat().st_size / 1024:12.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--tf", type=float, default=0.5, help="simulated seconds of the ensemble")
    parser.add_argument("--scalar-tf", type=float, default=20.0, help="simulated seconds of the scalar run")
    parser.add_argument("--decimate", type=int, nargs="+", default=[1, 10], help="the first is the reference")
    opts = parser.parse_args()
    print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench_decimate_") as tmp:
        ensemble_rows(opts.members, opts.tf, opts.decimate, Path(tmp))
        scalar_rows(opts.scalar_tf, opts.decimate, Path(tmp))


if __name__ == "__main__":
    main()
