"""SIGINT and SIGTERM for the ``cosimrun`` command: both end a run as ``interrupted``.

:func:`handling` installs the command's handlers (main thread only, restored
on exit; a library user's process is left alone). SIGINT raises
``KeyboardInterrupt`` as Python's own handler does; SIGTERM raises
:class:`Terminated`, a ``KeyboardInterrupt``, so every ``except
KeyboardInterrupt`` (a run's, a sweep's ledger and summary) handles both.

Python drops an exception raised inside a finalizer or a weakref callback
(``Exception ignored in ...``); an interrupt that lands there would be lost and
the run would end ``complete``. The handlers therefore also note the signal:
:func:`check` raises it again, and the runner calls it at its progress reports
and when the simulation returns. While :func:`handling` is active such a
dropped interrupt is not printed either.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from cosimrun.exits import EXIT_SIGINT, EXIT_SIGTERM

INTERRUPTED = "interrupted by the user"
"""The error of a run ended by SIGINT (Ctrl-C) or a component's ``KeyboardInterrupt``."""


class Terminated(KeyboardInterrupt):
    """Raised by SIGTERM; ``str()`` is ``"terminated by SIGTERM"``."""

    def __init__(self, message: str = "terminated by SIGTERM") -> None:
        super().__init__(message)


_received: int | None = None
"""The last signal handled since :func:`handling` started (``None``: none)."""


def received() -> int | None:
    """The signal number noted by the handlers (``signal.SIGINT``/``SIGTERM``), or ``None``."""
    return _received


def interruption(signum: int | None) -> KeyboardInterrupt:
    """The exception that stands for *signum*: :class:`Terminated` for SIGTERM, else ``KeyboardInterrupt``."""
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def request_stop(signum: int = signal.SIGTERM) -> None:
    """End the runs in progress in this process as if *signum* had arrived, at their next :func:`check`.

    For runs outside the main thread, which signals cannot interrupt (a dask
    worker that is being closed); the process runs nothing afterwards.
    """
    global _received
    _received = signum


def check() -> None:
    """Raise the interrupt noted by the handlers, in case Python dropped it where it was raised."""
    if _received is not None:
        raise interruption(_received)


def message(exc: BaseException) -> str:
    """What an interrupted run records as its error: ``terminated by SIGTERM`` or ``interrupted by the user``.

    A bare ``KeyboardInterrupt`` raised again for a SIGTERM (a sweep's job does) still says SIGTERM.
    """
    return str(exc) or (str(Terminated()) if _received == signal.SIGTERM else INTERRUPTED)


def exit_code(exc: BaseException | None = None) -> int:
    """143 when the command was terminated by SIGTERM (or *exc* is :class:`Terminated`), else 130."""
    terminated = isinstance(exc, Terminated) or _received == signal.SIGTERM
    return EXIT_SIGTERM if terminated else EXIT_SIGINT


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = signum
    raise interruption(signum)


def _unraisable(previous: Any) -> Any:
    def hook(info: Any) -> None:
        if isinstance(info.exc_value, KeyboardInterrupt) and _received is not None:
            return  # noted by the handler: check() raises it again
        previous(info)

    return hook


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as described above inside the block; nothing outside the main thread.

    What the handlers noted (:func:`received`) is forgotten when the block ends.
    """
    global _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received = None
    saved = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    try:
        yield
    finally:
        for s, previous in saved.items():
            signal.signal(s, previous)
        sys.unraisablehook = hook
        _received = None
