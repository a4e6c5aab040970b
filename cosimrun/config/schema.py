"""Structured config schema of an experiment: the one declaration of its known keys.

The dataclasses below are registered in Hydra's ConfigStore (``cosimrun_schema``),
which types the run times and storage settings, and they are what the builder
(:mod:`cosimrun.config.build`) checks every key against, however it arrived
(experiment file, override, ``+`` addition, ``--config-dir``): Hydra's struct
mode does not close keys added with ``+``. Components are free-form for Hydra,
so that a whole component can be added from the command line; the builder
checks them against :class:`ComponentConfig` or :class:`MultiComponentConfig`.
Component parameters and master settings are validated by the builder against
the component's and master's own declarations (a master's settings are its
frozen dataclass, see :func:`cosimrun.config.build.build_master`).

:class:`RunSettings` and :class:`StorageSettings` are both the schema of their
section and the frozen settings the builder returns: each default is written
once, here (the flush interval's on the engine side, in :mod:`cosimrun.core.defaults`,
which the recorder shares).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from cosimrun.core.defaults import DEFAULT_FLUSH_INTERVAL, DEFAULT_FLUSH_SECONDS


@dataclass
class CheckpointConfig:
    """``run.checkpoint``: save the system's state into the results file (``/checkpoints``) at the first communication
    point at or after each time asked for, and at the end (see ``docs/how-to/checkpoints.md``). Times are seconds or
    quantities (``10 min``); all unset: no checkpoints."""

    every: Any = None
    """Simulated time between checkpoints."""
    wall: Any = None
    """Wall-clock time between checkpoints."""
    at: list[Any] = field(default_factory=list)
    """Simulated instants."""


@dataclass(frozen=True)
class RunSettings:
    """The simulated interval and macro step, in seconds, and checkpoints and restarts (``run.*``)."""

    t0: float = field(default=0.0, metadata={"unit": "s"})
    """Start time."""
    tf: float = field(default=10.0, metadata={"unit": "s"})
    """End time."""
    dt: float = field(default=0.01, metadata={"unit": "s"})
    """Macro (communication) step."""
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """When to save the state (built: its times in seconds; the runner makes it a
    ``cosimrun.checkpoint.CheckpointSettings``)."""
    restart: str | None = None
    """``PATH`` or ``PATH@t``: continue from the last (or the given time's) checkpoint of the results file at
    PATH; the results hold the parent's history up to there and name it."""
    start_from: str | None = None
    """``PATH`` or ``PATH@t``: as ``restart``, with parameters that may differ from the checkpoint's (Python
    components', tunable FMU parameters): a run forked from a saved state."""


@dataclass
class ModelConfig:
    """One model: a component's plugin ``type``, its parameters and unit relabels (also a mode of ``multi``)."""

    type: str = MISSING
    params: dict[str, Any] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


@dataclass
class ComponentConfig(ModelConfig):
    """One component: a model plus the initial values of its inputs."""

    initial: dict[str, Any] = field(default_factory=dict)


@dataclass
class MultiComponentConfig:
    """A ``type: multi`` component: ``modes`` (name -> :class:`ModelConfig`), the mode it starts in,
    the ``selector`` that switches and a ``hysteresis``, unit relabels and initial input values; no
    ``params`` of its own (each mode has its own)."""

    type: str = MISSING
    units: dict[str, str] = field(default_factory=dict)
    initial: dict[str, Any] = field(default_factory=dict)
    modes: dict[str, Any] = field(default_factory=dict)
    initial_mode: str | None = None
    selector: dict[str, Any] | None = None
    hysteresis: dict[str, Any] | None = None


@dataclass
class ConnectionConfig:
    """A connection written as a mapping (``{src: a.y, dst: b.u}``) rather than ``"a.y -> b.u"``.

    Only the mapping takes a linear transformation: ``dst = scale * src + offset``,
    with *src* first converted to the unit of *dst* unless ``convert_units`` is false
    (SSP's ``LinearTransformation`` and ``suppressUnitConversion``).
    """

    src: str = MISSING
    dst: str = MISSING
    scale: float = 1.0
    """Factor applied to the source value after unit conversion (real ports only)."""
    offset: float = 0.0
    """Added after the scale, in the destination port's unit (real ports only)."""
    convert_units: bool = True
    """False passes the source number unconverted (its unit is not checked against the destination's)."""


@dataclass(frozen=True)
class StorageSettings:
    """Where and what the run records and how it compresses it (``storage.*``)."""

    file: str = "results.h5"
    """The results file in the run directory: ``.h5``, ``.hdf5`` or ``.nc`` (HDF5 either way)."""
    record: list[str] = field(default_factory=lambda: ["*"])
    """Ports to record: ``"*"``, ``"comp"``, ``"comp.*"`` or ``"comp.port"``."""
    compression: str | None = "gzip"
    compression_level: int = 4
    flush_interval: int = DEFAULT_FLUSH_INTERVAL
    """Samples kept in memory per port before they are written to the file."""
    allow_nonfinite: bool = False
    """Store NaN and infinite values and go on; by default the run fails at the first one."""
    flush_seconds: float = DEFAULT_FLUSH_SECONDS
    """Seconds of computing after which the samples kept in memory are written, however few: a run that dies
    hard (a crash, ``os._exit``) loses at most that much."""
    decimate: int = 1
    """Record every N-th communication point counted from t0 (FMPy's ``output_interval`` as a multiple of the
    step), plus the last sample and both samples at every event instant; 1 records every point."""
    layout: str = "per_job"
    """Where a sweep's jobs write: ``per_job`` (a file per job, ``storage.file`` in its directory) or ``per_chunk``
    (the jobs a dask worker runs as one chunk share a file, ``<sweep dir>/chunks/...``, a group per job; a run
    that is not part of a chunk writes its own file either way)."""


@dataclass
class CosimConfig:
    """The composed configuration of one run."""

    name: str = "unnamed"
    description: str = ""
    action: str = "run"
    """``run`` the experiment or ``describe`` its structure without running."""
    run: RunSettings = field(default_factory=RunSettings)
    components: dict[str, Any] = field(default_factory=dict)
    """Component name -> :class:`ComponentConfig` (or :class:`MultiComponentConfig`), checked by the builder."""
    connections: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    """Event connections ``"comp.event -> subscriber"``."""
    master: dict[str, Any] = field(default_factory=dict)
    storage: StorageSettings = field(default_factory=StorageSettings)


def register_configs() -> None:
    """Register the schema as ``cosimrun_schema`` in Hydra's ConfigStore.

    OmegaConf makes the node of a frozen dataclass read-only; the settings are
    frozen once built, not while Hydra composes and overrides them, so the
    sections are stored writable (still typed, their keys still closed).
    """
    from hydra.core.config_store import ConfigStore
    from omegaconf import DictConfig, OmegaConf

    schema = OmegaConf.structured(CosimConfig)
    for key in schema:
        section = schema._get_node(key)
        if isinstance(section, DictConfig):
            OmegaConf.set_readonly(section, None)
    ConfigStore.instance().store(name="cosimrun_schema", node=schema)
