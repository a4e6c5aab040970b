"""A component step whose work is one C call, split so that the call can run on another thread without Python.

A component that declares :attr:`~cosimrun.core.component.CoSimComponent.steps_in_parallel`
offers its step as a :class:`CStep` (:meth:`~cosimrun.core.component.CoSimComponent.c_step`):
:meth:`CStep.begin` (on the main thread: inputs to the model, the step's
arguments into :attr:`CStep.job`), the C call the job describes (on any
thread, run by the masters' parallel stepper, ``cosimrun/masters/_cpool.c``,
with the GIL released) and :meth:`CStep.end` (on the main thread: the call's
outcome, outputs, the rest of ``do_step``). ``begin``, the call and ``end`` do
exactly what ``do_step`` does, so parallel steps compute the same bits.
"""

from __future__ import annotations

import ctypes
from typing import Protocol


class CStepJob(ctypes.Structure):
    """One C step call: the layout of ``cosimrun_step_job`` in ``cosimrun/masters/_cpool.c``.

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


class CStep(Protocol):
    """A component's step split around one C call (see the module docstring)."""

    job: CStepJob
    """The call, filled by :meth:`begin`, run by the stepper, read by :meth:`end`."""
    address: int
    """``ctypes.addressof(job)``."""

    def begin(self, t: float, h: float, snapshot: bool) -> None:
        """Prepare the step from *t* by *h*: what ``do_step`` does before its C call. With *snapshot*, the job
        saves the model's state before stepping, so that :meth:`undo` can return to it."""

    def end(self, t: float, h: float) -> None:
        """Finish the step after the job ran: what ``do_step`` does after its C call (raises as it does)."""

    def undo(self) -> None:
        """Return the model to the state the job saved (a step whose :meth:`end` did not run is undone)."""
