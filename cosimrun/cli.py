"""The ``cosimrun`` command: a Hydra application over experiments.

``cosimrun +experiment=NAME [key=value ...]`` runs an experiment,
``cosimrun +experiment=NAME action=describe`` prints its structure,
``cosimrun --list-components`` lists the installed component types, and
``cosimrun -m ...`` expands a sweep. Mistakes in the config end with one line
on stderr naming the key, and a non-zero exit code (see :mod:`cosimrun.exits`).
SIGINT and SIGTERM end the runs as ``interrupted`` (:mod:`cosimrun.runner.signals`).
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

from cosimrun.exits import EXIT_FAILED, fail


def _group_options(group: str, config_dirs: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Options of a config group: cosimrun's own, plugin config packages', and ``--config-dir``'s."""
    from hydra_plugins.cosimrun_searchpath.searchpath import config_packages

    roots: list[Any] = []
    for package in ["cosimrun.conf", *(pkg for _, pkg in config_packages())]:
        try:
            roots.append(resources.files(package) / group)
        except ModuleNotFoundError:
            continue
    roots += [Path(d) / group for d in config_dirs]
    names: set[str] = set()
    for root in roots:
        try:
            names.update(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(names)


def _config_dirs(argv: list[str]) -> list[str]:
    """Directories given with ``--config-dir``/``-cd`` (Hydra adds them to the search path)."""
    dirs = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            dirs.append(arg.split("=", 1)[1])
    return dirs


def _precheck(argv: list[str]) -> None:
    """Catch unknown experiments and masters before Hydra turns them into a long report."""
    from cosimrun.errors import suggest

    dirs = _config_dirs(argv)
    if any(arg.startswith("hydra.searchpath") for arg in argv):
        return
    for arg in argv:
        for group, key in (("experiment", "+experiment"), ("experiment", "experiment"), ("master", "master")):
            if not arg.startswith(f"{key}="):
                continue
            values = arg.split("=", 1)[1]
            if any(c in values for c in "()[]{}*$"):
                continue  # sweep functions and interpolations are Hydra's to resolve
            valid = _group_options(group, dirs)
            for value in values.split(","):
                value = value.strip()
                if value and valid and value not in valid:
                    fail(f"{group}: unknown {group} {value!r}{suggest(value, valid)} (available: {', '.join(valid)})")


def list_components() -> str:
    """A table of installed component types: name, distribution, description."""
    from cosimrun.plugins import list_components as infos

    rows = [(i.name, i.distribution, i.description) for i in infos()]
    width = [max([len(r[k]) for r in rows] + [len(h)]) for k, h in enumerate(("type", "distribution"))]
    lines = [f"{'type':{width[0]}}  {'distribution':{width[1]}}  description"]
    lines += [f"{n:{width[0]}}  {d:{width[1]}}  {text}" for n, d, text in rows]
    return "\n".join(lines)


def _task(cfg: Any) -> Any:
    """Hydra task: build and run (or describe) one experiment.

    In a sweep (``-m``) the job's outcome is returned instead: a failed job
    must not end the sweep (see :mod:`cosimrun.runner.sweep`).
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if HydraConfig.get().mode == RunMode.MULTIRUN:
        from cosimrun.runner.sweep import sweep_job

        return sweep_job(cfg)

    from cosimrun.console import Console
    from cosimrun.errors import ConfigError, ResultsWriteError
    from cosimrun.runner import signals
    from cosimrun.runner.configtext import resolved, task_overrides
    from cosimrun.runner.run import prepare, run_experiment

    plain, config_yaml = resolved(cfg)
    try:
        experiment = prepare(plain)
    except ConfigError as exc:
        fail(str(exc))
    if experiment.action == "describe":
        print(experiment.system.describe())
        return 0
    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    console = Console(experiment)
    try:
        outcome = run_experiment(
            plain,
            out_dir,
            config_yaml=config_yaml,
            overrides=task_overrides(hydra_cfg),
            progress=console.progress,
            experiment=experiment,
        )
    except ResultsWriteError as exc:  # the file could not even be created
        fail(str(exc), EXIT_FAILED)
    console.summary(outcome)
    if outcome.status == "interrupted":
        sys.exit(signals.exit_code(outcome.cause))
    if not outcome.ok:
        sys.exit(EXIT_FAILED)
    return 0


def register_hydra_plugins() -> None:
    """Register cosimrun's Hydra plugins explicitly.

    Hydra finds plugins by walking the ``hydra_plugins`` namespace, which an
    editable install does not expose to that walk; importing and registering
    them here works for every install mode (registration is idempotent).
    """
    from hydra.core.plugins import Plugins

    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher
    from hydra_plugins.cosimrun_searchpath.searchpath import CosimrunSearchPathPlugin
    from hydra_plugins.cosimrun_sweeper.sweeper import CosimrunSweeper

    Plugins.instance().register(CosimrunSearchPathPlugin)
    Plugins.instance().register(DaskLauncher)  # importing it also registers hydra/launcher=dask
    Plugins.instance().register(CosimrunSweeper)  # and hydra/sweeper=cosimrun


def main() -> None:
    """Entry point of the ``cosimrun`` console script."""
    argv = sys.argv[1:]
    if "--list-components" in argv:
        print(list_components())
        return
    _precheck(argv)
    from hydra_plugins.cosimrun_dask_launcher._forkserver import prestart

    prestart(argv)  # a sweep's local dask workers: their fork server imports beside Hydra's start-up
    import hydra

    from cosimrun.config.schema import register_configs
    from cosimrun.runner import ledger, signals, sweep

    register_configs()
    register_hydra_plugins()
    sweep.mark_driver()
    app = hydra.main(version_base="1.3", config_path="pkg://cosimrun.conf", config_name="config")(_task)
    interrupted: KeyboardInterrupt | None = None
    with signals.handling():
        try:
            app()
        except KeyboardInterrupt as exc:  # a sweep's, or Hydra's before a run started
            interrupted = exc
        finally:
            failed = ledger.finish()  # a sweep's summary; 1 when one of its jobs failed
        if interrupted is not None:
            print(f"cosimrun: {signals.message(interrupted)}", file=sys.stderr)
            sys.exit(signals.exit_code(interrupted))
    if failed:
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
