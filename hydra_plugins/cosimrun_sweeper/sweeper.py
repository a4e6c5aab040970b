"""The ``hydra/sweeper=cosimrun`` config and ``Sweeper`` class.

Hydra's basic sweeper composes every job's config once before launching a
batch, only to check that it composes, and the launcher
then composes it again. This sweeper expands and batches the overrides the same
way (``hydra.sweeper.params`` and ``max_batch_size`` included) but validates
a batch through a :class:`cosimrun.runner.compose.JobComposer`, which shares one
composition between jobs that differ only in values and raises Hydra's own
error for a job that does not compose. A launcher with a ``composer``
attribute (cosimrun's dask launcher) is handed that composer, so the
compositions are reused when the jobs are composed again.

It is also where a sweep takes its directory, whichever the launcher: the
sweep lock (:mod:`cosimrun.runner.lock`) is claimed before anything is
written there (Hydra's ``multirun.yaml`` included), and released by the
command when the sweep ends.

Imported by Hydra's plugin scan at every start: cosimrun's runner is imported
when a batch is validated. No ``from __future__ import annotations`` (see
``hydra_plugins.cosimrun_dask_launcher.dask_launcher``).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class CosimrunSweeperConf:
    """Settings of ``hydra/sweeper=cosimrun`` (those of Hydra's ``basic`` sweeper)."""

    _target_: str = "hydra_plugins.cosimrun_sweeper.sweeper.CosimrunSweeper"
    max_batch_size: int | None = None
    """Jobs launched at a time (all of them when null)."""
    params: dict[str, str] | None = None
    """Sweep parameters, as on the command line: ``{run.tf: 1,2,3}``."""


ConfigStore.instance().store(group="hydra/sweeper", name="cosimrun", node=CosimrunSweeperConf, provider="cosimrun")


class CosimrunSweeper(Sweeper):
    """Hydra's basic sweeper whose batch validation shares compositions with the launcher.

    It drives a ``BasicSweeper`` rather than subclassing it: Hydra's plugin
    scan executes the basic sweeper's module again, after which its
    ``super(BasicSweeper, self)`` names a class a subclass made earlier does
    not derive from.
    """

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        from cosimrun.runner._private import basic_sweeper

        self.basic = basic_sweeper(max_batch_size, params)
        self.basic.validate_batch_is_legal = self.validate_batch_is_legal
        self.composer: Any = None
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.basic.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    @property
    def launcher(self) -> Any:
        return self.basic.launcher

    def sweep(self, arguments: list[str]) -> Any:
        from cosimrun.runner.lock import claim

        assert self.config is not None
        claim(str(self.config.hydra.sweep.dir))
        return self.basic.sweep(arguments)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from cosimrun.runner.compose import JobComposer

        if self.composer is None:
            assert self.hydra_context is not None and self.config is not None
            self.composer = JobComposer(self.hydra_context, self.config)
            if hasattr(self.launcher, "composer"):
                self.launcher.composer = self.composer
        for overrides in batch:
            self.composer.validate(overrides)
