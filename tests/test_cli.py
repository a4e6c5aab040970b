"""End to end: the ``cosimrun`` command as a user runs it, in a fresh directory."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import forkserver

from cosimrun.exits import EXIT_SIGPIPE
from cosimrun.storage import load_results

RUN_CLI = Path(__file__).parent / "support" / "run_cli.py"

pytestmark = pytest.mark.slow


def cosimrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the command (with the test-only component types registered)."""
    return forkserver.run(forkserver.Form.run_cli(), list(args), cwd=cwd, capture_output=True, text=True, timeout=300)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("cosimrun: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("pendulum")
    proc = cosimrun("+experiment=pendulum_switch", "hydra.run.dir=run", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc, load_results(cwd / "run" / "results.h5")


def test_console_script_and_module_entry_points_work_from_any_directory(tmp_path) -> None:
    exe = shutil.which("cosimrun", path=str(Path(sys.executable).parent))
    assert exe is not None, "the cosimrun console script is not installed"
    proc = subprocess.run([exe, "+experiment=bouncing_ball"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "bouncing_ball: complete" in proc.stdout
    [results] = list(tmp_path.glob("outputs/bouncing_ball/*/results.h5"))
    assert load_results(results).status == "complete"
    proc = subprocess.run([sys.executable, "-m", "cosimrun", "--list-components"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "pendulum_linear" in proc.stdout


@pytest.mark.parametrize("flag", [["--list-components", "pendulum"], ["--list-components=pendulum"]])
def test_list_components_with_a_name_prints_its_reference(tmp_path, flag) -> None:
    proc = cosimrun(*flag, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("pendulum  (cosimrun.components.mechanics:Pendulum, distribution cosimrun)")
    assert "    length: float [m] = 1.0, > 0  rod length L" in out
    assert "    in  torque: real [N*m]" in out and "  ports:" in out
    assert not list(tmp_path.iterdir())


def test_list_components_with_an_unknown_name_is_one_line(tmp_path) -> None:
    proc = cosimrun("--list-components", "pendlum", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line.startswith("cosimrun: error: --list-components pendlum: unknown component type 'pendlum'; "
                           "did you mean 'pendulum'")


def test_pendulum_switch_results(pendulum_run) -> None:
    proc, res = pendulum_run
    assert "pendulum_switch: complete" in proc.stdout and "results:" in proc.stdout
    assert res.status == "complete"
    assert res.attrs["master"] == "hybrid"
    assert res.config["name"] == "pendulum_switch"
    events = res.events
    assert (events["event"] == "end_stop").sum() >= 1
    switches = res.mode_switches
    assert len(switches) >= 4
    assert set(switches["from_mode"]) | set(switches["to_mode"]) == {"linear", "nonlinear"}
    hist = res.history("pendulum")
    t, q = hist["q"]
    assert hist["q"].unit == "rad"
    assert np.all(np.abs(q) <= 0.75 + 1e-9)  # the end stop holds
    # switches happen where |q| crosses the band edges (localized by the hybrid master)
    for _, row in switches[switches["time"] > 0].iterrows():
        at = np.abs(q[np.isclose(t, row["time"], atol=1e-12)][0])
        assert at == pytest.approx(0.35 if row["to_mode"] == "nonlinear" else 0.25, abs=1e-6)
    # energy only drops at the end stop: between impacts, with damping, it never rises by much
    _, omega = hist["omega"]
    assert np.all(np.isfinite(omega))
    # the reference arrives in radians although it was produced in degrees
    _, ref_deg = res.history("ref")["y"]
    assert res.history("ref")["y"].unit == "deg"
    assert np.max(ref_deg) == pytest.approx(40.0, rel=1e-3)


def test_overrides_change_the_results(tmp_path) -> None:
    proc = cosimrun("+experiment=bouncing_ball", "components.ball.params.e=0.5", "run.tf=2.0",
                    "hydra.run.dir=a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    res = load_results(tmp_path / "a" / "results.h5")
    assert res.attrs["tf"] == 2.0
    bounces = res.events["time"].to_numpy()
    g, h0, e = 9.81, 1.0, 0.5
    t1 = np.sqrt(2 * h0 / g)
    assert bounces[0] == pytest.approx(t1, abs=1e-9)
    assert bounces[1] == pytest.approx(t1 + 2 * e * np.sqrt(2 * g * h0) / g, abs=1e-8)


def test_master_choice_and_describe(tmp_path) -> None:
    proc = cosimrun("+experiment=coupled_oscillators", "master=jacobi", "master.extrapolation=1",
                    "run.tf=0.5", "hydra.run.dir=j", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert load_results(tmp_path / "j" / "results.h5").attrs["master"] == "jacobi"
    proc = cosimrun("+experiment=pendulum_switch", "action=describe", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ref.y -> ctrl.r  [deg -> rad" in proc.stdout and "Priority levels" in proc.stdout
    assert not (tmp_path / "outputs" / "pendulum_switch").exists()  # describe leaves no run directory


F_SETPIPE_SZ = 1031
"""Linux's fcntl command that sets a pipe's capacity."""


def closed_early(*args: str, cwd: Path, read: int) -> tuple[bytes, subprocess.Popen]:
    """Run the command into a pipe of 4 KiB, read *read* bytes of its stdout (0: none) and close the pipe."""
    proc = subprocess.Popen([sys.executable, str(RUN_CLI), *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    if sys.platform == "linux":
        import fcntl

        fcntl.fcntl(proc.stdout.fileno(), F_SETPIPE_SZ, 4096)
    first = os.read(proc.stdout.fileno(), read) if read else b""
    proc.stdout.close()
    proc.wait(timeout=300)
    return first, proc


def test_describe_into_a_pipe_closed_early_ends_quietly_and_leaves_no_run_directory(tmp_path) -> None:
    # a sum of 400 inputs: more description than the pipe holds, so the command is still writing when
    # the reader goes away, as under `cosimrun ... action=describe | head`
    wide = "+components.wide={type: sum, params: {signs: '" + "+" * 400 + "'}}"
    first, proc = closed_early("+experiment=bouncing_ball", "action=describe", wide, cwd=tmp_path, read=20)
    assert first == b"System 'bouncing_ball'"[:20]
    assert (proc.returncode, proc.stderr.read()) == (EXIT_SIGPIPE, b"")
    assert list(tmp_path.iterdir()) == []  # no outputs/ left


def test_a_run_or_the_help_into_a_closed_pipe_ends_quietly(tmp_path) -> None:
    _, proc = closed_early("+experiment=bouncing_ball", "hydra.run.dir=run", cwd=tmp_path, read=0)
    assert (proc.returncode, proc.stderr.read()) == (EXIT_SIGPIPE, b"")
    assert load_results(tmp_path / "run" / "results.h5").status == "complete"  # the summary was not read
    _, proc = closed_early("--help", cwd=tmp_path, read=0)
    assert (proc.returncode, proc.stderr.read()) == (EXIT_SIGPIPE, b"")


def test_cfg_job_shows_the_composed_config(tmp_path) -> None:
    proc = cosimrun("+experiment=bouncing_ball", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "bouncing_ball" in proc.stdout and "time_tolerance" in proc.stdout


@pytest.fixture
def config_dir(tmp_path) -> Path:
    exp = tmp_path / "cfg" / "experiment"
    exp.mkdir(parents=True)
    (exp / "loop_warns.yaml").write_text(
        "# @package _global_\n"
        "name: loop_warns\n"
        "run: {t0: 0.0, tf: 1.0, dt: 0.1}\n"
        "components:\n"
        "  src: {type: ramp, params: {slope: 1.0}}\n"
        "  s: {type: sum, params: {signs: '++'}, initial: {u2: 0.0}}\n"
        "  a: {type: gain, params: {k: 4.0}}\n"
        "connections: ['src.y -> s.u1', 'a.y -> s.u2', 's.y -> a.u']\n"
        "master: {on_nonconvergence: warn}\n"
    )
    (exp / "breaks.yaml").write_text(
        "# @package _global_\n"
        "name: breaks\n"
        "run: {t0: 0.0, tf: 2.0, dt: 0.1}\n"
        "components:\n"
        "  src: {type: ramp, params: {slope: 1.0}}\n"
        "  bad: {type: faulty, params: {fail_at: 1.0}}\n"
    )
    (exp / "goes_nan.yaml").write_text(
        "# @package _global_\n"
        "name: goes_nan\n"
        "run: {t0: 0.0, tf: 2.0, dt: 0.1}\n"
        "components:\n"
        "  src: {type: ramp, params: {slope: 1.0}}\n"
        "  bad: {type: faulty, params: {fail_at: 99.0, nan_from: 0.5}}\n"
    )
    return tmp_path / "cfg"


BAD_INPUTS = [
    (["+experiment=pendulum_swich"], "experiment: unknown experiment 'pendulum_swich'; did you mean 'pendulum_switch'"),
    (["+experiment=pendulum_switch", "components.ctrl.type=pdi"], "components.ctrl.type: unknown component type 'pdi'"),
    (["+experiment=pendulum_switch", "connections.0='ref.y -> ctrl.rr'"],
     "connections[0]: connection ref.y -> ctrl.rr"),
    (["+experiment=pendulum_switch", "components.ctrl.params.output_unit=m"], "incompatible units"),
    (["+experiment=pendulum_switch", "+components.ref.params.amplitud=3"],
     "components.ref.params.amplitud: unknown parameter 'amplitud'"),
    (["+experiment=pendulum_switch", "components.pendulum.modes.nonlinear.params.length=-1"],
     "components.pendulum.modes.nonlinear.params.length"),
    (["+experiment=pendulum_switch", "run.dt=0"], "run.dt: the macro step must be positive"),
    (["+experiment=pendulum_switch", "run.tf=-1"], "run.tf: the end time"),
    (["+experiment=pendulum_switch", "master=gauss_seidl"], "master: unknown master 'gauss_seidl'; did you mean"),
    (["+experiment=pendulum_switch", "components.pendulum.initial_mode=linar"],
     "components.pendulum.initial_mode: unknown mode 'linar'; did you mean 'linear'"),
    (["+experiment=loop_warns", "components.a.params.k=1", "+components.src.params.offset=1"],
     "no consistent initial point of algebraic loop s -> a (inputs s.u2, a.u) at t=0: residual 1 on input s.u2"),
    (["+experiment=pendulum_switch", "run.dt=1e-300"], "run.dt: 1e-300 makes 1e+301 macro steps"),
    (["+experiment=pendulum_switch", "storage.file=.."], "storage.file: '..' must be a plain file name"),
    (["+experiment=pendulum_switch", "storage.file=."], "storage.file: '.' must be a plain file name"),
    (["+experiment=pendulum_switch", "+run.tff=1"], "run.tff: unknown key 'tff' in run; did you mean 'tf'?"),
    (["+experiment=pendulum_switch", "storage.foo=1"], "storage.foo: unknown key 'foo' in storage"),
    (["+experiment=pendulum_switch", "run.dt=abc"], "run.dt: 'abc' is not a number"),
    (["+experiment=pendulum_switch", "storage.file=results.csv"], "storage.file: 'results.csv' does not name an HDF5"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_INPUTS, ids=[a[-1].split("=")[0] for a, _ in BAD_INPUTS])
def test_bad_input_gives_one_clear_line_and_no_complete_file(tmp_path, config_dir, args, expected) -> None:
    proc = cosimrun("--config-dir", str(config_dir), *args, "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert expected in line, line
    left = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if not p.is_relative_to(config_dir)]
    assert left == [], "a config error leaves no run directory"


def test_warnings_are_one_line_on_stderr_and_kept_in_the_job_log(tmp_path, config_dir) -> None:
    proc = cosimrun("--config-dir", str(config_dir), "+experiment=loop_warns", "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warning = ("algebraic loop s -> a diverged at t=0.1 after 11 gauss_seidel iterations: "
               "residual 1.68e+06 on input s.u2 (tolerance 1e-10); the run goes on from the best iterate "
               "(further such solves are only counted)")
    assert proc.stderr.splitlines() == [f"cosimrun: warning: {warning}"]
    assert "| 10 unconverged loop solves |" in proc.stdout
    log = (tmp_path / "out" / "cosimrun.log").read_text().splitlines()
    assert len(log) == 2 and log[0].endswith(f"[cosimrun][WARNING] - {warning}")
    results = re.escape(str(tmp_path / "out" / "results.h5"))
    assert re.search(rf"\[cosimrun\]\[INFO\] - loop_warns: complete in [\d.]+ s; results: {results}$", log[1])
    assert load_results(tmp_path / "out" / "results.h5").stats["unconverged_loop_solves"] == 10


def test_every_job_of_a_sweep_keeps_its_warning_in_its_log_and_shows_it_once(tmp_path, config_dir) -> None:
    # the jobs run one after the other in one process (the basic launcher), as on a sweep worker: the same
    # warning at the same place must still reach the second job's log
    proc = cosimrun("-m", "--config-dir", str(config_dir), "+experiment=loop_warns", "run.tf=2,3",
                    "hydra/launcher=basic", "hydra.sweep.dir=sweep", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warning = ("cosimrun: warning: algebraic loop s -> a diverged at t=0.1 after 11 gauss_seidel iterations: "
               "residual 1.68e+06 on input s.u2 (tolerance 1e-10); the run goes on from the best iterate "
               "(further such solves are only counted)")
    assert [line for line in proc.stderr.splitlines() if "warning" in line] == [warning, warning]
    for job in ("0", "1"):
        log = (tmp_path / "sweep" / job / "cosimrun.log").read_text().splitlines()
        assert [line.split(" - ", 1)[1] for line in log if "[WARNING]" in line] == [warning.split(": ", 2)[2]]


def test_component_failing_mid_run_keeps_history_and_fails(tmp_path, config_dir) -> None:
    proc = cosimrun("--config-dir", str(config_dir), "+experiment=breaks", "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "run failed at t=0.9 s: RuntimeError: sensor broke at t=1" in proc.stderr
    res = load_results(tmp_path / "out" / "results.h5")
    assert res.status == "failed"
    assert "sensor broke" in res.attrs["error"] and "faulty.py" in res.attrs["traceback"]
    t, y = res.history("src")["y"]
    np.testing.assert_allclose(t, np.arange(10) * 0.1, atol=1e-12)
    np.testing.assert_allclose(y, t, atol=1e-12)
    assert not (tmp_path / "out" / "results.h5.partial").exists()


def test_a_non_finite_output_fails_the_run_at_its_first_value(tmp_path, config_dir) -> None:
    proc = cosimrun("--config-dir", str(config_dir), "+experiment=goes_nan", "hydra.run.dir=out", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    path = tmp_path / "out" / "results.h5"
    assert proc.stderr.splitlines() == [
        "cosimrun: error: run failed at t=0.5 s: NonFiniteValueError: output bad.y is nan at t=0.5: "
        "the run stops at the first non-finite value",
        f"partial results (failed): {path}",
    ]
    res = load_results(path)
    assert res.status == "failed" and res.attrs["error"].startswith("NonFiniteValueError: output bad.y is nan")
    for comp in ("src", "bad"):
        t, y = res.history(comp)["y"]
        np.testing.assert_allclose(t, np.arange(5) * 0.1, atol=1e-12)  # everything before the first NaN, no more
        np.testing.assert_allclose(y, t, atol=1e-12)
    assert not (tmp_path / "out" / "results.h5.partial").exists()

    allowed = cosimrun("--config-dir", str(config_dir), "+experiment=goes_nan", "storage.allow_nonfinite=true",
                       "hydra.run.dir=kept", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    kept = load_results(tmp_path / "kept" / "results.h5")
    assert kept.status == "complete"
    t, y = kept.history("bad")["y"]
    assert len(t) == 21 and np.isnan(y[t >= 0.5 - 1e-9]).all() and np.isfinite(y[t < 0.5 - 1e-9]).all()


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path) -> None:
    procs = [
        subprocess.Popen([sys.executable, str(RUN_CLI), "+experiment=bouncing_ball", "run.tf=0.2"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    runs = sorted(tmp_path.glob("outputs/bouncing_ball/*/results.h5"))
    assert len(runs) == 3
    assert all(load_results(p).status == "complete" for p in runs)
