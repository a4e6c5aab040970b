"""Simulate one FMU on its default experiment: cosimrun simulate MODEL.fmu [--start T0] [--stop TF] [...].

The run goes from the FMU's DefaultExperiment startTime to its stopTime
(else 0 to 1 s) by its stepSize (else (stop - start) / 500); --start,
--stop, --step change them, --set NAME=VALUE sets a parameter or start value
(a number, true or false, a string, or a quantity such as '2 m'), or a
setting of the FMU component (tolerance, interface, integrator, ...). The
tolerance of the default experiment goes to the FMU (FMI 2.0 co-simulation's
fmi2SetupExperiment, FMI 3.0's fmi3EnterInitializationMode) and, for model
exchange, to the integrator (rtol). cosimrun records every communication
step, so the output interval is the step: --output-interval is the step too
(and must equal --step when both are given). The run is an ordinary cosimrun
run of one component (master gauss_seidel, or --master): results.h5 and
cosimrun.log in outputs/<MODEL>/<date_time>/ (as a cosimrun run writes its
directory), or in --output DIR, or --output FILE.h5; the summary on stdout.
Exit status: 0 complete, 1 failed, 2 bad input, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import logging.config
import math
import re
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from cosimrun.errors import ConfigError

OUTPUT_ROOT = "outputs"
"""Where a simulation writes its run directory unless --output says: ``outputs/<MODEL>/<date_time>/``."""
STEPS_WITHOUT_HINT = 500
"""Communication steps of a run whose FMU gives no stepSize (as FMPy samples its output)."""
DEFAULT_SPAN = 1.0
"""The length of a run whose FMU gives no stopTime, in seconds (as FMPy has it)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n", 2)[2]
    parser.add_argument("fmu", metavar="MODEL.fmu", help="the FMU (FMI 2.0 or 3.0, co-simulation or model exchange)")
    parser.add_argument("--start", type=_number("--start"), metavar="T0", help="start time in s")
    parser.add_argument("--stop", type=_number("--stop"), metavar="TF", help="stop time in s")
    parser.add_argument("--step", type=_number("--step"), metavar="DT", help="communication step in s")
    parser.add_argument("--output-interval", type=_number("--output-interval"), metavar="DT",
                        help="interval of the recorded samples in s: the communication step")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="values",
                        help="a parameter, start value or component setting (repeatable)")
    parser.add_argument("--master", default="gauss_seidel", choices=("gauss_seidel", "jacobi", "ijcsa", "hybrid"),
                        help="the master algorithm (default: gauss_seidel)")
    parser.add_argument("--output", "-o", metavar="DIR|FILE.h5",
                        help=f"the run directory, or the results file (default: {OUTPUT_ROOT}/MODEL/DATE_TIME/)")


def _number(option: str) -> Any:
    """An argparse type: a finite float, else the one-line error naming *option*."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        return value

    parse.__name__ = option
    return parse


def run(args: argparse.Namespace) -> int:
    """Simulate the FMU of *args*; the exit status."""
    from cosimrun.console import Console
    from cosimrun.errors import ResultsWriteError
    from cosimrun.exits import EXIT_FAILED, fail
    from cosimrun.runner import signals
    from cosimrun.runner.configtext import dump
    from cosimrun.runner.joblog import log_outcome, warnings_logged
    from cosimrun.runner.run import prepare, run_experiment

    cfg, name = experiment_config(args)
    out_dir, cfg["storage"]["file"] = _output(args, name)
    try:
        experiment = prepare(cfg)
    except ConfigError as exc:
        raise _as_option(exc, name) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    console = Console(experiment)
    with signals.handling(), _job_log(out_dir):
        try:
            with warnings_logged():
                outcome = run_experiment(cfg, out_dir, config_yaml=dump(cfg), overrides=args.values,
                                         progress=console.progress, experiment=experiment,
                                         compare_default_experiment=False)
        except ResultsWriteError as exc:
            fail(str(exc), EXIT_FAILED)
        with signals.shielded(deliver=False):  # the file is closed: a signal now only sets the exit status
            log_outcome(outcome)
            console.summary(outcome)
    if outcome.status == "interrupted":
        signals.reported()  # the summary said it
        return signals.exit_code(outcome.cause)
    return 0 if outcome.ok else EXIT_FAILED


def experiment_config(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The experiment (a config as ``prepare`` takes it) that simulates the FMU of *args*, and its component's
    name: run settings from the options, else the FMU's default experiment."""
    from cosimrun.fmi.description import read_fmu

    path = Path(args.fmu).expanduser()
    if not path.is_file():
        raise ConfigError(None, f"{args.fmu}: no such FMU file" if not path.exists() else f"{args.fmu}: not a file")
    model = read_fmu(path)
    default = model.default_experiment
    name = component_name(path)
    t0 = _first(args.start, default.get("t0"), 0.0)
    tf = _first(args.stop, default.get("tf"), t0 + DEFAULT_SPAN)
    if not tf > t0:
        raise ConfigError("--stop", f"{tf:g} is not after the start time {t0:g}")
    step, interval = args.step, args.output_interval
    if step is not None and interval is not None and step != interval:
        raise ConfigError("--output-interval", f"{interval:g} differs from --step {step:g}: cosimrun records every "
                                               "communication step, so the output interval is the step; give one")
    dt = _first(step if step is not None else interval, default.get("dt"), (tf - t0) / STEPS_WITHOUT_HINT)
    for option, value in (("--step", step), ("--output-interval", interval)):
        if value is not None and not value > 0:
            raise ConfigError(option, f"{value:g} must be positive")
    params: dict[str, Any] = {"path": str(path.resolve())}
    if "tolerance" in default:
        params["tolerance"] = default["tolerance"]
    for item in args.values:
        key, value = _setting(item, model)
        var = model.variables.get(key)
        if var is not None and var.causality != "parameter":  # an input's or a state's start value
            params.setdefault("start", {})[key] = value
        else:
            params[key] = value
    if params.get("tolerance") is not None and _interface(model, params) == "me":
        params.setdefault("rtol", params["tolerance"])
    cfg = {
        "name": name,
        "run": {"t0": t0, "tf": tf, "dt": dt},
        "components": {name: {"type": "fmu", "params": params}},
        "master": {"name": args.master},
        "storage": {},
    }
    return cfg, name


def component_name(path: Path) -> str:
    """The component (and experiment) name of the FMU at *path*: its file name without ``.fmu``, each character
    a component name cannot hold (``.``, ``/``, spaces ...) replaced by ``_``."""
    return re.sub(r"[^\w-]", "_", path.stem) or "fmu"


def _first(*values: float | None) -> float:
    """The first of *values* that is given (not ``None``), as a float."""
    return float(next(v for v in values if v is not None))


def _interface(model: Any, params: Mapping[str, Any]) -> str:
    """``cs`` or ``me``: the interface the FMU component runs (its ``interface`` setting, else co-simulation when
    the FMU offers it)."""
    return str(params.get("interface") or ("cs" if "cs" in model.interfaces else "me"))


def _setting(item: str, model: Any) -> tuple[str, Any]:
    """``(name, value)`` of ``--set NAME=VALUE``: VALUE a number, else read as YAML (true/false, strings, ...); a
    variable of a numeric FMI type takes a number or a quantity such as ``2 m`` only."""
    import yaml

    from cosimrun.core.units import Q_

    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError("--set", f"{item!r} is not NAME=VALUE")
    value: Any = _plain_number(text.strip())
    if value is None:
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
    var = model.variables.get(key)
    numeric = var is not None and var.type not in ("Boolean", "String")
    if numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
        try:
            quantity = Q_(str(value))
            ok = isinstance(quantity.magnitude, int | float) and not isinstance(value, bool)
        except Exception:
            ok = False
        if not ok:
            unit = f" [{var.unit}]" if var.unit else ""
            raise ConfigError(f"--set {key}", f"{text!r} is not a number (variable {key!r} is {var.fmi_type}{unit})")
    return key, value


def _plain_number(text: str) -> int | float | None:
    """*text* as an int or a float (``1e-5`` too, which YAML reads as a string); ``None`` if it is neither."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return None


def _as_option(exc: ConfigError, name: str) -> ConfigError:
    """*exc* of the composed experiment keyed by the option that gave the value: ``--set NAME``, ``--start`` ..."""
    key = exc.key or ""
    prefix = f"components.{name}.params."
    if key.startswith(f"{prefix}start."):
        exc.key = f"--set {key[len(prefix) + len('start.'):]}"
    elif key == f"{prefix}start":  # start values of inputs and states: the message names the variable
        exc.key = "--set"
    elif key.startswith(prefix):
        exc.key = f"--set {key[len(prefix):]}"
    elif key in ("run.t0", "run.tf", "run.dt"):
        exc.key = {"run.t0": "--start", "run.tf": "--stop", "run.dt": "--step"}[key]
    elif key == "storage.file":
        exc.key = "--output"
    elif key.startswith(f"components.{name}"):
        exc.key = None
    return exc


def _output(args: argparse.Namespace, name: str) -> tuple[Path, str]:
    """The run directory and the results file name: --output (a directory, or a file ending in .h5, .hdf5 or
    .nc), else ``outputs/<name>/<date_time>/`` and ``results.h5``."""
    from cosimrun.config.build import RESULTS_SUFFIXES

    if args.output is None:
        return Path(OUTPUT_ROOT) / name / datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f"), "results.h5"
    out = Path(args.output).expanduser()
    if out.suffix.lower() in RESULTS_SUFFIXES:
        return out.parent, out.name
    if out.exists() and not out.is_dir():
        raise ConfigError("--output", f"{args.output} is a file; name a directory, or a results file ending in "
                                      f"{', '.join(RESULTS_SUFFIXES)}")
    return out, "results.h5"


@contextlib.contextmanager
def _job_log(out_dir: Path) -> Iterator[None]:
    """The logging of a ``cosimrun`` run (``hydra.job_logging`` of ``conf/config.yaml``): warnings on stderr as
    one line, warnings and the outcome in ``<out_dir>/cosimrun.log``."""
    import yaml

    text = (resources.files("cosimrun.conf") / "config.yaml").read_text()
    config = yaml.safe_load(text)["hydra"]["job_logging"]
    config["handlers"]["file"]["filename"] = str(out_dir / "cosimrun.log")
    config["handlers"]["console"]["stream"] = sys.stderr
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logging.config.dictConfig(config)
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
