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
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel, Jacobi, Master
from cosimrun.masters.coupling_error import CouplingErrorEstimate
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
    assert (f"estimated coupling error: {e.rms:.2g} RMS on src.y -> int.u, {e.rms / e.range:.2g} of its range "
            f"(largest {e.max:.2g} at t={e.time_of_max:.6g} s)\n") in buf.getvalue()


@pytest.mark.slow
def test_a_sweep_index_has_the_largest_estimate_per_job(cosimrun, tmp_path: Path) -> None:
    from cosimrun.runner.load import load_sweep

    proc = cosimrun("-m", "+experiment=coupled_oscillators", "run.tf=0.5", "master.extrapolation=0,1",
                    "hydra/launcher=basic", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 0, proc.stderr
    df = load_sweep(tmp_path / "sweep")
    for run, row in df.iterrows():
        table = load_results(tmp_path / "sweep" / row["path"]).coupling_error
        assert row["coupling_error_max"] == table["relative"].max(), run  # the run's own figure, as its file stores it
    assert df["coupling_error_max"].iloc[1] < df["coupling_error_max"].iloc[0] / 10  # extrapolation 1 vs 0


def test_a_connection_whose_producer_is_not_recorded_is_not_estimated(tmp_path: Path) -> None:
    cfg = sine_config(storage={"record": ["int"]})
    outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    assert outcome.result.coupling_errors == []
    assert load_results(outcome.path).coupling_error.empty


def held_inputs(**sources: dict[str, Any]) -> System:
    """Each source (``name={type, params}``) held into an integrator of its own, under Jacobi."""
    from cosimrun import create_component

    system = System("held")
    for name, spec in sources.items():
        system.add_component(create_component(spec["type"], name, spec.get("params", {})))
        system.add_component(create_component("integrator", f"i_{name}"))
        system.connect(f"{name}.y -> i_{name}.u")
    return system


def held_estimates(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The held estimate of every step, ``|y(t_k) - y(t_k-1)|``, from the producer's exact values."""
    return np.abs(np.diff(y))


def test_the_summary_ranks_by_the_sustained_estimate_relative_to_the_range() -> None:
    from cosimrun.masters.coupling_error import ranked, summary_line

    # a step at a communication point (t = 0.55, a time event of the source), a 1 Hz sine and a constant
    system = held_inputs(st={"type": "step", "params": {"final": 2.0, "step_time": 0.55}},
                         s={"type": "sine", "params": {"amplitude": 1e-3}},
                         c={"type": "constant", "params": {"value": 3.0}})
    result = system.run(0.0, 4.0, 0.1, master=Jacobi())
    t, _ = result.history.get_port_trajectory("st", "y")
    assert 0.55 in t
    by = {e.connection: e for e in result.coupling_errors}
    step = np.where(t >= 0.55, 2.0, 0.0)
    sine = 1e-3 * np.sin(2 * np.pi * t)
    for name, y in (("st.y -> i_st.u", step), ("s.y -> i_s.u", sine)):
        e = held_estimates(t, y)
        assert by[name].max == pytest.approx(e.max(), rel=1e-9)
        assert by[name].rms == pytest.approx(np.sqrt(np.mean(e**2)), rel=1e-9)
        assert by[name].range == pytest.approx(y.max() - y.min(), rel=1e-9)
    # the step's one estimate is its whole range (relative 1, the largest), the sine's are a third of its
    # range at every step: the sine's sustained error ranks first, the constant's 0 is left out
    assert by["st.y -> i_st.u"].relative == pytest.approx(1.0) and by["s.y -> i_s.u"].relative < 0.35
    assert [e.connection for e in ranked(result.coupling_errors)] == ["s.y -> i_s.u", "st.y -> i_st.u"]
    s = by["s.y -> i_s.u"]
    assert summary_line(result.coupling_errors) == (
        f"estimated coupling error: {s.rms:.2g} RMS on s.y -> i_s.u, {s.rms / s.range:.2g} of its range "
        f"(largest {s.max:.2g} at t={s.time_of_max:.6g} s)")


def test_the_summary_says_what_a_jump_and_a_constant_input_are() -> None:
    from cosimrun.masters.coupling_error import summary_line

    system = held_inputs(st={"type": "step", "params": {"final": 2.0, "step_time": 0.55}},
                         c={"type": "constant", "params": {"value": 3.0}})
    errors = system.run(0.0, 1.0, 0.1, master=Jacobi()).coupling_errors
    n = 11  # steps: 0.1 ... 0.5, 0.55, 0.6 ... 1.0
    assert summary_line(errors) == (
        f"estimated coupling error: {2.0 / math.sqrt(n):.2g} RMS on st.y -> i_st.u, {1.0 / math.sqrt(n):.2g} of its "
        "range (largest 2 at t=0.55 s: a jump over the input's whole range, which the estimate counts in full "
        "whichever side of it the input was given)")
    constant = held_inputs(c={"type": "constant", "params": {"value": 3.0}})
    errors = constant.run(0.0, 1.0, 0.1, master=Jacobi()).coupling_errors
    assert [(e.max, e.range) for e in errors] == [(0.0, 0.0)]
    assert summary_line(errors) == "estimated coupling error: 0 on every coupled input"  # not "0 of its range"
    assert summary_line([]) == ""
    from cosimrun.masters.coupling_error import CouplingError

    # an estimate on an input whose recorded values never changed has no range to be compared with
    odd = CouplingError("a.y -> b.u", "N", max=1e-3, rms=5e-4, time_of_max=0.3, range=0.0)
    assert summary_line([odd]) == ("estimated coupling error: 0.0005 N RMS on a.y -> b.u, an input that never "
                                   "changed (largest 0.001 N at t=0.3 s)")


def test_an_unknown_coupling_kind_is_a_config_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as info:
        CouplingErrorEstimate([], ["helt"], 0)
    assert info.value.key == "kinds" and info.value.suggestion == "held"
    assert str(info.value) == ("kinds: unknown coupling kind 'helt'; did you mean 'held'? (valid: held, taylor, mean, "
                               "line)")


def test_the_estimates_do_not_depend_on_the_blocks_the_recorder_hands_over() -> None:
    """Summed in fixed pieces: bit for bit the same whether samples come one by one, in blocks of 7 or 2000,
    or whenever a (tiny) ``flush_seconds`` passed, over more steps than one piece holds."""
    from cosimrun.system import MemorySink, Recorder

    found = []
    for interval, seconds in ((1, 5.0), (7, 5.0), (2000, 5.0), (2000, 1e-9)):
        system = sine_into_integrator()
        recorder = Recorder(MemorySink(system.history), flush_interval=interval, flush_seconds=seconds)
        errors = system.run(0.0, T_END, 0.001, master=Jacobi(extrapolation=2), recorder=recorder).coupling_errors
        found.append([(e.max, e.rms, e.time_of_max) for e in errors])
    assert len(found[0]) == 1 and found[0][0][1] > 0
    assert all(f == found[0] for f in found[1:]), found
