"""Checkpoints: microseconds per checkpoint, the step path with checkpoints off, and a killed long run restarted.

* **Cost per checkpoint** of each shipped experiment (and ``pendulum_switch_fmu``, whose nonlinear mode is an
  FMI 2.0 co-simulation FMU serialized with ``fmi2SerializeFMUstate``): a run that saves its state after every
  macro step into memory (``System.save_state``'s form), and the same into an HDF5 results file's
  ``/checkpoints`` group, against the run without checkpoints; the difference per checkpoint.
* **Step path with checkpoints off**: microseconds per macro step of this tree against the base (the tree at
  ``--base``, by default the main repository), run side by side in fresh processes, alternating, best of
  ``--repeat``.
* ``--kill STEPS``: the ``cosimrun`` command on a run of STEPS macro steps (10**6 for the issue's target),
  killed with SIGKILL at about 90 % (its checkpoint there), restarted into its own file; the results are
  compared with an uninterrupted run's, sample by sample.

Usage::

    python benchmarks/bench_checkpoint.py                 # costs and the step path
    python benchmarks/bench_checkpoint.py --kill 1000000  # and the killed 10**6-step run (minutes)

Benchmarks are never run as tests.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ["bouncing_ball", "coupled_oscillators", "pendulum_switch", "pendulum_dae_switch", "quarter_car",
               "pendulum_switch_fmu"]
STEP_PATH = {"coupled_oscillators": 2.0, "pendulum_switch": 5.0}
"""Experiments (and their end time) whose step path is timed against the base."""


def config(name: str, tf: float | None = None) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())
    master = next((d["override /master"] for d in cfg.pop("defaults", []) if isinstance(d, dict)
                   and "override /master" in d), "gauss_seidel")
    cfg.setdefault("master", {})["name"] = master
    if tf is not None:
        cfg["run"]["tf"] = tf
    return cfg


def timed_run(name: str, tf: float, every: float | None, out: Path | None) -> tuple[float, int, int]:
    """Wall seconds of the run of *name* to *tf* (checkpoints every *every* s, into memory or the results file at
    *out*), its macro steps and checkpoints."""
    from cosimrun.checkpoint import CheckpointSettings
    from cosimrun.config.build import build_experiment
    from cosimrun.runner.run import run_experiment

    cfg = config(name, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if out is not None:
            if every is not None:
                cfg["run"]["checkpoint"] = {"every": every}
            start = time.perf_counter()
            outcome = run_experiment(cfg, out)
            wall = time.perf_counter() - start
            assert outcome.ok, outcome.error
            with h5py.File(outcome.path, "r") as f:
                taken = len(f.get("checkpoints", {}))
            return wall, int(outcome.result.stats.macro_steps), taken
        exp = build_experiment(cfg)
        exp.system.initialize(exp.run.t0, exp.master)
        settings = CheckpointSettings(every=every) if every is not None else None
        start = time.perf_counter()
        result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master, checkpoint=settings,
                                on_checkpoint=lambda state: None)
        wall = time.perf_counter() - start
        exp.system.free()
        return wall, int(result.stats.macro_steps), 0 if settings is None else int(result.stats.macro_steps) + 1


def costs(tf: float, repeat: int) -> None:
    print(f"cost per checkpoint (a checkpoint after every macro step, runs of {tf:g} s, best of {repeat})")
    print(f"{'experiment':<22}{'steps':>7}{'state entries':>15}{'us/ckpt (memory)':>18}{'us/ckpt (HDF5)':>16}")
    for name in EXPERIMENTS:
        dt = float(config(name)["run"]["dt"])
        with tempfile.TemporaryDirectory() as tmp:
            base = min(timed_run(name, tf, None, None)[0] for _ in range(repeat))
            memory = [timed_run(name, tf, dt, None) for _ in range(repeat)]
            file_base = min(timed_run(name, tf, None, Path(tmp) / f"b{i}")[0] for i in range(repeat))
            files = [timed_run(name, tf, dt, Path(tmp) / f"c{i}") for i in range(repeat)]
        steps, taken = memory[0][1], memory[0][2]
        per_memory = (min(w for w, _, _ in memory) - base) / taken * 1e6
        per_file = (min(w for w, _, _ in files) - file_base) / files[0][2] * 1e6
        print(f"{name:<22}{steps:>7}{entries(name):>15}{per_memory:>18.0f}{per_file:>16.0f}")


def entries(name: str) -> int:
    """How many entries the state of experiment *name* has."""
    from cosimrun.config.build import build_experiment

    cfg = config(name, float(config(name)["run"]["dt"]) * 3)
    exp = build_experiment(cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp.system.initialize(exp.run.t0, exp.master)
        exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master)
    n = len(exp.system.save_state().entries)
    exp.system.free()
    return n


STEP_SCRIPT = """
import json, sys, time, warnings, yaml
from cosimrun.config.build import build_experiment
cfg = json.loads(sys.argv[1])
exp = build_experiment(cfg)
warnings.simplefilter("ignore")
exp.system.initialize(exp.run.t0, exp.master)
start = time.perf_counter()
result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master)
print((time.perf_counter() - start) / result.stats.macro_steps * 1e6)
"""


def step_path(base: Path, repeat: int) -> None:
    print(f"\nstep path with checkpoints off: us per macro step, this tree vs {base} (fresh processes, "
          f"best of {repeat})")
    print(f"{'experiment':<22}{'base':>10}{'this tree':>12}{'difference':>12}")
    for name, tf in STEP_PATH.items():
        cfg = json.dumps(config(name, tf))
        best = {"base": np.inf, "tree": np.inf}
        for _ in range(repeat):
            for key, tree in (("base", base), ("tree", ROOT)):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                out = subprocess.run([sys.executable, "-c", STEP_SCRIPT, cfg], env=env, cwd=tree,
                                     capture_output=True, text=True, check=True)
                best[key] = min(best[key], float(out.stdout.strip().splitlines()[-1]))
        diff = best["tree"] - best["base"]
        print(f"{name:<22}{best['base']:>10.1f}{best['tree']:>12.1f}{diff:>+12.1f}")


def kill_and_restart(steps: int) -> None:
    """The cosimrun command on *steps* macro steps of bouncing_ball, killed at ~90 % and restarted."""
    dt = 1e-3
    tf = steps * dt
    every = tf / 20
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        args = [sys.executable, "-m", "cosimrun", "+experiment=bouncing_ball", "master=gauss_seidel",
                f"run.tf={tf!r}", f"run.dt={dt!r}", f"run.checkpoint.every={every!r}"]
        start = time.perf_counter()
        command([*args, f"hydra.run.dir={tmp_path / 'whole'}"])
        whole_wall = time.perf_counter() - start
        killed = tmp_path / "killed"
        partial = killed / "results.h5.partial"
        proc = subprocess.Popen([*args, f"hydra.run.dir={killed}"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        while proc.poll() is None and last_checkpoint(partial) < 0.9 * tf - every / 2:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        at = last_checkpoint(partial)
        start = time.perf_counter()
        command([*args, f"run.restart={killed / 'results.h5'}", f"hydra.run.dir={killed}"])
        restart_wall = time.perf_counter() - start
        with h5py.File(tmp_path / "whole" / "results.h5", "r") as a, h5py.File(killed / "results.h5", "r") as b:
            same = all(np.array_equal(a["components/ball"][k][:], b["components/ball"][k][:])
                       for k in a["components/ball"])
            same = same and np.array_equal(a["events/time"][:], b["events/time"][:])
            n = a["components/ball/time"].shape[0]
    print(f"\n{steps} steps: uninterrupted {whole_wall:.1f} s; killed at t={at:.6g} s of {tf:g} s "
          f"({at / tf:.0%}), restarted in {restart_wall:.1f} s; {n} samples equal to the uninterrupted run's: {same}")


def command(args: list[str]) -> None:
    """Run *args*; on failure, exit with its error output."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr}")


def last_checkpoint(path: Path) -> float:
    try:
        with h5py.File(path, "r", locking=False) as f:
            group = f.get("checkpoints")
            return max((float(g.attrs["time"]) for g in group.values()), default=-np.inf) if group else -np.inf
    except Exception:  # not there yet, or caught mid-write
        return -np.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tf", type=float, default=0.5, help="simulated seconds of each cost run (default 0.5)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--base", type=Path, default=Path("/work/main"), help="the tree to compare the step path with")
    parser.add_argument("--kill", type=int, default=0, metavar="STEPS", help="also kill and restart a run of STEPS")
    args = parser.parse_args()
    costs(args.tf, args.repeat)
    if args.base.is_dir():
        step_path(args.base, args.repeat)
    if args.kill:
        kill_and_restart(args.kill)


if __name__ == "__main__":
    main()
