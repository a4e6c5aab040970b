"""A sweep owns its directory: the lock file that keeps a second sweep out while the first one lives.

A sweep creates ``<sweep dir>/.cosimrun-sweep.lock`` atomically
(``O_CREAT | O_EXCL``) before it writes anything there, holding its PID, host
and start time as JSON, and removes it when it ends (normally, on Ctrl-C,
SIGTERM or an error: :func:`release_all` runs from the ledger's ``finish`` and
at exit). A second sweep into the same directory finds the file and stops
with :class:`~cosimrun.errors.SweepDirectoryInUseError`, unless the holder is
gone:

* same host: the PID no longer runs (or now belongs to a process started
  later, a reused PID): the lock is taken over;
* another host: its liveness cannot be checked from here. The holder touches
  the file every :data:`HEARTBEAT_S` seconds, so a lock whose file has not
  changed for :data:`FOREIGN_STALE_S` seconds is taken over; a younger one
  counts as held.

Taking over is serialized by a second file (``.cosimrun-sweep.lock.takeover``,
also created exclusively), so that two sweeps finding the same stale lock do
not both take it.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from cosimrun.errors import SweepDirectoryInUseError

LOCK_FILE = ".cosimrun-sweep.lock"
HEARTBEAT_S = 30.0
"""How often the holder touches its lock file (its sign of life for other hosts)."""
FOREIGN_STALE_S = 600.0
"""A lock from another host whose file did not change for this long is taken over."""
_UNWRITTEN_GRACE_S = 5.0
"""A lock file still empty or unreadable after this long was left by a process that died creating it."""
_TAKEOVER_STALE_S = 30.0
"""A takeover guard file older than this was left by a process that died taking over."""


@dataclass(frozen=True)
class LockHolder:
    """What a lock file records about the sweep that holds the directory."""

    pid: int
    host: str
    started: str
    """ISO 8601 time the sweep took the lock."""
    token: str
    """Unique per lock: release removes only the file it created."""
    proc_start: str = ""
    """The holder's start time in the kernel's process table (Linux), to tell a reused PID."""

    def describe(self) -> str:
        return f"PID {self.pid} on host {self.host}, started {self.started}"

    @classmethod
    def of_this_process(cls) -> LockHolder:
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            started=datetime.now().astimezone().isoformat(timespec="seconds"),
            token=uuid.uuid4().hex,
            proc_start=_proc_stat(os.getpid())[1],
        )


def _proc_stat(pid: int) -> tuple[str, str]:
    """``(state, start time)`` of *pid* from ``/proc/<pid>/stat`` (``("", "")`` where there is none)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "", ""
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], fields[19]


def _alive(holder: LockHolder) -> bool:
    """Whether the holder's process (on this host) still runs: the PID exists, is no zombie, is not reused."""
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    state, start = _proc_stat(holder.pid)
    if state == "Z":
        return False
    return not (holder.proc_start and start and start != holder.proc_start)


class SweepLock:
    """The lock of one sweep directory: :meth:`acquire` it before writing there, :meth:`release` it at the end."""

    def __init__(self, sweep_dir: str | os.PathLike[str], *, foreign_stale_s: float = FOREIGN_STALE_S) -> None:
        self.sweep_dir = Path(sweep_dir).absolute()
        self.path = self.sweep_dir / LOCK_FILE
        self.foreign_stale_s = foreign_stale_s
        self.holder: LockHolder | None = None
        self.took_over = ""
        """After :meth:`acquire`: why an earlier holder's lock was taken over (``""`` if there was none)."""
        self._stop = threading.Event()

    @property
    def held(self) -> bool:
        return self.holder is not None

    def acquire(self) -> None:
        """Create the lock file, taking over a stale one; ``SweepDirectoryInUseError`` if a live sweep holds it."""
        if self.held:
            return
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        me = LockHolder.of_this_process()
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(asdict(me), f)
            self.holder = me
            self._stop.clear()
            threading.Thread(target=self._heartbeat, name="cosimrun-sweep-lock", daemon=True).start()
            return
        raise SweepDirectoryInUseError(
            f"sweep directory {self.sweep_dir} is being taken by another sweep (its lock {self.path} changed "
            "hands while this one tried to take it); choose another hydra.sweep.dir",
            path=str(self.path),
            holder={},
        )

    def release(self) -> None:
        """Remove the lock file if it is still this sweep's (nothing when it is not held)."""
        if self.holder is None:
            return
        self._stop.set()
        text, _, _ = self._read()
        with contextlib.suppress(FileNotFoundError):
            if text is not None and self.holder.token in text:
                self.path.unlink()
        self.holder = None

    def __enter__(self) -> SweepLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def _read(self) -> tuple[str | None, LockHolder | None, float]:
        """``(text, holder, age in seconds)`` of the lock file; text None when it is gone, holder None if unreadable."""
        try:
            text = self.path.read_text(encoding="utf-8")
            age = time.time() - self.path.stat().st_mtime
        except FileNotFoundError:
            return None, None, 0.0
        try:
            holder = LockHolder(**json.loads(text))
        except (ValueError, TypeError):
            holder = None
        return text, holder, age

    def _take_over_if_stale(self) -> None:
        """Remove the existing lock file if its holder is gone (noting why); raise if it is alive."""
        text, holder, age = self._read()
        if text is None:
            return  # released meanwhile
        reason = self._stale_reason(holder, age)
        if reason is None:
            time.sleep(0.2)  # being written right now: read it again
            return
        guard = self.path.with_name(LOCK_FILE + ".takeover")
        try:
            fd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - guard.stat().st_mtime > _TAKEOVER_STALE_S:
                    guard.unlink()
            time.sleep(0.1)
            return
        try:
            os.close(fd)
            if self._read()[0] == text:  # still the stale lock (not taken over by another sweep meanwhile)
                self.path.unlink()
                who = holder.describe() if holder else "an unknown process"
                self.took_over = f"took over the lock of sweep directory {self.sweep_dir} from {who}: {reason}"
        finally:
            guard.unlink()

    def _stale_reason(self, holder: LockHolder | None, age: float) -> str | None:
        """Why the lock's holder counts as gone (None: its file is being written); raises if it may still run."""
        if holder is None:
            return "its lock file was left unfinished" if age > _UNWRITTEN_GRACE_S else None
        if holder.host == socket.gethostname():
            if not _alive(holder):
                return "that process no longer runs"
            raise SweepDirectoryInUseError(
                f"sweep directory {self.sweep_dir} is in use by a running sweep ({holder.describe()}); "
                "wait for it to finish or choose another hydra.sweep.dir",
                path=str(self.path),
                holder=asdict(holder),
            )
        if age > self.foreign_stale_s:
            return f"it runs on another host and gave no sign of life for {age / 60:.0f} min"
        raise SweepDirectoryInUseError(
            f"sweep directory {self.sweep_dir} is in use by a sweep on another host ({holder.describe()}; "
            f"last sign of life {age:.0f} s ago); it is taken over after {self.foreign_stale_s / 60:.0f} min "
            f"without one, or remove {self.path} if that sweep is gone",
            path=str(self.path),
            holder=asdict(holder),
        )


_held: dict[Path, SweepLock] = {}
_at_exit = False


def claim(sweep_dir: str | os.PathLike[str]) -> SweepLock:
    """The ``cosimrun`` command's lock on *sweep_dir*, acquired once per process and kept until :func:`release_all`.

    A takeover is said in one line on stderr; a directory held by a live
    sweep ends the command with one line and exit status 2
    (:func:`cosimrun.exits.fail`) before anything is written there.
    """
    global _at_exit
    from cosimrun.exits import fail

    key = Path(sweep_dir).absolute()
    lock = _held.get(key)
    if lock is not None:
        return lock
    lock = SweepLock(key)
    try:
        lock.acquire()
    except SweepDirectoryInUseError as exc:
        fail(str(exc))
    if not _at_exit:
        atexit.register(release_all)
        _at_exit = True
    _held[key] = lock
    if lock.took_over:
        print(f"cosimrun: {lock.took_over}", file=sys.stderr)
    return lock


def release_all() -> None:
    """Release every lock :func:`claim` took (the end of the command)."""
    while _held:
        _held.popitem()[1].release()
