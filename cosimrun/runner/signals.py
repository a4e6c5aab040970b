"""SIGINT and SIGTERM for the ``cosimrun`` command: from its first instruction to its last, exit 130 or 143.

``cosimrun.cli.main`` calls :func:`install` before anything else and :func:`finish` last; a library
user's process is left alone. Inside, the first signal raises ``KeyboardInterrupt`` (SIGINT) or
:class:`Terminated` (SIGTERM, a ``KeyboardInterrupt``), so every ``except KeyboardInterrupt`` (a
run's, a sweep's ledger and summary) handles both, and the command ends with one line on stderr and
exit status 130 or 143 (:func:`finish`), whatever it was doing: importing, composing the config,
running, writing a summary.

Where an interrupt must not land, the code runs :func:`shielded`: a results file from its creation to
its closing (only the simulation inside is :func:`interruptible`), the sweep index and summary. A
signal there is noted, and raised as the block ends (or left to the caller, who checks
:func:`received`). Only the first signal raises: the code that handles the interrupt (closing files,
cancelling jobs) is not interrupted again by a second one, which is noted too.

Python drops an exception raised inside a finalizer or a weakref callback (``Exception ignored in
...``); an interrupt that lands there would be lost. The handlers' interrupt is therefore raised again
in the main thread when Python drops it, as soon as the main thread is out of the finalizer, and the
runner also calls :func:`check` at its progress reports and when the simulation returns.

A main thread inside a C call that does not return (an FMU's ``fmi2DoStep`` that loops) never runs a
Python handler. The handlers therefore also write each signal to a pipe (``signal.set_wakeup_fd``),
which the handler empties when it runs and a watchdog thread watches: when a signal stays in the
pipe for :data:`STUCK_GRACE_S` (:data:`SECOND_GRACE_S` once a second one came), and the main
thread does not run the handler when asked either, the watchdog closes
the open results files ``interrupted`` with what they hold (see ``HDF5Writer.close_open``), prints
one line naming what the main thread is stuck in, and ends the process with 130 or 143
(``os._exit``: the stuck native thread is abandoned, no clean-up of the FMU runs).
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import mmap
import os
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any, NoReturn

from cosimrun.exits import EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM

try:
    import fcntl
    import termios
except ImportError:  # not on Windows: no watchdog
    fcntl = termios = None  # type: ignore[assignment]

INTERRUPTED = "interrupted by the user"
"""The error of a run ended by SIGINT (Ctrl-C)."""

SIGNALS = (signal.SIGINT, signal.SIGTERM)
REDELIVERY_S = 0.01
"""How often a dropped interrupt is tripped again until the main thread raises it."""
STUCK_GRACE_S = 3.0
"""How long the main thread may go without running Python after a signal before the watchdog ends the command."""
SECOND_GRACE_S = 0.5
"""The same once a second signal arrived."""
ASK_S = 0.2
"""How long the watchdog waits for the main thread to run the handler when asked, before it ends the command."""
WATCH_POLL_S = 0.02
"""How often the watchdog looks at the pipe while it holds a signal."""
CLOSE_TIMEOUT_S = 10.0
"""How long the watchdog waits for the open results files to close before it exits all the same."""


class Terminated(KeyboardInterrupt):
    """Raised by SIGTERM; ``str()`` is ``"terminated by SIGTERM"``."""

    def __init__(self, message: str = "terminated by SIGTERM") -> None:
        super().__init__(message)


_received: int | None = None
"""The first signal noted since :func:`install` (or set by :func:`request_stop`); ``None``: none."""
_armed = False
"""Whether the handler raises at the next signal (once: the first signal, or a dropped one again)."""
_shields = 0
"""Depth of :func:`shielded` blocks: the handler only notes signals inside."""
_raised: BaseException | None = None
"""The interrupt the handler or :func:`check` raised last (raised again if Python drops it)."""
_reported = False
"""Whether the command already printed its line about the interrupt (see :func:`reported`)."""
_previous: dict[int, Any] | None = None
"""The handlers :func:`install` replaced; ``None``: not installed."""
_hook: Any = None
_final: tuple[int, int | None] | None = None
"""``(exit status, signal noted)`` decided by :func:`finish` when the handlers stay for the interpreter's exit."""
_at_exit_registered = False
_answers = 0
"""How often the handler ran in the main thread: the watchdog's sign of a main thread that runs Python."""
_wakeup: tuple[int, int, int] | None = None
"""``(read end, write end, previous wakeup fd)`` of the watchdog's pipe while the handlers are installed."""


def received() -> int | None:
    """The signal number noted (``signal.SIGINT``/``SIGTERM``), or ``None``."""
    return _received


def installed() -> bool:
    """Whether the command's handlers are installed in this process."""
    return _previous is not None


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
    """Raise the interrupt noted (the handler's, possibly dropped by Python, or one noted in a shield)."""
    global _armed, _raised
    if _received is not None:
        _armed = False
        _raised = interruption(_received)
        raise _raised


def message(exc: BaseException | None = None) -> str:
    """What an interrupted run records as its error: ``terminated by SIGTERM`` or ``interrupted by the user``.

    A bare ``KeyboardInterrupt`` raised again for a SIGTERM (a sweep's job does) still says SIGTERM.
    """
    text = str(exc) if exc is not None else ""
    return text or (str(Terminated()) if _received == signal.SIGTERM else INTERRUPTED)


def exit_code(exc: BaseException | None = None) -> int:
    """143 when the command was terminated by SIGTERM (or *exc* is :class:`Terminated`), else 130."""
    if _received is not None:
        return EXIT_SIGTERM if _received == signal.SIGTERM else EXIT_SIGINT
    return EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT


def from_signal(exc: BaseException) -> bool:
    """Whether the ``KeyboardInterrupt`` *exc* stands for a signal, not for code that raised it (a component).

    With the command's handlers a signal is always noted; in another thread no
    signal raises anything. Only Python's own SIGINT handler in the main thread
    (a library user's process) leaves it open: that counts as a signal.
    """
    if _received is not None or isinstance(exc, Terminated):
        return True
    if _previous is not None or threading.current_thread() is not threading.main_thread():
        return False
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler


def reported() -> None:
    """Note that the command printed its line about the interrupt (a run's summary): :func:`finish` prints none."""
    global _reported
    _reported = True


def _handler(signum: int, frame: FrameType | None) -> None:
    global _received, _armed, _raised, _answers
    _answers += 1
    wakeup = _wakeup
    if wakeup is not None:  # what the pipe holds is handled: the watchdog sees a main thread that runs Python
        with contextlib.suppress(OSError):
            os.read(wakeup[0], 512)
    if _received is None:
        _received = signum
    if _armed and not _shields:
        _armed = False
        _raised = interruption(_received)
        raise _raised


def _unraisable(previous: Any) -> Any:
    def hook(info: Any) -> None:
        global _armed, _shields
        if _raised is None or info.exc_value is not _raised:
            previous(info)
            return
        # Python dropped the interrupt (in a finalizer): raise it again once the main thread is out of it
        _shields += 1  # not in here, where it would be dropped again
        try:
            _armed = True
            with contextlib.suppress(RuntimeError):  # no new thread while the interpreter exits
                threading.Thread(target=_redeliver, name="cosimrun-signal", daemon=True).start()
        finally:
            _shields -= 1

    return hook


def _redeliver() -> None:
    """Trip the signal again for the main thread until an interrupt is raised there (or no longer wanted)."""
    while _armed and _previous is not None and _received is not None:
        _thread.interrupt_main(_received)
        time.sleep(REDELIVERY_S)


def _watch(read: int) -> None:
    """The watchdog: end the command when a signal stays in the wakeup pipe (see the module docstring)."""
    since: float | None = None  # when the pipe was first seen holding a signal the handler did not take
    while _wakeup is not None and _wakeup[0] == read:
        if since is None:
            if select.select([read], [], [])[0]:
                since = time.monotonic()
            continue
        time.sleep(WATCH_POLL_S)
        waiting = _pending(read)
        if not waiting:
            since = None
        elif time.monotonic() - since >= _grace(waiting) and _wakeup is not None:
            signum = _received
            with contextlib.suppress(OSError):  # the signal the pipe holds (the handler's once it runs)
                signum = signum or next((b for b in os.read(read, 512) if b in SIGNALS), signal.SIGINT)
            if not _answers_when_asked(signum or signal.SIGINT):
                _stuck(signum or signal.SIGINT, time.monotonic() - since)
            since = None
    os.close(read)  # uninstall closed the write end


def _grace(waiting: int) -> float:
    """How long *waiting* signals may stay in the pipe: :data:`SECOND_GRACE_S` when one of them, or one the
    handler noted before, makes two."""
    return SECOND_GRACE_S if waiting > 1 or _received is not None else STUCK_GRACE_S


def _pending(read: int) -> int:
    """How many bytes the pipe holds (signals not handled yet)."""
    with contextlib.suppress(OSError):
        return struct.unpack("i", fcntl.ioctl(read, termios.FIONREAD, b"\0\0\0\0"))[0]
    return 0


def _answers_when_asked(signum: int) -> bool:
    """Whether the main thread runs the handler for *signum* within :data:`ASK_S`."""
    answered = _answers
    with contextlib.suppress(OSError, ValueError):
        _thread.interrupt_main(signum)
    deadline = time.monotonic() + ASK_S
    while time.monotonic() < deadline:
        if _answers != answered:
            return True
        time.sleep(WATCH_POLL_S)
    return False


def _stuck(signum: int, seconds: float) -> NoReturn:
    """End the command from the watchdog: the main thread has not run Python for *seconds* after *signum*."""
    text = str(Terminated()) if signum == signal.SIGTERM else INTERRUPTED
    where = _stuck_in()
    closed: list[Any] = []
    hdf5 = sys.modules.get("cosimrun.storage.hdf5")
    if hdf5 is not None:  # no results file is open unless the writer's module was imported
        closer = threading.Thread(target=lambda: closed.extend(hdf5.HDF5Writer.close_open("interrupted", text)),
                                  name="cosimrun-close", daemon=True)
        closer.start()
        closer.join(CLOSE_TIMEOUT_S)
    kept = "; ".join(f"results up to the last flush kept in {path} (status {status})" for path, status in closed)
    _say(f"{text}: {where} for {seconds:.1f} s and cannot be interrupted (left running)" + (f"; {kept}" if kept
                                                                                               else ""))
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    _tell(b"\0X")
    os._exit(EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT)


WITNESS = r"""
import json, math, os, signal, struct, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
data = b""
while chunk := os.read(0, 1 << 16):
    data += chunk
state = os.pread(STATE_FD, STATE_BYTES, 0)
record = None
if state[:1] in (b"\1", b"\2"):
    start = 1 + (state[0] - 1) * SLOT
    size = int.from_bytes(state[start:start + 4], "little")
    record = state[start + 4:start + 4 + size].decode("utf-8", "surrogateescape")
dump = []
for line in data.splitlines():
    if line.startswith(b"\0X"):
        sys.exit()
    elif line.strip():
        dump.append(line.decode("utf-8", "replace"))
fatal = "Fatal Python error: "
error = next((d[len(fatal):].strip() for d in dump if d.startswith(fatal)), None)
if record is None and error is None:
    sys.exit()
names = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Floating point exception": "SIGFPE",
         "Bus error": "SIGBUS", "Illegal instruction": "SIGILL"}
how = f"crashed with {names.get(error, 'a fatal signal')} ({error})" if error else \
    "ended (exit() in native code, or killed)"
where = ""
if record is not None:
    try:
        raw = open(record, "rb").read()
        comps = json.loads(raw[:NAMES_BYTES])
        times = struct.unpack(f"<{len(comps)}d", raw[NAMES_BYTES:NAMES_BYTES + 8 * len(comps)])
        inside = {c: t for c, t in zip(comps, times) if not math.isnan(t)}
    except (OSError, ValueError, struct.error):
        inside = {}
    if len(inside) == 1:
        where = f" in the step of component {next(iter(inside))!r} from t={max(inside.values()):.12g}"
    elif inside:
        where = (f" in a step of the components {', '.join(map(repr, inside))} (stepped in parallel) from "
                 f"t={max(inside.values()):.12g}")
    try:
        with open(record[:-len(SUFFIX)] + CAUSE, "w", encoding="utf-8") as cause:
            cause.write(f"the process {how}{where}\n")
    except OSError:
        pass
    results = record[:-len(SUFFIX)] + ".partial"
    where += f"; results up to the last flush kept in {results} (status running)"
if SAY:
    print(f"cosimrun: error: the process {how}{where}", file=sys.stderr, flush=True)
"""
"""The crash witness: a small process that outlives the command's and says in one line how and where it died.

It reads a pipe from the command: faulthandler's report of a fatal signal, and a NUL byte and ``X`` on a line
when the command ends on purpose in the middle of a run (the watchdog). Which run is going on (the record of
:mod:`cosimrun.core.crashsite`, or none) it reads at the end from a small file the command shares with it by
memory map (:func:`_run_recorded`), which a run's start and end write without a system call or waking the
witness. At the end of the pipe (the command's process is gone) it prints the line, unless the command ended on
purpose, or outside a run without a fatal signal; when a run was recorded it also writes the cause to
``<results file>.crash`` (:data:`~cosimrun.core.crashsite.CAUSE`), which a sweep's launcher reports for a job
whose worker died.
"""
_witness: int | None = None
"""The write end of the pipe to the crash witness, once started."""
_current: mmap.mmap | None = None
"""The shared map saying which run is going on: a byte naming the slot in use (0: no run, 1 or 2), then two slots
of :data:`_SLOT` bytes, each the record's path as its length (4 bytes, little-endian) and its bytes. A run's start
writes the slot not in use, then the byte: a process killed at any instant leaves one whole path or none."""
_SLOT = 4 + 4096
"""Bytes of one slot of :data:`_current`: a path's length and the longest path it holds (longer: not recorded)."""
_say_crash = True


def watch_crashes(say: bool = True) -> None:
    """Have a crash of this process in native code reported (see :data:`WITNESS`): in one line on stderr with
    *say*, and in the cause file of the run. The witness starts with the first recorded run, and faulthandler
    writes to it."""
    global _say_crash
    from cosimrun.core import crashsite

    _say_crash = say
    crashsite.listener = _run_recorded


WITNESS_WAIT = 5.0
"""Seconds :func:`crash_cause` waits for the witness of a process that died in a run to write what it saw."""


def crash_cause(results: str | os.PathLike[str], wait: float = WITNESS_WAIT) -> str | None:
    """What the witness wrote of a process that died running the run of *results* (``None``: nothing).

    The witness writes once the dead process's pipe closes, which may be after
    the sweep's driver learns of the death: while the run's record (``.steps``)
    is there without the witness's file, this waits up to *wait* seconds for it.
    """
    from cosimrun.core.crashsite import CAUSE, SUFFIX

    cause, record = os.fspath(results) + CAUSE, os.fspath(results) + SUFFIX
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(cause, encoding="utf-8") as f:
                text = f.read().strip()
        except OSError:
            text = ""
        if text or not os.path.exists(record) or time.monotonic() >= deadline:  # written, or none is coming
            return text or None
        time.sleep(0.05)


def _run_recorded(record: Any) -> None:
    """Tell the witness (started now, the first time) that the run recorded in *record* began, or that the run
    ended (``None``)."""
    global _witness, _current
    if _witness is None:
        import faulthandler
        import subprocess
        import tempfile

        from cosimrun.core.crashsite import CAUSE, NAMES_BYTES, SUFFIX

        size = 1 + 2 * _SLOT
        try:
            with tempfile.TemporaryFile() as shared:  # no name: gone with the last process holding it
                shared.truncate(size)
                current = mmap.mmap(shared.fileno(), size)
                read, write = os.pipe()
                settings = (NAMES_BYTES, SUFFIX, CAUSE, _say_crash, shared.fileno(), size, _SLOT)
                code = f"NAMES_BYTES, SUFFIX, CAUSE, SAY, STATE_FD, STATE_BYTES, SLOT = {settings!r}\n{WITNESS}"
                try:
                    subprocess.Popen([sys.executable, "-I", "-S", "-c", code], stdin=read,
                                     stdout=subprocess.DEVNULL, start_new_session=True, pass_fds=(shared.fileno(),))
                except OSError:
                    os.close(write)
                    raise
                finally:
                    os.close(read)
        except OSError:  # no witness: crashes stay silent
            return
        _witness, _current = write, current
        faulthandler.enable(file=write, all_threads=False)
    assert _current is not None
    if record is None:
        _current[0] = 0
        return
    path = os.fsencode(record)
    if len(path) > _SLOT - 4:
        _current[0] = 0
        return
    slot = 2 if _current[0] == 1 else 1
    start = 1 + (slot - 1) * _SLOT
    _current[start:start + 4 + len(path)] = len(path).to_bytes(4, "little") + path
    _current[0] = slot


def _tell(message: bytes) -> None:
    if _witness is not None:
        with contextlib.suppress(OSError):
            os.write(_witness, message + b"\n")


def _stuck_in() -> str:
    """What the main thread is stuck in: the innermost component method on its stack and the time it stepped from."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    component = sys.modules.get("cosimrun.core.component")
    while frame is not None and component is not None:
        local = frame.f_locals
        t = local.get("t")
        at = f" at t={t:.12g}" if isinstance(t, float | int) else ""
        owner, batch = local.get("self"), local.get("batch")
        if isinstance(owner, component.CoSimComponent):
            return f"component {owner.name!r} has not returned from {frame.f_code.co_name}(){at}"
        steps = getattr(batch, "steps", None)  # a parallel master's batch (cosimrun.masters.parallel)
        if isinstance(steps, list) and steps and all(isinstance(s[0], component.CoSimComponent) for s in steps):
            names = ", ".join(repr(s[0].name) for s in steps)
            return f"a step of the components {names} (stepped in parallel) has not returned{at}"
        frame = frame.f_back
    return "the main thread has not returned from native code"


@contextlib.contextmanager
def shielded(deliver: bool = True) -> Iterator[None]:
    """Inside the block a signal is noted, not raised (no-op without the handlers).

    With *deliver*, one noted inside is raised as the outermost shield ends, unless an interrupt was
    raised already; without it the caller checks (:func:`received`).
    """
    global _shields
    _shields += 1
    try:
        yield
    finally:
        _shields -= 1
    if deliver and not _shields and _armed:
        check()


_held: contextlib.ExitStack | None = None
"""The shield :func:`hold` keeps up until :func:`release`."""


def hold() -> None:
    """Note signals, not raise them, until :func:`release`: Hydra's set-up of a single run (its run directory made,
    its files and log written), so that an interrupt there lands in the run's task, which removes that directory."""
    global _held
    if _held is None:
        _held = contextlib.ExitStack()
        _held.enter_context(shielded())


def release() -> None:
    """End :func:`hold` (nothing without one): a signal noted meanwhile is raised here."""
    global _held
    held, _held = _held, None
    if held is not None:
        held.close()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Inside a :func:`shielded` block, a block where signals raise again; one noted before is raised at its start."""
    global _shields
    saved, _shields = _shields, 0
    try:
        check()
        yield
    finally:
        _shields = saved


def install() -> bool:
    """Install the command's handlers (main thread only, once); whether this call installed them."""
    global _previous, _hook, _armed, _at_exit_registered
    if _previous is not None or threading.current_thread() is not threading.main_thread():
        return False
    _start_watchdog()  # before the handlers: nothing between them and the caller's ``try`` may be interrupted
    _hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    if not _at_exit_registered:  # registered first, so that it runs after every other exit function
        atexit.register(_at_exit)
        _at_exit_registered = True
    _reset()
    _armed = True
    _previous = {}
    for s in SIGNALS:
        _previous[s] = signal.signal(s, _handler)
    return True


def uninstall() -> None:
    """Restore the handlers :func:`install` replaced and forget what was noted."""
    global _previous, _hook
    if _previous is None:
        return
    for s, previous in _previous.items():
        signal.signal(s, previous)
    _stop_watchdog()
    sys.unraisablehook = _hook
    _previous = _hook = None
    _reset()


def _start_watchdog() -> None:
    """Write the signals to a pipe the watchdog thread reads (see the module docstring)."""
    global _wakeup
    if fcntl is None:
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    os.set_blocking(read, False)
    try:
        _wakeup = (read, write, signal.set_wakeup_fd(write, warn_on_full_buffer=False))
    except (ValueError, OSError):  # no wakeup fd to set here: no watchdog
        os.close(read)
        os.close(write)
        return
    try:
        threading.Thread(target=_watch, args=(read,), name="cosimrun-watchdog", daemon=True).start()
    except RuntimeError:  # no thread to start (the interpreter exits): no watchdog
        _stop_watchdog()
        os.close(read)


def _stop_watchdog() -> None:
    global _wakeup
    if _wakeup is None:
        return
    _read, write, previous = _wakeup
    _wakeup = None
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(previous)
    os.close(write)  # the watchdog sees the end of the pipe, closes its read end and returns


def _reset() -> None:
    global _received, _armed, _shields, _raised, _reported, _final
    _received, _armed, _shields, _raised, _reported, _final = None, False, 0, None, False, None


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """The handlers inside the block (restored after it) unless they are installed already (the command's)."""
    mine = install()
    try:
        yield
    finally:
        if mine:
            uninstall()


def finish(status: int | str | None, *, keep: bool) -> NoReturn:
    """End the command with *status*, or with 130/143 and one line on stderr when a signal was noted.

    No signal raises from here on. With *keep* (the command is the process) the
    handlers stay until the interpreter has exited, noting signals: one that
    arrives while the exit functions run (a dask cluster closing) still ends
    the process with 130/143 and its line. Otherwise they are restored.
    """
    global _armed, _final
    _armed = False
    if _received is not None:
        if not _reported:
            _say(message())
        status = exit_code()
    if keep and _previous is not None:
        _final = (_code(status), _received)
    else:
        uninstall()
    sys.exit(status)


def _code(status: int | str | None) -> int:
    if status is None:
        return 0
    return status if isinstance(status, int) else EXIT_FAILED


def _say(text: str) -> None:
    with contextlib.suppress(Exception):  # stderr closed: the exit status still says it
        print(f"cosimrun: {text}", file=sys.stderr, flush=True)


def _at_exit() -> None:
    """Last exit function: a signal that arrived after :func:`finish` decided the status ends the process now."""
    if _final is None or _received is None or _final[1] is not None:
        return
    _say(message())
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    os._exit(exit_code())
