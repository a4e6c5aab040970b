"""The quarter car of Schierz, Arnold and Clauss (2012), Table 1, beside cosimrun's measured figures.

Runs ``experiments/quarter_car.yaml`` (displacement-force coupling, Jacobi,
extrapolation order k) at the paper's fixed step H = 1 ms and under
``step_control: error`` at rtol 1e-4, and measures each run's error against a
monolithic ``solve_ivp`` reference (DOP853, rtol 1e-12) computed here: the
largest absolute error of the chassis and wheel positions over [0, 4] s, in m.
The paper's error measure and step controller (Richardson extrapolation) differ
from cosimrun's (a coupling-error estimate per input), so the columns compare
what each run achieves, not the same estimator.

    python benchmarks/accuracy_quarter_car.py
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import yaml
from scipy.integrate import solve_ivp

from cosimrun.config.build import build_experiment

EXPERIMENT = Path(__file__).resolve().parent.parent / "experiments" / "quarter_car.yaml"
PAPER = {  # k: (fixed H = 1 ms error, step control steps, rejected, error)
    0: (5.3e-4, 1610, 18, 1.05e-3),
    1: (6.0e-5, 402, 20, 3.2e-4),
    2: (2.0e-5, 210, 20, 3.2e-4),
}


def experiment(master: dict) -> object:
    cfg = yaml.safe_load(EXPERIMENT.read_text())
    cfg.pop("defaults")
    cfg["master"] = {"name": "jacobi", **master}
    return build_experiment(cfg)


def reference(cfg: dict):
    c, w = cfg["components"]["chassis"]["params"], cfg["components"]["wheel"]["params"]
    mc, mw, kc, dc, kw = c["mass"], w["mass"], w["coupling_stiffness"], w["coupling_damping"], w["stiffness"]

    def rhs(_, s):
        xc, vc, xw, vw = s
        f = kc * (xw - xc) + dc * (vw - vc)
        return [vc, f / mc, vw, (-kw * xw - f) / mw]

    return solve_ivp(rhs, (0.0, 4.0), [c["x0"], 0.0, w["x0"], 0.0], method="DOP853", rtol=1e-12, atol=1e-14,
                     dense_output=True).sol


def measure(master: dict, ref) -> tuple[int, int, float, float]:
    exp = experiment(master)
    start = time.perf_counter()
    result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, master=exp.master)
    wall = time.perf_counter() - start
    error = 0.0
    for comp, row in (("chassis", 0), ("wheel", 2)):
        t, x = (np.asarray(a) for a in exp.system.history.get_port_trajectory(comp, "x"))
        error = max(error, float(np.max(np.abs(x - ref(t)[row]))))
    return result.stats.macro_steps, result.stats.rejected_steps, error, wall


def main() -> None:
    ref = reference(yaml.safe_load(EXPERIMENT.read_text()))
    print("quarter car, displacement-force coupling, Jacobi, 4 s; error: max |x - x_ref| of both positions [m]")
    print(f"{'k':>2} | {'paper fixed 1 ms':>16} | {'cosimrun fixed 1 ms':>19} | {'paper control (rej), error':>27} | "
          f"{'cosimrun rtol 1e-4 (rej), error':>32} | wall")
    for k, (p_fixed, p_steps, p_rej, p_err) in PAPER.items():
        _, _, fixed, w1 = measure({"extrapolation": k}, ref)
        steps, rejected, err, w2 = measure({"extrapolation": k, "step_control": "error", "rtol": 1e-4}, ref)
        print(f"{k:>2} | {p_fixed:>16.2e} | {fixed:>19.2e} | {f'{p_steps} ({p_rej}), {p_err:.2e}':>27} | "
              f"{f'{steps} ({rejected}), {err:.2e}':>32} | {w1 + w2:.1f} s")


if __name__ == "__main__":
    main()
