"""Ensemble throughput: coupled_oscillators members run one by one (scalar) and as one ensemble of arrays.

    python benchmarks/bench_ensemble.py [--members 10000] [--tf 0.5] [--scalar-tf 1.0] [--record-every 100]
                                        [--sweep 20] [--bouncing-ball 10000 [--ball-tf 5]]
                                        [--pendulum-switch 10000 [--switch-tf 2]]
                                        [--dask-sweep 10000 [--dask-experiment pendulum_switch]]
                                        [--integrator rk45 [--members 10000] [--tf 0.5]]
                                        [--step-control error [--extrapolation 2] [--rtol 1e-3] [--atol 1e-4]
                                         [--dt 1e-3]]

For the Jacobi and the Gauss-Seidel master (fixed steps, ``run.dt`` of the experiment), prints microseconds per
member per macro step of (a) ``System.run`` of one member in this process and (b) one ensemble of ``--members``
members with different stiffnesses (``run_ensemble``, histories kept every ``--record-every`` steps), side by
side with the ratio; the target is <= 2 us per member per step on one core. With ``--sweep N`` it also runs the
scalar sweep of N jobs through the ``cosimrun -m`` command (basic launcher, end to end) and reports its time per
member per step. The ensemble's members are checked against scalar runs of the same parameters (bitwise or not,
the largest relative difference is printed). Peak RSS of this process is printed at the end.

With ``--bouncing-ball N`` it times the shipped ``bouncing_ball`` experiment (hybrid master, state events located
per member) instead: ``System.run`` of a few members against one ensemble of N members of random restitution and
drop height, per member per communication step (the loop, and the whole run with its samples laid out), and
checks the sampled members' event instants and samples (every 10th point and both at each event, every recorded
port, bit for bit against their scalar runs thinned alike).

With ``--pendulum-switch N`` it times the shipped ``pendulum_switch`` experiment (hybrid master, every member in
its own mode: the end stop and the switch regions' boundaries located per member, the dwell time per member) the
same way: ``System.run`` of a few members against one ensemble of N members of random controller gains, reference
amplitude, initial state and damping, and checks the sampled members' mode switches, event instants and samples
(every output, event ports too).

With ``--integrator rk45`` (``rk23``, ``dop853``) it times ``coupled_oscillators`` under Jacobi with both masses
integrated by that adaptive method instead: ``System.run`` of a few members against one ensemble of ``--members``
members of stiffnesses over two decades (each member its own step size), per member per macro step, with the
members' mean accepted steps per macro step and the largest difference from the scalar runs.

With ``--step-control error`` it times error-controlled steps instead (``master.step_control=error`` with
``--extrapolation``, ``--rtol`` and ``--atol``, every member on its own clock): ``System.run`` of one member against
one ensemble of ``--members`` members (``run.dt`` of ``--dt``, which ``rk4`` keeps its substep length at: a longer
step takes more substeps, each member as many as its run), per member per accepted step (the ensemble's loop time
over the accepted steps of all its members), for the Jacobi and the Gauss-Seidel master, and checks three
members' sample times, step counts and histories against their scalar runs.

With ``--dask-sweep N`` it times the command end to end (from its start to the index on disk) on the dask
launcher: a sweep of N members grouped into ensembles (``hydra.launcher.ensemble_size``, each size of
``--ensemble-size``) against the same sweep one job per member (``ensemble_size=0``) on ``--dask-jobs`` of its
members, and prints microseconds per member per macro step of each and their ratio. The sweep is of
``coupled_oscillators`` (the stiffness of mass 1), or with ``--dask-experiment pendulum_switch`` of
``pendulum_switch`` (the controller's gain ``kp``). Each sweep's values are a Hydra ``range``, so that 10^5
members fit on a command line. It also prints the peak resident set (``VmHWM``) of the command's process (the
driver, with the local cluster's scheduler) and of each dask worker, polled while the sweep runs: with
``--dask-jobs 0`` (no one-job-per-member sweep) and ``--dask-sweep`` of 10^4 and then 10^5 members it shows
what the memory is bounded by.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import run_ensemble

ROOT = Path(__file__).resolve().parents[1]
_CLI = "from cosimrun.cli import main; main()"


def config(master: str, tf: float, settings: dict[str, Any] | None = None, dt: float | None = None) -> dict[str, Any]:
    """The shipped coupled_oscillators experiment under *master* (with *settings* of it), run to *tf* (by *dt*)."""
    cfg = yaml.safe_load((ROOT / "conf" / "experiment" / "coupled_oscillators.yaml").read_text())
    cfg.pop("defaults", None)
    master_cfg = yaml.safe_load((ROOT / "conf" / "master" / f"{master}.yaml").read_text())
    cfg["master"] = {**master_cfg, **(settings or {})}
    cfg["run"]["tf"] = tf
    if dt is not None:
        cfg["run"]["dt"] = dt
    return cfg


def scalar(master: str, tf: float, stiffness: float, settings: dict[str, Any] | None = None,
           dt: float | None = None) -> tuple[float, int, np.ndarray, np.ndarray]:
    """Seconds of ``System.run`` of one member, its macro steps and its ``mass1.x`` history (times, values)."""
    exp = build_experiment(config(master, tf, settings, dt))
    exp.system.components["mass1"].set_parameters(stiffness=stiffness)
    start = time.perf_counter()
    result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, exp.master)
    wall = time.perf_counter() - start
    times, values = exp.system.components["mass1"].get_history_arrays()
    return wall, result.stats.macro_steps, np.asarray(times), np.asarray(values["x"])


def ensemble(master: str, tf: float, stiffness: np.ndarray, record_every: int,
             settings: dict[str, Any] | None = None, dt: float | None = None) -> Any:
    exp = build_experiment(config(master, tf, settings, dt))
    return run_ensemble(exp.system, exp.master, {"mass1.stiffness": stiffness}, t0=exp.run.t0, tf=exp.run.tf,
                        dt=exp.run.dt, record_every=record_every)


def sweep(jobs: int, master: str, tf: float) -> float:
    """Wall time of the ``cosimrun -m`` sweep of *jobs* stiffnesses (basic launcher), end to end."""
    values = ",".join(f"{5.0 + 0.5 * k:g}" for k in range(jobs))
    with tempfile.TemporaryDirectory(prefix="bench_ensemble_") as tmp:
        cmd = [sys.executable, "-c", _CLI, "-m", "+experiment=coupled_oscillators", f"master={master}",
               f"run.tf={tf}", f"components.mass1.params.stiffness={values}", "hydra/launcher=basic",
               f"hydra.sweep.dir={tmp}/sweep"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the sweep failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall


SWEPT = {"coupled_oscillators": (["master=gauss_seidel"], "components.mass1.params.stiffness", 5.0, 10.0, 1e-3),
         "pendulum_switch": ([], "components.ctrl.params.kp", 20.0, 60.0, 1e-2)}
"""Experiment of ``--dask-experiment`` -> (other overrides, the swept parameter, its lowest value and range, run.dt)."""


class PeakRSS:
    """The peak resident set (``VmHWM`` of Linux's ``/proc``, in MiB) of a process and of each of its descendants,
    polled while it runs: the sweep's driver, and the workers its local cluster forks (none found elsewhere)."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid = pid
        self.peaks: dict[int, tuple[int, float]] = {}
        """pid -> (its parent's pid, its peak so far in MiB)."""
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        import psutil  # a dependency of distributed

        while not self._done.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for proc in procs:
                try:
                    status = Path(f"/proc/{proc.pid}/status").read_text()
                    parent = proc.ppid()
                except (OSError, psutil.Error):
                    continue
                peak = next((int(line.split()[1]) / 1024 for line in status.splitlines()
                             if line.startswith("VmHWM:")), 0.0)
                self.peaks[proc.pid] = (parent, max(peak, self.peaks.get(proc.pid, (0, 0.0))[1]))
            self._done.wait(self._every)

    def stop(self) -> tuple[float, list[float]]:
        """``(the driver's peak, the workers' peaks, largest first)``: workers are the processes forked by a child
        of the driver (its fork server), not their own helpers (a worker's crash watcher)."""
        self._done.set()
        self._thread.join()
        driver = self.peaks.get(self.pid, (0, float("nan")))[1]
        children = {pid for pid, (parent, _) in self.peaks.items() if parent == self.pid}
        workers = sorted((peak for parent, peak in self.peaks.values() if parent in children), reverse=True)
        return driver, workers


def dask_sweep(members: int, tf: float, ensemble_size: int, workers: int,
               experiment: str = "coupled_oscillators") -> tuple[float, int, float, list[float]]:
    """``(wall time, dask tasks, the driver's peak RSS, each worker's, in MiB)`` of ``cosimrun -m`` of *members*
    values of the swept parameter of *experiment* (:data:`SWEPT`) on the dask launcher with *ensemble_size*, end to
    end."""
    others, key, low, span, _ = SWEPT[experiment]
    values = f"range({low:g},{low + span:g},{span / members:.17g})"
    with tempfile.TemporaryDirectory(prefix="bench_ensemble_") as tmp:
        cmd = [sys.executable, "-c", _CLI, "-m", f"+experiment={experiment}", *others,
               f"run.tf={tf}", f"{key}={values}", "hydra/launcher=dask",
               f"hydra.launcher.n_workers={workers}", f"hydra.launcher.ensemble_size={ensemble_size}",
               "hydra.launcher.progress=false", f"hydra.sweep.dir={tmp}/sweep"]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rss = PeakRSS(proc.pid)
        out, err = proc.communicate()
        wall = time.perf_counter() - start
        driver, worker_peaks = rss.stop()
        if proc.returncode != 0 or not (Path(tmp) / "sweep" / "index.h5").is_file():
            sys.exit(f"the sweep failed ({proc.returncode}):\n{out}\n{err}")
    tasks = next((int(line.split(" in ")[-1].split()[0]) for line in (out + err).splitlines()
                  if "the jobs ran in" in line), 0)
    return wall, tasks, driver, worker_peaks


def dask_table(members: int, jobs: int, tf: float, sizes: list[int], workers: int,
               experiment: str = "coupled_oscillators") -> None:
    """Print the end-to-end dask sweep with ensembles of each size in *sizes* against *jobs* ordinary jobs (none
    with *jobs* 0), with the peak RSS of the driver and of each worker."""
    others, key, _, _, dt = SWEPT[experiment]
    steps = round(tf / dt)
    print(f"cosimrun -m {experiment} ({' '.join(others) or 'its master'}, {key}, tf={tf:g} s, {steps} steps), dask "
          f"launcher, {workers} workers, end to end; load {os.getloadavg()[0]:.2f}")
    print(f"{'sweep':34}{'members':>9}{'tasks':>7}{'wall [s]':>10}{'us/member-step':>16}{'ratio':>8}"
          f"{'driver MiB':>12}  workers MiB")
    us_jobs = float("nan")
    if jobs:
        wall, tasks, driver, peaks = dask_sweep(jobs, tf, 0, workers, experiment)
        us_jobs = 1e6 * wall / (jobs * steps)
        print(f"{'one job per member':34}{jobs:9d}{tasks:7d}{wall:10.2f}{us_jobs:16.2f}{1:7.0f}x{driver:12.0f}  "
              f"{', '.join(f'{p:.0f}' for p in peaks)}")
    for size in sizes:
        wall, tasks, driver, peaks = dask_sweep(members, tf, size, workers, experiment)
        us = 1e6 * wall / (members * steps)
        ratio = f"{us_jobs / us:7.0f}x" if jobs else f"{'-':>8}"
        print(f"{f'ensembles, ensemble_size={size}':34}{members:9d}{tasks:7d}{wall:10.2f}{us:16.3f}{ratio}"
              f"{driver:12.0f}  {', '.join(f'{p:.0f}' for p in peaks)}")
    print("ratio = one job per member / ensembles, per member per step; peak RSS (VmHWM) of the command's process "
          "(driver and scheduler) and of each worker")


RECORD_EVERY = 10
"""``storage.decimate`` of the event benchmarks' ensembles and of the scalar runs they are checked against."""


def scalar_with_events(cfg: dict[str, Any], params: dict[str, np.ndarray], m: int) -> tuple[Any, Any, float]:
    """Member *m*'s scalar ``System.run`` (its samples thinned as the ensemble's): experiment, report, seconds."""
    from cosimrun.system.recorder import MemorySink, Recorder

    one = build_experiment(cfg)
    for key, values in params.items():
        comp, _, name = key.partition(".")
        one.system.components[comp].set_parameters(**{name: float(values[m])})
    recorder = Recorder(MemorySink(one.system.history), decimate=RECORD_EVERY)
    start = time.perf_counter()
    report = one.system.run(one.run.t0, one.run.tf, one.run.dt, one.master, recorder=recorder)
    return one, report, time.perf_counter() - start


def check_samples(result: Any, m: int, one: Any) -> None:
    """Exit unless member *m*'s recorded samples (every port: time, micro step, value) are its scalar run's *one*,
    bit for bit."""
    for comp in one.system.components:
        for port, series in one.system.history.get_component_history(comp).get_all_histories().items():
            key = f"{comp}.{port}"
            if key not in result.history:
                continue
            mine = result.member_history(m, key)
            theirs = (series.time, series.micro, np.asarray(series.values, dtype=float))
            if not all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True)):
                sys.exit(f"member {m}: its samples of {key} differ from its scalar run's")


def bouncing_ball(members: int, tf: float, sample: int = 5) -> None:
    """Print the hybrid master's bouncing ball: scalar runs of *sample* members against an ensemble of *members*."""
    cfg = yaml.safe_load((ROOT / "conf" / "experiment" / "bouncing_ball.yaml").read_text())
    cfg.pop("defaults", None)
    cfg["master"] = yaml.safe_load((ROOT / "conf" / "master" / "hybrid.yaml").read_text())
    cfg["run"]["tf"] = tf
    rng = np.random.default_rng(0)
    params = {"ball.e": rng.uniform(0.5, 0.95, members), "ball.h0": rng.uniform(0.2, 2.0, members)}
    exp = build_experiment(cfg)
    result = run_ensemble(exp.system, exp.master, params, t0=exp.run.t0, tf=exp.run.tf, dt=exp.run.dt,
                          record=["ball.h", "ball.v", "ball.bounce"], record_every=RECORD_EVERY)
    steps = result.stats.macro_steps
    us_ensemble = result.stats.us_per_member_step
    us_wall = 1e6 * result.stats.wall_time_s / (members * steps)
    walls, worst = [], 0.0
    for m in np.linspace(0, members - 1, sample).astype(int).tolist():
        one, _, wall = scalar_with_events(cfg, params, m)
        walls.append(wall)
        check_samples(result, m, one)
        h = one.system.history.get_component_history("ball").get_port_history("h")
        mine = result.member_events(m)["time"]
        theirs = h.time[h.micro == 1]
        if len(mine) != len(theirs):
            sys.exit(f"member {m}: {len(mine)} events, its scalar run {len(theirs)}")
        worst = max(worst, float(np.max(np.abs(mine - theirs), initial=0.0)))
    us_scalar = 1e6 * float(np.mean(walls)) / steps
    events = result.member_stats["events"]
    print(f"bouncing_ball (hybrid, time_tolerance {exp.master.time_tolerance:g} s), {members} members, tf={tf:g} s, "
          f"{steps} communication steps; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'us per member per communication step':40}{'scalar run':>12}{'ensemble':>10}{'ratio':>8}"
          f"{'events per member':>19}{'max |event time diff| [s]':>27}")
    print(f"{'':40}{us_scalar:12.1f}{us_ensemble:10.2f}{us_scalar / us_ensemble:7.1f}x"
          f"{float(events.mean()):19.1f}{worst:27.1e}")
    print(f"{'  ensemble with building and layout':40}{'':12}{us_wall:10.2f}{us_scalar / us_wall:7.1f}x")
    print(f"scalar run: the mean of {sample} members, their samples (every {RECORD_EVERY}th point and both at each "
          "event) equal to the bit; peak RSS of this process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def adaptive(method: str, members: int, tf: float, record_every: int, sample: int = 3) -> None:
    """Print ``coupled_oscillators`` (Jacobi) integrated by *method*: scalar runs of *sample* members against an
    ensemble of *members*."""
    from cosimrun.ensemble import members as ensemble_members

    cfg = config("jacobi", tf)
    for comp in cfg["components"].values():
        comp["params"]["integrator"] = method
    stiffness = np.geomspace(5.0, 500.0, members)
    made: list[Any] = []
    integrator = ensemble_members.VectorAdaptive

    class Counted(integrator):  # type: ignore[misc, valid-type]
        """The ensemble's integrators, kept for their counts of steps."""

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    ensemble_members.VectorAdaptive = Counted  # type: ignore[misc]
    try:
        exp = build_experiment(cfg)
        result = run_ensemble(exp.system, exp.master, {"mass1.stiffness": stiffness}, t0=exp.run.t0,
                              tf=exp.run.tf, dt=exp.run.dt, record_every=record_every)
    finally:
        ensemble_members.VectorAdaptive = integrator
    steps = result.stats.macro_steps
    walls, worst = [], 0.0
    for m in np.linspace(0, members - 1, sample).astype(int).tolist():
        one = build_experiment(cfg)
        one.system.components["mass1"].set_parameters(stiffness=float(stiffness[m]))
        start = time.perf_counter()
        one.system.run(one.run.t0, one.run.tf, one.run.dt, one.master)
        walls.append(time.perf_counter() - start)
        x = np.asarray(one.system.components["mass1"].get_history_arrays()[1]["x"])
        ref = x[::record_every] if len(x[::record_every]) == len(result.time) else np.append(x[::record_every], x[-1])
        worst = max(worst, float(np.max(np.abs(result.history["mass1.x"][:, m] - ref)) / np.max(np.abs(ref))))
    us_scalar = 1e6 * float(np.mean(walls)) / steps
    us_ensemble = result.stats.us_per_member_step
    accepted: dict[str, list[np.ndarray]] = {}  # per component, its integrators' counts chunk by chunk
    for integ in made:
        accepted.setdefault(integ.name, []).append(integ.accepted)
    taken = sum(np.concatenate(counts) for counts in accepted.values()) / (len(accepted) * steps)
    print(f"coupled_oscillators (jacobi, integrator {method}), {members} members of stiffness 5..500 N/m, tf={tf:g} s, "
          f"{steps} macro steps; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'us per member per macro step':30}{'scalar run':>12}{'ensemble':>10}{'ratio':>8}"
          f"{'steps per macro step (min..max)':>33}{'max rel diff':>14}")
    print(f"{'':30}{us_scalar:12.1f}{us_ensemble:10.2f}{us_scalar / us_ensemble:7.1f}x"
          f"{f'{taken.min():.2f}..{taken.max():.2f}':>33}{worst:14.1e}")
    print(f"scalar run: the mean of {sample} members; max rel diff: of mass1.x, to its largest value")


def pendulum_switch(members: int, tf: float, sample: int = 5) -> None:
    """Print the hybrid master's ``pendulum_switch``, every member in its own mode: scalar runs of *sample* members
    against an ensemble of *members*."""
    cfg = yaml.safe_load((ROOT / "conf" / "experiment" / "pendulum_switch.yaml").read_text())
    cfg.pop("defaults", None)
    cfg["master"] = yaml.safe_load((ROOT / "conf" / "master" / "hybrid.yaml").read_text())
    cfg["run"]["tf"] = tf
    rng = np.random.default_rng(0)
    params = {"ctrl.kp": rng.uniform(20, 80, members), "ctrl.kd": rng.uniform(2, 10, members),
              "ref.amplitude": rng.uniform(5, 45, members), "pendulum.q0": rng.uniform(-0.6, 0.6, members),
              "pendulum.omega0": rng.uniform(-6, 6, members), "pendulum.damping": rng.uniform(0.05, 1.0, members)}
    exp = build_experiment(cfg)
    exp.system.initialize(exp.run.t0, exp.master)
    record = [f"{name}.{port}" for name, comp in exp.system.components.items() for port in comp.outputs]
    result = run_ensemble(exp.system, exp.master, params, t0=exp.run.t0, tf=exp.run.tf, dt=exp.run.dt,
                          record=record, record_every=RECORD_EVERY)
    steps = result.stats.macro_steps
    walls, worst = [], 0.0
    for m in np.linspace(0, members - 1, sample).astype(int).tolist():
        one, report, wall = scalar_with_events(cfg, params, m)
        walls.append(wall)
        check_samples(result, m, one)
        mine, theirs = result.member_switches(m), report.mode_switches
        if list(mine["to_mode"]) != [s.to_mode for s in theirs]:
            sys.exit(f"member {m}: switches to {list(mine['to_mode'])}, its scalar run to "
                     f"{[s.to_mode for s in theirs]}")
        events = result.member_events(m)
        if list(events["event"]) != [name for _, _, name in report.events]:
            sys.exit(f"member {m}: other events than its scalar run's")
        worst = max(worst, float(np.max(np.abs(mine["time"] - [s.time for s in theirs]), initial=0.0)),
                    float(np.max(np.abs(events["time"] - [d.t for d, _, _ in report.events]), initial=0.0)))
    us_scalar = 1e6 * float(np.mean(walls)) / steps
    us_ensemble = result.stats.us_per_member_step
    switches, events = result.member_stats["mode_switches"], result.member_stats["events"]
    print(f"pendulum_switch (hybrid, time_tolerance {exp.master.time_tolerance:g} s), {members} members, tf={tf:g} s, "
          f"{steps} communication steps; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'us per member per communication step':40}{'scalar run':>12}{'ensemble':>10}{'ratio':>8}"
          f"{'switches/member':>17}{'events/member':>15}{'max |time diff| [s]':>21}")
    print(f"{'':40}{us_scalar:12.1f}{us_ensemble:10.2f}{us_scalar / us_ensemble:7.1f}x"
          f"{float(switches.mean()):17.1f}{float(events.mean()):15.1f}{worst:21.1e}")
    us_wall = 1e6 * result.stats.wall_time_s / (members * steps)
    print(f"{'  ensemble with building and layout':40}{'':12}{us_wall:10.2f}{us_scalar / us_wall:7.1f}x")
    print(f"scalar run: the mean of {sample} members (their switches, events and samples, every port, checked); "
          f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def controlled_table(opts: argparse.Namespace) -> None:
    """``--step-control error``: us per member per accepted step of ``System.run`` and of one ensemble, each member
    on its own clock; three members checked against their scalar runs (times, step counts, histories)."""
    settings = {"step_control": opts.step_control, "extrapolation": opts.extrapolation, "rtol": opts.rtol,
                "atol": opts.atol}
    stiffness = np.random.default_rng(0).uniform(5.0, 20.0, opts.members)
    load = os.getloadavg()[0]
    print(f"coupled_oscillators, {opts.members} members (mass1.stiffness 5..20), step_control={opts.step_control}, "
          f"extrapolation={opts.extrapolation}, rtol={opts.rtol:g}, atol={opts.atol:g}, dt={opts.dt:g}, "
          f"tf={opts.tf:g} s; "
          f"{os.cpu_count()} cores, load {load:.2f}")
    print(f"{'master':14}{'scalar us':>11}{'ensemble us':>13}{'ratio':>8}{'accepted steps':>22}{'rejected':>10}"
          f"{'wall [s]':>10}{'max rel diff':>14}")
    for master in ("jacobi", "gauss_seidel"):
        wall, steps, _, _ = scalar(master, opts.tf, float(stiffness[0]), settings, opts.dt)
        us_scalar = 1e6 * wall / steps
        result = ensemble(master, opts.tf, stiffness, 1, settings, opts.dt)
        accepted = result.member_stats["macro_steps"]
        us_ensemble = 1e6 * result.stats.step_time_s / int(accepted.sum())
        worst = 0.0
        for m in (0, opts.members // 2, opts.members - 1):
            _, steps_m, t, x = scalar(master, opts.tf, float(stiffness[m]), settings, opts.dt)
            assert steps_m == accepted[m] and np.array_equal(result.time[:len(t), m], t), f"member {m}'s steps"
            got = result.history["mass1.x"][:len(x), m]
            worst = max(worst, float(np.max(np.abs(got - x) / np.maximum(np.abs(x), 1e-300))))
        print(f"{master:14}{us_scalar:11.2f}{us_ensemble:13.3f}{us_scalar / us_ensemble:7.0f}x"
              f"{f'{accepted.min()}..{accepted.max()}':>22}{int(result.member_stats['rejected_steps'].sum()):10d}"
              f"{result.stats.wall_time_s:10.2f}{worst:14.1e}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"us per member per accepted step (the ensemble's loop time over all its members' accepted steps); peak "
          f"RSS of this process: {rss:.0f} MiB; max rel diff: ensemble member vs scalar run of its parameters "
          "(3 members, same sample times and step counts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--tf", type=float, default=0.5, help="simulated seconds of the ensemble")
    parser.add_argument("--scalar-tf", type=float, default=1.0, help="simulated seconds of the scalar run")
    parser.add_argument("--record-every", type=int, default=100)
    parser.add_argument("--sweep", type=int, default=0, help="also time a cosimrun -m sweep of N jobs")
    parser.add_argument("--dask-sweep", type=int, default=0, help="also time a dask sweep of N members as ensembles")
    parser.add_argument("--dask-jobs", type=int, default=100, help="members of the one-job-per-member dask sweep")
    parser.add_argument("--dask-tf", type=float, default=1.0, help="simulated seconds of the dask sweeps")
    parser.add_argument("--ensemble-size", type=int, action="append", help="ensemble_size (repeatable)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--bouncing-ball", type=int, default=0, help="time the bouncing ball of N members instead")
    parser.add_argument("--ball-tf", type=float, default=5.0, help="simulated seconds of the bouncing ball")
    parser.add_argument("--pendulum-switch", type=int, default=0, help="time pendulum_switch of N members instead")
    parser.add_argument("--switch-tf", type=float, default=2.0, help="simulated seconds of pendulum_switch")
    parser.add_argument("--dask-experiment", choices=sorted(SWEPT), default="coupled_oscillators",
                        help="the experiment of --dask-sweep")
    parser.add_argument("--integrator", choices=["rk45", "rk23", "dop853"], help="time this adaptive method instead")
    parser.add_argument("--step-control", choices=["error"], help="time error-controlled steps per member instead")
    parser.add_argument("--extrapolation", type=int, default=2, help="--step-control: the masters' extrapolation")
    parser.add_argument("--rtol", type=float, default=1e-3, help="--step-control: the masters' rtol")
    parser.add_argument("--atol", type=float, default=1e-4, help="--step-control: the masters' atol")
    parser.add_argument("--dt", type=float, default=1e-3, help="--step-control: run.dt (rk4's substeps are as at it)")
    opts = parser.parse_args()
    if opts.integrator:
        adaptive(opts.integrator, opts.members, opts.tf, opts.record_every)
        return
    if opts.step_control:
        controlled_table(opts)
        return
    if opts.bouncing_ball:
        bouncing_ball(opts.bouncing_ball, opts.ball_tf)
        return
    if opts.pendulum_switch:
        pendulum_switch(opts.pendulum_switch, opts.switch_tf)
        return
    if opts.dask_sweep:
        dask_table(opts.dask_sweep, opts.dask_jobs, opts.dask_tf, opts.ensemble_size or [1000], opts.workers,
                   opts.dask_experiment)
        return
    rng = np.random.default_rng(0)
    stiffness = rng.uniform(5.0, 20.0, opts.members)
    load = os.getloadavg()[0]
    rows = []
    for master in ("jacobi", "gauss_seidel"):
        wall, steps, _, _ = scalar(master, opts.scalar_tf, float(stiffness[0]))
        us_scalar = 1e6 * wall / steps
        result = ensemble(master, opts.tf, stiffness, opts.record_every)
        us_ensemble = result.stats.us_per_member_step
        worst = 0.0
        for m in (0, opts.members // 2, opts.members - 1):
            _, _, _, x = scalar(master, opts.tf, float(stiffness[m]))
            got = result.history["mass1.x"][:, m]
            ref = x[:: opts.record_every] if len(got) == len(x[:: opts.record_every]) else \
                np.append(x[:: opts.record_every], x[-1])
            worst = max(worst, float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300))))
        us_sweep = None
        if opts.sweep:
            sweep_wall = sweep(opts.sweep, master, opts.scalar_tf)
            us_sweep = 1e6 * sweep_wall / (opts.sweep * steps)
        rows.append((master, us_scalar, us_sweep, us_ensemble, result.stats, worst))
    print(f"coupled_oscillators, {opts.members} members, dt=1e-3, ensemble tf={opts.tf:g} s, scalar tf="
          f"{opts.scalar_tf:g} s, record_every={opts.record_every}; {os.cpu_count()} cores, load {load:.2f}")
    head = f"{'master':14}{'scalar run':>12}"
    if opts.sweep:
        head += f"{f'sweep ({opts.sweep} jobs)':>18}"
    head += f"{'ensemble':>12}{'ratio':>9}"
    if opts.sweep:
        head += f"{'sweep ratio':>13}"
    head += f"{'ensemble wall [s]':>19}{'max rel diff':>14}"
    print("us per member per macro step")
    print(head)
    for master, us_scalar, us_sweep, us_ensemble, stats, worst in rows:
        line = f"{master:14}{us_scalar:12.2f}"
        if us_sweep is not None:
            line += f"{us_sweep:18.2f}"
        line += f"{us_ensemble:12.3f}{us_scalar / us_ensemble:8.0f}x"
        if us_sweep is not None:
            line += f"{us_sweep / us_ensemble:12.0f}x"
        line += f"{stats.wall_time_s:19.2f}{worst:14.1e}"
        print(line)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {rss:.0f} MiB; target <= 2 us per member per step on one core")
    print("ratio = scalar run / ensemble (sweep ratio: the sweep's time per member per step, end to end, / ensemble); "
          "max rel diff: ensemble member vs scalar run of its parameters (3 members)")


if __name__ == "__main__":
    main()
