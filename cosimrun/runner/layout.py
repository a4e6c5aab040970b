"""Where a sweep's jobs write: job folders sharded so that no directory holds more than about 1000 entries.

``hydra.sweep.subdir`` is ``${cosimrun.job_subdir:${hydra.sweep.dir},${hydra.job.num}}``
(``conf/config.yaml``): jobs 0 to 999 write into ``<sweep dir>/<num>/`` as
they always did, later ones into a shard of 1000 jobs,
``<sweep dir>/<num // 1000>k/<num>/`` (job 1234 into ``1k/1234/``). A sweep
directory made before jobs were sharded (it holds a folder ``1000/``) keeps
its flat layout, so that a resume finds its jobs' results files where they are.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARD_SIZE = 1000
RESOLVER = "cosimrun.job_subdir"


def job_subdir(sweep_dir: str | os.PathLike[str], num: int | str) -> str:
    """The folder of job *num* relative to *sweep_dir* (see the module's docstring)."""
    num = int(num)
    if num < SHARD_SIZE or Path(sweep_dir, str(SHARD_SIZE)).is_dir():
        return str(num)
    return f"{num // SHARD_SIZE}k/{num}"


def register_resolver() -> None:
    """Register :data:`RESOLVER` with OmegaConf (once per process; a later call changes nothing)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, lambda sweep_dir, num: job_subdir(sweep_dir, num), use_cache=False)
