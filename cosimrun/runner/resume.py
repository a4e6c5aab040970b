"""Resuming a sweep: which jobs' results a new launch of the same sweep may take over.

With ``hydra.launcher.resume=true`` the dask launcher skips a job whose
results file in the sweep directory is complete and was made from the same
config (:func:`reusable`); its outcome is read from that file.
"""

from __future__ import annotations

import os

from cosimrun.runner.compose import JobSpec
from cosimrun.runner.configtext import resolved
from cosimrun.runner.outcome import results_attrs
from cosimrun.runner.worker import hydra_config
from cosimrun.storage.hdf5 import FORMAT


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


def reusable(spec: JobSpec) -> bool:
    """Whether a resume may skip *spec*: its results file is complete and was made from the same config."""
    path = spec.results_path
    if not path.is_file():
        return False
    try:
        attrs = results_attrs(path, ("format", "status", "config_yaml"))
    except OSError:
        return False
    if attrs.get("format") != FORMAT or attrs.get("status") != "complete" or not attrs.get("config_yaml"):
        return False
    return attrs["config_yaml"] == expected_config_yaml(spec)
