"""The sweep lock (:mod:`cosimrun.runner.lock`): one live sweep per directory, stale locks taken over."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cosimrun.errors import SweepDirectoryInUseError
from cosimrun.runner import lock as lock_module
from cosimrun.runner.lock import LOCK_FILE, LockHolder, SweepLock


def _lock_of(pid: int, host: str | None = None, proc_start: str = "") -> dict[str, object]:
    return {
        "pid": pid,
        "host": host or socket.gethostname(),
        "started": "2026-01-01T12:00:00+00:00",
        "token": "t" * 32,
        "proc_start": proc_start,
    }


def _write(sweep_dir: Path, content: dict[str, object] | str, age_s: float = 0.0) -> Path:
    path = sweep_dir / LOCK_FILE
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_acquire_writes_holder_and_release_removes_it(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "new" / "sweep"
    lock = SweepLock(sweep_dir)
    lock.acquire()
    data = json.loads((sweep_dir / LOCK_FILE).read_text())
    assert data["pid"] == os.getpid() and data["host"] == socket.gethostname()
    assert data["started"] and len(data["token"]) == 32 and lock.took_over == ""
    lock.acquire()  # held already: nothing happens
    lock.release()
    assert not (sweep_dir / LOCK_FILE).exists()
    lock.release()  # not held: nothing happens
    assert sorted(p.name for p in sweep_dir.iterdir()) == []


def test_a_live_holder_on_this_host_keeps_the_directory(tmp_path: Path) -> None:
    with SweepLock(tmp_path):
        before = (tmp_path / LOCK_FILE).read_text()
        with pytest.raises(SweepDirectoryInUseError) as info:
            SweepLock(tmp_path).acquire()
        assert (tmp_path / LOCK_FILE).read_text() == before
    message = str(info.value)
    assert f"in use by a running sweep (PID {os.getpid()} on host {socket.gethostname()}, started " in message
    assert "\n" not in message and info.value.holder["pid"] == os.getpid()
    assert info.value.path == str(tmp_path / LOCK_FILE)


@pytest.mark.parametrize(
    ("holder", "reason"),
    [
        (lambda: _lock_of(_dead_pid()), "that process no longer runs"),
        # a PID that runs, but is a process started after the lock was taken (a reused PID)
        (lambda: _lock_of(os.getpid(), proc_start="1"), "that process no longer runs"),
        (lambda: "{", "its lock file was left unfinished"),
        (lambda: _lock_of(1234, host="elsewhere.example"), "gave no sign of life for 20 min"),
    ],
    ids=["dead-pid", "reused-pid", "unfinished-file", "other-host-silent"],
)
def test_a_stale_lock_is_taken_over(tmp_path: Path, holder, reason: str) -> None:
    content = holder()
    _write(tmp_path, content, age_s=1200)
    lock = SweepLock(tmp_path)
    lock.acquire()
    assert reason in lock.took_over and str(tmp_path) in lock.took_over
    data = json.loads((tmp_path / LOCK_FILE).read_text())
    assert data["pid"] == os.getpid() and data["token"] == lock.holder.token
    assert not (tmp_path / (LOCK_FILE + ".takeover")).exists()
    lock.release()
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_lock_from_another_host_counts_as_held_while_it_shows_life(tmp_path: Path) -> None:
    path = _write(tmp_path, _lock_of(1234, host="elsewhere.example"), age_s=30)
    before = path.read_text()
    with pytest.raises(SweepDirectoryInUseError) as info:
        SweepLock(tmp_path).acquire()
    message = str(info.value)
    assert message.startswith(f"sweep directory {tmp_path} is in use by a sweep on another host (PID 1234 on host")
    assert "taken over after 10 min" in message and f"remove {path}" in message
    assert path.read_text() == before


def test_a_lock_being_written_is_not_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_module.time, "sleep", lambda s: None)
    path = _write(tmp_path, "")  # just created, not written yet
    with pytest.raises(SweepDirectoryInUseError, match="is being taken by another sweep"):
        SweepLock(tmp_path).acquire()
    assert path.read_text() == ""


def test_release_leaves_a_lock_that_another_sweep_took_over(tmp_path: Path) -> None:
    lock = SweepLock(tmp_path)
    lock.acquire()
    other = json.dumps(_lock_of(4321, host="elsewhere.example"))
    (tmp_path / LOCK_FILE).write_text(other)
    lock.release()
    assert (tmp_path / LOCK_FILE).read_text() == other


def test_the_holder_keeps_its_lock_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock_module, "HEARTBEAT_S", 0.05)
    with SweepLock(tmp_path):
        path = tmp_path / LOCK_FILE
        reset = time.time()
        os.utime(path, (0, 0))
        deadline = time.monotonic() + 60  # a margin for a loaded machine: the heartbeat comes every 50 ms
        while path.stat().st_mtime == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert path.stat().st_mtime >= reset - 1  # touched again after it was reset (1 s: the clock's granularity)


def test_lock_holder_describes_itself() -> None:
    me = LockHolder.of_this_process()
    assert me.describe() == f"PID {os.getpid()} on host {socket.gethostname()}, started {me.started}"
    if Path("/proc/self/stat").exists():
        assert me.proc_start.isdigit()


def test_claim_exits_with_one_line_when_held(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SweepLock(tmp_path / "s"):
        with pytest.raises(SystemExit) as info:
            lock_module.claim(tmp_path / "s")
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"cosimrun: error: sweep directory {tmp_path / 's'} is in use")
    lock = lock_module.claim(tmp_path / "s")
    assert lock_module.claim(tmp_path / "s") is lock  # once per process
    lock_module.release_all()
    assert not lock.held and not (tmp_path / "s" / LOCK_FILE).exists()
