"""Run one experiment end to end: build, simulate, stream results to HDF5."""

from __future__ import annotations

import time
import traceback as _traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosimrun.config.build import Experiment, build_experiment, recorded_ports
from cosimrun.errors import ConfigError, LoopConvergenceError, MissingInitialValueError, SimulationError
from cosimrun.storage import HDF5Writer
from cosimrun.storage.hdf5 import write_run_summary
from cosimrun.system import Recorder, RunResult

Progress = Callable[[float], None]


@dataclass
class RunOutcome:
    """What a run left behind."""

    experiment: str
    status: str
    """``complete``, ``failed`` or ``interrupted``."""
    path: Path
    master: str
    result: RunResult | None
    error: str | None
    wall_time_s: float
    failed_at: float | None = None
    final_values: dict[str, Any] = field(default_factory=dict)
    """``{"comp.port": last value}`` of the recorded ports (see ``HDF5Writer.final_values``)."""

    @property
    def ok(self) -> bool:
        return self.status == "complete"


def prepare(cfg: Mapping[str, Any]) -> Experiment:
    """Build and initialize the experiment, turning structural errors into :class:`ConfigError`."""
    exp = build_experiment(cfg)
    try:
        exp.system.initialize(exp.run.t0, exp.master)
    except MissingInitialValueError as exc:
        comp, _, name = exc.port.partition(".")
        raise ConfigError(f"components.{comp}.initial.{name}", str(exc)) from None
    except LoopConvergenceError as exc:
        raise ConfigError("master", f"the initial algebraic loop did not converge: {exc}") from None
    exp.recorded = recorded_ports(exp.system, exp.storage.record)
    return exp


def run_experiment(
    cfg: Mapping[str, Any],
    out_dir: str | Path,
    *,
    config_yaml: str = "",
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    experiment: Experiment | None = None,
) -> RunOutcome:
    """Simulate the experiment *cfg* and write ``<out_dir>/<storage.file>``.

    Configuration errors raise :class:`ConfigError` before any file is created.
    A failure during the simulation is not raised: the file keeps everything
    computed up to it, with status ``failed``, the error and the traceback.
    """
    exp = experiment or prepare(cfg)
    path = Path(out_dir) / exp.storage.file
    writer = HDF5Writer(
        path,
        experiment=exp.name,
        attrs={
            "config_yaml": config_yaml,
            "overrides": " ".join(overrides),
            "t0": exp.run.t0,
            "tf": exp.run.tf,
            "dt": exp.run.dt,
            "master": exp.master.name,
        },
        compression=exp.storage.compression,
        compression_opts=exp.storage.compression_level if exp.storage.compression == "gzip" else None,
    )
    system = exp.system
    recorder = Recorder(writer, flush_interval=exp.storage.flush_interval, allow_nonfinite=exp.storage.allow_nonfinite)
    recorder.attach(system.components, exp.recorded)
    start = time.perf_counter()
    result: RunResult | None = None
    try:
        try:
            result = system.run(
                exp.run.t0, exp.run.tf, exp.run.dt, master=exp.master, progress=progress, recorder=recorder
            )
        except KeyboardInterrupt:
            return _abort(exp, writer, path, start, "interrupted", "interrupted by the user", "")
        except Exception as exc:  # a failing component must not lose what was computed
            message = f"{type(exc).__name__}: {exc}"
            when = exc.time if isinstance(exc, SimulationError) else None
            return _abort(exp, writer, path, start, "failed", message, _traceback.format_exc(), when)
        write_run_summary(writer, result)
        writer.close("complete")
    finally:
        system.free()
    wall = time.perf_counter() - start
    return RunOutcome(exp.name, "complete", path, exp.master.name, result, None, wall,
                      final_values=writer.final_values())


def _abort(
    exp: Experiment,
    writer: HDF5Writer,
    path: Path,
    start: float,
    status: str,
    message: str,
    trace: str,
    failed_at: float | None = None,
) -> RunOutcome:
    """Close the file as *status* with what was computed; *failed_at* is the error's time when it names one."""
    system = exp.system
    if failed_at is None:
        failed_at = max((c.t for c in system.components.values()), default=exp.run.t0)
    try:
        writer.write_mode_switches(system.mode_switches())
        writer.write_stats(exp.master.stats.as_dict())
    except Exception as exc:  # keep the original error; note that saving the rest failed too
        message = f"{message} (and saving the partial results failed: {type(exc).__name__}: {exc})"
    finally:
        writer.close(status, error=message, traceback=trace)
    wall = time.perf_counter() - start
    return RunOutcome(exp.name, status, path, exp.master.name, None, message, wall, failed_at=failed_at,
                      final_values=writer.final_values())
