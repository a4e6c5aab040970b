"""The pools that run FMU steps (``fmi2DoStep``, ``fmi3DoStep``) for the masters' parallel stepper, without Python.

An FMU's C step (:class:`~cosimrun.core.cstep.CStep`) describes its call in a
:class:`CStepJob`; :data:`RUNNER` starts the pool that runs batches of them,
each job exactly once, on the pool's threads and the calling thread at once:

* ``native`` (``cosimrun/fmi/_cpool.c``, an optional extension built at
  install when a C compiler and POSIX threads are there): native threads that
  take the jobs of a batch from one atomic word and run no Python, so a batch
  never waits for the GIL and a hand-off costs under a microsecond while the
  threads poll;
* ``threads`` (:class:`ThreadPool`, always there): Python threads that make
  the same C calls through ctypes, which releases the GIL for the call, so
  the calls run at once as well; each job costs a few microseconds of Python
  and a hand-off may wait for the GIL.

Both make the same calls with the same arguments, so they compute the same
bits. ``native`` is used when it is built; :data:`ENV_POOL`
(``COSIMRUN_PARALLEL_POOL=threads``) chooses the Python threads, and
``=native`` makes a run fail in one line when the extension is not there.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from cosimrun.console import notice
from cosimrun.core.cstep import CStepPool
from cosimrun.errors import ConfigError, did_you_mean, suggest


class CStepJob(ctypes.Structure):
    """One C step call: the layout of ``cosimrun_step_job`` in ``cosimrun/fmi/_cpool.c``.

    ``version`` 2 calls ``fmi2DoStep(instance, t, h, no_prior)``, 3 calls
    ``fmi3DoStep(instance, t, h, no_prior, *out)``, 0 calls nothing. With
    ``snapshot`` set, ``get_state(instance, &state)`` (``fmi2GetFMUstate``,
    ``fmi3GetFMUState``) runs first; when it fails, ``status`` is -1 and
    ``state_status`` says what it returned. ``thread`` tells who ran the job
    (0: the thread that ran the batch).
    """

    _fields_ = [
        ("step", ctypes.c_void_p),
        ("instance", ctypes.c_void_p),
        ("get_state", ctypes.c_void_p),
        ("state", ctypes.c_void_p),
        ("out", ctypes.c_void_p * 4),
        ("t", ctypes.c_double),
        ("h", ctypes.c_double),
        ("version", ctypes.c_int32),
        ("no_prior", ctypes.c_int32),
        ("snapshot", ctypes.c_int32),
        ("status", ctypes.c_int32),
        ("state_status", ctypes.c_int32),
        ("thread", ctypes.c_int32),
    ]


SNAPSHOT_FAILED = -1
"""``CStepJob.status`` of a job whose snapshot failed: it was not stepped."""
MAX_JOBS = 0xFFFF
"""The most jobs of one batch (the native pool's claim word holds a batch's size and next job in 16 bits each)."""
ENV_POOL = "COSIMRUN_PARALLEL_POOL"
"""``native`` or ``threads``: which pool runs parallel FMU steps (unset: ``native`` when it is built)."""
KINDS = ("native", "threads")

NATIVE_MISSING: str | None = None
"""Why the native pool cannot run, or ``None`` when it can."""
try:
    _cpool: Any = importlib.import_module("cosimrun.fmi._cpool")
except ModuleNotFoundError as exc:  # no C compiler (or no POSIX threads) when cosimrun was installed
    if exc.name != "cosimrun.fmi._cpool":
        raise
    _cpool = None
    NATIVE_MISSING = "not built"
except ImportError as exc:
    _cpool = None
    NATIVE_MISSING = f"not loadable ({exc})"
else:
    if (ctypes.sizeof(CStepJob), MAX_JOBS) != (_cpool.JOB_SIZE, _cpool.MAX_JOBS):
        NATIVE_MISSING = (f"built for another job layout ({_cpool.JOB_SIZE} bytes and {_cpool.MAX_JOBS} jobs a batch, "
                          f"not {ctypes.sizeof(CStepJob)} and {MAX_JOBS}): reinstall cosimrun")

_told = False


def pool_kind() -> str:
    """The pool a parallel run starts: :data:`ENV_POOL` when set, else ``native`` when it is built (else ``threads``,
    with a notice once per process). ``ConfigError`` names a bad value, or ``native`` when it is not built."""
    global _told
    chosen = os.environ.get(ENV_POOL, "").strip().lower()
    if chosen and chosen not in KINDS:
        close = did_you_mean(chosen, KINDS)
        raise ConfigError(ENV_POOL, f"{chosen!r} is not valid{suggest(chosen, KINDS)} (valid: native or threads)",
                          suggestion=close[0] if close else None)
    if chosen == "threads":
        return "threads"
    if NATIVE_MISSING is None:
        return "native"
    if chosen == "native":
        raise ConfigError(ENV_POOL, f"the native pool (cosimrun.fmi._cpool) is {NATIVE_MISSING}")
    if not _told:
        _told = True
        hint = " (reinstall cosimrun with a C compiler to build it)" if _cpool is None else ""
        notice(f"the native pool (cosimrun.fmi._cpool) is {NATIVE_MISSING}: parallel FMU steps run on Python "
               f"threads, with slower hand-offs{hint}", stacklevel=3)
    return "threads"


class FMIStepRunner:
    """Starts the pool that runs :class:`CStepJob` batches (:class:`~cosimrun.core.cstep.CStepRunner`)."""

    max_jobs: int = MAX_JOBS

    def start(self, threads: int, spin_s: float) -> CStepPool:
        """A pool of *threads* threads besides the caller (see :func:`pool_kind`)."""
        if pool_kind() == "native":
            assert _cpool is not None
            return _cpool.Pool(threads, spin_s * 1e6)
        return ThreadPool(threads, spin_s * 1e6)


RUNNER = FMIStepRunner()
"""The runner of every FMU's C step."""


# ------------------------------------------------------------------ the Python threads' pool
_FMI2_DO_STEP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int)
_FMI3_DO_STEP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_bool,
                                 ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
_GET_STATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_STATE_OFFSET = CStepJob.state.offset
_functions: dict[tuple[Any, int], Any] = {}
"""ctypes functions by prototype and address (built once: building one costs more than calling it)."""


def _function(prototype: Any, address: int) -> Any:
    """The C function at *address* as *prototype* (a ctypes call releases the GIL while it runs)."""
    key = (prototype, address)
    function = _functions.get(key)
    if function is None:
        if len(_functions) > 4096:  # FMUs loaded and unloaded over a long process: start afresh
            _functions.clear()
        function = _functions[key] = prototype(address)
    return function


def run_job(job: CStepJob, who: int) -> None:
    """Make the call *job* describes, as ``run_job`` of ``_cpool.c`` does; *who*: the running thread's number."""
    job.thread = who
    if job.snapshot and job.get_state:
        job.state_status = _function(_GET_STATE, job.get_state)(job.instance, ctypes.addressof(job) + _STATE_OFFSET)
        if job.state_status > 1:
            job.status = SNAPSHOT_FAILED
            return
    version = job.version
    if version == 2:
        job.status = _function(_FMI2_DO_STEP, job.step)(job.instance, job.t, job.h, job.no_prior)
    elif version == 3:
        out = job.out
        job.status = _function(_FMI3_DO_STEP, job.step)(job.instance, job.t, job.h, job.no_prior != 0,
                                                         out[0], out[1], out[2], out[3])
    else:
        job.status = 0


_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: time.sleep(0))
"""Lets another thread run on this core, with the GIL released."""


def _wait(ready: Callable[[], bool], block: Callable[[], Any], spin_s: float) -> None:
    """Wait until *ready*: poll for *spin_s* seconds, yielding the core and the GIL, then *block* (waking a blocked
    thread costs 40-180 µs on a small cloud VM whose idle cores halt)."""
    if ready():
        return
    deadline = time.perf_counter() + spin_s
    while time.perf_counter() < deadline:
        _yield()
        if ready():
            return
    block()


class _Batch:
    """The jobs of one :meth:`ThreadPool.run`, claimed one at a time under a lock: a thread still holding a finished
    batch finds nothing left in it, so no job runs twice."""

    __slots__ = ("jobs", "next", "lock", "error")

    def __init__(self, jobs: list[CStepJob]) -> None:
        self.jobs = jobs
        self.next = 0
        self.lock = threading.Lock()
        self.error: BaseException | None = None

    def take(self, who: int) -> int:
        """Run jobs of the batch until none is left; the number run."""
        jobs, lock, count = self.jobs, self.lock, len(self.jobs)
        taken = 0
        while True:
            with lock:
                i = self.next
                if i >= count:
                    return taken
                self.next = i + 1
            run_job(jobs[i], who)
            taken += 1


class _Worker:
    """A pool thread: the caller hands it a batch by releasing ``todo``; it sets ``done`` once it found none left."""

    def __init__(self, index: int, spin_s: float) -> None:
        self.index, self.spin_s = index, spin_s
        self.batch: _Batch | None = None
        self.taken = 0
        self.todo = threading.Lock()
        self.todo.acquire()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"cosimrun-pool-{index}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        todo, done = self.todo, self.done

        def handed() -> bool:
            return todo.acquire(False)

        while True:
            _wait(handed, todo.acquire, self.spin_s)
            batch = self.batch
            if batch is None:
                return
            try:
                self.taken += batch.take(self.index)
            except BaseException as exc:  # noqa: BLE001 - raised by the caller of ThreadPool.run
                batch.error = exc
            finally:
                done.set()

    def start(self, batch: _Batch) -> None:
        self.done.clear()
        self.batch = batch
        self.todo.release()

    def finish(self) -> None:
        """Wait until the thread is done with its batch (waiting again after an interrupt: it may still step)."""
        done = self.done
        interrupted: BaseException | None = None
        while not done.is_set():
            try:
                _wait(done.is_set, done.wait, self.spin_s)
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted


class ThreadPool:
    """Python threads that run :class:`CStepJob` batches with the caller (the ``threads`` pool, see the module).

    The interface of ``_cpool.Pool``: ``ThreadPool(threads, spin_us)``,
    :meth:`run` (one caller at a time), :meth:`close`, :attr:`pooled`,
    :attr:`alive`. A batch wakes only the threads it can use. An interrupt
    (``KeyboardInterrupt``) on the calling thread leaves the jobs it had not
    started unrun and is raised once the pool's threads are done with theirs.
    """

    kind = "threads"

    def __init__(self, threads: int, spin_us: float = 200.0) -> None:
        if threads < 0 or not spin_us >= 0:
            raise ValueError("threads and spin_us must be >= 0")
        self._workers = [_Worker(i + 1, spin_us * 1e-6) for i in range(threads)]
        self._closed = False

    @property
    def pooled(self) -> int:
        """Jobs run by the pool's threads (not the caller) so far."""
        return sum(worker.taken for worker in self._workers)

    @property
    def alive(self) -> int:
        """Pool threads running (0 once closed)."""
        return sum(worker.thread.is_alive() for worker in self._workers)

    def run(self, jobs: int, count: int, /) -> None:
        """Run the *count* jobs at *jobs* (the address of an array of :class:`CStepJob` pointers, at most
        :data:`MAX_JOBS`) on the pool's threads and this one; returns once all have run."""
        if not 0 <= count <= MAX_JOBS:
            raise ValueError(f"count {count} out of range: a batch holds 0 to {MAX_JOBS} jobs (MAX_JOBS)")
        if self._closed:
            raise RuntimeError("the pool is closed")
        if count == 0:
            return
        batch = _Batch([CStepJob.from_address(a) for a in (ctypes.c_void_p * count).from_address(jobs)])
        started: list[_Worker] = []
        try:
            for worker in self._workers[:count - 1]:
                worker.start(batch)
                started.append(worker)
            batch.take(0)
        finally:
            for worker in started:  # no job may still run when the caller goes on (or fails)
                worker.finish()
        if batch.error is not None:
            raise batch.error

    def close(self) -> None:
        """Stop the pool's threads and wait for them."""
        self._closed = True
        for worker in self._workers:
            if worker.thread.is_alive():
                worker.batch = None
                worker.todo.release()
                worker.thread.join()
