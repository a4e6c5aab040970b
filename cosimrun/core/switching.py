"""Mode switching: the protocol masters use, and its value objects.

A component that switches between models ("modes") implements
:class:`ModeSwitching`; masters find such components with ``isinstance`` and
use only these methods. :class:`Hysteresis` (a dwell time) and
:class:`StateAdapter` (translating a state between models) are the policy
pieces a :class:`~cosimrun.core.multi.MultiComponent` is configured with;
:class:`ModeSwitch` is one logged switch.

Contract with masters: a master that takes trial steps (snapshot, step,
restore) calls ``hold_mode_switches(True)`` for the run and
``apply_mode_switch(t)`` itself at every accepted communication point (t0
included), evaluating event indicators only after that call: a snapshot cannot
be restored once the mode changed. Masters without rollback need nothing:
``do_step`` switches at the start of each step.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cosimrun.errors import ConfigError

if TYPE_CHECKING:
    from cosimrun.core.component import CoSimComponent

ModeKey = str

_TIME_EPS = 1e-12
"""Relative time tolerance: a dwell window ending within this of *t* counts as closed."""


@dataclass(frozen=True, slots=True)
class ModeSwitch:
    """One mode switch of a multi-model component."""

    time: float
    component: str
    from_mode: str
    to_mode: str


class ModeSwitching(ABC):
    """What a master may ask of a component that switches between models."""

    @abstractmethod
    def hold_mode_switches(self, hold: bool) -> None:
        """Stop (``True``) or allow again (``False``) switches inside ``do_step``.

        Masters that step tentatively hold switches for the whole run, so that
        rollback snapshots stay valid, and switch through :meth:`apply_mode_switch`.
        """

    @abstractmethod
    def apply_mode_switch(self, t: float) -> bool:
        """Switch at the accepted point *t* if the selector wants another mode; ``True`` if it switched."""

    @abstractmethod
    def mode_switches(self) -> list[ModeSwitch]:
        """Every switch so far, in time order."""


@runtime_checkable
class StateAdapter(Protocol):
    """Translates a state between models with different state names, units or layouts."""

    def adapt_state(self, source_state: dict[str, Any], target_component: CoSimComponent) -> dict[str, Any]:
        """Convert *source_state* (from ``get_state``) into what *target_component*'s ``set_state`` accepts."""
        ...



class Hysteresis:
    """Minimum dwell time between mode switches.

    Only answers "is the dwell window still open?"; whether a different mode is
    wanted is the caller's business. ``last_switch_time`` starts at ``-inf`` so
    the first switch is always allowed.
    """

    def __init__(self, dwell_time: float = 0.01) -> None:
        dwell_time = float(dwell_time)
        if not math.isfinite(dwell_time) or dwell_time < 0.0:
            raise ConfigError("dwell_time", f"must be a finite number >= 0, got {dwell_time!r}")
        self.dwell_time = dwell_time
        self.last_switch_time: float = -math.inf

    @property
    def window_end(self) -> float:
        """The instant at which the current dwell window closes (``-inf`` before any switch)."""
        return self.last_switch_time + self.dwell_time

    def in_dwell_window(self, t: float) -> bool:
        """True while less than ``dwell_time`` has passed since the last switch.

        A window ending within a relative 1e-12 of *t* counts as closed, so that a
        communication point placed at :attr:`window_end` may switch.
        """
        return t < self.window_end - _TIME_EPS * max(1.0, abs(t))

    def record_switch(self, t: float) -> None:
        """Record that a switch happened at *t*."""
        self.last_switch_time = float(t)

    def reset(self) -> None:
        """Forget the last switch."""
        self.last_switch_time = -math.inf

    def __repr__(self) -> str:
        return f"Hysteresis(dwell_time={self.dwell_time!r})"

