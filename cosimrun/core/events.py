"""Event data: superdense time, events, zero-crossing indicators and hints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cosimrun.errors import ConfigError

if TYPE_CHECKING:
    from cosimrun.core.component import CoSimComponent


def _sign(value: float, tol: float = 0.0) -> int:
    """Sign of *value*, with ``|value| <= tol`` counted as zero."""
    if value > tol:
        return 1
    if value < -tol:
        return -1
    return 0


def crossed(before: float, after: float, direction: int = 0, tol: float = 0.0) -> bool:
    """True when an indicator crossed zero from *before* to *after*.

    A crossing goes from a strictly signed value to one strictly past zero:
    reaching zero is not crossing it (an indicator on its surface has no side
    yet, and one that touches zero and turns back fires nothing), so an event
    located at a crossing has its indicator past zero. Values within *tol* of
    zero count as zero. ``direction`` +1 accepts rising crossings only, -1
    falling only, 0 both.
    """
    s0 = _sign(before, tol)
    if s0 == 0 or _sign(after, tol) != -s0:
        return False
    if direction == 0:
        return True
    return (direction > 0) == (s0 < 0)


@dataclass(frozen=True, order=True, slots=True)
class DenseTime:
    """Superdense time ``(t, micro)``: ordered first by ``t``, then by micro step."""

    t: float
    micro: int = 0

    def advance_micro(self) -> DenseTime:
        """The same instant, one micro step later."""
        return DenseTime(self.t, self.micro + 1)

    def to_float(self) -> float:
        """The real time, dropping the micro step."""
        return float(self.t)


@dataclass(slots=True)
class Event:
    """A named event emitted by component ``source`` (``time`` unset for subscriptions)."""

    name: str
    source: str
    time: DenseTime | None = None
    direction: int | None = None


class EventIndicator:
    """A scalar function of a component whose zero crossings are events."""

    __slots__ = ("name", "function", "direction")

    def __init__(self, name: str, function: Callable[[CoSimComponent], float], direction: int = 0) -> None:
        if direction not in (-1, 0, 1):
            raise ConfigError("direction", f"event indicator {name!r}: must be -1, 0 or +1, got {direction!r}")
        self.name = name
        self.function = function
        self.direction = direction

    def evaluate(self, component: CoSimComponent) -> float:
        """The indicator's value for the component's current state."""
        return float(self.function(component))

    def __repr__(self) -> str:
        return f"EventIndicator({self.name!r}, direction={self.direction})"


@dataclass(slots=True)
class InternalEventInfo:
    """A bracket ``[t_before, t_after]`` in which a component saw an indicator cross zero."""

    event_name: str
    t_before: float
    t_after: float
    indicator_before: float | None = None
    indicator_after: float | None = None

    @property
    def interval_width(self) -> float:
        """Width of the bracket in seconds."""
        return self.t_after - self.t_before

