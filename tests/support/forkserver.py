"""The ``cosimrun`` command of the tests' subprocesses, forked from one process that imported it once.

Most of a short command's time is Python importing cosimrun, Hydra, numpy and h5py; the tests and the
documentation's examples run some hundreds of commands. A server (this script, started by :func:`started`)
listens on a Unix socket; a shim (:data:`SHIM`, written by :func:`write_shim`) stands where the command would
be started. The shim sends its arguments, working directory and environment, and its standard input, output and
error themselves (the file descriptors, so pipes and redirections are the caller's), and ends as the command
ended: the same exit status, or the same signal. The server forks; the child becomes what the command would
have been (its ``sys.argv``, ``sys.path[0]``, ``__main__`` file, working directory, environment and descriptors
0-2) and calls :func:`cosimrun.cli.main` as the command does.

A server stands in for one form of the command (:class:`Form`): the console script (the examples), ``python -c
"from cosimrun.cli import main; main()"`` or ``python tests/support/run_cli.py`` (the tests; the latter's module,
which registers test-only component types, is imported by the server too). Whatever the server cannot stand in
for runs the real command: an environment that differs from the server's (a variable that a module read when it
was imported) or a server that is gone. Signals the shim receives (SIGINT, SIGTERM, SIGHUP) are passed on to the
child. ``COSIMRUN_TESTS_FORK=0`` turns the tests' servers off (:func:`command`).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import gc
import importlib
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

PRELOAD = ("cosimrun.cli", "cosimrun.config.reporting", "cosimrun.config.build", "cosimrun.runner.ledger",
           "cosimrun.runner.run", "cosimrun.runner.signals", "cosimrun.storage", "cosimrun.post.commands",
           "cosimrun.components._base", "cosimrun.components.fmu.base", "hydra_plugins.cosimrun_sweeper.sweeper",
           "hydra_plugins.cosimrun_dask_launcher.dask_launcher", "hydra.main", "hydra._internal.utils", "h5py",
           "numpy", "pandas")
"""Modules a command imports anyway; none of them starts a thread or reads the environment it is given later."""

IGNORED = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PS4", "PYTEST_CURRENT_TEST"})
"""Variables a shell sets (or, not interactive, drops) for every command, and the one pytest sets for each test:
differences in them do not make a command run for real."""

CLI = "from cosimrun.cli import main; main()"
"""The console script's entry point, as ``python -c`` runs it."""
RUN_CLI = Path(__file__).with_name("run_cli.py")
"""The command with the test-only component types (see there)."""


@dataclass(frozen=True)
class Form:
    """A form of the ``cosimrun`` command a server stands in for: the command line that runs it for real
    (*real*), the ``sys.argv[0]`` and ``sys.path[0]`` the child takes, the ``__main__`` file (which a sweep's
    local workers import again; ``""``: none, as under ``python -c``) and a module the server imports first."""

    real: tuple[str, ...]
    argv0: str
    path0: str
    main_file: str = ""
    module: str = ""

    @classmethod
    def console_script(cls) -> Form:
        script = str(Path(sys.executable).parent / "cosimrun")
        return cls((script,), script, str(Path(script).parent), script)

    @classmethod
    def python_c(cls) -> Form:
        return cls((sys.executable, "-c", CLI), "-c", "")

    @classmethod
    def run_cli(cls) -> Form:
        return cls((sys.executable, str(RUN_CLI)), "cosimrun", str(RUN_CLI.parent), str(RUN_CLI), str(RUN_CLI))


SHIM = '''#!{python} -IS
"""`cosimrun`, forked by tests/support/forkserver.py's server (see there); the real command if it is gone."""
import json, os, signal, socket, sys

REAL = {real!r}
try:
    server = socket.socket(socket.AF_UNIX)
    server.connect({socket!r})
except OSError:
    os.execv(REAL[0], [*REAL, *sys.argv[1:]])
request = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(server, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
replies = server.makefile("r")
kind, _, value = replies.readline().partition(" ")
if kind != "pid":
    server.close()
    os.execv(REAL[0], [*REAL, *sys.argv[1:]])
child = int(value)
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda signum, frame: os.kill(child, signum))
kind, _, value = replies.readline().partition(" ")
if kind == "signal":
    signal.signal(int(value), signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
sys.exit(int(value) if kind == "exit" else 1)
'''


def write_shim(path: Path, socket_path: Path, form: Form) -> None:
    """The ``cosimrun`` shim at *path*, a client of the server at *socket_path* (the real command: *form*'s)."""
    path.write_text(SHIM.format(python=sys.executable, real=list(form.real), socket=str(socket_path)))
    path.chmod(0o755)


@contextlib.contextmanager
def started(env: Mapping[str, str], folder: Path, form: Form) -> Iterator[Path]:
    """A server for commands of *form* run in *env*, its socket and log (``server.log``) in *folder*: yields the
    socket once the server listens, and ends the server after (its commands still running go on alone)."""
    socket_path = folder / "cosimrun.sock"
    with (folder / "server.log").open("wb") as log:
        server = subprocess.Popen([sys.executable, __file__, str(socket_path), json.dumps(vars(form))], env=dict(env),
                                  cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while not socket_path.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the fork server did not start: {(folder / 'server.log').read_text()}")
            time.sleep(0.05)
        yield socket_path
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the server ends at the end of its input
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


MOST_SERVERS = 6
"""Servers one process keeps at most (one per form and environment): a new one ends the one used least recently."""

_servers: collections.OrderedDict[tuple[Form, frozenset[tuple[str, str]]], tuple[Path, contextlib.ExitStack]] = (
    collections.OrderedDict())
_uses: collections.Counter[tuple[Form, frozenset[tuple[str, str]]]] = collections.Counter()


def _end_servers() -> None:
    while _servers:
        _servers.popitem()[1][1].close()


atexit.register(_end_servers)


def command(form: Form, env: Mapping[str, str]) -> list[str]:
    """The command line that runs *form* in *env* from this process: the shim of a server for *form* and *env*
    from the second such call on (a server costs what a command does: an environment used once, as a test that
    sets a variable of its own has, runs for real), or the real command line (with ``COSIMRUN_TESTS_FORK=0``)."""
    key = (form, frozenset((k, v) for k, v in env.items() if k not in IGNORED))
    if os.environ.get("COSIMRUN_TESTS_FORK", "1") == "0":
        return list(form.real)
    if key not in _servers:
        _uses[key] += 1
        if _uses[key] < 2:
            return list(form.real)
        if len(_servers) >= MOST_SERVERS:
            _servers.popitem(last=False)[1][1].close()
        stack = contextlib.ExitStack()
        folder = Path(tempfile.mkdtemp(prefix="cosimrun-fork-"))  # short: a socket's path has at most 107 bytes
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        socket_path = stack.enter_context(started(env, folder, form))
        write_shim(folder / "cosimrun", socket_path, form)
        _servers[key] = (folder / "cosimrun", stack)
    _servers.move_to_end(key)
    return [str(_servers[key][0])]


def run(form: Form, args: list[str], env: Mapping[str, str] | None = None,
        **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` of the command *form* with *args* in *env* (this process's environment if ``None``) through
    :func:`command`. The environment is passed on explicitly: the one a child would inherit may hold more than
    ``os.environ`` (readline exports ``COLUMNS`` and ``LINES`` behind its back)."""
    env = dict(os.environ if env is None else env)
    return subprocess.run([*command(form, env), *args], env=env, **kwargs)


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


def serve(socket_path: str, own: dict[str, str]) -> tuple[dict[str, Any], list[int]] | None:
    """Serve until standard input ends; in a forked child, return its request and descriptors.

    Each command is logged on standard error: ``forked PID: ARGS`` or ``real command (VARIABLES differ): ARGS``.
    """
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


def become_the_command(request: dict[str, Any], fds: list[int], form: Form) -> None:
    """In the forked child: take the shim's descriptors, directory and environment, and run the command."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [form.argv0, *request["argv"]]
    main_module = sys.modules["__main__"]
    if form.main_file:
        main_module.__file__ = form.main_file
    else:
        del main_module.__file__
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


def _import_file(path: str) -> None:
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


if __name__ == "__main__":
    _, socket_path, described = sys.argv
    environment = dict(os.environ)  # as started: an imported module may add to it (COLUMNS, LINES)
    form = Form(**{k: tuple(v) if k == "real" else v for k, v in json.loads(described).items()})
    sys.path[0] = form.path0  # the command's, not this script's folder (a module may put more before it)
    if form.module:
        _import_file(form.module)
    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a preloaded module started a thread: forking would be unsafe"
    gc.freeze()  # the children's collections leave the server's objects alone (and their pages shared)
    sys.stdout.flush()
    job = serve(socket_path, environment)
    if job is not None:
        become_the_command(*job, form)
