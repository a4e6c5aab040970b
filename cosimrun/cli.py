"""The ``cosimrun`` command: a Hydra application over experiments.

``cosimrun +experiment=NAME [key=value ...]`` runs an experiment,
``cosimrun +experiment=NAME action=describe`` prints its structure,
``cosimrun --list-components [NAME]`` lists the installed component types (or one type's reference),
``cosimrun -m ...`` expands a sweep, ``cosimrun plot|report|compare|export ...``
look at results, ``cosimrun ssp import ...`` imports an SSP system and
``cosimrun simulate MODEL.fmu`` runs one FMU on its default experiment
(:mod:`cosimrun.post.commands`, :mod:`cosimrun.runner.simulate`). Mistakes in the command line or the config,
Hydra's and YAML's included, end with one line on stderr naming the key (or
file and line) and exit status 2 (see :mod:`cosimrun.exits` and
:mod:`cosimrun.config.reporting`); ``HYDRA_FULL_ERROR=1`` shows Hydra's full
report instead. SIGINT and SIGTERM end the runs as ``interrupted``
(:mod:`cosimrun.runner.signals`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from cosimrun.exits import EXIT_FAILED, EXIT_SIGPIPE, fail

if TYPE_CHECKING:
    from pathlib import Path

HELP = """\
cosimrun: declarative co-simulation experiments (Hydra configs)

usage:
  cosimrun +experiment=NAME [KEY=VALUE ...]     run an experiment
  cosimrun +experiment=NAME action=describe     print its structure; nothing runs
  cosimrun +experiment=NAME --cfg job           print the composed config
  cosimrun -m +experiment=NAME KEY=V1,V2 ...    sweep: one job per combination (on dask)
  cosimrun --list-components [NAME]             the installed component types, or one type's reference
  cosimrun plot RESULTS|SWEEP_DIR [PORTS ...]   figures of a run (one panel per unit) or a sweep
  cosimrun report RESULTS|SWEEP_DIR [-o FILE]   one self-contained HTML page of a run or a sweep
  cosimrun compare A B [--rtol R] [--atol A]    compare two runs, or a run with a CSV reference
  cosimrun export RESULTS [--format F] [-o DIR] CSV per component, Parquet or MATLAB .mat
  cosimrun ssp import SYSTEM.ssp DIR [--name N] an SSP system as DIR/experiment/N.yaml with its FMUs
  cosimrun simulate MODEL.fmu [--stop TF ...]   one FMU on its default experiment (--set NAME=VALUE, --output)
  cosimrun --version | --help | --hydra-help    versions, this help, Hydra's own options

overrides (Hydra's syntax):
  key=value        change a key: run.tf=5 components.ball.params.e=0.5 master=ijcsa
  +key=value       add a key: +components.ball.initial.u=0
                   or a component: '+components.tab={type: table, params: {path: t.csv}}'
  ~key             remove a key: ~components.ctrl
  --config-dir DIR experiments from DIR/experiment/*.yaml too

experiments: $EXPERIMENTS
masters:     $MASTERS

Bad input ends with one line naming the key and exit status 2 (HYDRA_FULL_ERROR=1:
Hydra's full report); a failed run exits with 1. See README.md."""


def _group_roots(group: str, config_dirs: list[str] | tuple[str, ...] = ()) -> list[Any]:
    """Folders of a config group in Hydra's search order: cosimrun's own, ``--config-dir``'s, plugin packages'."""
    from importlib import resources
    from pathlib import Path

    from hydra_plugins.cosimrun_searchpath.searchpath import config_packages

    roots: list[Any] = []
    for package in ["cosimrun.conf", *(pkg for _, pkg in config_packages())]:
        try:
            roots.append(resources.files(package) / group)
        except ModuleNotFoundError:
            continue
    return roots[:1] + [Path(d) / group for d in config_dirs] + roots[1:]


def _group_options(group: str, config_dirs: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Options of a config group: cosimrun's own, plugin config packages', and ``--config-dir``'s."""
    names: set[str] = set()
    for root in _group_roots(group, config_dirs):
        try:
            names.update(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(names)


def _group_file(group: str, option: str, config_dirs: list[str] | tuple[str, ...] = ()) -> str | None:
    """The file of a config group option, the first in Hydra's search order."""
    for root in _group_roots(group, config_dirs):
        candidate = root / f"{option}.yaml"
        if candidate.is_file():
            return str(candidate)
    return None


def _config_dirs(argv: list[str]) -> list[str]:
    """Directories given with ``--config-dir``/``-cd`` (Hydra adds them to the search path)."""
    dirs = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(argv[i + 1])
        elif arg.startswith("--config-dir="):
            dirs.append(arg.split("=", 1)[1])
    return dirs


def _check_launcher_keys(argv: list[str]) -> None:
    """Refuse a ``hydra.launcher.KEY`` the dask launcher does not have in one line, with the keys it has.

    Hydra's own advice for a key not in the config (add it with ``+``) does not
    work for a launcher: its settings are the parameters of its class.
    """
    if any(a.startswith("hydra/launcher=") and a != "hydra/launcher=dask" for a in argv):
        return  # another launcher: its keys are Hydra's to check
    keys = [a.lstrip("+~").partition("=")[0] for a in argv if a.lstrip("+~").startswith("hydra.launcher.")]
    if not keys:
        return
    import dataclasses

    from cosimrun.errors import suggest
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncherConf

    known = [f.name for f in dataclasses.fields(DaskLauncherConf) if not f.name.startswith("_")]
    for key in keys:
        name = key.removeprefix("hydra.launcher.").split(".")[0]
        if name not in known:
            fail(f"{key}: the dask launcher has no setting {name!r}{suggest(name, known)} "
                 f"(its settings: {', '.join(known)}; hydra.launcher.NAME=VALUE sets one)")


def _precheck(argv: list[str]) -> None:
    """Catch unknown experiments, masters and launcher settings at once, a sweep's values included, before any job
    is composed."""
    from cosimrun.errors import unknown_option

    _check_launcher_keys(argv)
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
                    fail(str(unknown_option(group, value, valid)))


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

    from pathlib import Path

    from cosimrun.config.reporting import remove_unused_dir
    from cosimrun.runner import signals

    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    hydra_files = [str(hydra_cfg.output_subdir)] if hydra_cfg.output_subdir else []
    try:
        signals.release()  # one that came during Hydra's set-up of the run is raised here
        outcome = _run(cfg, hydra_cfg, out_dir, hydra_files)
    except KeyboardInterrupt:  # before the results file was created: nothing ran, no run directory
        with signals.shielded():
            remove_unused_dir(out_dir, hydra_files)
        raise
    if outcome is None:
        return 0
    if outcome.status == "interrupted":
        signals.reported()  # the summary said it
        sys.exit(signals.exit_code(outcome.cause))
    if not outcome.ok:
        sys.exit(EXIT_FAILED)
    return 0


def _run(cfg: Any, hydra_cfg: Any, out_dir: Path, hydra_files: list[str]) -> Any:
    """Build and run (or describe: ``None``) the experiment of a single run; its outcome, summarized on stdout."""
    from cosimrun.config.reporting import config_error, remove_unused_dir
    from cosimrun.console import Console
    from cosimrun.errors import ResultsWriteError
    from cosimrun.runner import signals
    from cosimrun.runner.configtext import resolved, task_overrides
    from cosimrun.runner.joblog import log_outcome, warnings_logged
    from cosimrun.runner.run import prepare, run_experiment

    try:
        plain, config_yaml = resolved(cfg)
        experiment = prepare(plain)
    except Exception as exc:
        error = config_error(exc)
        if error is None:
            raise
        remove_unused_dir(out_dir, hydra_files)  # nothing ran: no run directory
        fail(str(error))
    if experiment.action == "describe":
        try:
            with _closed_stdout_ends_quietly():
                print(experiment.system.describe(), flush=True)
        finally:  # also when stdout was closed (| head): describing leaves no run directory
            experiment.system.free()
            remove_unused_dir(out_dir, hydra_files)
        return None
    console = Console(experiment)
    try:
        with warnings_logged():
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
    with signals.shielded(deliver=False):  # the run's file is closed: a signal now only sets the exit status
        log_outcome(outcome)
        with _closed_stdout_ends_quietly():
            console.summary(outcome)
            sys.stdout.flush()
    return outcome


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


def version() -> str:
    """``cosimrun X (Hydra Y)``: what ``cosimrun --version`` prints."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    from cosimrun import __version__

    try:
        hydra = installed("hydra-core")
    except PackageNotFoundError:
        hydra = "not installed"
    return f"cosimrun {__version__} (Hydra {hydra})"


def usage() -> str:
    """What ``cosimrun --help`` prints: the commands and actions, the experiments and masters installed."""
    return (HELP.replace("$EXPERIMENTS", ", ".join(_group_options("experiment")) or "none")
            .replace("$MASTERS", ", ".join(_group_options("master"))))


def _error_handler(argv: list[str]) -> Any:
    """Hydra's errors about the command line or the config as one line and exit 2 (unless ``HYDRA_FULL_ERROR=1``)."""
    from cosimrun.config.reporting import config_error, full_error_requested

    dirs = _config_dirs(argv)

    def handle(exc: Exception) -> None:
        from cosimrun.runner import signals

        if signals.received() is not None:  # an error the interrupt caused (a library cleaning up): the interrupt
            raise signals.interruption(signals.received()) from exc
        if isinstance(exc, BrokenPipeError):
            _stdout_closed()
        if full_error_requested():
            return
        unusable = _unusable_dir(exc, argv)
        if unusable is not None:
            fail(unusable)
        error = config_error(exc, argv, lambda group, option: _group_file(group, option, dirs))
        if error is not None:
            fail(str(error))

    return handle


def _unusable_dir(exc: Exception, argv: list[str]) -> str | None:
    """The one line for an ``OSError`` on the run directory (``hydra.run.dir``) or the sweep directory
    (``hydra.sweep.dir``): not a directory, read-only, ...; ``None`` for any other error.

    The directory is the one Hydra's ``run_job`` (``output_dir``) or the sweep (``sweep_dir``) was making, as
    the traceback shows it: Hydra has forgotten its config by the time it reports the error.
    """
    from pathlib import Path

    if not isinstance(exc, OSError) or not exc.filename:
        return None
    sweep = any(a in ("-m", "--multirun") for a in argv)
    key, kind, local = ("hydra.sweep.dir", "sweep", "sweep_dir") if sweep else ("hydra.run.dir", "run", "output_dir")
    path = Path(str(exc.filename)).absolute()
    tb = exc.__traceback__
    while tb is not None:
        made = tb.tb_frame.f_locals.get(local)
        tb = tb.tb_next
        if not isinstance(made, str | Path):
            continue
        directory = Path(str(made)).absolute()
        if path == directory or path in directory.parents or path.parent == directory:
            return f"{key}={made}: cannot use it as the {kind} directory: {exc.strerror or exc}: {exc.filename}"
    return None


def _reporting(argv: list[str]) -> contextlib.AbstractContextManager[None]:
    """Hydra's error reporting with cosimrun's one-line config errors; Hydra's own if its private API changed."""
    from cosimrun.runner._private import RUN_AND_REPORT, PrivateAPIChanged, hydra_error_reporting

    try:
        RUN_AND_REPORT.get()
    except PrivateAPIChanged:
        return contextlib.nullcontext()
    return hydra_error_reporting(_error_handler(argv))


def _list_components(argv: list[str], flag: str) -> None:
    """``--list-components``: the installed types; ``--list-components NAME`` (or ``=NAME``): one type's
    reference (a builtin, a plugin's type or an FMU file)."""
    name = flag.partition("=")[2]
    if not name:
        after = argv[argv.index(flag) + 1 :]
        name = after[0] if after and not after[0].startswith("-") else ""
    if not name:
        print(list_components())
        return
    from cosimrun.errors import CosimrunError
    from cosimrun.reference import component_reference

    try:
        print(component_reference(name))
    except (CosimrunError, ValueError, OSError) as exc:
        fail(f"--list-components {name}: {exc}")


def _stdout_closed() -> NoReturn:
    """Exit quietly with 141 because the reader of stdout went away (``cosimrun ... | head``).

    As a tool that SIGPIPE ends, with no traceback (:mod:`cosimrun.exits`). SIGPIPE itself keeps
    Python's handling (BrokenPipeError), which sockets, a sweep's dask connections among them, rely
    on. stdout goes to devnull so that the interpreter's last flush does not fail again (Python's
    documentation, "Note on SIGPIPE").
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_SIGPIPE)


@contextlib.contextmanager
def _closed_stdout_ends_quietly() -> Iterator[None]:
    """Inside the block, a write to a closed stdout ends the command with :func:`_stdout_closed` (inside a Hydra
    task too, where Hydra would report the error first)."""
    try:
        yield
    except BrokenPipeError:
        _stdout_closed()


def main() -> None:
    """Entry point of the ``cosimrun`` console script.

    SIGINT and SIGTERM are handled from the first instruction to the last: whatever the command is doing,
    it ends with one line and exit status 130 or 143 (:mod:`cosimrun.runner.signals`). Called from a
    ``__main__`` module (the console script, ``python -m cosimrun``), the handlers stay until the
    interpreter has exited; called from other code, they are restored when it returns.
    """
    from cosimrun.runner import signals

    signals.install()
    entry = sys._getframe(1).f_globals.get("__name__") == "__main__"
    try:
        signals.watch_crashes()
        status = _status(sys.argv[1:])
        signals.finish(status, keep=entry)  # no signal raises from here on
    except KeyboardInterrupt as exc:  # the only one the handlers raise (or code that raised one itself)
        if signals.received() is None:
            print(f"cosimrun: error: {type(exc).__name__} raised outside a run{f': {exc}' if str(exc) else ''}",
                  file=sys.stderr)
            signals.finish(EXIT_FAILED, keep=entry)
        signals.finish(signals.exit_code(exc), keep=entry)
    except Exception:  # what a library made of the interrupt (cleaning up after it) is the interrupt
        if signals.received() is None:
            raise
        signals.finish(signals.exit_code(), keep=entry)


def _status(argv: list[str]) -> int | str | None:
    """Run the command *argv*; its exit status (``SystemExit``'s code)."""
    try:
        with _closed_stdout_ends_quietly():
            try:
                _main(argv)
            finally:
                sys.stdout.flush()  # a closed stdout shows here, not in the interpreter's last flush
    except SystemExit as exc:
        return exc.code
    return 0


def _main(argv: list[str]) -> None:
    """The command named by *argv*: a result command, a listing, the help, or Hydra's runs and sweeps."""
    from cosimrun.console import warnings_as_lines
    from cosimrun.post import commands

    warnings_as_lines()  # notices outside a run (plugin discovery) as one line; a run's go to its log too

    if commands.is_command(argv):
        commands.main(argv)
    listing = [a for a in argv if a == "--list-components" or a.startswith("--list-components=")]
    if listing:
        _list_components(argv, listing[0])
        return
    if "--version" in argv:
        print(version())
        return
    if "--help" in argv or "-h" in argv:
        print(usage())
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
    with _reporting(argv):
        try:
            app()  # an interrupt goes on to main(), after the sweep's summary
        finally:
            signals.release()  # Hydra ended a run without its task: a signal held meanwhile is raised now
            failed = ledger.finish()  # a sweep's summary; 1 when one of its jobs failed
    if failed:
        sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()
