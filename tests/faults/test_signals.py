"""SIGINT and SIGTERM: a run or a sweep ends ``interrupted`` with exit 130 or 143 and its files closed.

The in-process tests check :mod:`cosimrun.runner.signals` itself: handlers installed and restored,
an interrupt Python dropped in a finalizer not lost. The subprocess tests start the command, wait
until its results file holds samples, send the signal and check the exit status, stderr and every
file left behind.
"""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from cosimrun.runner import signals
from cosimrun.runner.load import load_sweep
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results

RUN_CLI = Path(__file__).parents[1] / "support" / "run_cli.py"

EXPERIMENT = """\
# @package _global_
name: slow
run: {t0: 0.0, tf: 1000.0, dt: 0.1}
storage: {flush_interval: 10}
components:
  src: {type: ramp, params: {slope: 1.0}}
  bad: {type: faulty, params: {fail_at: 1.0e9, sleep_per_step: 0.01}}
"""


# ---------------------------------------------------------------------- the module
def test_handlers_are_installed_in_the_block_and_restored_after() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook
    with signals.handling():
        assert signal.getsignal(signal.SIGTERM) is not before[1]
        with pytest.raises(signals.Terminated, match="^terminated by SIGTERM$"):
            signal.raise_signal(signal.SIGTERM)
        assert signals.received() == signal.SIGTERM
        assert signals.exit_code() == 143
        signal.raise_signal(signal.SIGINT)  # only the first signal raises: cleaning up is not interrupted again
        assert signals.received() == signal.SIGTERM and signals.exit_code() == 143
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before
    with signals.handling():  # installed again: a new start
        with pytest.raises(KeyboardInterrupt) as caught:
            signal.raise_signal(signal.SIGINT)
        assert type(caught.value) is KeyboardInterrupt and signals.exit_code(caught.value) == 130


def test_a_signal_in_a_shield_is_raised_as_the_outermost_shield_ends() -> None:
    with signals.handling():
        with pytest.raises(KeyboardInterrupt), signals.shielded():
            with signals.shielded():
                signal.raise_signal(signal.SIGINT)
                assert signals.received() == signal.SIGINT  # noted, not raised
            reached = True  # the inner shield's end does not raise either
        assert reached
    with signals.handling():
        with signals.shielded(deliver=False):
            signal.raise_signal(signal.SIGTERM)
        assert signals.received() == signal.SIGTERM  # left to the caller
        with pytest.raises(signals.Terminated), signals.shielded(deliver=False), signals.interruptible():
            pass  # an interruptible block raises what was noted at its start


def test_a_keyboard_interrupt_is_a_signal_only_when_one_was_received() -> None:
    with signals.handling():
        assert not signals.from_signal(KeyboardInterrupt())  # raised by code: the handlers note every signal
        with pytest.raises(KeyboardInterrupt) as caught:
            signal.raise_signal(signal.SIGINT)
        assert signals.from_signal(caught.value)
    # without cosimrun's handlers, Python's own SIGINT handler may have raised it in the main thread
    assert signals.from_signal(KeyboardInterrupt())
    seen: list[bool] = []
    worker = threading.Thread(target=lambda: seen.append(signals.from_signal(KeyboardInterrupt())))
    worker.start()
    worker.join()
    assert seen == [False]  # no signal raises anything outside the main thread


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_python_drops_in_a_finalizer_is_raised_again_in_the_main_thread(capsys, signum) -> None:
    class Finalized:
        def __del__(self) -> None:
            signal.raise_signal(signum)  # the handler raises in here, and Python drops it

    with signals.handling():
        start = time.monotonic()
        with pytest.raises(signals.Terminated if signum == signal.SIGTERM else KeyboardInterrupt):
            Finalized()
            gc.collect()
            while time.monotonic() < start + 30:  # raised again here, in the main thread
                pass
        assert time.monotonic() - start < 5
        time.sleep(0.1)
        total = sum(range(10_000))  # and only once
    assert total == 49_995_000
    assert "Exception ignored" not in capsys.readouterr().err


def test_outside_the_main_thread_nothing_is_installed() -> None:
    seen = []

    def body() -> None:
        with signals.handling():
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert seen == [before]


def ramp_experiment() -> dict[str, Any]:
    """A ramp ``y = t`` over 10 s in 1000 steps: a run whose progress reports a test interrupts."""
    return {
        "name": "ramp",
        "run": {"t0": 0.0, "tf": 10.0, "dt": 0.01},
        "components": {"src": {"type": "ramp", "params": {"slope": 1.0}}},
    }


def test_a_run_checks_for_a_dropped_interrupt_at_its_progress_reports(tmp_path: Path) -> None:
    cfg = ramp_experiment()
    reports: list[float] = []

    def progress(t: float) -> None:
        reports.append(t)
        if len(reports) == 3:
            signals.request_stop(signal.SIGTERM)  # as the handler notes a signal whose exception was dropped

    try:
        outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg), progress=progress)
    finally:
        signals._received = None
    assert outcome.status == "interrupted" and outcome.error == "terminated by SIGTERM"
    assert len(reports) == 3
    res = load_results(tmp_path / "results.h5")
    assert res.status == "interrupted" and res.attrs["error"] == "terminated by SIGTERM"
    assert 0 < len(res.history("src")["y"].time) < 1001


# ---------------------------------------------------------------------- the command
def start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """The command on the ``slow`` experiment (``-m`` goes first, as for ``cosimrun``)."""
    config = tmp_path / "cfg" / "experiment"
    config.mkdir(parents=True, exist_ok=True)
    (config / "slow.yaml").write_text(EXPERIMENT)
    multirun = [a for a in args if a == "-m"]
    overrides = [a for a in args if a != "-m"]
    return subprocess.Popen(
        [sys.executable, str(RUN_CLI), *multirun, "--config-dir", str(tmp_path / "cfg"), "+experiment=slow",
         *overrides],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def samples(path: Path) -> int:
    try:
        with h5py.File(path, "r", locking=False) as f:
            return int(f["components/src/time"].shape[0])
    except (OSError, KeyError):
        return 0


def wait_for_samples(proc: subprocess.Popen[str], partial: Path, n: int = 20, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while samples(partial) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no samples in {partial}"
        time.sleep(0.05)


SIGNALS = [(signal.SIGINT, 130, "interrupted by the user"), (signal.SIGTERM, 143, "terminated by SIGTERM")]


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code", "error"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_single_run_interrupted(tmp_path, signum, code, error) -> None:
    proc = start(tmp_path, "hydra.run.dir=out")
    path = tmp_path / "out" / "results.h5"
    wait_for_samples(proc, tmp_path / "out" / "results.h5.partial")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("cosimrun: error: run interrupted at t="), err
    assert lines[0].endswith(f" s: {error}") and lines[1] == f"partial results (interrupted): {path}"
    res = load_results(path)
    assert res.status == "interrupted" and res.attrs["error"] == error
    t, y = res.history("src")["y"]
    assert len(t) >= 20 and (y == t).all()
    assert not (tmp_path / "out" / "results.h5.partial").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code", "error"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_sweep_with_the_basic_launcher_interrupted(tmp_path, signum, code, error) -> None:
    sweep = tmp_path / "sweep"
    proc = start(tmp_path, "-m", "hydra/launcher=basic", f"hydra.sweep.dir={sweep}", "components.src.params.slope=1,2")
    wait_for_samples(proc, sweep / "0" / "results.h5.partial")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.splitlines() == [
        "sweep: 1 jobs, 0 complete, 0 failed, 1 interrupted",
        f"index: {sweep / 'index.h5'}",
        f"to finish it, run the same command with hydra.sweep.dir={sweep} hydra.launcher.resume=true",
        f"cosimrun: {error}",
    ]
    res = load_results(sweep / "0" / "results.h5")
    assert res.status == "interrupted" and res.attrs["error"] == error
    assert len(res.history("src")["y"].time) >= 20
    assert not list(sweep.glob("*/results.h5.partial")) and not (sweep / "1").exists()
    assert list(load_sweep(sweep)["status"]) == ["interrupted"]


@pytest.mark.slow
def test_sigterm_ends_a_sweep_on_dask_interrupted(tmp_path) -> None:
    """The driver cancels the jobs: the index says interrupted, and the workers close the jobs' files as such."""
    sweep = tmp_path / "sweep"
    proc = start(tmp_path, "-m", f"hydra.sweep.dir={sweep}", "hydra.launcher.progress=false",
                 "hydra.launcher.ensemble_size=0", "components.src.params.slope=1,2")  # jobs, each with its file
    wait_for_samples(proc, sweep / "0" / "results.h5.partial")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, err
    assert "Traceback" not in err, err
    assert err.splitlines()[-4:] == [
        "sweep: 2 jobs, 0 complete, 0 failed, 2 interrupted",
        f"index: {sweep / 'index.h5'}",
        f"to finish it, run the same command with hydra.sweep.dir={sweep} hydra.launcher.resume=true",
        "cosimrun: terminated by SIGTERM",
    ]
    assert list(load_sweep(sweep)["status"]) == ["interrupted", "interrupted"]
    jobs = sorted(sweep.glob("*/results.h5*"))
    assert [j.relative_to(sweep) for j in jobs] == [Path("0/results.h5"), Path("1/results.h5")]
    for job in jobs:
        res = load_results(job)  # the workers stop their runs at the next check as they close
        assert (res.status, res.attrs["error"]) == ("interrupted", "terminated by SIGTERM")
        assert len(res.history("src")["y"].time) > 1



@pytest.mark.slow
def test_sigterm_ends_a_sweep_of_members_run_one_after_the_other_interrupted(tmp_path) -> None:
    """The slow experiment's jobs run as an ensemble whose members run one after the other (``faulty`` is not
    vectorized): cut short, it leaves no file, nor the mark of the member it ran; its members are interrupted."""
    sweep = tmp_path / "sweep"
    proc = start(tmp_path, "-m", f"hydra.sweep.dir={sweep}", "hydra.launcher.progress=false",
                 "components.src.params.slope=1,2")
    deadline = time.monotonic() + 60
    while not list(sweep.glob("ensembles/*.member")):  # the first member runs
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, err
    assert err.splitlines()[-4] == "sweep: 2 jobs, 0 complete, 0 failed, 2 interrupted"
    df = load_sweep(sweep)
    assert list(df["status"]) == ["interrupted"] * 2 and list(df["path"]) == ["", ""]
    assert not list((sweep / "ensembles").iterdir()) and not (sweep / "0").exists()


def test_a_signal_in_hydras_set_up_of_a_run_leaves_no_run_directory(tmp_path) -> None:
    """SIGINT once Hydra has made the run directory and written its files, before the task: the interrupt is held
    until the task begins, which removes the directory (nothing ran); one line, 130."""
    proc = start(tmp_path, "hydra.run.dir=out", "run.tf=1",
                 "+hydra.callbacks.interrupt._target_=tests.support.interrupting.SignalAtJobStart")
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "cosimrun: interrupted by the user\n")
    assert not (tmp_path / "out").exists()

def handlers_installed(pid: int) -> bool:
    """Whether process *pid* catches SIGINT and SIGTERM (``SigCgt`` of ``/proc/PID/status``): the command's
    first instruction ran."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return all(caught >> (s - 1) & 1 for s in (signal.SIGINT, signal.SIGTERM))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the signal mask from /proc")
@pytest.mark.parametrize("delay", [0.0, 0.3, 1.0, 2.5])
@pytest.mark.parametrize(("signum", "code", "error"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_at_a_fixed_delay_after_the_start_ends_the_command_in_one_line(
    tmp_path, signum, code, error, delay
) -> None:
    """From the command's first instruction (its handlers installed) through imports, Hydra's composition, the
    build and the start of the run: one line (two with the results file), 130/143, the file closed interrupted."""
    proc = start(tmp_path, "hydra.run.dir=out", "run.tf=1e9")
    deadline = time.monotonic() + 60
    while not handlers_installed(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    out = tmp_path / "out"
    path = out / "results.h5"
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) if out.exists() else []
    if path.exists():  # the run had started: its file is closed as interrupted
        lines = err.splitlines()
        assert len(lines) == 2 and lines[0].startswith("cosimrun: error: run interrupted at t="), err
        assert lines[0].endswith(f" s: {error}") and lines[1] == f"partial results (interrupted): {path}"
        res = load_results(path)
        assert res.status == "interrupted" and res.attrs["error"] == error
        t, y = res.history("src")["y"]
        assert (y == t).all() and (np.diff(t) > 0).all()
        assert left == [".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml", "cosimrun.log",
                        "results.h5"]
    else:  # stopped before: one line, and no run directory with a file in it
        assert err == f"cosimrun: {error}\n"
        assert left == [], left


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code", "error"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_exit_functions_run_still_ends_the_command_with_its_status(
    tmp_path, signum, code, error
) -> None:
    """A signal after the command decided its status (a dask cluster closing at exit): 130/143 and one line."""
    script = (
        "import atexit, os, sys\n"
        "from cosimrun import cli\n"
        f"cli.version = lambda: (atexit.register(os.kill, os.getpid(), {int(signum)}), 'cosimrun X')[1]\n"
        "sys.argv = ['cosimrun', '--version']\n"
        "cli.main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "cosimrun X\n" and proc.stderr == f"cosimrun: {error}\n"


def test_an_error_a_library_raises_while_cleaning_up_after_the_interrupt_is_the_interrupt(
    monkeypatch, capsys
) -> None:
    """The signal lands in a library's ``with`` block whose cleanup then fails (omegaconf did, composing the
    config): the command still ends with the interrupt's line and 130, not with that error's traceback."""
    from cosimrun import cli

    def interrupted_while_composing(argv: list[str]) -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        finally:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(cli, "_main", interrupted_while_composing)
    monkeypatch.setattr(sys, "argv", ["cosimrun", "+experiment=x"])
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(SystemExit) as caught:
        cli.main()
    assert caught.value.code == 130
    assert capsys.readouterr().err == "cosimrun: interrupted by the user\n"
    assert signal.getsignal(signal.SIGINT) is before and not signals.installed()  # called from a test: restored


def test_a_run_whose_interrupt_a_library_turns_into_another_error_is_interrupted(tmp_path: Path) -> None:
    cfg = ramp_experiment()
    reports: list[float] = []

    def progress(t: float) -> None:
        reports.append(t)
        if len(reports) == 3:
            try:
                signal.raise_signal(signal.SIGTERM)
            finally:
                raise RuntimeError("cleaning up failed")

    with signals.handling():
        outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg), progress=progress)
    assert outcome.status == "interrupted" and outcome.error == "terminated by SIGTERM"
    res = load_results(tmp_path / "results.h5")
    assert res.status == "interrupted" and res.attrs["error"] == "terminated by SIGTERM"
    t, y = res.history("src")["y"]
    assert 0 < len(t) < 1001 and (y == t).all()


def test_a_signal_as_the_results_file_is_created_leaves_it_interrupted_with_its_components_and_no_samples(
    tmp_path: Path, monkeypatch
) -> None:
    """The signal lands while the file is being created (held back there, raised as the simulation starts): the
    file says interrupted and declares what the run records, with no samples (it got none)."""
    from cosimrun.runner import run as run_module

    real = run_module.HDF5Writer

    def writer_then_signal(*args: Any, **kwargs: Any) -> Any:
        writer = real(*args, **kwargs)
        signal.raise_signal(signal.SIGINT)  # shielded here: noted, not raised
        return writer

    monkeypatch.setattr(run_module, "HDF5Writer", writer_then_signal)
    cfg = ramp_experiment()
    with signals.handling():
        outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert outcome.status == "interrupted" and outcome.error == "interrupted by the user"
    res = load_results(tmp_path / "results.h5")
    assert res.status == "interrupted" and res.attrs["error"] == "interrupted by the user"
    assert res.components == ["src"]
    t, y = res.history("src")["y"]
    assert len(t) == len(y) == 0
