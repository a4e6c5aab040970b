"""The error FMU components raise and the names of FMI 2.0 status codes (for messages)."""

from __future__ import annotations

from cosimrun.errors import FMUError

__all__ = ["STATUS_NAMES", "FMUError", "status_name"]

STATUS_NAMES = ("OK", "Warning", "Discard", "Error", "Fatal", "Pending")
"""FMI 2.0 status codes by value."""


def status_name(status: int) -> str:
    """``fmi2Discard`` etc. for an FMI 2.0 status code (``status N`` for an unknown one)."""
    return f"fmi2{STATUS_NAMES[status]}" if 0 <= status < len(STATUS_NAMES) else f"status {status}"
