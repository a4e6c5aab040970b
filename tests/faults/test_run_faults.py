"""Every way a component can end a single run: the exit code, the lines printed and the file left.

The command runs in a subprocess (``tests/support/run_cli.py`` registers the test-only component
``faulty``, which raises, exits or overflows on request); each test checks the exit status, stderr
(no traceback, no "Exception ignored") and the results file: its status, error and samples.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import forkserver

from cosimrun.runner.load import load_sweep
from cosimrun.storage import load_results

pytestmark = pytest.mark.slow

EXPERIMENT = """\
# @package _global_
name: faults
run: {t0: 0.0, tf: 2.0, dt: 0.1}
components:
  src: {type: ramp, params: {slope: 1.0}}
  bad: {type: faulty, params: {fail_at: 99.0}}
"""


def cosimrun(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``faults`` experiment with *args*, its results in ``tmp_path/out``."""
    config = tmp_path / "cfg" / "experiment"
    config.mkdir(parents=True, exist_ok=True)
    (config / "faults.yaml").write_text(EXPERIMENT)
    multirun = [a for a in args if a == "-m"]  # first, as for cosimrun
    return forkserver.run(
        forkserver.Form.run_cli(),
        [*multirun, "--config-dir", str(tmp_path / "cfg"), "+experiment=faults", "hydra.run.dir=out",
         *(a for a in args if a != "-m")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )


def assert_clean(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert "RuntimeWarning" not in stderr, stderr


def assert_kept_until(path: Path, n: int) -> None:
    """Both components' samples are those before the failing step: t = 0, 0.1, ... (n of them)."""
    res = load_results(path)
    for comp in ("src", "bad"):
        t, y = res.history(comp)["y"]
        np.testing.assert_allclose(t, np.arange(n) * 0.1, atol=1e-12)
        np.testing.assert_allclose(y, t, atol=1e-12)


EXITS = [
    (["+components.bad.params.exit_at=0.5"], "SystemExit: component 'bad' called sys.exit(0) at t=0.4"),
    (["+components.bad.params.exit_at=0.5", "+components.bad.params.exit_code=3"],
     "SystemExit: component 'bad' called sys.exit(3) at t=0.4"),
    (["+components.bad.params.exit_at=0.5", "+components.bad.params.exit_code='bye'"],
     "SystemExit: component 'bad' called sys.exit('bye') at t=0.4"),
    (["+components.bad.params.generator_exit_at=0.5"], "GeneratorExit: component 'bad' raised GeneratorExit at t=0.4"),
    # no signal raised it: the component did, and the run fails as for SystemExit (not the user's interrupt)
    (["+components.bad.params.interrupt_at=0.5"],
     "KeyboardInterrupt: component 'bad' raised KeyboardInterrupt at t=0.4"),
]


@pytest.mark.parametrize(("args", "error"), EXITS,
                         ids=["exit0", "exit3", "exit_text", "generator_exit", "keyboard_interrupt"])
def test_a_component_exiting_fails_the_run_and_keeps_what_was_computed(tmp_path, args, error) -> None:
    proc = cosimrun(tmp_path, *args)
    path = tmp_path / "out" / "results.h5"
    assert proc.returncode == 1, proc.stderr
    assert_clean(proc.stderr)
    assert proc.stderr.splitlines() == [
        f"cosimrun: error: run failed at t=0.4 s: {error}",
        f"partial results (failed): {path}",
    ]
    res = load_results(path)
    assert res.status == "failed" and res.attrs["error"] == error
    assert "faulty.py" in res.attrs["traceback"]
    assert_kept_until(path, 5)
    assert not (tmp_path / "out" / "results.h5.partial").exists()


def test_numpy_warnings_are_not_printed_when_the_recorder_reports_the_first_non_finite_value(tmp_path) -> None:
    proc = cosimrun(tmp_path, "+components.bad.params.overflow_from=0.5")
    path = tmp_path / "out" / "results.h5"
    assert proc.returncode == 1, proc.stderr
    assert_clean(proc.stderr)
    assert proc.stderr.splitlines() == [
        "cosimrun: error: run failed at t=0.5 s: NonFiniteValueError: output bad.y is inf at t=0.5: "
        "the run stops at the first non-finite value",
        f"partial results (failed): {path}",
    ]
    assert load_results(path).status == "failed"
    assert_kept_until(path, 5)


def test_with_non_finite_values_allowed_numpy_warnings_say_where_they_arise(tmp_path) -> None:
    proc = cosimrun(tmp_path, "+components.bad.params.overflow_from=0.5", "storage.allow_nonfinite=true")
    assert proc.returncode == 0, proc.stderr
    assert "RuntimeWarning: overflow encountered" in proc.stderr
    res = load_results(tmp_path / "out" / "results.h5")
    assert res.status == "complete"
    t, y = res.history("bad")["y"]
    assert len(t) == 21 and np.isinf(y[t >= 0.5 - 1e-9]).all()


@pytest.mark.parametrize("launcher", ["dask", "basic"])
def test_a_component_raising_keyboard_interrupt_fails_its_sweep_job_and_the_sweep_goes_on(tmp_path, launcher) -> None:
    sweep = tmp_path / "sweep"
    proc = cosimrun(tmp_path, "-m", "+components.bad.params.interrupt_at=0.5,99", f"hydra/launcher={launcher}",
                    f"hydra.sweep.dir={sweep}",
                    *(["hydra.launcher.progress=false", "hydra.launcher.n_workers=1", "hydra.launcher.retries=0"]
                      if launcher == "dask" else []))
    error = "KeyboardInterrupt: component 'bad' raised KeyboardInterrupt at t=0.4"
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "WorkerDied" not in proc.stderr, proc.stderr
    assert "sweep: 2 jobs, 1 complete, 1 failed" in proc.stderr
    assert f"  #0 failed: +experiment=faults +components.bad.params.interrupt_at=0.5: {error}" in proc.stderr
    df = load_sweep(sweep)
    assert list(df["status"]) == ["failed", "complete"] and list(df["error"]) == [error, ""]
    failed, complete = load_results(sweep / "0" / "results.h5"), load_results(sweep / "1" / "results.h5")
    assert (failed.status, failed.attrs["error"]) == ("failed", error)
    assert_kept_until(sweep / "0" / "results.h5", 5)
    assert complete.status == "complete" and len(complete.history("bad")["y"].time) == 21
