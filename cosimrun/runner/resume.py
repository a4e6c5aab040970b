"""Resuming a sweep: which jobs' results a new launch of the same sweep may take over.

With ``hydra.launcher.resume=true`` the dask launcher skips a job whose
results file in the sweep directory is complete, was made from the same
config and passes :func:`cosimrun.storage.verify.verify_results` (readable,
dataset lengths consistent, the checksums written at close match):
:func:`check_reuse`. Its outcome is read from that file. A job whose file
claims to be complete but is damaged, or was made from another config, runs
again with a note saying why (the index's ``note`` column).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cosimrun.runner.compose import JobSpec
from cosimrun.runner.configtext import resolved
from cosimrun.runner.worker import hydra_config
from cosimrun.storage.hdf5 import FORMAT
from cosimrun.storage.summary import results_attrs
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


def check_reuse(spec: JobSpec) -> Reuse:
    """Whether a resume may skip *spec*: its results file is complete, made from the same config and verified.

    Files without status ``complete`` (failed, interrupted, never finished)
    run again without a note; a file that cannot be opened or whose data does
    not verify is reported as damaged.
    """
    path = spec.results_path
    if not path.is_file():
        return Reuse(False)
    try:
        attrs = results_attrs(path, ("format", "status", "config_yaml"))
    except OSError as exc:
        return Reuse(False, f"rerun: results file damaged (unreadable: {exc})")
    if attrs.get("format") != FORMAT or attrs.get("status") != "complete" or not attrs.get("config_yaml"):
        return Reuse(False)
    if attrs["config_yaml"] != expected_config_yaml(spec):
        return Reuse(False, "rerun: configuration changed")
    problems = verify_results(path)
    if problems:
        more = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
        return Reuse(False, f"rerun: results file damaged ({problems[0]}{more})")
    return Reuse(True)
