"""Sweep throughput and per-job overhead, side by side in one run.

    python benchmarks/bench_sweep.py [--jobs 32] [--tf 20] [--workers 2]
    python benchmarks/bench_sweep.py --warm [--warm-jobs 300] [--index 1000,10000,100000] [--baseline DIR]
    python benchmarks/bench_sweep.py --layouts [--warm-jobs 300] [--repeat 3] [--chunk 50]

Default: the same 32-job sweep run serially and on the dask launcher with 2
workers. Each job is the ``pendulum_switch`` experiment (about 0.5 s of
simulation at ``run.tf=20``) with a different controller gain. Prints the wall
time of both commands (end to end: interpreter start, composition, cluster
start and stop), the speedup (target >= 1.8x on 2 cores) and the per-job
overhead beyond the simulation itself: ``(workers * jobs wall time - sum of
the simulations' wall times) / jobs``, where the jobs wall time runs from the
start of the first job to the end of the last one (written to the sweep index).

``--warm``: the cost of a job on a warm worker (as a job, and as a member of the
ensembles the launcher groups a sweep into by default) against a job in a
process of its own, for a trivial Python experiment (a sine into a gain, one
step) and for a 100-step run of the shipped pendulum FMU (targets: <= 5 ms per
job beyond the simulation for the first, <= 5 ms per job in all for the second). A sweep of
``--warm-jobs`` jobs of each on the dask launcher gives the warm figures (the
job on its worker, the simulation, their difference; the overhead per job as
above; the driver's peak RSS); ``cosimrun`` run once per job, a process each,
gives the per-job-process figures (the command's wall time, and the job inside
it: the results file's run wall time is the simulation). Then the driver's time
writing the sweep index for ``--index`` jobs (appended while they finish,
written whole at the end). The load average is printed beside each figure: the
machine is shared, and its load moves them.

With ``--baseline DIR`` (a source tree of cosimrun to compare with, e.g. the
main checkout or ``git archive <commit> | tar -x -C DIR``) the CPU time per job
in process is also measured for that code (put first on ``PYTHONPATH``, in an
interpreter of its own, as is this tree's for the comparison) and printed beside
this tree's, each the least of ``--repeat`` alternating runs.

``--layouts``: that CPU time per job for ``storage.layout=per_job`` and
``per_chunk`` side by side, the jobs run in chunks of ``--chunk`` jobs as the dask launcher sends them (a job's
cost under ``per_chunk`` should not grow with the chunk).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support: an in-process sweep

# The ``cosimrun`` command, run with this interpreter.
_CLI = "from cosimrun.cli import main; main()"


def _burn(_: int = 0) -> float:
    start = time.perf_counter()
    x = 0
    for i in range(3_000_000):
        x += i * i
    return time.perf_counter() - start


def parallel_capacity(workers: int) -> float:
    """Throughput of *workers* CPU-bound processes relative to one, measured now (ideal: *workers*).

    Other work on the machine (or vCPUs sharing a physical core) lowers it; it
    bounds what any parallel sweep can reach here.
    """
    import multiprocessing

    one = min(_burn() for _ in range(2))
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(_burn, range(workers))  # start-up
        many = max(pool.map(_burn, range(workers)))
    return workers * one / many


def run_sweep(tmp: Path, name: str, args: list[str]) -> tuple[float, dict]:
    """Run one sweep command; its wall time runs until the ``cosimrun`` process exits.

    Its output goes to a file, as to a terminal: with a pipe, the wait would
    also include the local cluster's fork server finishing after the command
    (some 0.2 s), which holds the pipe open.
    """
    sweep_dir = tmp / name
    cmd = [sys.executable, "-c", _CLI, "-m", *args, f"hydra.sweep.dir={sweep_dir}"]
    log = tmp / f"{name}.log"
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{name} sweep failed ({proc.returncode}):\n{log.read_text()}")
    with h5py.File(sweep_dir / "index.h5", "r") as f:
        info = {
            "sim": f["wall_time_s"][...],
            "job": f["job_time_s"][...],
            "jobs_wall": float(f.attrs["jobs_wall_time_s"]),
            "status": list(f["status"].asstr()[...]),
        }
    return wall, info


TINY = """# @package _global_
name: tiny
run: {t0: 0.0, tf: 0.01, dt: 0.01}
components:
  src: {type: sine, params: {amplitude: 1.0, frequency: 1.0}}
  k: {type: gain, params: {k: 2.0}}
connections:
  - src.y -> k.u
"""
"""A trivial Python experiment: one step of a sine into a gain."""

PENDULUM_FMU = """# @package _global_
name: pendulum_fmu
run: {t0: 0.0, tf: 1.0, dt: 0.01}
components:
  p: {type: fmu, params: {path: "example:pendulum", length: 1.0, damping: 0.2, start: {q: 0.5}}}
"""
"""A 100-step run of the shipped pendulum FMU."""

CHUNK = 50
"""Jobs per chunk in :func:`in_process_jobs` with a layout: about a second of work of the tiny experiment."""

WARM = {"tiny": (TINY, "components.k.params.k"), "pendulum_fmu": (PENDULUM_FMU, "components.p.params.length")}


def _write_experiments(tmp: Path) -> None:
    """The experiments of :data:`WARM` as ``<tmp>/conf/experiment/<name>.yaml``."""
    (tmp / "conf" / "experiment").mkdir(parents=True)
    for name, (text, _) in WARM.items():
        (tmp / "conf" / "experiment" / f"{name}.yaml").write_text(text)


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _sweep_values(name: str, n: int) -> str:
    return f"range(1,{n + 1})" if name == "tiny" else ",".join(f"{0.5 + k / n:.6g}" for k in range(n))


def warm_jobs(tmp: Path, name: str, n: int, workers: int, ensembles: bool = False) -> dict[str, float]:
    """A dask sweep of *n* jobs of experiment *name*: per-job figures on warm workers (ms) and the driver's RSS.
    With *ensembles* the launcher groups the jobs into ensembles as it does by default (the tiny experiment's
    members stepped as arrays, the FMU's one after the other): a member's "job" is then its share of the
    workers' time, ``workers x jobs wall time / n``."""
    import resource

    conf, key = tmp / "conf", WARM[name][1]
    args = [f"--config-dir={conf}", f"+experiment={name}", f"{key}={_sweep_values(name, n)}", "hydra/launcher=dask",
            f"hydra.launcher.n_workers={workers}", "hydra.launcher.progress=false",
            *([] if ensembles else ["hydra.launcher.ensemble_size=0"])]
    wall, info = run_sweep(tmp, f"warm_{name}{'_ensembles' if ensembles else ''}", args)
    if any(s != "complete" for s in info["status"]):
        sys.exit(f"warm {name}: not every job completed")
    job, sim = np.asarray(info["job"]), np.asarray(info["sim"])
    steady = slice(min(len(job) // 10, 50), None)  # past each worker's first jobs (imports, extraction, loading)
    if ensembles:
        job, steady = np.full(n, workers * info["jobs_wall"] / n), slice(None)
    return {"job": float(np.mean(job[steady])) * 1e3, "sim": float(np.mean(sim[steady])) * 1e3,
            "overhead": (workers * info["jobs_wall"] - float(sim.sum())) / n * 1e3,
            "rate": n / wall, "rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def process_jobs(tmp: Path, name: str, runs: int) -> dict[str, float]:
    """*runs* single runs of experiment *name*, a ``cosimrun`` process each: its wall time and the run's (ms)."""
    conf = tmp / "conf"
    walls, sims = [], []
    for k in range(runs):
        out = tmp / f"single_{name}_{k}"
        cmd = [sys.executable, "-c", _CLI, f"--config-dir={conf}", f"+experiment={name}",
               f"hydra.run.dir={out}"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        if proc.returncode != 0:
            sys.exit(f"single {name} failed:\n{proc.stderr[-2000:]}")
        with h5py.File(out / "results.h5", "r") as f:
            sims.append(float(f.attrs["wall_time_s"]))
    return {"wall": float(np.mean(walls)) * 1e3, "sim": float(np.mean(sims)) * 1e3}


def fmu_runs(tmp: Path, runs: int) -> dict[bool, float]:
    """ms per 100-step run of the pendulum FMU component in this process (instantiate or reset, set, step, free),
    with FMU instances kept between runs (``True``) and without."""
    from cosimrun.components.fmu import FMUComponent, build_example
    from cosimrun.fmi.instance import keep_instances

    path = str(build_example("pendulum", tmp))
    out = {}
    for keep in (False, True, False, True):
        keep_instances(keep)
        start = time.perf_counter()
        for k in range(runs):
            comp = FMUComponent("p")
            comp.set_parameters(path=path, length=0.5 + k / runs, start={"q": 0.5})
            comp.initialize(0.0)
            t = 0.0
            for _ in range(100):
                comp.do_step(t, 0.01)
                t += 0.01
            comp.free()
        out[keep] = min(out.get(keep, np.inf), (time.perf_counter() - start) / runs * 1e3)
    keep_instances(False)
    return out


def in_process_jobs(tmp: Path, name: str, n: int, layout: str | None = None, chunk: int = CHUNK
                    ) -> dict[str, float]:
    """*n* jobs of experiment *name* run one after the other in this process as a warm worker runs them
    (``worker.run_hydra_job`` on payloads the launcher's composer makes): CPU ms per job in all, in the run
    (``run_experiment``: build, simulate, write the results file) and in its ``System.run``. CPU time, unlike wall
    time, hardly moves with the load of a shared machine. With a *layout* (``storage.layout``) the jobs run in
    chunks of *chunk* jobs (``worker.run_hydra_chunk``), as the dask launcher sends them."""
    import uuid

    from hydra._internal.callbacks import Callbacks
    from support.hydra_sweep import sweep_context  # the in-process Hydra context of the runner tests

    from cosimrun.fmi.instance import keep_instances
    from cosimrun.runner import compose, run, sweep, worker
    from cosimrun.system import system

    key = WARM[name][1]
    ctx, master = sweep_context([f"+experiment={name}", f"hydra.sweep.dir={tmp / f'inproc_{name}'}",
                                 f"hydra.searchpath=[file://{tmp / 'conf'}]"])
    composer = compose.JobComposer(ctx, master)
    values = [str(k + 1) for k in range(n + 20)] if name == "tiny" else _sweep_values(name, n + 20).split(",")
    extra = [] if layout is None else [f"storage.layout={layout}"]
    specs = [composer.compose([f"+experiment={name}", f"{key}={v}", *extra], k, on_worker=True)
             for k, v in enumerate(values)]
    for spec in specs:
        spec.payload().sweep_files = True  # as the launcher sends them: the sweep's .hydra files are at its root
    state, token = worker.worker_state(Callbacks(specs[0].payload().to_config())), uuid.uuid4().hex
    keep_instances()
    spent = {"run": 0.0, "sim": 0.0}

    def timed(function, part):
        def call(*args, **kwargs):
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[part] += time.process_time() - start
        return call

    run_experiment, system_run = run.run_experiment, system.System.run
    run.run_experiment, system.System.run = timed(run_experiment, "run"), timed(system_run, "sim")
    try:
        size = 1 if layout is None else chunk
        for first in [*range(0, 20, size), *range(20, len(specs), size)]:
            if first == 20:  # past the first jobs (imports, the layout's image, the FMU's extraction and loading)
                start, spent["run"], spent["sim"] = time.process_time(), 0.0, 0.0
            chunk = [spec.payload() for spec in specs[first:min(first + size, 20 if first < 20 else len(specs))]]
            outcomes = ([worker.run_hydra_job(chunk[0], sweep.sweep_job, state, token)] if layout is None else
                        worker.run_hydra_chunk(chunk, sweep.sweep_job, state, token, [1] * len(chunk)))
            for outcome in outcomes:
                if outcome.status != "complete":
                    sys.exit(f"in-process {name}: job {outcome.num} {outcome.status}: {outcome.error}")
        total = time.process_time() - start
    finally:
        run.run_experiment, system.System.run = run_experiment, system_run
        keep_instances(False)
    return {"job": total / n * 1e3, "run": spent["run"] / n * 1e3, "sim": spent["sim"] / n * 1e3}


def _cpu_in(tree: str | None, name: str, n: int, layout: str | None = None, chunk: int = CHUNK) -> dict[str, float]:
    """:func:`in_process_jobs` in a new interpreter, on the cosimrun source *tree* when given (else this one)."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(tree).absolute()), env.get("PYTHONPATH")]))
    command = [sys.executable, __file__, "--cpu", name, str(n), *(["--layout", layout] if layout else []),
               "--chunk", str(chunk)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"in-process {name} ({tree or 'this tree'}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare_cpu(baseline: str, n: int, repeat: int) -> None:
    """CPU ms per job in process (:func:`in_process_jobs`) of the *baseline* tree and of this one, side by side:
    the least of *repeat* runs of each, alternating (the machine's load moves single runs)."""
    print(f"CPU per job in process, {n} jobs, least of {repeat} alternating runs: baseline {baseline} / this tree")
    _side_by_side("code", {"baseline": (baseline, None), "this tree": (None, None)}, n, repeat)


def compare_layouts(n: int, repeat: int, chunk: int = CHUNK) -> None:
    """CPU ms per job in process, in chunks of *chunk* jobs, with ``storage.layout`` ``per_job`` and ``per_chunk``
    side by side: the least of *repeat* alternating runs of each."""
    print(f"CPU per job in process, {n} jobs in chunks of {chunk}, least of {repeat} alternating runs")
    _side_by_side("layout", {layout: (None, layout) for layout in ("per_job", "per_chunk")}, n, repeat, chunk)


def _side_by_side(column: str, variants: dict[str, tuple[str | None, str | None]], n: int, repeat: int,
                  chunk: int = CHUNK) -> None:
    """Print the least CPU per job of :func:`_cpu_in` for each of *variants* (``{label: (tree, layout)}``), run in
    turn *repeat* times, for every experiment of :data:`WARM`."""
    print(f"{'experiment':14}{column:>11}{'job [ms]':>10}{'sim [ms]':>10}{'job-sim [ms]':>14}"
          f"{'run_experiment [ms]':>21}  load")
    for name in WARM:
        best: dict[str, dict[str, float]] = {}
        for _ in range(repeat):
            for label, (tree, layout) in variants.items():
                cpu = _cpu_in(tree, name, n, layout, chunk)
                if label not in best or cpu["job"] < best[label]["job"]:
                    best[label] = cpu
        for label, cpu in best.items():
            print(f"{name:14}{label:>11}{cpu['job']:10.2f}{cpu['sim']:10.2f}{cpu['job'] - cpu['sim']:14.2f}"
                  f"{cpu['run']:21.2f}  {_load()}")


def warm_main(opts: argparse.Namespace) -> None:
    """The ``--warm`` figures (see the module)."""
    from sweep_overhead import index_cost

    print(f"per-job cost, warm dask workers ({opts.workers}) against a process per job; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench_sweep_warm_") as tmp_name:
        tmp = Path(tmp_name)
        _write_experiments(tmp)
        print(f"{'experiment':14}{'where':>18}{'job [ms]':>10}{'sim [ms]':>10}{'job-sim [ms]':>14}"
              f"{'overhead/job [ms]':>19}{'jobs/s':>8}{'driver RSS [MB]':>17}  load")
        for name in WARM:
            cold = process_jobs(tmp, name, opts.process_runs)
            print(f"{name:14}{'process per job':>18}{cold['wall']:10.1f}{cold['sim']:10.2f}"
                  f"{cold['wall'] - cold['sim']:14.1f}{'':19}{1e3 / cold['wall']:8.1f}{'':17}  {_load()}")
            for label, grouped in (("warm worker", False), ("warm, ensembles", True)):
                warm = warm_jobs(tmp, name, opts.warm_jobs, opts.workers, grouped)
                print(f"{'':14}{label:>18}{warm['job']:10.2f}{warm['sim']:10.2f}{warm['job'] - warm['sim']:14.2f}"
                      f"{warm['overhead']:19.2f}{warm['rate']:8.1f}{warm['rss']:17.0f}  {_load()}")
            cpu = in_process_jobs(tmp, name, opts.warm_jobs)
            print(f"{'':14}{'CPU, in process':>18}{cpu['job']:10.2f}{cpu['sim']:10.2f}{cpu['job'] - cpu['sim']:14.2f}"
                  f"{'':19}{'':8}{'':17}  {_load()}  (run_experiment {cpu['run']:.2f} ms)")
    print("job: a job's wall time on its worker (past each worker's first jobs), or the command's for a process per "
          "job, or for ensembles (the launcher's default grouping) a member's share of the workers' time; sim: the "
          "simulation's (the results file's wall_time_s, a member's run or share); overhead/job = (workers x jobs "
          "wall time - sum of simulation wall times) / jobs; driver RSS: the largest peak of the sweep's processes; "
          "CPU, in process: the same jobs run one after the other in this process as on a warm worker, CPU time per "
          "job (sim: in System.run; run_experiment: building, simulating and writing the results file)")
    print("targets: tiny job-sim <= 5 ms; pendulum_fmu job <= 5 ms (both on warm workers, as jobs or as ensembles)")
    with tempfile.TemporaryDirectory(prefix="bench_sweep_fmu_") as tmp_name:
        runs = fmu_runs(Path(tmp_name), 200)
    print(f"pendulum FMU component, 100 steps, in one process: {runs[False]:.2f} ms per run with a fresh instance, "
          f"{runs[True]:.2f} ms with the instance kept and reset ({_load()})")
    if opts.baseline:
        compare_cpu(opts.baseline, opts.warm_jobs, opts.repeat)
    print(f"{'index: jobs':14}{'CPU writing [s]':>17}{'per job [us]':>14}{'last append [ms]':>18}"
          f"{'final [ms]':>12}  load")
    for n in (int(x) for x in opts.index.split(",") if x):
        total, last, final = index_cost(n)
        print(f"{n:<14d}{total:17.3f}{total / n * 1e6:14.1f}{last * 1e3:18.2f}{final * 1e3:12.1f}  {_load()}")
    print("index: the driver's CPU time writing the index of n jobs (an append every 100 outcomes, the whole file "
          "at the end); linear growth keeps the per-job figure flat")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--tf", type=float, default=20.0, help="simulated seconds per job (sets the job length)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warm", action="store_true", help="per-job cost on warm workers against a process per job")
    parser.add_argument("--warm-jobs", type=int, default=300)
    parser.add_argument("--process-runs", type=int, default=3)
    parser.add_argument("--index", default="1000,10000,100000", help="index sizes for --warm, comma separated")
    parser.add_argument("--baseline", help="with --warm: a cosimrun source tree whose CPU per job to print beside")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tree for --baseline")
    parser.add_argument("--layouts", action="store_true",
                        help="CPU per job in process with storage.layout per_job and per_chunk, side by side")
    parser.add_argument("--cpu", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--layout", choices=("per_job", "per_chunk"), help=argparse.SUPPRESS)
    parser.add_argument("--chunk", type=int, default=CHUNK, help="jobs per chunk for --layouts")
    opts = parser.parse_args()
    if opts.cpu:
        with tempfile.TemporaryDirectory(prefix="bench_sweep_cpu_") as tmp_name:
            tmp = Path(tmp_name)
            _write_experiments(tmp)
            print(json.dumps(in_process_jobs(tmp, opts.cpu[0], int(opts.cpu[1]), opts.layout, opts.chunk)))
        return
    if opts.layouts:
        compare_layouts(opts.warm_jobs, opts.repeat, opts.chunk)
        return
    if opts.warm:
        warm_main(opts)
        return
    gains = ",".join(str(40 + k) for k in range(opts.jobs))
    args = ["+experiment=pendulum_switch", f"run.tf={opts.tf}", f"components.ctrl.params.kp={gains}"]
    load = os.getloadavg()[0]
    capacity = parallel_capacity(opts.workers)
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp_name:
        tmp = Path(tmp_name)
        t_serial, serial = run_sweep(tmp, "serial", [*args, "hydra/launcher=basic"])
        t_dask, dask = run_sweep(
            tmp, "dask", [*args, "hydra/launcher=dask", f"hydra.launcher.n_workers={opts.workers}"]
        )
    n, w = opts.jobs, opts.workers
    for label, info in (("serial", serial), ("dask", dask)):
        bad = [s for s in info["status"] if s != "complete"]
        if bad:
            sys.exit(f"{label}: {len(bad)} jobs did not complete")
    over_serial = (serial["jobs_wall"] - serial["sim"].sum()) / n
    over_dask = (w * dask["jobs_wall"] - dask["sim"].sum()) / n
    ms = 1e3
    print(f"sweep of {n} jobs (pendulum_switch, run.tf={opts.tf:g}) on {os.cpu_count()} cores, load {load:.2f}")
    print(f"{'':28}{'serial (basic)':>16}{f'dask ({w} workers)':>20}")
    rows = [
        ("simulation per job [ms]", np.mean(serial["sim"]) * ms, np.mean(dask["sim"]) * ms),
        ("job on its worker [ms]", np.mean(serial["job"]) * ms, np.mean(dask["job"]) * ms),
        ("jobs wall time [s]", serial["jobs_wall"], dask["jobs_wall"]),
        ("command wall time [s]", t_serial, t_dask),
        ("overhead per job [ms]", over_serial * ms, over_dask * ms),
    ]
    for label, a, b in rows:
        print(f"{label:28}{a:16.2f}{b:20.2f}")
    print(f"speedup {t_serial / t_dask:.2f}x end to end, {serial['jobs_wall'] / dask['jobs_wall']:.2f}x jobs only")
    print(
        f"machine: {opts.workers} CPU-bound processes ran at {capacity:.2f}x the throughput of one just before "
        f"(the bound for any {opts.workers}-worker sweep here)"
    )
    print("targets: speedup >= 1.8x on 2 cores; overhead <= 50 ms per job")
    print("overhead per job = (workers x jobs wall time - sum of simulation wall times) / jobs")


if __name__ == "__main__":
    main()
