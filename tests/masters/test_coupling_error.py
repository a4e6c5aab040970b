"""Coupling-error estimates: against the true one-step coupling error, in the results file and the summary.

The test system is a 1 Hz cosine source driving an integrator: the source's
output is known exactly between communication points, so the true coupling
error of a step (the largest difference over the step between what the
integrator was given and the sine) is computed here from dense samples.
"""

from __future__ import annotations

import io
import math
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cosimrun.components.blocks import Integrator
from cosimrun.components.sources import Sine
from cosimrun.masters import GaussSeidel, Jacobi, Master
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results
from cosimrun.system import System

H = 0.02
T_END = 1.0
OMEGA = 2.0 * math.pi
PHASE = math.pi / 2
"""A cosine: flat at the start, so the first steps (extrapolated at a lower degree) do not dominate."""


def sine_into_integrator() -> System:
    system = System("sine")
    src = Sine("src")
    src.set_parameters(phase=PHASE)
    system.add_component(src)
    system.add_component(Integrator("int"))
    system.connect("src.y -> int.u")
    return system


def sine_config(**more: Any) -> dict[str, Any]:
    """The same system as an experiment config under Jacobi (with *more* top-level keys)."""
    return {
        "name": "sine",
        "run": {"t0": 0.0, "tf": T_END, "dt": H},
        "master": {"name": "jacobi"},
        "components": {"src": {"type": "sine"}, "int": {"type": "integrator"}},
        "connections": ["src.y -> int.u"],
        **more,
    }


def true_largest_error(scheme: str, p: int) -> float:
    """The largest over the run of ``max |given(s) - sin(omega s)|`` over each step, ``s`` sampled densely."""
    times = np.arange(0.0, T_END + H / 2, H)
    y = np.sin(OMEGA * times + PHASE)
    worst = 0.0
    for k in range(1, len(times)):
        t0, t1 = times[k - 1], times[k]
        s = np.linspace(t0, t1, 201)
        if scheme == "gauss_seidel":
            given = np.full_like(s, y[k]) if p == 0 else y[k - 1] + (y[k] - y[k - 1]) * (s - t0) / H
        else:
            q = min(p, k - 1)
            coeffs = np.polyfit(times[k - 1 - q:k], y[k - 1 - q:k], q)
            given = np.polyval(coeffs, s)
        worst = max(worst, float(np.max(np.abs(given - np.sin(OMEGA * s + PHASE)))))
    return worst


MASTERS = {
    ("jacobi", 0): lambda: Jacobi(extrapolation=0),
    ("jacobi", 1): lambda: Jacobi(extrapolation=1),
    ("jacobi", 2): lambda: Jacobi(extrapolation=2),
    ("gauss_seidel", 0): lambda: GaussSeidel(extrapolation=0),
    ("gauss_seidel", 1): lambda: GaussSeidel(extrapolation=1),
}


@pytest.mark.parametrize("key", list(MASTERS), ids=[f"{m} p={p}" for m, p in MASTERS])
def test_the_estimate_is_within_a_factor_3_of_the_true_one_step_coupling_error(key: tuple[str, int]) -> None:
    master: Master = MASTERS[key]()
    system = sine_into_integrator()
    result = system.run(0.0, T_END, H, master=master)
    (estimate,) = result.coupling_errors
    assert estimate.connection == "src.y -> int.u"
    true = true_largest_error(*key)
    assert true / 3 <= estimate.max <= 3 * true, (key, estimate.max, true)
    assert 0 < estimate.rms <= estimate.max
    assert estimate.range == pytest.approx(2.0, abs=0.02)  # the sine's range, sampled at the steps
    assert estimate.relative == pytest.approx(estimate.max / estimate.range)
    assert 0.0 < estimate.time_of_max <= T_END


def test_estimates_shrink_with_the_step_as_the_held_input_s_change() -> None:
    """Held inputs (no extrapolation): the estimate is the input's change over a step, ~ H."""
    largest = {}
    for h in (0.02, 0.01):
        system = sine_into_integrator()
        largest[h] = system.run(0.0, T_END, h, master=Jacobi()).coupling_errors[0].max
    assert math.log2(largest[0.02] / largest[0.01]) == pytest.approx(1.0, abs=0.1)


def test_the_results_file_and_the_summary_carry_the_estimates(tmp_path: Path) -> None:
    cfg = sine_config()
    outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    table = load_results(outcome.path).coupling_error
    assert list(table.columns) == ["connection", "unit", "max", "rms", "time_of_max", "range", "relative"]
    assert table["connection"].tolist() == ["src.y -> int.u"]
    assert table["max"].iloc[0] == pytest.approx(outcome.result.coupling_errors[0].max)
    import xarray as xr

    with open(outcome.path, "rb") as fh, xr.open_dataset(fh, engine="h5netcdf", group="coupling_error") as ds:
        assert ds["max"].dims == ("connection",)
        assert ds["connection"].values.tolist() == ["src.y -> int.u"]
    from cosimrun.console import Console

    buf = io.StringIO()
    with redirect_stdout(buf):
        Console(prepare(cfg)).summary(outcome)
    e = outcome.result.coupling_errors[0]
    assert f"largest estimated coupling error: {e.max:.2g} on src.y -> int.u ({e.relative:.2g} of its range)\n" \
        in buf.getvalue()


@pytest.mark.slow
def test_a_sweep_index_has_the_largest_estimate_per_job(cosimrun, tmp_path: Path) -> None:
    from cosimrun.runner.load import load_sweep

    proc = cosimrun("-m", "+experiment=coupled_oscillators", "run.tf=0.5", "master.extrapolation=0,1",
                    "hydra/launcher=basic", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 0, proc.stderr
    df = load_sweep(tmp_path / "sweep")
    for run, row in df.iterrows():
        table = load_results(tmp_path / "sweep" / row["path"]).coupling_error
        assert row["coupling_error_max"] == pytest.approx(table["relative"].max()), run
    assert df["coupling_error_max"].iloc[1] < df["coupling_error_max"].iloc[0] / 10  # extrapolation 1 vs 0


def test_a_connection_whose_producer_is_not_recorded_is_not_estimated(tmp_path: Path) -> None:
    cfg = sine_config(storage={"record": ["int"]})
    outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    assert outcome.result.coupling_errors == []
    assert load_results(outcome.path).coupling_error.empty
