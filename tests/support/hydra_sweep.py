"""In-process Hydra sweeps for the runner tests: the context ``cosimrun -m`` builds, a recording callback."""

from __future__ import annotations

from typing import Any


def sweep_context(overrides: list[str]) -> tuple[Any, Any]:
    """A Hydra context and multirun master config as ``cosimrun -m <overrides>`` builds them (in process)."""
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.utils import setup_globals
    from hydra.types import HydraContext, RunMode

    from cosimrun.cli import register_hydra_plugins
    from cosimrun.config.schema import register_configs

    register_configs()
    register_hydra_plugins()
    setup_globals()
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path("pkg://cosimrun.conf"))
    master = loader.load_configuration("config", overrides, run_mode=RunMode.MULTIRUN)
    return HydraContext(config_loader=loader, callbacks=Callbacks()), master


class RecordingCallback:
    """A Hydra callback (``hydra.callbacks.<name>._target_``) that notes the job events it sees in ``calls``."""

    calls: list[tuple[str, int, Any]] = []

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        RecordingCallback.calls.append(("start", int(config.hydra.job.num), None))

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        RecordingCallback.calls.append(("end", int(config.hydra.job.num), job_return.status.name))
