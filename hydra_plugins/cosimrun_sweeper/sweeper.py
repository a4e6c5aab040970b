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

Before the first batch is launched, its first job is built as the run would
build it (:func:`cosimrun.config.build.build_experiment`): when that fails with
a config error (an unknown key, a bad parameter) and so does every other job
of the batch, the error is common to the sweep, which stops at once with one
line and exit status 2 rather than failing every job. A sweep that stops
before launching anything removes what it wrote (its ``multirun.yaml``, its lock
and the directory, when nothing else is there).

Importing it registers the resolver of the job folders' layout
(:mod:`cosimrun.runner.layout`), which cosimrun's ``hydra.sweep.subdir`` uses.

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

from cosimrun.runner.layout import register_resolver

register_resolver()  # hydra.sweep.subdir of cosimrun's config names the job folders through it

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
        self.launched = False
        """Whether a batch has passed validation (and so was launched)."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.basic.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    @property
    def launcher(self) -> Any:
        return self.basic.launcher

    def sweep(self, arguments: list[str]) -> Any:
        from cosimrun.config.reporting import remove_unused_dir
        from cosimrun.runner.lock import claim

        assert self.config is not None
        sweep_dir = str(self.config.hydra.sweep.dir)
        lock = claim(sweep_dir)
        try:
            return self.basic.sweep(arguments)
        except BaseException:
            if not self.launched:  # stopped before any job: leave nothing behind
                lock.release()
                remove_unused_dir(sweep_dir, ("multirun.yaml",))
            raise

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from cosimrun.runner.compose import JobComposer

        if self.composer is None:
            assert self.hydra_context is not None and self.config is not None
            self.composer = JobComposer(self.hydra_context, self.config)
            if hasattr(self.launcher, "composer"):
                self.launcher.composer = self.composer
        for overrides in self._to_validate(batch):
            self.composer.validate(overrides)
        if not self.launched and batch:
            self._fail_if_common_config_error(batch)
        self.launched = True

    def _to_validate(self, batch: Sequence[Sequence[str]]) -> Sequence[Sequence[str]]:
        """The jobs whose composition is checked: all, but with ensembles on (the dask launcher's
        ``ensemble_size``) one job of those that differ only in numbers given to the same component parameters
        (they compose alike: ``params`` takes any value; :func:`cosimrun.runner.ensembles.representatives`)."""
        if not getattr(self.launcher, "ensemble_size", 0):
            return batch
        from cosimrun.runner.ensembles import representatives

        return representatives(batch)

    def _fail_if_common_config_error(self, batch: Sequence[Sequence[str]]) -> None:
        """End the command (exit 2, one line) if every job of *batch* has a config error, as the first has."""
        from cosimrun.exits import fail

        error = self._config_error(batch[0])
        if error is None or any(self._config_error(overrides) is None for overrides in batch[1:]):
            return  # jobs with errors of their own fail as jobs; the others run
        fail(str(error))

    def _config_error(self, overrides: Sequence[str]) -> Any:
        """The ConfigError that building the job with *overrides* raises, or None (also when it cannot be resolved)."""
        from omegaconf import OmegaConf

        from cosimrun.config.build import build_experiment
        from cosimrun.errors import ConfigError
        from cosimrun.runner.configtext import resolved
        from cosimrun.runner.run import prepare
        from cosimrun.runner.worker import hydra_config

        config = self.composer.compose(overrides, 0).config
        try:
            with hydra_config(config):  # as the job resolves it: relative paths against the experiment file's
                plain, _ = resolved(OmegaConf.masked_copy(config, [str(key) for key in config if key != "hydra"]))
        except Exception:  # an interpolation only the job can resolve: the job will say
            return None
        try:
            experiment = build_experiment(plain)
        except ConfigError as exc:
            return exc
        experiment.system.free()
        if experiment.run.start_from is None:
            return None
        try:  # a fork: the job's parameters must be ones that may change at the checkpoint
            prepare(plain).system.free()
        except ConfigError as exc:
            return exc
        except Exception:  # the job will say
            return None
        return None
