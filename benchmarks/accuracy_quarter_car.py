"""The quarter car of Schierz, Arnold and Clauss (2012), Table 1, beside cosimrun's measured figures.

Runs ``experiments/quarter_car.yaml`` (displacement-force coupling) and
``experiments/quarter_car_dd.yaml`` (displacement-displacement coupling) under
Jacobi with extrapolation order k, and measures each run's error against a
monolithic ``solve_ivp`` reference (DOP853, rtol 1e-12) computed here. The
error at an instant is the larger of the chassis's and the wheel's absolute
position errors, in m; a run's *mean* global error (the issue's and the paper's
measure) is its time average over [0, 4] s (trapezoidal, so that short steps do
not weigh more), its *max* error the largest.

Three tables per coupling:

1. fixed steps: the error at the paper's H = 1 ms and the observed order from
   H = 2 ms and 1 ms;
2. the paper's step control beside cosimrun's ``step_control: error`` and
   ``step_control: richardson`` at the loosest tolerance of a grid whose mean
   error is no larger than the paper's, with steps counted with the rejected ones;
3. every tolerance of the grid, for both step controls: steps (with rejected),
   mean and max error, the steps a fixed step of the same mean error takes
   (interpolated in log-log between fixed runs of 8 to 0.25 ms), and their
   ratio (>= 1: error control takes no more). Steps are counted as the paper
   counts them, one per trial step; under ``richardson`` each trial is also
   taken as two half steps, so the last column divides the fixed steps by every
   macro step taken (trials and half steps): the ratio of the work.

``error`` estimates each coupled input's local error from its history;
``richardson`` is the paper's step doubling (one step against two half steps).
The paper's error measure is not documented in enough detail to repeat, so the
columns compare what each run achieves.

    python benchmarks/accuracy_quarter_car.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml
from scipy.integrate import solve_ivp

from cosimrun.config.build import build_experiment

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
EXPERIMENT = EXPERIMENTS / "quarter_car.yaml"
COUPLINGS = {"displacement-force": EXPERIMENT, "displacement-displacement": EXPERIMENTS / "quarter_car_dd.yaml"}
PAPER = {  # k: (fixed H = 1 ms error, step control steps, rejected, error)
    0: (5.3e-4, 1610, 18, 1.05e-3),
    1: (6.0e-5, 402, 20, 3.2e-4),
    2: (2.0e-5, 210, 20, 3.2e-4),
}
TOLERANCES = (1e-1, 5e-2, 3e-2, 2e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-5, 1e-6)
FIXED_STEPS = (8e-3, 4e-3, 2e-3, 1e-3, 5e-4, 2.5e-4)
CONTROLS = ("error", "richardson")
MOST_STEPS = 40_000
"""A tolerance whose run would take more steps than this (judged from the trend) is not run."""


def experiment(master: dict, path: Path = EXPERIMENT) -> object:
    cfg = yaml.safe_load(path.read_text())
    cfg.pop("defaults")
    cfg["master"] = {"name": "jacobi", **master}
    return build_experiment(cfg)


def reference(cfg: dict):
    """The monolithic quarter car of *cfg* (either coupling: the bodies' parameters are named alike)."""
    c, w = cfg["components"]["chassis"]["params"], cfg["components"]["wheel"]["params"]
    mc, mw, kc, dc, kw = c["mass"], w["mass"], w["coupling_stiffness"], w["coupling_damping"], w["stiffness"]

    def rhs(_, s):
        xc, vc, xw, vw = s
        f = kc * (xw - xc) + dc * (vw - vc)
        return [vc, f / mc, vw, (-kw * xw - f) / mw]

    return solve_ivp(rhs, (0.0, 4.0), [c["x0"], 0.0, w["x0"], 0.0], method="DOP853", rtol=1e-12, atol=1e-14,
                     dense_output=True).sol


def measure(master: dict, ref, path: Path = EXPERIMENT,
            dt: float | None = None) -> tuple[int, int, float, float, float]:
    """``(accepted steps, rejected steps, max error, mean error, wall seconds)`` of one run (see the module
    docstring for the errors)."""
    stats, largest, mean, wall = measure_run(master, ref, path, dt)
    return stats.macro_steps, stats.rejected_steps, largest, mean, wall


def measure_run(master: dict, ref, path: Path = EXPERIMENT, dt: float | None = None) -> tuple[object, float, float,
                                                                                                float]:
    """``(stats, max error, mean error, wall seconds)`` of one run."""
    exp = experiment(master, path)
    start = time.perf_counter()
    result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt if dt is None else dt, master=exp.master)
    wall = time.perf_counter() - start
    errors = []
    for comp, row in (("chassis", 0), ("wheel", 2)):
        t, x = (np.asarray(a) for a in exp.system.history.get_port_trajectory(comp, "x"))
        errors.append(np.abs(x - ref(t)[row]))
    error = np.maximum(*errors)
    mean = float(np.trapezoid(error, t) / (t[-1] - t[0]))
    return result.stats, float(np.max(error)), mean, wall


def fixed_steps_for(error: float, fixed: list[tuple[int, float]]) -> float:
    """The steps a fixed step of *error* takes: log-log interpolation in the fixed runs *fixed* ``(steps,
    error)``, extended by the slope of the two nearest runs."""
    steps, errors = (np.log(np.array(v, dtype=float)) for v in zip(*sorted(fixed, key=lambda r: -r[1]), strict=True))
    e = np.log(error)
    i = int(np.clip(np.searchsorted(-errors, -e) - 1, 0, len(errors) - 2))
    slope = (steps[i + 1] - steps[i]) / (errors[i + 1] - errors[i])
    return float(np.exp(steps[i] + slope * (e - errors[i])))


def coupling_tables(name: str, path: Path, orders: tuple[int, ...], tolerances: tuple[float, ...]) -> None:
    ref = reference(yaml.safe_load(path.read_text()))
    print(f"\nquarter car, {name} coupling, Jacobi, 4 s; errors in m: mean (max) over time of the larger position "
          "error")
    print(f"{'k':>2} | {'paper fixed 1 ms':>16} | {'cosimrun fixed 1 ms':>19} | {'order (2 ms/1 ms)':>17} | "
          f"{'paper control: steps (rej), error':>33} | "
          + " | ".join(f"{f'{c}: rtol, steps (rej), error (max)':>49}" for c in CONTROLS))
    sweeps = {}
    for k in orders:
        fixed_runs = [measure({"extrapolation": k}, ref, path, dt=h) for h in FIXED_STEPS]
        fixed = [(round(4.0 / h), run[3]) for h, run in zip(FIXED_STEPS, fixed_runs, strict=True)]
        by_step = dict(zip(FIXED_STEPS, (run[3] for run in fixed_runs), strict=True))
        max_1ms = fixed_runs[FIXED_STEPS.index(1e-3)][2]
        order = np.log2(by_step[2e-3] / by_step[1e-3])
        p_fixed, p_steps, p_rej, p_err = PAPER[k]
        row = (f"{k:>2} | {p_fixed:>16.2e} | {f'{by_step[1e-3]:.2e} ({max_1ms:.2e})':>19} | {order:>17.2f} | "
               f"{f'{p_steps} ({p_rej}), {p_err:.2e}':>33}")
        for control in CONTROLS:
            runs = control_runs(k, control, ref, path, tolerances)
            sweeps[k, control] = (fixed, runs)
            within = [r for r in runs if r[4] <= p_err]
            best = (f"{within[0][0]:.0e}, {within[0][1]} ({within[0][2]}), {within[0][4]:.2e} ({within[0][5]:.2e})"
                    if within else "none in grid")
            row += f" | {best:>49}"
        print(row)
    print(f"\n{name}: error control against the fixed step of the same error (ratio > 1: control takes fewer steps)")
    print(f"{'k':>2} | {'control':>10} | {'rtol':>7} | {'steps (rej)':>12} | {'half steps':>10} | {'mean error':>10} | "
          f"{'max error':>9} | {'fixed steps, same mean error':>28} | {'ratio':>5} | work ratio")
    for (k, control), (fixed, runs) in sweeps.items():
        for rtol, steps, rejected, half, error, largest in runs:
            equal = fixed_steps_for(error, fixed)
            print(f"{k:>2} | {control:>10} | {rtol:>7.0e} | {f'{steps} ({rejected})':>12} | {half:>10} | "
                  f"{error:>10.2e} | {largest:>9.2e} | {equal:>28.0f} | {equal / steps:>5.2f} | "
                  f"{equal / (steps + half):.2f}")


def control_runs(k: int, control: str, ref, path: Path,
                 tolerances: tuple[float, ...]) -> list[tuple[float, int, int, int, float, float]]:
    """The runs of *control* at extrapolation *k* over *tolerances* (until the trend exceeds ``MOST_STEPS``):
    ``(rtol, steps with rejected, rejected, half steps, mean error, max error)`` each."""
    runs: list[tuple[float, int, int, int, float, float]] = []
    trend = None
    for rtol in tolerances:
        if trend is not None and trend[0] * (trend[1] / rtol) ** trend[2] > MOST_STEPS:
            break
        stats, largest, error, _ = measure_run({"extrapolation": k, "step_control": control, "rtol": rtol}, ref, path)
        steps = stats.macro_steps + stats.rejected_steps
        runs.append((rtol, steps, stats.rejected_steps, stats.half_steps, error, largest))
        if len(runs) >= 2:
            (r0, s0, *_), (r1, s1, *_) = runs[-2:]
            trend = (s1, r1, np.log(s1 / s0) / np.log(r0 / r1))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="k = 1 and 2 only, tolerances 1e-1 to 1e-3")
    args = parser.parse_args()
    orders = (1, 2) if args.quick else (0, 1, 2)
    tolerances = TOLERANCES[:5] if args.quick else TOLERANCES
    start = time.perf_counter()
    for name, path in COUPLINGS.items():
        coupling_tables(name, path, orders, tolerances)
    print(f"\n(wall {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
