"""Sweep jobs run as ensembles: which jobs group (:func:`plan`), how a group runs on a worker
(:func:`run_ensemble_task`) and which members a resume takes over (:class:`Finished`).

The dask launcher groups jobs whose overrides differ only in numbers given to component parameters
(``components.<c>.params.<p>=<number>``, or of a multi component's mode ``components.<c>.modes.<m>.params.<p>``,
or its switch settings ``components.<c>.selector.lower|upper`` and ``components.<c>.hysteresis.dwell_time``)
and whose other overrides are the same. A group runs as ensembles of at
most ``hydra.launcher.ensemble_size`` members when its first job's experiment leaves nothing an ensemble's file
does not hold (every recorded port a real output or an event port, no checkpoints or restarts,
``storage.allow_nonfinite`` off, no global-error estimate) and the swept values change nothing else of the
resolved config (no interpolation reads them); anything else runs as ordinary jobs, and the reason is said once.
The members of an ensemble are stepped at once as arrays when the vectorized engine steps the system
(:func:`not_vectorized`: :func:`cosimrun.ensemble.run.refuse_system`, no algebraic loop; with state events or mode
switches each member records the samples its job records, at its event instants too); otherwise they run one
after the other in the ensemble's task (:mod:`cosimrun.ensemble.serial`: an FMU, an implicit integrator, ...),
each built from its job's config, and the reason is said once. Each ensemble writes one file,
``<sweep dir>/ensembles/<first job>-<last job>.<launch>.h5``
(:mod:`cosimrun.storage.ensemble`); each member is a row of the sweep index whose ``path`` is that file and
whose ``member`` is its column there. A member that fails in its ensemble runs again as its own job, so its row,
error and results file are those of an ordinary job; an ensemble that cannot run at all runs its members as
ordinary jobs, and so does the launcher with the members not finished of an ensemble whose worker died or that ran
past ``hydra.launcher.timeout`` (:func:`complete_members` tells which its file holds as complete).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cosimrun.runner.inputs import changed as changed_input
from cosimrun.runner.inputs import recorded as recorded_inputs
from cosimrun.runner.outcome import JobOutcome, describe_exception

if TYPE_CHECKING:
    from hydra.types import TaskFunction

    from cosimrun.runner.compose import JobComposer, JobSpec
    from cosimrun.runner.worker import JobPayload

ENSEMBLE_DIR = "ensembles"
"""The folder of a sweep directory that holds its ensembles' files."""
CONFIG_KEY = "sweep_config_key"
"""Attribute of an ensemble file: the hash of its members' common resolved config (see :func:`config_key`)."""
INPUTS = "inputs"
"""An ensemble file's attribute: the files its members read besides their config, by content
(:func:`cosimrun.runner.inputs.recorded`); a resume takes over no member of a file whose inputs changed."""
MIN_SPLIT = 64
"""Members an ensemble keeps at least when a group is split to give every worker one."""
HISTORY_BYTES = 256 << 20
"""The histories one ensemble keeps in memory at most (members x samples x recorded ports x 8 bytes): a group
whose runs record many samples runs in smaller ensembles than ``ensemble_size``."""
SERIAL_PARTS = 4
"""Ensembles per worker a group whose members run one after the other is split into at least (while each keeps
:data:`SERIAL_MIN_SPLIT` members): such a task takes as long as its members together, and the last ones should not
hold back the end of a sweep."""
SERIAL_MIN_SPLIT = 8
"""Members an ensemble run one after the other keeps at least when a group is split for the workers: its task's own
cost (the config resolved, the file written: tens of milliseconds) is shared by them."""
_PARAMETER = re.compile(r"components\.[^.]+\.(?:(?:modes\.[^.]+\.)?params\.[^.]+|selector\.(?:lower|upper)|"
                        r"hysteresis\.dwell_time)")
RAN_ALONE = "ran as its own job: {cause}"


@dataclass
class Group:
    """Jobs that may run as one ensemble: the same other overrides, numbers for the same parameters."""

    keys: tuple[str, ...]
    """The swept parameters, as config paths (``components.mass1.params.stiffness``)."""
    positions: list[int] = field(default_factory=list)
    values: dict[int, tuple[float, ...]] = field(default_factory=dict)
    """Position of a job -> its values of :attr:`keys`."""
    config_key: str = ""
    largest: int = 0
    """Most members per ensemble that keep the histories within :data:`HISTORY_BYTES` (0: not known yet)."""
    serial: str = ""
    """Why the members are not stepped at once, as arrays ("" when they are): they run one after the other
    (:mod:`cosimrun.ensemble.serial`)."""


@dataclass
class Ensemble:
    """One ensemble of a sweep: its members' positions and where its file goes."""

    group: Group
    positions: list[int]
    path: Path


@dataclass
class Plan:
    """What :func:`plan` decided: the ensembles, by the position of each member."""

    ensembles: list[Ensemble] = field(default_factory=list)
    of: dict[int, Ensemble] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    """Why groups of jobs run as ordinary jobs -> how many jobs."""
    serial: dict[str, int] = field(default_factory=dict)
    """Why groups of jobs run as ensembles of members one after the other -> how many jobs."""

    def notices(self) -> list[str]:
        """One line per reason (mostly one in all)."""
        return [*(f"{n} sweep jobs run as separate jobs, not as ensembles: {why}" for why, n in self.reasons.items()),
                *(f"{n} sweep jobs run as ensembles of members one after the other (not as arrays: {why})"
                  for why, n in self.serial.items())]


def _split(overrides: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[float, ...]] | None:
    """``(other overrides, swept parameter keys, their values)`` of a job's overrides; None when unparsable."""
    from hydra.core.override_parser.types import OverrideType, ValueType

    from cosimrun.runner.compose import parsed_overrides

    try:
        parsed = parsed_overrides(overrides)
    except Exception:  # Hydra reports it as the job's error
        return None
    others, keys, values = [], [], []
    for ov in parsed:
        value = ov.value() if ov.value_type == ValueType.ELEMENT else None
        if (ov.type == OverrideType.CHANGE and ov.package is None and ov.value_type == ValueType.ELEMENT
                and _PARAMETER.fullmatch(ov.key_or_group or "") and isinstance(value, int | float)
                and not isinstance(value, bool) and math.isfinite(value)):
            keys.append(ov.key_or_group)
            values.append(value)
        else:
            others.append(ov.input_line)
    return tuple(others), tuple(keys), tuple(values)


def representatives(batch: Sequence[Sequence[str]]) -> list[Sequence[str]]:
    """The jobs of *batch* to check for composition errors: every job, except that of the jobs with the same other
    overrides and numbers for the same component parameters only the first (a value for a key of a component's
    ``params``, which takes any value, composes as any other number for it does)."""
    seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    out = []
    for overrides in batch:
        split = _split(overrides)
        if split is not None and split[1]:
            if (split[0], split[1]) in seen:
                continue
            seen.add((split[0], split[1]))
        out.append(overrides)
    return out


def plan(jobs: Sequence[tuple[int, int, list[str]]], composer: JobComposer, size: int, workers: int,
         sweep_dir: Path) -> Plan:
    """The ensembles of *jobs* (``(position, job number, overrides)``) of at most *size* members, split so that
    each of *workers* gets one while an ensemble keeps :data:`MIN_SPLIT` members; groups that cannot run as
    ensembles are left to run as jobs, their reason kept once."""
    result = Plan()
    if size <= 0:
        return result
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], Group] = {}
    overrides_at = {pos: (num, overrides) for pos, num, overrides in jobs}
    for pos, _num, overrides in jobs:
        split = _split(overrides)
        if split is None or not split[1]:
            continue
        others, keys, values = split
        group = groups.setdefault((others, keys), Group(keys))
        group.positions.append(pos)
        group.values[pos] = values
    launch = uuid.uuid4().hex[:8]
    hooks = _job_hooks(composer)
    for group in groups.values():
        if len(group.positions) < 2:
            continue
        first, last = overrides_at[group.positions[0]], overrides_at[group.positions[-1]]
        why = hooks or " ".join(_refusal(composer, group, first, last).split("\n")[:1])  # one line
        if why:
            result.reasons[why] = result.reasons.get(why, 0) + len(group.positions)
            continue
        count = len(group.positions)
        most = max(2, min(size, group.largest or size))
        spread, least = max(workers, 1), MIN_SPLIT
        if group.serial:
            spread, least = spread * SERIAL_PARTS, SERIAL_MIN_SPLIT
        parts = max(math.ceil(count / most), min(spread, count // least))
        bounds = [round(i * count / parts) for i in range(parts + 1)]
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            positions = group.positions[lo:hi]
            if len(positions) < 2:  # one member: an ordinary job
                continue
            if group.serial:
                result.serial[group.serial] = result.serial.get(group.serial, 0) + len(positions)
            nums = [overrides_at[p][0] for p in positions]
            path = sweep_dir / ENSEMBLE_DIR / f"{nums[0]}-{nums[-1]}.{launch}.h5"
            ensemble = Ensemble(group, positions, path)
            result.ensembles.append(ensemble)
            for p in positions:
                result.of[p] = ensemble
    return result


def _job_hooks(composer: JobComposer) -> str:
    """Why no job of the sweep runs in an ensemble when a callback of ``hydra.callbacks`` acts on each job
    (``on_job_start``, ``on_job_end``: Hydra calls them per job, an ensemble's members are no jobs); "" otherwise."""
    from cosimrun.runner.worker import idle_hook

    callbacks = composer.hydra_context.callbacks
    hooks = [hook for hook in ("on_job_start", "on_job_end") if not idle_hook(callbacks, hook)]
    return f"hydra.callbacks: a callback defines {' and '.join(hooks)}, which Hydra calls for each job" if hooks else ""


def _resolved(spec: JobSpec) -> dict[str, Any]:
    """The job's task config resolved as its run resolves it (:func:`cosimrun.runner.resume.expected_config_yaml`)."""
    from omegaconf import open_dict, read_write

    from cosimrun.runner.configtext import resolved
    from cosimrun.runner.worker import hydra_config

    task_cfg, config = spec.payload().configs()
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(spec.job_dir)
    with hydra_config(config):
        return resolved(task_cfg)[0]


def _masked(plain: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """*plain* with the swept parameters *keys* set to None (a copy)."""
    out = json.loads(json.dumps(plain, default=str))
    for key in keys:
        *path, last = key.split(".")
        node = out
        for part in path:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict) and last in node:
            node[last] = None
    return out


def config_key(plain: dict[str, Any], keys: Sequence[str]) -> str:
    """The hash of a job's resolved config without its swept values: the same for every member of a group."""
    text = json.dumps([list(keys), _masked(plain, keys)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _refusal(composer: JobComposer, group: Group, first: tuple[int, list[str]], last: tuple[int, list[str]]) -> str:
    """Why *group* cannot run as ensembles ("" when it can); sets its :attr:`Group.config_key`."""
    from cosimrun.config.build import build_experiment
    from cosimrun.errors import CosimrunError

    try:
        plain = _resolved(composer.compose(first[1], first[0]))
        group.config_key = config_key(plain, group.keys)
        if config_key(_resolved(composer.compose(last[1], last[0])), group.keys) != group.config_key:
            return "their configs differ in more than the swept parameter values"
        for key in group.keys:  # an interpolation that reads a swept value changes with it
            probe = [o for o in first[1] if not o.startswith(f"{key}=")] + [f"{key}=1234.5678"]
            if config_key(_resolved(composer.compose(probe, first[0])), group.keys) != group.config_key:
                return f"{key}: another value of the config is computed from it"
        exp = build_experiment(plain)
        try:
            return _experiment_refusal(exp, plain, group)
        finally:
            _release(exp)
    except CosimrunError as exc:
        return str(exc)
    except Exception as exc:  # the job itself will report it
        return f"{type(exc).__name__}: {exc}"


def _release(exp: Any) -> None:
    """Reset the initialized components of the experiment *exp* and free its system's resources."""
    for comp in exp.system.components.values():
        if comp.is_initialized:
            comp.reset()
    exp.system.free()


def _experiment_refusal(exp: Any, plain: dict[str, Any], group: Group) -> str:
    """Why the built experiment *exp* (of the resolved config *plain*) cannot run as an ensemble ("" if it can);
    sets :attr:`Group.largest` and :attr:`Group.serial`."""
    from cosimrun.config.build import recorded_ports
    from cosimrun.core.ports import PortType

    if exp.action != "run":
        return f"action: {exp.action!r}"
    run = plain.get("run", {})
    if any(run.get(k) for k in ("restart", "start_from")) or any(
            (run.get("checkpoint") or {}).get(k) for k in ("every", "wall", "at")):
        return "run: checkpoints and restarts run as separate jobs"
    if exp.storage.allow_nonfinite:
        return "storage.allow_nonfinite: ensembles stop a member at its first non-finite value"
    exp.system.initialize(exp.run.t0, exp.master)
    group.serial = " ".join(not_vectorized(exp).split("\n")[:1])
    if group.serial and getattr(exp.master, "global_error", "none") != "none":
        return f"master.global_error: {exp.master.global_error!r}: ensembles do not estimate the global error"
    recorded = recorded_ports(exp.system, list(exp.storage.record))
    samples = math.ceil(math.ceil((exp.run.tf - exp.run.t0) / exp.run.dt) / exp.storage.decimate) + 1  # kept ones
    group.largest = HISTORY_BYTES // max(1, 8 * samples * max(1, sum(map(len, recorded.values()))))
    for comp, ports in recorded.items():
        outputs = exp.system.components[comp].outputs
        for port in ports:
            if port not in outputs or outputs[port].spec.type not in (PortType.REAL, PortType.EVENT):
                return f"storage.record: {comp}.{port} is not a real output, which ensembles do not record"
    return ""


# ---------------------------------------------------------------------------------------------- on the worker


def run_ensemble_task(payloads: list[JobPayload], keys: tuple[str, ...], values: list[tuple[float, ...]],
                      path: str, config_key_: str, task_function: TaskFunction, state: bytes, state_token: str,
                      attempts: list[int]) -> list[JobOutcome]:
    """Run the jobs *payloads* as one ensemble (their values of *keys* one row each) into the file *path*;
    one outcome per job, in order. A member that fails, or every member when the ensemble cannot run, runs again
    as its own job (:func:`~cosimrun.runner.worker.run_hydra_job`)."""
    from cosimrun.runner import worker

    start = time.perf_counter()
    outcomes: list[JobOutcome | None]
    with worker._job_lock:
        worker.install_state(state, state_token)
        try:
            outcomes = _run(payloads, keys, values, Path(path), config_key_)
            cause = ""
        except Exception as exc:  # the ensemble cannot run these members: each runs as its own job
            outcomes, cause = [None] * len(payloads), describe_exception(exc)[0]
    took = time.perf_counter() - start
    for outcome in outcomes:
        if outcome is not None:
            outcome.job_time_s = took / len(payloads)
            outcome.worker = worker._worker_address()
    for i, (payload, attempt) in enumerate(zip(payloads, attempts, strict=True)):
        if outcomes[i] is None or outcomes[i].status != "complete":  # type: ignore[union-attr]
            why = cause or f"failed in its ensemble ({outcomes[i].error})"  # type: ignore[union-attr]
            alone = worker.run_hydra_job(payload, task_function, state, state_token, attempt)
            alone.note = alone.note or RAN_ALONE.format(cause=why)
            worker.save_outcome(payload.job_dir, state_token, attempt, alone)  # kept should the worker die now
            outcomes[i] = alone
    return outcomes  # type: ignore[return-value]


def _run(payloads: list[JobPayload], keys: tuple[str, ...], values: list[tuple[float, ...]], path: Path,
         key: str) -> list[JobOutcome | None]:
    from omegaconf import open_dict, read_write

    from cosimrun.ensemble import run_members
    from cosimrun.ensemble.parameters import rows_to_arrays
    from cosimrun.ensemble.serial import RUN_TIME, run_serially
    from cosimrun.runner.configtext import resolved
    from cosimrun.runner.run import prepare
    from cosimrun.runner.worker import hydra_config
    from cosimrun.storage.ensemble import write_ensemble

    task_cfg, config = payloads[0].configs()
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(payloads[0].job_dir)
    with hydra_config(config):
        plain, _ = resolved(task_cfg)
    exp = prepare(plain)
    record = [f"{comp}.{port}" for comp, ports in exp.recorded.items() for port in ports]
    rows = [dict(zip(map(_short, keys), row, strict=True)) for row in values]
    inputs = recorded_inputs(plain)  # what the members read, as they start
    path.parent.mkdir(parents=True, exist_ok=True)
    if not not_vectorized(exp):
        result = run_members(exp.system, exp.master, rows, t0=exp.run.t0, tf=exp.run.tf, dt=exp.run.dt,
                             record=record, record_every=exp.storage.decimate)
    else:
        _release(exp)

        def build(m: int) -> tuple[Any, Any]:
            running.mark(m)
            member = prepare(with_values(plain, keys, values[m]))
            return member.system, member.master

        with RunningMember(path) as running:
            result = run_serially(build, len(values), rows_to_arrays(rows), t0=exp.run.t0, tf=exp.run.tf,
                                  dt=exp.run.dt, recorded=exp.recorded, record_every=exp.storage.decimate)
    write_ensemble(path, result, jobs=[p.num for p in payloads], overrides=[" ".join(p.overrides) for p in payloads],
                   attrs={"experiment": exp.name, CONFIG_KEY: key, "keys": json.dumps(list(keys)),
                          INPUTS: inputs})
    own = result.member_stats.get(RUN_TIME)  # one after the other: each member's own run
    share = result.stats.wall_time_s / result.members
    coupling = None if result.coupling_error is None else result.coupling_error.largest_relative()
    outcomes: list[JobOutcome | None] = []
    for m, payload in enumerate(payloads):
        failure = result.failures.get(m)
        outcomes.append(JobOutcome(
            payload.num, "complete" if failure is None else "failed", list(payload.overrides), path=str(path),
            error="" if failure is None else str(failure), wall_time_s=share if own is None else float(own[m]),
            coupling_error_max=math.nan if coupling is None else float(coupling[m]),
            summaries={k: float(v[m]) for k, v in result.final.items()}, member=m))
    return outcomes


class RunningMember:
    """The member an ensemble's task is running, while its members run one after the other: the file
    ``<ensemble file>.member`` holds its number (8 bytes, little-endian), rewritten as each member starts, so that the
    driver times each member against ``hydra.launcher.timeout`` (:func:`running_member`); removed at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        """The ensemble's file."""
        self._fd = -1

    def __enter__(self) -> RunningMember:
        self._fd = os.open(member_mark(self.path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        return self

    def mark(self, member: int) -> None:
        os.pwrite(self._fd, member.to_bytes(8, "little"), 0)

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)
        drop_member_mark(self.path)


def member_mark(path: Path) -> Path:
    """Where the task of the ensemble whose file is *path* says which member it runs (:class:`RunningMember`)."""
    return path.with_name(path.name + ".member")


def drop_member_mark(path: Path) -> None:
    """Remove the mark of the member the task of the ensemble whose file is *path* runs, if there is one: at the
    task's end, or by the driver for a task that did not end (stopped, its worker dead, the sweep cut short)."""
    with contextlib.suppress(OSError):
        member_mark(path).unlink()


def running_member(path: Path) -> int:
    """The member the task of the ensemble whose file is *path* is running (-1: none said yet, or not one after the
    other)."""
    try:
        with open(member_mark(path), "rb") as f:
            data = f.read(8)
    except OSError:
        return -1
    return int.from_bytes(data, "little") if len(data) == 8 else -1


def not_vectorized(exp: Any) -> str:
    """Why the vectorized engine does not step the members of the built, initialized experiment *exp* at once
    (:func:`cosimrun.ensemble.run.refuse_system`, or an algebraic loop), "" when it does; the others run one after
    the other (:mod:`cosimrun.ensemble.serial`)."""
    from cosimrun.ensemble.run import refuse_system
    from cosimrun.errors import ConfigError

    try:
        refuse_system(exp.system, exp.master)
    except ConfigError as exc:
        return str(exc)
    loops = exp.system.analysis.loops if exp.system.analysis is not None else []
    return f"connections: the algebraic loop through {', '.join(loops[0].components)}" if loops else ""


def with_values(plain: dict[str, Any], keys: Sequence[str], values: Sequence[float]) -> dict[str, Any]:
    """The resolved config *plain* with the swept parameters *keys* (config paths) set to *values*: a member's
    config, as its job resolves it (the planner checked that nothing else depends on them). The dicts on the
    keys' paths are copied, the rest shared."""
    out = dict(plain)
    for key, value in zip(keys, values, strict=True):
        *path, last = key.split(".")
        node = out
        for part in path:
            node[part] = dict(node[part])
            node = node[part]
        node[last] = value
    return out


def complete_members(path: Path, jobs: Sequence[tuple[int, list[str], int]]) -> dict[int, JobOutcome]:
    """Job number -> outcome of each of *jobs* (``(number, overrides, attempt)``) that the ensemble file *path*
    holds as complete: what an ensemble's task had finished when its worker died or was stopped after it wrote
    its file (empty when it wrote none)."""
    from cosimrun.storage.ensemble import read_summary

    summary = read_summary(path)
    if summary is None:
        return {}
    members = {num: m for m, num in enumerate(summary.jobs) if summary.status[m] == "complete"}
    return {num: JobOutcome(num, "complete", list(overrides), path=str(path), attempts=attempt, member=members[num],
                            summaries={k: float(v[members[num]]) for k, v in summary.finals.items()},
                            coupling_error_max=float(summary.coupling_error_max[members[num]]))
            for num, overrides, attempt in jobs if num in members}


# ---------------------------------------------------------------------------------------------- resume


class Finished:
    """The complete members of a sweep's earlier ensembles, by job number, for a resume to take over."""

    def __init__(self, sweep_dir: Path) -> None:
        self.by_job: dict[int, list[tuple[Path, int, str, dict[str, float], tuple[float, ...], tuple[str, ...],
                                          float]]] = {}
        folder = sweep_dir / ENSEMBLE_DIR
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.h5")):
            self._read(path)

    def _read(self, path: Path) -> None:
        from cosimrun.storage.ensemble import read_summary, unreadable

        summary = read_summary(path)
        if summary is None or CONFIG_KEY not in summary.attrs:  # damaged or of another layout: its members run again
            return
        if unreadable(path) is not None:  # a member's histories are lost with the file: they run again
            return
        if changed_input(str(summary.attrs.get(INPUTS, ""))) is not None:  # made from a file that changed since
            return
        try:
            keys = tuple(json.loads(summary.attrs["keys"]))
            params = [summary.parameters[_short(k)] for k in keys]
        except (KeyError, ValueError):
            return
        for m, num in enumerate(summary.jobs):
            if summary.status[m] == "complete":
                self.by_job.setdefault(num, []).append(
                    (path, m, str(summary.attrs[CONFIG_KEY]), {k: float(v[m]) for k, v in summary.finals.items()},
                     tuple(float(p[m]) for p in params), keys, float(summary.coupling_error_max[m])))

    def outcome(self, num: int, overrides: list[str], group: Group, values: tuple[float, ...]) -> JobOutcome | None:
        """Job *num*'s outcome from the newest ensemble file where it is complete, made from the same config and
        values (None: it runs)."""
        for path, member, key, finals, stored, keys, coupling in reversed(self.by_job.get(num, [])):
            if key == group.config_key and keys == group.keys and stored == tuple(float(v) for v in values):
                return JobOutcome(num, "complete", list(overrides), path=str(path), summaries=dict(finals),
                                  attempts=0, reused=True, member=member, coupling_error_max=coupling)
        return None


def _short(key: str) -> str:
    """``components.mass1.params.stiffness`` -> ``mass1.stiffness`` (an ensemble file's parameter name);
    ``components.pendulum.modes.linear.params.q0`` -> ``pendulum.linear.q0``; a switch setting
    ``components.pendulum.selector.lower`` -> ``pendulum.selector.lower``."""
    parts = key.split(".")
    if parts[2] not in ("params", "modes"):
        return ".".join(parts[1:])
    return ".".join([parts[1], parts[3], parts[5]] if len(parts) == 6 else [parts[1], parts[3]])
