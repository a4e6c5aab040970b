"""The error FMU code raises, the names of FMI status codes, and :class:`FMULog`: an instance's last log messages
and how its errors name it."""

from __future__ import annotations

from collections import deque

from cosimrun.errors import FMUError

__all__ = ["STATUS_NAMES", "FMULog", "FMUError", "status_name"]

STATUS_NAMES = ("OK", "Warning", "Discard", "Error", "Fatal", "Pending")
"""FMI 2.0 status codes by value."""


def status_name(status: int) -> str:
    """``fmi2Discard`` etc. for an FMI 2.0 status code (``status N`` for an unknown one)."""
    return f"fmi2{STATUS_NAMES[status]}" if 0 <= status < len(STATUS_NAMES) else f"status {status}"


def status_name3(status: int) -> str:
    """``fmi3Discard`` etc. for an FMI 3.0 status code (``status N`` for an unknown one)."""
    return f"fmi3{STATUS_NAMES[status]}" if 0 <= status <= 4 else f"status {status}"


class FMULog:
    """The last log messages of one FMU (kept by the logger callback, see :func:`~cosimrun.fmi.fmi2.callbacks`) and
    the errors that name it: ``FMU component 'NAME' (FILE): ...``, ending with those messages."""

    __slots__ = ("name", "label", "fmi3", "messages", "env", "__weakref__")

    def __init__(self, name: str, label: str, fmi3: bool) -> None:
        from cosimrun.fmi.fmi2 import register_log_sink

        self.name, self.label, self.fmi3 = name, label, fmi3
        self.messages: deque[str] = deque(maxlen=20)
        self.env = register_log_sink(self.messages)
        """The logger environment id the FMU's callbacks carry."""

    @property
    def where(self) -> str:
        return f"FMU component {self.name!r} ({self.label})"

    def tail(self) -> str:
        """``; FMU log: ...`` with the last five messages (empty without messages)."""
        if not self.messages:
            return ""
        return "; FMU log: " + " | ".join(list(self.messages)[-5:])

    def status(self, status: int) -> str:
        """The name of status code *status* in this FMU's version (``fmi2Discard``, ``fmi3Error`` ...)."""
        return status_name3(status) if self.fmi3 else status_name(status)

    def error(self, message: str, t: float | None) -> FMUError:
        """An :class:`FMUError` of this FMU at simulation time *t*, ending with its last messages."""
        return FMUError(f"{self.where}: {message}{self.tail()}", component=self.name, time=t)

    def call_failed(self, function: str, status: int, t: float) -> FMUError:
        """The error of FMI call *function* that returned *status* at *t*."""
        return self.error(f"{function} returned {self.status(status)} at t={t:.12g}", t)
