"""Resuming a sweep: which jobs' results a new launch of the same sweep may take over.

With ``hydra.launcher.resume=true`` the dask launcher skips a job whose
results file in the sweep directory is complete, was made from the same
config and passes :func:`cosimrun.storage.verify.verify_results` (readable,
dataset lengths consistent, the checksums written at close match):
:func:`check_reuse`. A job whose file claims to be complete but is damaged,
or was made from another config, runs again with a note saying why (the
index's ``note`` column).

That check composes the job's config and reads the whole file: tens of
milliseconds per job. A sweep of many jobs is resumed from its index instead
(:func:`take_over`). When a job completes, the driver records in its index row
a *fingerprint* (:func:`fingerprint`): the ``stat`` of its results file (size,
modification and change times, inode) and the key of the configuration it was
made from (:func:`config_key`). A resume trusts a file whose ``stat`` still
matches without reading it, decides "same config" when the job's overrides are
those of its row and the key of its shared composition is unchanged, and takes
the outcome from the row. Whatever the fingerprint cannot decide is checked as
:func:`check_reuse` does: a file changed since (or of a sweep without
fingerprints) is verified in full, a config the key cannot tell is composed.
A file damaged without a change of its ``stat`` (its size, times and inode
restored) is the limit of this.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.runner.compose import JobSpec
from cosimrun.runner.configtext import dump, experiment_dir, resolved
from cosimrun.runner.inputs import changed as changed_input
from cosimrun.runner.outcome import SUMMARY_PREFIX, JobOutcome, outcome_from_file, outcome_from_row
from cosimrun.runner.worker import JobPayload, hydra_config
from cosimrun.storage.chunkfile import REF_FILE, read_ref, split_address
from cosimrun.storage.hdf5 import FORMAT
from cosimrun.storage.summary import results_attrs
from cosimrun.storage.sweep_index import read_index_parts, read_sweep_index
from cosimrun.storage.verify import verify_results


def expected_config_yaml(spec: JobSpec) -> str:
    """The resolved task config that the job's run stores (``config_yaml``), as the worker's job would see it."""
    from omegaconf import open_dict, read_write

    task_cfg, config = spec.payload().configs()
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(spec.job_dir)
    with hydra_config(config):
        try:
            return resolved(task_cfg)[1]
        except Exception:  # unresolvable: the job will report it; it just cannot be reused
            return ""


@dataclass(frozen=True)
class Reuse:
    """Whether a resume takes a job's results file over, and if not, a note when the reason is worth telling."""

    ok: bool
    note: str = ""
    """``rerun: results file damaged (...)`` or ``rerun: configuration changed``; ``""`` for an ordinary rerun."""


@dataclass(frozen=True)
class Location:
    """Where the last run of a job put its results."""

    results: str
    """Its results file, or under ``storage.layout: per_chunk`` the address ``<chunk file>::/runs/<job>``."""
    written: Path
    """The file whose modification time says when the run started writing them: the results file, or the
    pointer ``results.ref`` the run left in the job's folder."""

    @property
    def exists(self) -> bool:
        return split_address(self.results)[0].is_file()


def results_location(spec: JobSpec) -> Location:
    """Where job *spec*'s last run put its results (see :class:`Location`): the group its folder's
    ``results.ref`` points at, else its results file."""
    address = read_ref(spec.job_dir)
    if address is None:
        return Location(str(spec.results_path), spec.results_path)
    return Location(address, Path(spec.job_dir, REF_FILE))


def check_reuse(spec: JobSpec, verify: bool = True, location: Location | None = None) -> Reuse:
    """Whether a resume may skip *spec*: its results file is complete, made from the same config and verified.

    Files without status ``complete`` (failed, interrupted, never finished)
    run again without a note; a file that cannot be opened or whose data does
    not verify is reported as damaged. Without *verify* the file's data is not
    read (its fingerprint says it is as it was written). A job under ``storage.layout: per_chunk`` is checked
    the same way in its group of the chunk's file (:func:`results_location`); a group whose run never closed it
    (status ``running``: its worker died) runs again. *location* is :func:`results_location` of *spec* when
    the caller has it.
    """
    location = location or results_location(spec)
    path = location.results
    if not location.exists:
        return Reuse(False)
    try:
        attrs = results_attrs(path, ("format", "status", "config_yaml", "inputs"))
    except OSError as exc:
        return Reuse(False, f"rerun: results file damaged (unreadable: {exc})")
    if attrs.get("format") != FORMAT or attrs.get("status") != "complete" or not attrs.get("config_yaml"):
        return Reuse(False)
    if attrs["config_yaml"] != expected_config_yaml(spec):
        return Reuse(False, "rerun: configuration changed")
    gone = changed_input(str(attrs.get("inputs", "")))
    if gone is not None:
        return _input_changed(gone)
    problems = verify_results(path) if verify else []
    if problems:
        more = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
        return Reuse(False, f"rerun: results file damaged ({problems[0]}{more})")
    return Reuse(True)


def _input_changed(path: str) -> Reuse:
    return Reuse(False, f"rerun: input file changed ({path})")


# ---------------------------------------------------------------------------------------------- fingerprints

_STAT_FIELDS = ("size", "mtime_ns", "ctime_ns", "ino")
_keys: dict[bytes, str] = {}
"""Shared composition (pickled) -> its :func:`config_key`."""
_MAX_KEYS = 256


def _stat(path: str | os.PathLike[str]) -> dict[str, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {name: getattr(st, f"st_{name}") for name in _STAT_FIELDS}


def fingerprint(path: str | os.PathLike[str], config: str, inputs: str = "") -> str:
    """The fingerprint of the results file *path* of a job made from the config of key *config* that read the
    input files *inputs* (:func:`cosimrun.runner.inputs.recorded`), as JSON (``""`` when the file cannot be
    stat'ed)."""
    st = _stat(path)
    if st is None:
        return ""
    return json.dumps({**st, "config": config, **({"inputs": inputs} if inputs else {})}, separators=(",", ":"))


def config_key(payload: JobPayload) -> str:
    """A key of the config of the job *payload*: equal keys and equal overrides make equal resolved configs.

    It is the hash of the job's shared composition without the ``hydra`` node
    (as YAML text, unresolved), of that composition resolved as a job resolves
    it, of the directory of the experiment's file (the job's relative
    component files are found there) and of the versions of cosimrun,
    OmegaConf and Hydra (which type and resolve the config). ``""`` when no
    key decides: the job is composed in full on the driver, a value override
    holds an interpolation (resolved per launch, as ``${now:...}``), or the
    config reads Hydra's node (``${hydra:...}``, different per job) or does
    not resolve without the job's values.
    """
    if payload.values is None or any("${" in value for value in payload.values):
        return ""
    key = _keys.get(payload.config)
    if key is None:
        if len(_keys) >= _MAX_KEYS:
            _keys.clear()
        key = _keys[payload.config] = _composition_key(payload)
    return key


def _composition_key(payload: JobPayload) -> str:
    from importlib.metadata import version

    probe = JobPayload(payload.num, [], payload.config, payload.job_dir, [], [], payload.cache, payload.sweep_dir)
    try:
        task_cfg, config = probe.configs()
        unresolved = dump(task_cfg)
        if "hydra:" in unresolved:
            return ""
        with hydra_config(config):
            text = resolved(task_cfg)[1]
        where = experiment_dir(config.hydra)
        versions = [version(name) for name in ("cosimrun", "omegaconf", "hydra-core")]
    except Exception:  # not resolvable without the job's own values, or a config of another shape
        return ""
    digest = hashlib.sha256()
    for part in (*versions, str(where), unresolved, text):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()[:32]


# ---------------------------------------------------------------------------------------------- the previous index


class PreviousIndex:
    """The rows of a sweep's index as a resume finds it (before its launch writes the index anew), by job number.

    Rows come from the index's row store while it has one (a sweep
    interrupted or killed: exact JSON values), else from its table.
    """

    def __init__(self, index_path: str | os.PathLike[str]) -> None:
        self.root = Path(index_path).absolute().parent
        self._rows: dict[int, dict[str, Any]] = {}
        self._at: dict[int, int] = {}
        self._columns: dict[str, np.ndarray] = {}
        self._summaries: dict[str, str] = {}
        """Summary column -> its ``comp.port``."""
        self._inexact: set[str] = set()
        """Summary columns whose values may not read back as they were written (:func:`_mixed`): their rows are
        read from their files, as is a row whose value may stand for a missing one (NaN, "")."""
        try:
            rows = read_index_parts(index_path)
            if rows is not None:
                self._rows = {int(row["num"]): row for row in rows}
                return
            table = read_sweep_index(index_path)
        except Exception:  # none, or unreadable: every job is checked as without an index
            return
        if "fingerprint" not in table.columns:
            return  # a sweep of an earlier version: nothing to take from it
        self._columns = table.columns
        self._at = {int(num): i for i, num in enumerate(table.run)}
        for column in table.summaries:
            self._summaries[column] = column[len(SUMMARY_PREFIX):]
            if not column.startswith(SUMMARY_PREFIX) or "|" in column or _mixed(table.columns[column]):
                self._inexact.add(column)  # a name the index changed, or values of other types written as one

    def row(self, num: int) -> dict[str, Any] | None:
        """Job *num*'s row as :func:`~cosimrun.runner.outcome.outcome_row` makes it (overrides joined by spaces when
        read from the table, summaries None when the table cannot give them exactly); None without one."""
        if self._rows:
            return self._rows.get(num)
        i = self._at.get(num)
        if i is None:
            return None
        c = self._columns
        row: dict[str, Any] = {"num": num, **{name: c[name][i] for name in (
            "status", "overrides", "path", "error", "traceback", "fingerprint") if name in c}}
        row.update(wall_time_s=float(c["wall_time_s"][i]), coupling_error_max=float(c["coupling_error_max"][i]),
                   member=int(c["member"][i]) if "member" in c else -1, summaries=self._summary(i))
        return row

    def _summary(self, i: int) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        for column, name in self._summaries.items():
            value = self._columns[column][i]
            if column in self._inexact or (isinstance(value, float) and math.isnan(value)) or value == "":
                return None  # the file says what the value is, or that there is none
            out[name] = value.item() if isinstance(value, np.generic) else value
        return out

    def recorded_fingerprint(self, row: dict[str, Any] | None, spec: JobSpec) -> dict[str, Any] | None:
        """The fingerprint of job *spec*'s results file that its *row* recorded, when the row is of that file, of a
        complete job with the same overrides (None otherwise)."""
        if row is None or row.get("status") != "complete" or not row.get("fingerprint") or row.get("member", -1) >= 0:
            return None
        path = Path(str(row.get("path", "")))
        if (path if path.is_absolute() else self.root / path) != spec.results_path:
            return None
        if not _same_overrides(row.get("overrides", ""), list(spec.overrides)):
            return None
        try:
            recorded = json.loads(str(row["fingerprint"]))
        except ValueError:
            return None
        return recorded if isinstance(recorded, dict) else None


def _mixed(values: np.ndarray) -> bool:
    """Whether a summary column of the index may hold values of other types than it reads back as: integers or
    booleans of jobs of which some lack the port (a float column of whole numbers and NaN), numbers or booleans
    written as text beside a text port's values."""
    if values.dtype.kind == "f":
        nan = np.isnan(values)
        return bool(nan.any()) and bool(np.all(values[~nan] == np.round(values[~nan])))
    if values.dtype.kind == "O":
        return any(_reads_as_number(v) for v in values)
    return False


def _reads_as_number(text: str) -> bool:
    if text in ("True", "False", "None"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _same_overrides(recorded: Any, overrides: list[str]) -> bool:
    if isinstance(recorded, str):  # the table's text: the overrides joined by spaces
        return not any(" " in o for o in overrides) and recorded == " ".join(overrides)
    return list(recorded) == overrides


def take_over(spec: JobSpec, previous: PreviousIndex | None) -> tuple[Reuse, JobOutcome | None]:
    """Whether a resume takes job *spec* over and, if it does, its outcome (reused, attempts 0).

    Decided from the job's row in *previous* where its fingerprint can
    (:mod:`the module <cosimrun.runner.resume>`), else by :func:`check_reuse`
    (without reading the data when the file is unchanged since it was
    fingerprinted).
    """
    location = results_location(spec)
    if location.results != str(spec.results_path):  # a group of a chunk's file: no fingerprint, it is verified
        reuse = check_reuse(spec, location=location)
        return reuse, outcome_from_file(spec.num, spec.overrides, location.results) if reuse.ok else None
    row = previous.row(spec.num) if previous is not None else None
    recorded = previous.recorded_fingerprint(row, spec) if previous is not None else None
    untouched = recorded is not None and _stat(spec.results_path) == {k: recorded.get(k) for k in _STAT_FIELDS}
    if untouched and recorded.get("config") and recorded["config"] == config_key(spec.payload()):
        gone = changed_input(str(recorded.get("inputs", "")))
        if gone is not None:
            return _input_changed(gone), None
        assert row is not None
        if row["summaries"] is None:
            outcome = outcome_from_file(spec.num, spec.overrides, spec.results_path)
        else:
            outcome = outcome_from_row({**row, "overrides": list(spec.overrides), "path": str(spec.results_path)})
            outcome.job_time_s, outcome.attempts, outcome.reused, outcome.worker, outcome.note = (
                math.nan, 0, True, "", "")
        outcome.fingerprint = str(row["fingerprint"])
        return Reuse(True), outcome
    reuse = check_reuse(spec, verify=not untouched, location=location)
    if not reuse.ok:
        return reuse, None
    return reuse, outcome_from_file(spec.num, spec.overrides, spec.results_path)
