"""Faults in native code: an FMU whose step never returns, one that crashes, and a run that dies hard.

The test FMU ``misbehave`` (``tests/fmus/misbehave.c``) outputs ``y = t`` and, on request, hangs in
``fmi2DoStep`` (sleeping forever, off the CPU) or crashes there (SIGSEGV, ``abort()``, ``exit(7)``).
The command runs in a subprocess; each test checks the exit status, the one line on stderr and the
results file left: its status, and that its samples are those of the run up to that point (``y = t``
on the grid ``k * dt``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cosimrun.config.build import build_storage
from cosimrun.core import crashsite
from cosimrun.errors import ConfigError
from cosimrun.runner.load import load_sweep
from cosimrun.runner.signals import STUCK_GRACE_S
from cosimrun.storage import load_results
from cosimrun.system import recorder as recorder_module
from cosimrun.system.recorder import Recorder
from tests.fmus import builders

RUN_CLI = Path(__file__).parents[1] / "support" / "run_cli.py"
DT = 0.01


@pytest.fixture(scope="module")
def misbehave(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.misbehave(tmp_path_factory.mktemp("fmus"))


def experiment(tmp_path: Path, fmu: Path, hung: str, *, parallel: bool = False) -> Path:
    """The config directory of experiment ``native``: FMU ``hung`` with parameters *hung* (and FMU ``fine``
    beside it, stepped in parallel, with *parallel*); 5 ms of work per step."""
    config = tmp_path / "cfg" / "experiment"
    config.mkdir(parents=True, exist_ok=True)
    fine = f"  fine: {{type: fmu, params: {{path: {fmu}, work: 0.005}}}}\n" if parallel else ""
    (config / "native.yaml").write_text(
        "# @package _global_\n"
        "name: native\n"
        + ("defaults:\n  - override /master: jacobi\nmaster: {parallel: 2}\n" if parallel else "")
        + f"run: {{t0: 0.0, tf: 100.0, dt: {DT}}}\n"
        "components:\n"
        + fine
        + f"  hung: {{type: fmu, params: {{path: {fmu}, work: 0.005, {hung}}}}}\n"
    )
    return tmp_path / "cfg"


def start(tmp_path: Path, config: Path, *args: str, always_parallel: bool = False) -> subprocess.Popen[str]:
    """The command on experiment ``native``; *always_parallel*: its parallel batches step in parallel whatever their
    timing (``tests/support/run_cli.py``)."""
    env = dict(os.environ, COSIMRUN_TESTS_ALWAYS_PARALLEL="1") if always_parallel else None
    return subprocess.Popen(
        [sys.executable, str(RUN_CLI), "--config-dir", str(config), "+experiment=native", "hydra.run.dir=out",
         "storage.flush_seconds=0.1", *args],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def samples(path: Path) -> int:
    """How many samples of ``hung`` the file being written holds (0 while it cannot be read)."""
    try:
        return len(load_results(path).history("hung")["y"].time)
    except (OSError, KeyError, ValueError):
        return 0


def wait_for_samples(proc: subprocess.Popen[str], path: Path, at_least: int) -> int:
    """How many samples the file being written holds once it holds *at_least* (a process that never gets there
    is killed: a stuck one would outlive the test)."""
    deadline = time.monotonic() + 120
    while (n := samples(path)) < at_least:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the run did not write {at_least} samples: {proc.communicate()}")
        time.sleep(0.1)
    return n


def assert_prefix_of_the_run(path: Path, at_least: int, before: float, components: tuple[str, ...] = ("hung",)
                             ) -> None:
    """Every component's samples are y = t on the grid k * DT, at least *at_least* of them, all before *before*."""
    res = load_results(path)
    for comp in components:
        t, y = res.history(comp)["y"]
        assert len(t) >= at_least
        np.testing.assert_allclose(t, np.arange(len(t)) * DT, rtol=0, atol=1e-12)
        np.testing.assert_allclose(y, t, rtol=0, atol=1e-12)
        assert t[-1] < before


# ---------------------------------------------------------------------- a step that never returns
@pytest.mark.slow
def test_a_second_sigint_ends_a_run_stuck_in_an_fmu_step_with_the_flushed_samples(tmp_path, misbehave) -> None:
    config = experiment(tmp_path, misbehave, "hang_at: 1.0")
    proc = start(tmp_path, config)
    partial = tmp_path / "out" / "results.h5.partial"
    seen = wait_for_samples(proc, partial, 30)  # flushed by time while it runs; it hangs in the step to t=1
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    assert proc.poll() is None  # the first one cannot interrupt the C call
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    path = tmp_path / "out" / "results.h5"
    assert proc.returncode == 130, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("cosimrun: interrupted by the user: component 'hung' has not returned from do_step() "
                               "at t=0.99 for "), err
    assert lines[0].endswith(f" s and cannot be interrupted (left running); results up to the last flush kept in "
                             f"{path} (status interrupted)"), err
    res = load_results(path)
    assert res.status == "interrupted" and res.attrs["error"] == "interrupted by the user"
    assert_prefix_of_the_run(path, seen, 1.0)
    assert not partial.exists()


@pytest.mark.slow
def test_one_sigterm_ends_a_run_stuck_on_the_native_pool_after_the_grace_period(tmp_path, misbehave) -> None:
    """The step to t=0.5 hangs, in parallel (as it is when that is the faster way: forced here, as a loaded
    machine may time the serial way faster)."""
    config = experiment(tmp_path, misbehave, "hang_at: 0.5", parallel=True)
    proc = start(tmp_path, config, always_parallel=True)
    seen = wait_for_samples(proc, tmp_path / "out" / "results.h5.partial", 20)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent >= STUCK_GRACE_S  # the main thread was given the grace period
    path = tmp_path / "out" / "results.h5"
    assert proc.returncode == 143, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("cosimrun: terminated by SIGTERM: a step of the components 'fine', 'hung' (stepped "
                               "in parallel) has not returned at t=0.49 for "), err
    assert lines[0].endswith(f"; results up to the last flush kept in {path} (status interrupted)"), err
    res = load_results(path)
    assert res.status == "interrupted" and res.attrs["error"] == "terminated by SIGTERM"
    assert_prefix_of_the_run(path, seen, 0.5, ("fine", "hung"))


# ---------------------------------------------------------------------- a crash in C
CRASHES = [
    (1, -signal.SIGSEGV, "crashed with SIGSEGV (Segmentation fault)"),
    (2, -signal.SIGABRT, "crashed with SIGABRT (Aborted)"),
    (3, 7, "ended (exit() in native code, or killed)"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("how", "code", "what"), CRASHES, ids=["segfault", "abort", "exit7"])
@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "pool"])
def test_a_crash_in_an_fmu_step_is_said_in_one_line_and_keeps_what_was_flushed_by_time(
    tmp_path, misbehave, how, code, what, parallel
) -> None:
    """The step to t=1 crashes (100 steps of 5 ms and more; on the pool the step to t=0.5, which steps in
    parallel, see above): far fewer samples than a block of 2000, yet the file keeps those up to the last flush
    of storage.flush_seconds=0.1; the line names the component(s) whose step had not returned, the time and the
    signal."""
    at = 0.5 if parallel else 1.0
    config = experiment(tmp_path, misbehave, f"crash_at: {at}, crash_how: {how}", parallel=parallel)
    proc = start(tmp_path, config)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    partial = tmp_path / "out" / "results.h5.partial"
    # on the pool 'fine' is named when its 5 ms step had not returned at the crash, which a loaded machine may not
    # keep (the crash then lands after it): the line names whichever steps had not returned
    whos = ["the step of component 'hung'"] + (["a step of the components 'fine', 'hung' (stepped in parallel)"]
                                               if parallel else [])
    assert err.splitlines() in [[
        f"cosimrun: error: the process {what} in {who} from t={at - DT:g}; results up to the last flush kept in "
        f"{partial} (status running)"
    ] for who in whos], err
    assert load_results(partial).status == "running"
    assert_prefix_of_the_run(partial, 15 if parallel else 50, at, ("fine", "hung") if parallel else ("hung",))


@pytest.mark.slow
def test_in_a_dask_sweep_a_job_crashing_in_an_fmu_fails_with_that_cause_and_the_sweep_goes_on(tmp_path,
                                                                                            misbehave) -> None:
    config = experiment(tmp_path, misbehave, "crash_at: 1.0, crash_how: 1")
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, str(RUN_CLI), "-m", "--config-dir", str(config), "+experiment=native",
         "components.hung.params.crash_at=0.5,1e300", "run.tf=1", "hydra/launcher=dask", "hydra.launcher.retries=0",
         "hydra.launcher.progress=false", f"hydra.sweep.dir={sweep}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    cause = "the process crashed with SIGSEGV (Segmentation fault) in the step of component 'hung' from t=0.49"
    index = load_sweep(sweep)
    assert list(index["status"]) == ["failed", "complete"]
    assert index["error"][0].startswith(f"WorkerDied: the worker process running this job died once ({cause}); ")
    assert_prefix_of_the_run(sweep / "1" / "results.h5", 101, 1.01)
    assert load_results(sweep / "0" / "results.h5.partial").status == "running"


@pytest.mark.slow
def test_a_run_that_ends_in_python_leaves_no_record_of_its_native_steps(tmp_path, misbehave) -> None:
    config = experiment(tmp_path, misbehave, "hang_at: 1e300")
    proc = start(tmp_path, config, "run.tf=0.2")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".hydra", "cosimrun.log", "results.h5"]
    assert_prefix_of_the_run(tmp_path / "out" / "results.h5", 21, 0.21)


def test_the_record_names_the_components_whose_native_step_has_not_returned(tmp_path) -> None:
    class Native:
        slot = None

        def record_native_steps(self, slot) -> None:
            self.slot = slot

    a, b = Native(), Native()
    crashsite.begin(tmp_path / "r.h5", {"a": a, "plain": object(), "b": b})
    try:
        record = tmp_path / "r.h5.steps"
        assert crashsite.read(record) == {} and crashsite.describe(record) == ""
        a.slot[0] = 0.5
        assert crashsite.read(record) == {"a": 0.5}
        assert crashsite.describe(record) == "component 'a' in its step from t=0.5"
        b.slot[0] = 0.5
        assert crashsite.describe(record) == "the components 'a', 'b' (stepped in parallel) in their step from t=0.5"
    finally:
        crashsite.end()
    assert not record.exists() and a.slot is None and b.slot is None


class ListSink:
    """A sink keeping the blocks it is handed."""

    def __init__(self) -> None:
        self.times: list[np.ndarray] = []

    def add_component(self, name, ports) -> None:
        pass

    def append(self, component, time, micro, values, *, flush=True) -> None:
        self.times.append(time)

    def write_events(self, rows, *, flush=True) -> int:
        return 0

    def n_samples(self, component) -> int:
        return sum(len(t) for t in self.times)

    def n_events(self) -> int:
        return 0

    def flush(self) -> None:
        pass


def test_the_recorder_hands_over_its_samples_once_flush_seconds_passed(monkeypatch) -> None:
    from cosimrun.components.sources import Ramp

    clock = [0.0]
    monkeypatch.setattr(recorder_module, "perf_counter", lambda: clock[0])
    ramp = Ramp("ramp")
    ramp.initialize(0.0)
    sink = ListSink()
    rec = Recorder(sink, flush_interval=1000, flush_seconds=2.0)
    rec.attach({"ramp": ramp})
    held = []
    for k in range(300):  # a slow run: 10 ms a sample
        clock[0] = 0.01 * k
        rec.sample(0.01 * k)
        held.append(sink.n_samples("ramp"))
    # 2 s after the start (the sample at t=2), the samples so far are handed over, and not again before 4 s
    assert held == [0] * 200 + [201] * 100
    rec.flush()
    np.testing.assert_array_equal(np.concatenate(sink.times), 0.01 * np.arange(300))
    assert [len(t) for t in sink.times] == [201, 99]


def test_flush_seconds_must_be_a_positive_number() -> None:
    assert build_storage({"flush_seconds": 0.5}).flush_seconds == 0.5
    assert build_storage({}).flush_seconds == 5.0
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="storage.flush_seconds"):
            build_storage({"flush_seconds": bad})
