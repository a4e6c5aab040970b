"""Run one experiment end to end: build, simulate, stream results to HDF5."""

from __future__ import annotations

import contextlib
import math
import time
import traceback as _traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.checkpoint.schedule import checkpoint_settings, parse_reference
from cosimrun.config.build import Experiment, build_experiment, recorded_ports
from cosimrun.console import notice
from cosimrun.core import crashsite
from cosimrun.core.component import StopRequest
from cosimrun.errors import (
    ComponentStateError,
    ConfigError,
    LoopConvergenceError,
    ResultsWriteError,
    SimulationError,
)
from cosimrun.runner import signals
from cosimrun.runner.configtext import relocate_paths
from cosimrun.runner.inputs import recorded as recorded_inputs
from cosimrun.storage import HDF5Writer
from cosimrun.storage.checkpoints import ContinuingSink, Parent, read_parent, write_checkpoint
from cosimrun.storage.chunkfile import current_chunk, drop_ref, write_ref
from cosimrun.storage.hdf5 import chunk_rows, partial_path, run_address, write_run_summary
from cosimrun.storage.summary import results_attrs
from cosimrun.system import Recorder, RunResult
from cosimrun.system.recorder import check_resumable, port_layout

Progress = Callable[[float], None]


@dataclass
class RunOutcome:
    """What a run left behind."""

    experiment: str
    status: str
    """``complete``, ``failed`` or ``interrupted``."""
    path: Path
    """The results file: ``<storage.file>``, or its ``.partial`` file when a write error left it unclosed; under
    ``storage.layout: per_chunk`` in a chunk of a sweep, the address ``<chunk file>::/runs/<job>`` of the job's
    group (:mod:`cosimrun.storage.chunkfile`)."""
    master: str
    result: RunResult | None
    error: str | None
    wall_time_s: float
    failed_at: float | None = None
    final_values: dict[str, Any] = field(default_factory=dict)
    """``{"comp.port": last value}`` of the recorded ports (see ``HDF5Writer.final_values``)."""
    cause: BaseException | None = None
    """The exception that ended the run early (without its traceback, which ``error``'s file keeps)."""
    file_status: str = ""
    """The status the results file records: ``status``, or ``running`` when it could not be closed."""
    inputs: str = ""
    """The files the run read besides its config, by content (:func:`cosimrun.runner.inputs.recorded`; also the
    results' root attribute ``inputs``)."""
    stopped: StopRequest | None = None
    """Set when a component asked to end the run (an FMU's ``terminateSimulation``): the run completed there, at
    ``stopped.time``; the file's root attributes ``stop_time``, ``stop_component`` and ``stop_reason`` say so."""

    @property
    def ok(self) -> bool:
        return self.status == "complete"


def prepare(cfg: Mapping[str, Any], base_dir: str | Path | None = None) -> Experiment:
    """Build and initialize the experiment (only build it for ``action=describe``), turning structural errors into
    :class:`ConfigError`; with ``run.checkpoint`` every component must give its state, and ``run.restart``'s
    checkpoint is read and restored (refused in one line when missing, damaged or of another system).

    Relative file paths of components (an FMU's or a table's ``path``) are
    resolved against *base_dir* when it is given (see :func:`relocate_paths`),
    else against the working directory when the component reads the file.
    :func:`~cosimrun.runner.configtext.resolved` has already resolved them
    against the experiment file's directory in a ``cosimrun`` run.
    """
    if base_dir is not None:
        cfg = relocate_paths(cfg, base_dir)
    exp = build_experiment(cfg)
    if exp.action == "describe":  # nothing runs: no component starts (an FMU's library is not even loaded)
        return exp
    try:
        exp.system.initialize(exp.run.t0, exp.master)
    except LoopConvergenceError as exc:
        raise ConfigError("master", f"the initial algebraic loop did not converge: {exc}") from None
    try:
        exp.system.check_run(exp.run.t0, exp.run.tf, exp.run.dt)
    except ConfigError as exc:
        raise (exc.within("master") if exc.key else exc) from None
    exp.recorded = recorded_ports(exp.system, exp.storage.record)
    if checkpoint_settings(exp.run.checkpoint).on:
        try:
            exp.system.check_checkpoints()
        except ComponentStateError as exc:
            raise ConfigError("run.checkpoint", str(exc)) from None
    exp.parent = _parent(exp)
    return exp


def run_experiment(
    cfg: Mapping[str, Any],
    out_dir: str | Path,
    *,
    config_yaml: str = "",
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    experiment: Experiment | None = None,
    compare_default_experiment: bool = True,
) -> RunOutcome:
    """Simulate the experiment *cfg* and write ``<out_dir>/<storage.file>``.

    Configuration errors raise :class:`ConfigError` before any file is created,
    and :class:`ResultsWriteError` when the file cannot be created. However the
    run ends afterwards, it is not raised: the file is closed with everything
    computed up to the end (see :class:`RunOutcome`). An exception from a
    component (``SystemExit``, ``GeneratorExit`` and a ``KeyboardInterrupt`` it
    raised itself included) makes the run ``failed`` with the error and
    traceback; a signal (Ctrl-C, and SIGTERM's
    :class:`~cosimrun.runner.signals.Terminated` under the ``cosimrun`` command,
    see :func:`~cosimrun.runner.signals.from_signal`) makes it ``interrupted``,
    also when it arrives while the file is created; a write error makes it ``failed`` with
    the file as far as it was flushed (see :class:`~cosimrun.storage.HDF5Writer`).
    A component that asks to stop (an FMU's ``terminateSimulation``) ends the
    run ``complete`` at that time (:attr:`RunOutcome.stopped`).

    numpy's floating-point warnings are silenced during the simulation: the
    recorder ends the run at the first NaN or infinity and names it. With
    ``storage.allow_nonfinite`` they are left on, as the only report of where
    such values arise.

    With *compare_default_experiment*, a system of one FMU whose ``run``
    settings differ from the FMU's default experiment gets a notice saying so
    (``cosimrun simulate`` runs the default experiment unless told otherwise).
    """
    exp = experiment or prepare(cfg)
    parent = exp.parent or _leftover(exp, Path(out_dir), config_yaml)
    if compare_default_experiment:
        differs = default_experiment_notice(exp)
        if differs is not None:
            notice(differs)
    chunk = current_chunk() if exp.storage.layout == "per_chunk" else None
    inputs = recorded_inputs(cfg)
    with signals.shielded(deliver=False):  # from the file's creation to its closing, an interrupt lands only in
        # the simulation; one that arrives later is the caller's to see (signals.received)
        shared = {} if chunk is None else {"file": chunk.file(), "group": chunk.group}
        if chunk is None:
            drop_ref(out_dir)
        else:  # the job's folder points at its group from the start, as a job's own file would be there
            write_ref(out_dir, run_address(shared["file"].filename, chunk.group))
        writer = HDF5Writer(
            Path(out_dir) / exp.storage.file if chunk is None else Path(shared["file"].filename),
            experiment=exp.name,
            attrs={
                "config_yaml": config_yaml,
                "overrides": " ".join(overrides),
                "t0": exp.run.t0,
                "tf": exp.run.tf,
                "dt": exp.run.dt,
                "master": exp.master.name,
                "decimate": exp.storage.decimate,
                "inputs": inputs or None,
                **(parent.attrs if parent is not None else {}),
            },
            compression=exp.storage.compression,
            compression_opts=exp.storage.compression_level if exp.storage.compression == "gzip" else None,
            chunk_size=chunk_rows(_expected_samples(exp)),
            components=None if parent is not None else {
                name: port_layout(exp.system.components[name], ports) for name, ports in exp.recorded.items()
            },
            **shared,
        )
        outcome = _simulate(exp, writer, progress, parent)
    outcome.inputs = inputs
    return outcome


def _expected_samples(exp: Experiment) -> int:
    """The samples a run records at its communication points on the grid of ``run.dt`` (events, a variable step
    and a restart's earlier samples aside): what its results file's chunks are sized for."""
    steps = (exp.run.tf - exp.run.t0) / exp.run.dt
    return int(min(steps, 2**40)) // exp.storage.decimate + 2


def _parent(exp: Experiment) -> Parent | None:
    """The checkpoint ``run.restart`` (or ``run.start_from``, a fork with other parameters) names, read and
    restored into the system (refused in one line before any file is written: missing, damaged, of another system
    or settings, or a parameter that cannot change); ``None`` without one."""
    fork = exp.run.start_from is not None
    reference = exp.run.start_from if fork else exp.run.restart
    if reference is None:
        return None
    key = "run.start_from" if fork else "run.restart"
    path, at = parse_reference(reference, key)
    parent = read_parent(path, at, key)
    check_resumable(parent.state.recorder(), exp.storage.decimate)
    try:
        exp.system.restore_state(parent.state, fork=fork)
    except ConfigError as exc:
        raise ConfigError(key, f"{parent.path}: {exc}") if exc.key is None else exc from None
    return parent


def _leftover(exp: Experiment, out_dir: Path, config_yaml: str) -> Parent | None:
    """The last checkpoint of the unfinished results file (``.partial``) a killed run of this very config left in
    *out_dir*, restored into the system: a run with ``run.checkpoint`` run again into its directory (a sweep's
    resume reruns a killed job there) continues from it instead of starting again. ``None`` (a run from the
    start) when there is none, or it is damaged or of another config (a notice says why)."""
    if not config_yaml or not checkpoint_settings(exp.run.checkpoint).on:
        return None
    path = partial_path(out_dir / exp.storage.file)
    if not path.is_file():
        return None
    try:
        if results_attrs(path, ("config_yaml",)).get("config_yaml") != config_yaml:
            return None
        parent = read_parent(path, None)
        exp.system.restore_state(parent.state)
    except (OSError, ConfigError) as exc:
        notice(f"the unfinished results file {path} is not continued, the run starts again: {exc}")
        return None
    notice(f"continuing the unfinished run of {path} from its checkpoint at t={parent.state.time:.12g}")
    return parent


def _simulate(exp: Experiment, writer: HDF5Writer, progress: Progress | None, parent: Parent | None = None
              ) -> RunOutcome:
    """Run *exp* into *writer* and close it (inside :func:`signals.shielded`; the simulation is interruptible);
    a restart continues *parent*."""
    system = exp.system
    start = time.perf_counter()
    crashsite.begin(writer.path, system.components)  # for a crash in native code: where it was (removed at the end)
    try:
        # the file declares what the run records before an interrupt held back since its creation lands (an
        # interrupted file lists its components, with the samples it got: none then)
        sink = writer if parent is None else ContinuingSink(writer, parent)
        recorder = Recorder(sink, flush_interval=exp.storage.flush_interval,
                            allow_nonfinite=exp.storage.allow_nonfinite, flush_seconds=exp.storage.flush_seconds,
                            decimate=exp.storage.decimate)
        recorder.attach(system.components, exp.recorded)
        with signals.interruptible():
            quiet = contextlib.nullcontext() if exp.storage.allow_nonfinite else np.errstate(all="ignore")
            with quiet:
                result = system.run(
                    exp.run.t0, exp.run.tf, exp.run.dt, master=exp.master, progress=_watching(progress),
                    recorder=recorder, checkpoint=checkpoint_settings(exp.run.checkpoint),
                    on_checkpoint=lambda state: write_checkpoint(writer, state),
                )
            signals.check()
        write_run_summary(writer, result)
        stopped = result.stopped
        if stopped is not None:
            writer.set_attrs(stop_time=stopped.time, stop_component=stopped.component, stop_reason=stopped.reason)
        writer.close("complete")
    except KeyboardInterrupt as exc:
        if signals.from_signal(exc):
            return _abort(exp, writer, start, "interrupted", signals.message(exc), "", exc)
        return _abort(exp, writer, start, "failed", _exit_message(exc, exp), _traceback.format_exc(), exc)
    except (SystemExit, GeneratorExit) as exc:  # a component's: the run fails, the command goes on
        return _abort(exp, writer, start, "failed", _exit_message(exc, exp), _traceback.format_exc(), exc)
    except Exception as exc:  # a failing component must not lose what was computed
        if signals.received() is not None and not isinstance(exc, ResultsWriteError):
            # a library cleaning up after the interrupt failed in turn: the run was interrupted
            return _abort(exp, writer, start, "interrupted", signals.message(), "", exc)
        message = str(exc) if isinstance(exc, ResultsWriteError) else f"{type(exc).__name__}: {exc}"
        when = exc.time if isinstance(exc, SimulationError) else None
        return _abort(exp, writer, start, "failed", message, _traceback.format_exc(), exc, when)
    finally:
        crashsite.end()
        system.free()
    wall = time.perf_counter() - start
    return RunOutcome(exp.name, "complete", Path(writer.address), exp.master.name, result, None, wall,
                      final_values=writer.final_values(), file_status="complete", stopped=stopped)


def default_experiment_notice(exp: Experiment) -> str | None:
    """The notice for an experiment whose ``run.t0``, ``run.tf`` or ``run.dt`` differs from the DefaultExperiment
    (startTime, stopTime, stepSize) of its only FMU component; ``None`` when they agree, the FMU gives none, or
    the system has another number of FMUs."""
    from cosimrun.components.fmu.base import FMUBase
    from cosimrun.fmi.description import DEFAULT_EXPERIMENT

    fmus = [c for c in exp.system.components.values() if isinstance(c, FMUBase)]
    if len(fmus) != 1 or fmus[0].model is None:
        return None
    fmu = fmus[0]
    default = fmu.model.default_experiment
    differ = []
    for key in ("t0", "tf", "dt"):
        given, value = getattr(exp.run, key), default.get(key)
        if value is not None and not math.isclose(given, value, rel_tol=1e-12, abs_tol=0.0):
            differ.append((f"run.{key}", given, DEFAULT_EXPERIMENT[key], value))
    if not differ:
        return None
    settings = [f"{key}={given:g}" for key, given, _, _ in differ]
    ours = " and ".join(filter(None, (", ".join(settings[:-1]), settings[-1])))
    theirs = ", ".join(f"{attr}={value:g}" for _, _, attr, value in differ)
    fix = " ".join(f"{key}={value:g}" for key, _, _, value in differ)
    return (f"experiment {exp.name!r}: {ours} differ{'s' if len(differ) == 1 else ''} from the default experiment of "
            f"its FMU {fmu.name!r} ({Path(fmu.model.path).name}: {theirs}); {fix} runs the FMU as its default "
            "experiment does")


def _watching(progress: Progress | None) -> Progress:
    """*progress* preceded by :func:`signals.check`, so an interrupt Python dropped still ends the run."""

    def report(t: float) -> None:
        signals.check()
        if progress is not None:
            progress(t)

    return report


def _failed_at(exp: Experiment) -> float:
    """Where the components are: the time a run that stopped early reached."""
    return max((c.t for c in exp.system.components.values()), default=exp.run.t0)


def _exit_message(exc: BaseException, exp: Experiment) -> str:
    """``SystemExit: component 'x' called sys.exit(0) at t=...`` (the component when the traceback shows it); also
    for ``GeneratorExit`` and a ``KeyboardInterrupt`` that code raised (no signal did)."""
    culprit = _culprit(exc, exp)
    if isinstance(exc, SystemExit):
        what = f"called sys.exit({'' if exc.code is None else repr(exc.code)})"
    else:
        what = f"raised {type(exc).__name__}{f'({str(exc)!r})' if str(exc) else ''}"
    who = f"component {culprit!r}" if culprit else "the run"
    return f"{type(exc).__name__}: {who} {what} at t={_failed_at(exp):.12g}"


def _culprit(exc: BaseException, exp: Experiment) -> str | None:
    """The outermost of the system's components whose method is on *exc*'s traceback."""
    names = {id(c): name for name, c in exp.system.components.items()}
    tb = exc.__traceback__
    while tb is not None:
        name = names.get(id(tb.tb_frame.f_locals.get("self")))
        if name is not None:
            return name
        tb = tb.tb_next
    return None


def _abort(
    exp: Experiment,
    writer: HDF5Writer,
    start: float,
    status: str,
    message: str,
    trace: str,
    cause: BaseException,
    failed_at: float | None = None,
) -> RunOutcome:
    """Close the file as *status* with what was computed; *failed_at* is the error's time when it names one."""
    system = exp.system
    if failed_at is None:
        failed_at = _failed_at(exp)
    try:
        writer.write_mode_switches(system.mode_switches())
        writer.write_stats(system.master_run.stats.as_dict() if system.master_run is not None else {})
    except ResultsWriteError as exc:
        if exc is not cause:
            message = f"{message} (and saving the partial results failed: {exc})"
    except Exception as exc:  # keep the original error; note that saving the rest failed too
        message = f"{message} (and saving the partial results failed: {type(exc).__name__}: {exc})"
    finally:
        path = writer.close(status, error=message, traceback=trace)
    file_status = status
    if path == writer.path:
        path = Path(writer.address)
    else:
        file_status = "running"
        harm = ", and may be unreadable" if writer.damaged else ", kept up to its last flush"
        message = f"{message}; the results file is incomplete (status running{harm})"
    wall = time.perf_counter() - start
    return RunOutcome(exp.name, status, path, exp.master.name, None, message, wall, failed_at=failed_at,
                      final_values=writer.final_values(), cause=cause.with_traceback(None), file_status=file_status)
