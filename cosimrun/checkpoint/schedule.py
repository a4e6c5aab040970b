"""When a run saves its state: ``run.checkpoint`` (:class:`CheckpointSettings`) and :class:`Checkpointer`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

from cosimrun.errors import ConfigError, UnknownNameError

if TYPE_CHECKING:
    from cosimrun.checkpoint.state import SystemState
    from cosimrun.masters.base import MasterRun

TIME_TOLERANCE = 1e-9
"""A communication point within this fraction of ``run.dt`` before a checkpoint time counts as reaching it."""


@dataclass(frozen=True)
class CheckpointSettings:
    """``run.checkpoint``: save the state at the first communication point at or after each of these."""

    every: float | None = None
    """Simulated seconds between checkpoints."""
    wall: float | None = None
    """Wall-clock seconds between checkpoints."""
    at: tuple[float, ...] = ()
    """Simulated instants."""

    def __post_init__(self) -> None:
        for key in ("every", "wall"):
            value = getattr(self, key)
            if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)
                                          and math.isfinite(value) and value > 0):
                raise ConfigError(key, f"must be a positive number of seconds, got {value!r}")
        for t in self.at:
            if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
                raise ConfigError("at", f"must be a list of times in seconds, got {t!r}")

    @property
    def on(self) -> bool:
        """Whether any checkpoint is asked for (the final state is then saved too)."""
        return self.every is not None or self.wall is not None or bool(self.at)


CHECKPOINT_KEYS = ("every", "wall", "at")


def checkpoint_settings(raw: Any, key: str = "run.checkpoint") -> CheckpointSettings:
    """``run.checkpoint`` (a mapping of :data:`CHECKPOINT_KEYS`, or the schema's dataclass; ``None``: off) as
    :class:`CheckpointSettings`.

    Each time is a number of seconds or a quantity (``10 min``); errors are keyed by the setting."""
    if raw is None:
        return CheckpointSettings()
    if isinstance(raw, CheckpointSettings):
        return raw
    if dataclasses.is_dataclass(raw) and not isinstance(raw, type):  # the schema's CheckpointConfig
        raw = dataclasses.asdict(raw)
    if not isinstance(raw, Mapping):
        raise ConfigError(key, f"{raw!r} is not a mapping; write it as {{every: 100, wall: 600, at: [1.5, 3]}}")
    for name in raw:
        if name not in CHECKPOINT_KEYS:
            raise UnknownNameError("setting", str(name), CHECKPOINT_KEYS, f"of {key}", key=f"{key}.{name}")
    at = raw.get("at") or []
    if isinstance(at, str | bytes) or not isinstance(at, Sequence):
        at = [at]
    try:
        return CheckpointSettings(
            every=_seconds(raw.get("every"), f"{key}.every"), wall=_seconds(raw.get("wall"), f"{key}.wall"),
            at=tuple(_seconds(t, f"{key}.at[{i}]") for i, t in enumerate(at)))  # type: ignore[misc]
    except ConfigError as exc:
        raise exc.within(key) if exc.key and "." not in exc.key else exc from None


def _seconds(value: Any, key: str) -> float | None:
    """*value* (a number of seconds, or a quantity of time such as ``10 min``) in seconds; ``None`` stays."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    if isinstance(value, str):
        from cosimrun.core.units import Q_

        try:
            quantity = Q_(value)
            return float(quantity.to("s").magnitude) if not isinstance(quantity, int | float) else float(quantity)
        except Exception:
            pass
    raise ConfigError(key, f"{value!r} is not a time: give seconds (100) or a quantity (10 min)")


def parse_reference(text: str, key: str) -> tuple[str, float | None]:
    """``PATH`` or ``PATH@t`` of ``run.restart``: the results file and the checkpoint's time (``None``: the last)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(key, f"{text!r} is not a results file (write PATH or PATH@t)")
    path, sep, when = text.rpartition("@")
    if sep:
        try:
            return path, float(when)
        except ValueError:
            pass
    return text, None


class Checkpointer:
    """Called by the master after every accepted step (see :meth:`MasterRun.run`): hands the state to *write*
    at the points :class:`CheckpointSettings` asks for, and at the end of a run that completed.

    *save* gives the system's state at a run's tick (``System``'s); the recorder hands over its samples first,
    so the state's recorder position counts every sample up to the checkpoint. A run that continues a state
    from *start* takes the checkpoints after it that the whole run would have taken (``every`` counts from *t0*).
    """

    def __init__(self, settings: CheckpointSettings, save: Callable[[MasterRun, int], SystemState],
                 write: Callable[[SystemState], Any], t0: float, dt: float, start: float | None = None) -> None:
        self.settings = settings
        self.save = save
        self.write = write
        self.taken = 0
        self.seconds = 0.0
        """Wall time spent saving and writing checkpoints."""
        self._slack = TIME_TOLERANCE * dt
        start = t0 if start is None else start
        every = settings.every
        self._next_sim = t0 + every * (math.floor((start + self._slack - t0) / every) + 1) if every else math.inf
        self._at: Sequence[float] = sorted(t for t in settings.at if t > start + self._slack)
        self._next_at = 0
        self._next_wall = perf_counter() + settings.wall if settings.wall is not None else math.inf
        self._last = math.nan

    def __call__(self, run: MasterRun, tick: int, final: bool) -> None:
        t = run.clock.time(tick)
        due = final
        if t >= self._next_sim - self._slack:
            due = True
            every = self.settings.every
            assert every is not None
            self._next_sim += every * max(1, math.floor((t + self._slack - self._next_sim) / every) + 1)
        while self._next_at < len(self._at) and t >= self._at[self._next_at] - self._slack:
            due = True
            self._next_at += 1
        if self._next_wall != math.inf and perf_counter() >= self._next_wall:
            due = True
        if due and t != self._last:
            self.take(run, tick, final or tick >= run.clock.end)

    def take(self, run: MasterRun, tick: int, final: bool = False) -> None:
        """Save and write the state at *tick* now (*final*: the run ends there, its last sample is recorded)."""
        start = perf_counter()
        run.recorder.flush(final=final)
        self.write(self.save(run, tick))
        self._last = run.clock.time(tick)
        self.taken += 1
        now = perf_counter()
        self.seconds += now - start
        if self.settings.wall is not None:
            self._next_wall = now + self.settings.wall
