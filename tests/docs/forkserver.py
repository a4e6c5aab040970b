"""The ``cosimrun`` command of the documentation's examples, forked from one process that imported it once.

Most of a short command's time is Python importing cosimrun, Hydra, numpy and h5py; the examples run
about a hundred commands. ``conftest.py`` (here) starts this script as a server on a Unix socket and puts
a ``cosimrun`` shim (:data:`SHIM`) first on the examples' ``PATH``. The shim sends its arguments, working
directory and environment, and its standard input, output and error themselves (the file descriptors,
so pipes and redirections are the shell's), and ends as the command ended: the same exit status, or the
same signal. The server forks; the child becomes what the console script would have been (its
``sys.argv``, ``sys.path[0]``, ``__main__`` file, working directory, environment and descriptors 0-2)
and calls :func:`cosimrun.cli.main` as the script does.

Whatever the server cannot stand in for runs the real command: an environment that differs from the
server's (a variable that a module read when it was imported) or a server that is gone. Signals the
shim receives (SIGINT, SIGTERM, SIGHUP) are passed on to the child.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

PRELOAD = ("cosimrun.cli", "cosimrun.config.reporting", "cosimrun.config.build", "cosimrun.runner.ledger",
           "cosimrun.runner.run", "cosimrun.runner.signals", "cosimrun.storage", "cosimrun.post.commands",
           "cosimrun.components._base", "cosimrun.components.fmu.base", "hydra_plugins.cosimrun_sweeper.sweeper",
           "hydra_plugins.cosimrun_dask_launcher.dask_launcher", "hydra.main", "hydra._internal.utils", "h5py",
           "numpy", "pandas")
"""Modules a command imports anyway; none of them starts a thread or reads the environment it is given later."""

IGNORED = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PS4"})
"""Variables a shell sets (or, not interactive, drops) for every command: differences in them do not make a
command run for real."""

SHIM = '''#!{python} -IS
"""`cosimrun`, forked by tests/docs/forkserver.py's server (see there); the real command if it is gone."""
import json, os, signal, socket, sys

REAL = {real!r}
try:
    server = socket.socket(socket.AF_UNIX)
    server.connect({socket!r})
except OSError:
    os.execv(REAL, [REAL, *sys.argv[1:]])
request = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(server, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
replies = server.makefile("r")
kind, _, value = replies.readline().partition(" ")
if kind != "pid":
    server.close()
    os.execv(REAL, [REAL, *sys.argv[1:]])
child = int(value)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda signum, frame: os.kill(child, signum))
kind, _, value = replies.readline().partition(" ")
if kind == "signal":
    signal.signal(int(value), signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
sys.exit(int(value) if kind == "exit" else 1)
'''


def write_shim(path: Path, socket_path: Path, real: Path) -> None:
    """The ``cosimrun`` shim at *path*, a client of the server at *socket_path* (*real*: the console script)."""
    path.write_text(SHIM.format(python=sys.executable, real=str(real), socket=str(socket_path)))
    path.chmod(0o755)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    size = int.from_bytes(data[:8], "big")
    data = data[8:]
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the shim went away")
        data += chunk
    return json.loads(data), fds


def _differences(env: dict[str, str], own: dict[str, str]) -> list[str]:
    return sorted(k for k in (env.keys() | own.keys()) - IGNORED if env.get(k) != own.get(k))


def _log(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def serve(socket_path: str) -> tuple[dict[str, Any], list[int]] | None:
    """Serve until standard input ends; in a forked child, return its request and descriptors.

    Each command is logged on standard error: ``forked PID: ARGS`` or ``real command (VARIABLES differ): ARGS``.
    """
    own = dict(os.environ)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(socket_path)
    listener.listen(64)
    waiting: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([listener, 0], [], [], 0.02)
        if 0 in ready and not os.read(0, 1 << 16):
            return None
        if listener in ready:
            conn, _ = listener.accept()
            try:
                request, fds = _receive(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            differences = _differences(request["env"], own)
            if len(fds) != 3 or differences:
                for fd in fds:
                    os.close(fd)
                conn.sendall(b"fallback\n")
                conn.close()
                _log(f"real command ({', '.join(differences) or 'no descriptors'} differ): {request['argv']}")
                continue
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                for other in waiting.values():
                    other.close()
                return request, fds
            for fd in fds:
                os.close(fd)
            conn.sendall(f"pid {pid}\n".encode())
            waiting[pid] = conn
            _log(f"forked {pid}: {request['argv']}")
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid)
            ended = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
            with contextlib.suppress(OSError):  # the shim was killed: nobody to tell
                conn.sendall(f"{ended}\n".encode())
            conn.close()


def become_the_command(request: dict[str, Any], fds: list[int], real: str) -> None:
    """In the forked child: take the shim's descriptors, directory and environment, and run the console script."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [real, *request["argv"]]
    sys.path[0] = os.path.dirname(real)
    sys.modules["__main__"].__file__ = real
    importlib.invalidate_caches()
    from cosimrun.cli import main

    try:
        sys.exit(main())
    except SystemExit as exc:
        _exit_as_the_interpreter_does(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        _exit_as_the_interpreter_does(None, signal.SIGINT)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        _exit_as_the_interpreter_does(1)


def _exit_as_the_interpreter_does(code: object, by_signal: int | None = None) -> NoReturn:
    """End the child as Python ends a script (``SystemExit``'s code, threads joined, exit functions run, standard
    streams flushed, then an uncaught ``KeyboardInterrupt`` ends it by SIGINT), without tearing down the modules
    the server imported: that alone takes longer than a short command."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    threading._shutdown()  # type: ignore[attr-defined] - what the interpreter calls first when it ends
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - as the interpreter reports a stream it cannot flush at exit
            sys.unraisablehook(sys.UnraisableHookArgs((*sys.exc_info(), "Exception ignored on flushing", stream)))
            status = 120
    if by_signal is not None:
        signal.signal(by_signal, signal.SIG_DFL)
        os.kill(os.getpid(), by_signal)
    os._exit(status & 0xFF)


if __name__ == "__main__":
    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a preloaded module started a thread: forking would be unsafe"
    gc.freeze()  # the children's collections leave the server's objects alone (and their pages shared)
    _, socket_path, real_script = sys.argv
    sys.stdout.flush()
    job = serve(socket_path)
    if job is not None:
        become_the_command(*job, real_script)
