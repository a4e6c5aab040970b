"""Structured config schema of an experiment (registered in Hydra's ConfigStore).

The schema types what OmegaConf can type (run times, storage settings, the
component table's fixed keys); component parameters and master settings are
free-form here and validated by the builder against the component's and
master's own declarations, with messages that name the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class RunConfig:
    """Simulated interval and macro step, in seconds."""

    t0: float = 0.0
    tf: float = 10.0
    dt: float = 0.01


@dataclass
class ComponentConfig:
    """One component: its plugin ``type``, parameters, initial input values, unit relabels.

    ``type: multi`` takes ``modes`` (name -> component config), ``initial_mode``,
    a ``selector`` and ``hysteresis`` instead of ``params``.
    """

    type: str = MISSING
    params: dict[str, Any] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    modes: dict[str, Any] | None = None
    initial_mode: str | None = None
    selector: dict[str, Any] | None = None
    hysteresis: dict[str, Any] | None = None


@dataclass
class StorageConfig:
    """Where and what the run records."""

    file: str = "results.h5"
    record: list[str] = field(default_factory=lambda: ["*"])
    """Ports to record: ``"*"``, ``"comp"``, ``"comp.*"`` or ``"comp.port"``."""
    compression: str | None = "gzip"
    compression_level: int = 4
    flush_interval: int = 2000
    """Samples kept in memory per component before they are written to the file."""
    allow_nonfinite: bool = False
    """Store NaN and infinite values and go on; by default the run fails at the first one."""


@dataclass
class CosimConfig:
    """The composed configuration of one run."""

    name: str = "unnamed"
    description: str = ""
    action: str = "run"
    """``run`` the experiment or ``describe`` its structure without running."""
    run: RunConfig = field(default_factory=RunConfig)
    components: dict[str, ComponentConfig] = field(default_factory=dict)
    connections: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    """Event connections ``"comp.event -> subscriber"``."""
    master: dict[str, Any] = field(default_factory=dict)
    storage: StorageConfig = field(default_factory=StorageConfig)


def register_configs() -> None:
    """Register the schema as ``cosimrun_schema`` in Hydra's ConfigStore."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="cosimrun_schema", node=CosimConfig)
