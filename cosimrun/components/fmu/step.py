"""The FMU component's step path: one compiled function around ``fmi2Set*``, ``fmi2DoStep`` and ``fmi2Get*``.

:meth:`FMUStepping._bind` builds it once per instance from the pushers and
pullers at the end of this module. This is also where the component meets the
step machinery of :class:`~cosimrun.core.component.CoSimComponent`
(``do_step``, ``_do_step_internal``, ``_update_output_states``,
``record_history``, ``_step_recorders``, ``_event_ports``).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from cosimrun.components.fmu import fmi3
from cosimrun.components.fmu.base import FMUBase
from cosimrun.components.fmu.description import FMUVariable
from cosimrun.components.fmu.errors import FMUError
from cosimrun.components.fmu.fmi2 import (
    C_TYPES,
    FMI2_LAST_SUCCESSFUL_TIME,
    FMI2_TERMINATED,
    GETTERS,
    SETTERS,
    fast_functions,
    from_c,
)
from cosimrun.core.component import NO_EVENTS, step_size_error
from cosimrun.core.ports import PortState
from cosimrun.errors import StepDiscarded
from cosimrun.fmi.pool import RUNNER, SNAPSHOT_FAILED, CStepJob, FMIStepRunner

VARIABLE_STEP_FLAG = "canHandleVariableCommunicationStepSize=false"

EARLY_RETURN_EVENT = "early_return"
STEP_END_EVENT = "event"
"""The event of an FMI 3 FMU that asks for event handling at the end of a step (``eventHandlingNeeded``)."""
"""The event recorded where an FMI 3 FMU returned early from ``fmi3DoStep`` at an event it handled there."""


class FMUStepping(FMUBase):
    """Stepping: ``do_step`` written out around the compiled step, and output reads between steps.

    A step the FMU ends early with ``fmi2Discard`` raises :class:`StepDiscarded`
    (see :meth:`_step_failed`); an FMU with ``canHandleVariableCommunicationStepSize``
    false is only ever stepped by one step size (see :attr:`fixed_step`).
    """

    steps_in_parallel: ClassVar[bool] = True
    """The step's work is ``fmi2DoStep``/``fmi3DoStep`` (:meth:`c_step`), which the masters' parallel stepper
    calls on native threads; the FMU's log messages come back through a ctypes callback, which takes the GIL."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._push_all: Callable[[], None] = nothing
        self._pull_all: Callable[[], None] = nothing
        self._push_on_read = False
        self._fast_step: Callable[[float, float], None] = self._not_running
        self._c_step: FMUCStep | None = None
        self.fixed_step: float | None = None
        """The one step size of an FMU that cannot handle variable steps: that of its first step since it was
        instantiated (``initialize``, ``set_state``); ``None`` before it, and for FMUs that can."""

    @property
    def fixed_step_only(self) -> bool:  # type: ignore[override]
        """True when the FMU declares ``canHandleVariableCommunicationStepSize`` false: all its steps have one size."""
        return self.model is not None and not self.model.variable_step

    @property
    def may_discard(self) -> bool:  # type: ignore[override]
        """Whether ``do_step`` may end early with :class:`StepDiscarded`, leaving the FMU at its last successful time.

        Masters keep what they need to bring the other components to that
        instant. A fixed-step FMU cannot go on from there, so its discards are
        failures (``False``).
        """
        return self.model is not None and self.model.variable_step

    def _bind(self) -> None:
        """Compile the per-step input push and output pull.

        They call the FMU through function pointers without ctypes argument
        conversion (``argtypes``) on pre-built arguments of the exact C types:
        the value references, the sizes and the value buffers are allocated once
        here, so a step costs three foreign calls and no allocation besides the
        two ``c_double`` times.
        """
        if self.is_fmi3:
            self._bind3()
            return
        inst = self._instance
        assert inst is not None
        fast = fast_functions(self._slave.dll)
        c = inst.c
        ins, outs = self._value_ports()
        pushers: list[Callable[[], None]] = [] if self._alias_push is nothing else [self._alias_push]
        pullers: list[Callable[[], None]] = []
        for kinds in (("Real",), ("Integer", "Enumeration"), ("Boolean",), ("String",)):
            group = port_group(ins, kinds)
            if group is not None:
                pushers.append(make_pusher(fast[SETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
            group = port_group(outs, kinds)
            if group is not None:
                pullers.append(make_puller(fast[GETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
        if self.interpolates_inputs and port_group(ins, ("Real",)) is not None:
            pushers.append(_make_derivative_pusher(self._slave.dll, c, *port_group(ins, ("Real",)), self._call_failed))
        if self._alias_pull is not nothing:
            pullers.append(self._alias_pull)
        self._push_all = push_all = chain(pushers)
        self._pull_all = pull_all = chain(pullers)
        self._push_on_read = any(self.direct_feedthrough.values())
        do_step = fast["fmi2DoStep"]
        no_prior = ctypes.c_int(0 if self.model is not None and self.model.can_rollback else 1)
        t_c, dt_c = ctypes.c_double(), ctypes.c_double()
        step_failed = self._step_failed
        real_in, real_out = port_group(ins, ("Real",)), port_group(outs, ("Real",))
        only_real = len(pushers) == (real_in is not None) and len(pullers) == (real_out is not None)
        if only_real and real_in is not None and real_out is not None and real_in[3] == 1:
            # The common case (real ports, one input) with the FMI calls inline: no nested calls.
            vr_in, buf_in, (port_in,), _ = real_in
            vr_out, buf_out, ports_out, n_out = real_out
            set_real, get_real = fast["fmi2SetReal"], fast["fmi2GetReal"]
            one, size_out = ctypes.c_size_t(1), ctypes.c_size_t(n_out)
            failed = self._call_failed

            def step(t: float, dt: float) -> None:
                buf_in[0] = port_in.value
                status = set_real(c, vr_in, one, buf_in)
                if status > 1:
                    raise failed("fmi2SetReal", status)
                t_c.value = t
                dt_c.value = dt
                status = do_step(c, t_c, dt_c, no_prior)
                if status > 1:
                    step_failed(status, t, dt)
                status = get_real(c, vr_out, size_out, buf_out)
                if status > 1:
                    raise failed("fmi2GetReal", status)
                for port, value in zip(ports_out, buf_out[:], strict=True):
                    port.value = value
        else:
            def step(t: float, dt: float) -> None:
                push_all()
                t_c.value = t
                dt_c.value = dt
                finish(t, dt, do_step(c, t_c, dt_c, no_prior))

        def finish(t: float, dt: float, status: int) -> None:
            if status > 1:
                step_failed(status, t, dt)
            pull_all()

        self._fast_step = self._keep_fixed_step(step) if self.fixed_step_only else step
        self._c_step = FMUCStep(self, CStepJob(step=_address(do_step), instance=c.value, version=2,
                                               no_prior=no_prior.value), lambda t: push_all(), finish)

    def _bind3(self) -> None:
        """The step path of an FMI 3.0 FMU: one ``fmi3Set*``/``fmi3Get*`` call per FMI type, arrays whole, and
        ``fmi3DoStep`` with its early return and event mode (see :meth:`_step_ended`)."""
        inst = self._instance
        assert inst is not None and self.model is not None
        c, f = inst.c, inst.f
        ins, outs = self._value_ports()
        pushers = [self._alias_push, *(make_pusher3(f[fmi3.SETTERS[t]], c, group, t, self._call_failed)
                                       for t, group in groups3(ins))]
        pullers = [make_puller3(f[fmi3.GETTERS[t]], c, group, t, self._call_failed) for t, group in groups3(outs)]
        pullers.append(self._alias_pull)
        self._push_all = push_all = chain(pushers)
        self._pull_all = pull_all = chain(pullers)
        self._push_on_read = any(self.direct_feedthrough.values())
        do_step = f["fmi3DoStep"]
        no_prior = not self.model.can_rollback
        result = fmi3.StepResult()
        refs = result.refs
        step_failed, step_ended = self._step_failed, self._step_ended

        def begin(t: float) -> None:
            if self.pending_event is not None:
                self._handle_pending_event(t)
                if self.stop_requested is not None:
                    raise self._stepped_after_stop(t)
            push_all()

        def finish(t: float, dt: float, status: int) -> None:
            first = True
            while True:
                if status > 1:
                    step_failed(status, t, dt)
                if not (result.terminate.value or result.early.value or result.event.value) \
                        or not step_ended(t, dt, result, first):
                    break
                first = False
                push_all()
                status = do_step(c, t, dt, no_prior, *refs)
            pull_all()

        def step(t: float, dt: float) -> None:
            begin(t)
            finish(t, dt, do_step(c, t, dt, no_prior, *refs))

        self._fast_step = self._keep_fixed_step(step) if self.fixed_step_only else step
        job = CStepJob(step=_address(do_step), instance=c.value, version=3, no_prior=int(no_prior))
        job.out[:] = [ctypes.addressof(v) for v in (result.event, result.terminate, result.early, result.last)]
        self._c_step = FMUCStep(self, job, begin, finish)

    @property
    def leaves_events(self) -> bool:  # type: ignore[override]
        """True for an FMI 3 FMU with event mode: its events wait for the master (:attr:`pending_event`)."""
        return self._event_mode

    @property
    def _event_mode(self) -> bool:
        """Whether the FMU hands its events to cosimrun (FMI 3 ``hasEventMode``): it may then return early."""
        model = self.model
        return model is not None and self.is_fmi3 and model.interfaces["cs"].has_event_mode

    def _settle_events(self, t: float, enter: bool = False) -> None:
        """Handle the FMU's event at *t* in its event mode: enter it (with *enter*), update the discrete states until
        they settle, then return to step mode (FMI 3.0, ``eventModeUsed``); an FMU that asks to terminate there
        stays in event mode with a stop request (:attr:`stop_requested`)."""
        inst = self._instance
        assert inst is not None
        if enter:
            self._call("fmi3EnterEventMode", t)
        if fmi3.update_discrete_states(inst, t, lambda message: self._error(message, t)):
            self._request_stop("fmi3UpdateDiscreteStates returned terminateSimulation")
            return
        self._call("fmi3EnterStepMode", t)

    def _step_ended(self, t: float, dt: float, result: fmi3.StepResult, first: bool) -> bool:
        """After an ``fmi3DoStep`` from *t* by *dt* that asked for attention: terminate, event or early return.

        An event at the step's end (``eventHandlingNeeded`` without early
        return) is handled there in event mode. An early return at
        ``lastSuccessfulTime`` inside the step raises :class:`StepDiscarded`
        with the component's time and outputs at that instant, before its event,
        and ``event="early_return"``, as FMI 2's discard does: the masters make
        it the communication point of every component (no search: the FMU names
        the instant), record the sample before the event and an
        ``early_return`` event there, then :meth:`handle_event` handles it in
        the FMU's event mode and they record the sample after it (micro 1).
        The FMU handles a pending event itself before its next step if nobody
        did.
        An early return at the step's start (an event due at once)
        is handled and the step taken again (``True``: step again; once only,
        the *first* time). ``terminateSimulation`` ends the step at
        ``lastSuccessfulTime`` with a stop request (see :meth:`_terminated`).
        """
        end = t + dt
        if result.terminate.value:
            self._terminated(t, dt, result.last.value, "fmi3DoStep returned terminateSimulation")
            return False
        if not result.early.value:
            if result.event.value and self._event_mode:
                self.pending_event = STEP_END_EVENT  # the sample before it is taken first
            return False
        last = result.last.value
        eps = 4.0 * math.ulp(max(abs(t), abs(end)))
        message = f"fmi3DoStep from t={t:.12g} with step {dt:.6g} returned early at t={last:.12g}"
        if not math.isfinite(last) or last < t - eps or last > end + eps:
            raise self._error(f"{message}, outside the step", t)
        at_end = abs(last - end) <= eps
        if result.event.value and self._event_mode and at_end:
            self.pending_event = EARLY_RETURN_EVENT
            return False
        if result.event.value and self._event_mode and last <= t + eps:
            self._settle_events(last, enter=True)
            if self.stop_requested is not None:
                raise self._error(f"{message}, its start, and {self.stop_requested} there: cosimrun ends a run "
                                  "where an FMU asks to terminate only at a time it reached in a step", t)
        if at_end:
            return False
        if last <= t + eps:
            if not (first and result.event.value):
                raise self._error(f"{message}, its start, " + ("again after handling its event there"
                                                              if result.event.value else "without an event"), t)
            return True
        if self.fixed_step_only:
            raise self._error(f"{message}; it cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}), "
                              "so it cannot step on from there", t)
        self.t = last
        self._pull_all()
        event = EARLY_RETURN_EVENT if result.event.value else None
        if event is not None and self._event_mode:
            self.pending_event = event
        raise StepDiscarded(f"{self._where()}: {message}" + (" (an event of the FMU, handled there)" if event else ""),
                            component=self.name, time=t, last_successful_time=last, event=event)

    def _keep_fixed_step(self, step: Callable[[float, float], None]) -> Callable[[float, float], None]:
        """*step*, refusing any step size other than the first (:attr:`fixed_step`) with a clear FMUError.

        Two step sizes count as one when they differ by rounding only: the
        difference of two grid times ``t0 + k*dt`` is ``dt`` to a few ulp of ``t``.
        """
        self.fixed_step = None
        check = self._check_fixed_step

        def fixed(t: float, dt: float) -> None:
            check(t, dt)
            step(t, dt)

        return fixed

    def _check_fixed_step(self, t: float, dt: float) -> None:
        """Refuse a step size other than the first (:attr:`fixed_step`, set here by the first) with an FMUError."""
        h = self.fixed_step
        if h is None:
            self.fixed_step = dt
        elif abs(dt - h) > 1e-9 * h + 4.0 * math.ulp(abs(t) + h):
            raise self._error(
                f"the FMU cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}), so every "
                f"step must be {h:.12g} like its first, but it was asked to step from t={t:.12g} with {dt:.12g}",
                t,
            )

    def _unbind(self) -> None:
        """Drop the step path of an instance about to be freed (with the FMU state its C step saved): stepping
        refuses until the next ``_bind``."""
        self._push_all = self._pull_all = nothing
        self._fast_step = self._not_running
        c_step, self._c_step = self._c_step, None
        inst = self._instance
        if c_step is not None and c_step.job.state and inst is not None:
            inst.free_state(ctypes.c_void_p(c_step.job.state))
            c_step.job.state = None

    def c_step(self) -> FMUCStep | None:
        """The step split around ``fmi2DoStep``/``fmi3DoStep`` (:class:`FMUCStep`), while the FMU is instantiated."""
        return self._c_step

    def _not_running(self, *args: Any) -> None:
        raise RuntimeError(f"{self._where()}: the FMU is not instantiated; call initialize(t0) first "
                           "(after reset or free, too)")

    def _call_failed(self, fname: str, status: int) -> FMUError:
        return self._error(f"{fname} returned {self._status(status)} at t={self.t:.12g}", self.t)

    def _step_failed(self, status: int, t: float, dt: float) -> None:
        """Raise for an ``fmi2DoStep`` that did not return OK or Warning (or return: the step counts as done).

        ``fmi2Discard`` with a last successful time ``t_last`` inside the step
        (``t < t_last < t + dt``, as FMI 2.0 lets an FMU end a step early) raises
        :class:`StepDiscarded` with the component's time and outputs at
        ``t_last``, nothing recorded: the master decides whether that instant
        becomes a communication point. A ``t_last`` within rounding (a few ulp)
        of ``t + dt`` is the step done. Any other discard (no last successful
        time, none past ``t``, a fixed-step FMU that could not step on from
        ``t_last``), ``fmi2Error`` and ``fmi2Fatal`` raise :class:`FMUError`.
        With ``fmi2Terminated`` the FMU asks to end the run at ``t_last``
        (see :meth:`_terminated`).
        """
        prefix = "fmi3" if self.is_fmi3 else "fmi2"
        message = f"{prefix}DoStep from t={t:.12g} with step {dt:.6g} returned {self._status(status)}"
        last = self._status_value("fmi2GetRealStatus", FMI2_LAST_SUCCESSFUL_TIME, ctypes.c_double) \
            if status == 2 and not self.is_fmi3 else None
        if last is None or not math.isfinite(last):
            raise self._error(message, t)
        message += f" (last successful time {last:.12g})"
        end = t + dt
        eps = 4.0 * math.ulp(max(abs(t), abs(end)))
        if self._status_value("fmi2GetBooleanStatus", FMI2_TERMINATED, ctypes.c_int):
            self._terminated(t, dt, last, "fmi2DoStep returned fmi2Discard with fmi2Terminated")
            return
        if abs(last - end) <= eps:
            return
        if not t + eps < last < end:
            raise self._error(message, t)
        if self.fixed_step_only:
            raise self._error(f"{message}; it cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}), "
                              "so it cannot step on from there", t)
        self.t = last
        self._pull_all()
        raise StepDiscarded(f"{self._where()}: {message}{self._log_tail()}", component=self.name, time=t,
                            last_successful_time=last)

    def _terminated(self, t: float, dt: float, last: float, how: str) -> None:
        """The FMU asks to end the simulation at its last successful time *last* of the step from *t* by *dt*
        (*how*: the FMI call that said so): a stop request (:attr:`stop_requested`), the step done when *last* is
        its end; inside the step, :class:`StepDiscarded` at *last* (with the FMU's outputs there), so that the
        masters bring every component to that instant, where the run ends."""
        end = t + dt
        eps = 4.0 * math.ulp(max(abs(t), abs(end)))
        message = f"{how} in the step from t={t:.12g} with step {dt:.6g} at t={last:.12g}"
        if not (math.isfinite(last) and t + eps < last <= end + eps):
            raise self._error(f"{message}, not after the step's start and within the step: cosimrun ends a run "
                              "where an FMU asks to terminate only at a time it reached in a step", t)
        self._request_stop(how)
        if abs(last - end) <= eps:
            return
        self.t = last
        self._pull_all()
        raise StepDiscarded(f"{self._where()}: {message}{self._log_tail()}", component=self.name, time=t,
                            last_successful_time=last)

    def _status_value(self, function: str, kind: int, c_type: Any) -> Any:
        """The value ``fmi2Get*Status(kind)`` reports (``None`` when the FMU does not provide it)."""
        inst = self._instance
        fn = inst.f.get(function) if inst is not None else None
        if fn is None:
            return None
        value = c_type()
        try:
            if fn(inst.c, kind, ctypes.byref(value)) > 1:
                return None
        except Exception:  # a status query must not hide the step's own failure
            return None
        return value.value

    def _read_outputs(self) -> None:
        """Read every output from the FMU now, between steps.

        Inputs are set again first when an output depends on them directly:
        between two steps the master may have changed them (loop iteration),
        and FMI 2.0 lets outputs be read after that.
        """
        if self._push_on_read:
            self._push_all()
        self._pull_all()

    # ------------------------------------------------------------------ the base class's step machinery
    def do_step(self, t: float, dt: float) -> None:
        """Advance from *t* to *t + dt*: set the inputs, ``fmi2DoStep``, read the outputs, record them.

        The contract of :meth:`CoSimComponent.do_step`, written out so that a
        step is one compiled call around the three FMI calls (see :meth:`_bind`).
        """
        if not dt > 0.0:
            raise step_size_error(self.name, t, dt)
        if self.stop_requested is not None:
            raise self._stepped_after_stop(t)
        self._fast_step(t, dt)
        self._stepped(t + dt)

    def _stepped(self, t: float) -> None:
        """The end of a step at *t*: the component's time, event ports cleared, the step recorded."""
        self.t = t
        if self._event_ports:
            for port in self._event_ports:
                port.value = False
        if self.record_history:
            for port, append_t, append_v in self._step_recorders:
                append_t(t)
                append_v(port.value)

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._fast_step(t, dt)  # also reads the outputs: _update_output_states after it finds them fresh

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        self._read_outputs()

    def _handle_events_internal(self, event_names: list[str], t: float) -> None:
        """An FMI 3 early return's event waits here: handled in the FMU's event mode (see :meth:`_step_ended`)."""
        if self.pending_event is not None:
            self._handle_pending_event(t)

    def _handle_pending_event(self, t: float) -> None:
        """Handle the event the last step left (:attr:`pending_event`, at *t*) in event mode; the outputs after it."""
        self.pending_event = None
        self._settle_events(t, enter=True)
        self._pull_all()


class FMUCStep:
    """An FMU's step split around ``fmi2DoStep``/``fmi3DoStep`` (:class:`~cosimrun.core.cstep.CStep`).

    ``begin`` does what ``do_step`` does before the call (the fixed-step
    check, an FMI 3 pending event, the inputs) and ``end`` what it does after
    it (the status, outputs, time, recording), with the same code, so a step
    taken this way computes what ``do_step`` computes. The state a speculative
    job saves (``fmi2GetFMUstate``, after the inputs were set) is kept in the
    job and reused, and freed with the instance.
    """

    __slots__ = ("comp", "job", "address", "_begin", "_finish", "_set_state", "_state_function", "_set_function",
                 "_fixed_step_only")
    runner: ClassVar[FMIStepRunner] = RUNNER

    def __init__(self, comp: FMUStepping, job: CStepJob, begin: Callable[[float], None],
                 finish: Callable[[float, float, int], None]) -> None:
        inst = comp._instance
        assert inst is not None
        self._state_function, self._set_function = ("fmi3GetFMUState", "fmi3SetFMUState") if comp.is_fmi3 \
            else ("fmi2GetFMUstate", "fmi2SetFMUstate")
        get_state = inst.f.get(self._state_function) if comp.supports_rollback else None
        self._set_state = inst.f.get(self._set_function)
        job.get_state = _address(get_state) if get_state is not None else None
        self.comp, self.job, self.address = comp, job, ctypes.addressof(job)
        self._begin, self._finish = begin, finish
        self._fixed_step_only = comp.fixed_step_only

    def begin(self, t: float, h: float, snapshot: bool) -> None:
        """Check the step, set the inputs and the job's arguments (*snapshot*: save the state first)."""
        comp = self.comp
        if not h > 0.0:
            raise step_size_error(comp.name, t, h)
        if comp.stop_requested is not None:
            raise comp._stepped_after_stop(t)
        if self._fixed_step_only:
            comp._check_fixed_step(t, h)
        self._begin(t)
        job = self.job
        job.t, job.h, job.snapshot = t, h, snapshot and job.get_state is not None

    def end(self, t: float, h: float) -> None:
        """The outcome of the job: raises as ``do_step`` does, else reads the outputs and records the step."""
        comp = self.comp
        status = self.job.status
        if status == SNAPSHOT_FAILED:
            raise comp._error(f"{self._state_function} returned {comp._status(self.job.state_status)} "
                              f"at t={t:.12g}", t)
        self._finish(t, h, status)
        comp._stepped(t + h)

    def undo(self) -> None:
        """Return the FMU to the state its job saved before stepping (its ports were never updated)."""
        comp = self.comp
        inst = comp._instance
        assert inst is not None and self._set_state is not None and self.job.state
        status = self._set_state(inst.c, ctypes.c_void_p(self.job.state))
        if status > 1:
            raise comp._error(f"{self._set_function} returned {comp._status(status)} at t={comp.t:.12g}", comp.t)
        comp.pending_event = None


def _address(function: Any) -> int:
    """The address of a ctypes function pointer."""
    return ctypes.cast(function, ctypes.c_void_p).value or 0


# ------------------------------------------------------------------ the compiled step path
def port_group(ports: list[tuple[PortState, FMUVariable]], type_names: tuple[str, ...]) -> Any:
    """``(value references, buffer, ports, count)`` for the ports of the given FMI types, or ``None``."""
    chosen = [(p, v) for p, v in ports if v.type in type_names]
    if not chosen:
        return None
    n = len(chosen)
    vr = (ctypes.c_uint * n)(*(v.vr for _, v in chosen))
    buf = (C_TYPES[type_names[0]] * n)()
    return vr, buf, [p for p, _ in chosen], n


def nothing() -> None:
    """Does nothing: what a chain of no pushers or pullers calls."""


def chain(functions: list[Callable[[], None]]) -> Callable[[], None]:
    """One function calling *functions* in order, leaving out :func:`nothing` (the function itself when one is
    left)."""
    functions = [fn for fn in functions if fn is not nothing]
    if not functions:
        return nothing
    if len(functions) == 1:
        return functions[0]

    def chained() -> None:
        for fn in functions:
            fn()

    return chained


def make_pusher(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that copies the port values into *buf* and sets them in one FMI call."""
    size = ctypes.c_size_t(n)
    fname = SETTERS[type_name]
    if type_name == "String":
        def push() -> None:
            buf[:] = [str(p.value).encode() for p in ports]
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    elif n == 1:
        port = ports[0]

        def push() -> None:
            buf[0] = port.value
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    else:
        def push() -> None:
            buf[:] = [p.value for p in ports]
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
    return push


def _make_derivative_pusher(dll: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int,
                            failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that gives the FMU the first and second derivatives of its real inputs (zero where a port
    has none) in one ``fmi2SetRealInputDerivatives`` call."""
    fn = dll["fmi2SetRealInputDerivatives"]
    fn.restype = ctypes.c_int
    size = ctypes.c_size_t(2 * n)
    vrs = (ctypes.c_uint * (2 * n))(*vr, *vr)
    orders = (ctypes.c_int * (2 * n))(*([1] * n + [2] * n))
    values = (ctypes.c_double * (2 * n))()
    fname = "fmi2SetRealInputDerivatives"

    def push() -> None:
        for i, port in enumerate(ports):
            d = port.derivatives
            values[i] = d[0] if d else 0.0
            values[n + i] = d[1] if len(d) > 1 else 0.0
        status = fn(c, vrs, size, orders, values)
        if status > 1:
            raise failed(fname, status)

    return push


def make_puller(fn: Any, c: ctypes.c_void_p, vr: Any, buf: Any, ports: list[PortState], n: int, type_name: str,
                 failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that reads the outputs in one FMI call and stores them in the ports."""
    size = ctypes.c_size_t(n)
    fname = GETTERS[type_name]
    if type_name in ("Boolean", "String"):
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = from_c(type_name, value)
    elif n == 1:
        port = ports[0]

        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            port.value = buf[0]
    else:
        def pull() -> None:
            status = fn(c, vr, size, buf)
            if status > 1:
                raise failed(fname, status)
            for port, value in zip(ports, buf[:], strict=True):
                port.value = value
    return pull


def groups3(ports: list[tuple[PortState, FMUVariable]]) -> list[tuple[str, list[tuple[PortState, FMUVariable]]]]:
    """The ports of an FMI 3 FMU by FMI type, each group ordered by value reference and element (arrays whole)."""
    groups: dict[str, list[tuple[PortState, FMUVariable]]] = {}
    for port, var in ports:
        groups.setdefault(var.fmi_type, []).append((port, var))
    return [(t, sorted(g, key=lambda pv: (pv[1].vr, pv[1].index or 0))) for t, g in groups.items()]


def _buffers3(group: list[tuple[PortState, FMUVariable]], fmi_type: str) -> tuple[Any, Any, Any, Any]:
    """``(value references, their count, buffer, its size)`` for one FMI 3 type group."""
    vrs = list(dict.fromkeys(v.vr for _, v in group))
    return ((ctypes.c_uint * len(vrs))(*vrs), ctypes.c_size_t(len(vrs)), (fmi3.C_TYPES[fmi_type] * len(group))(),
            ctypes.c_size_t(len(group)))


def make_pusher3(fn: Any, c: ctypes.c_void_p, group: list[tuple[PortState, FMUVariable]], fmi_type: str,
                  failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that sets the ports of one FMI 3 type in one call."""
    vrs, nvr, buf, n = _buffers3(group, fmi_type)
    ports = [p for p, _ in group]
    fname = fmi3.SETTERS[fmi_type]
    encode = fmi_type == "String"

    def push() -> None:
        buf[:] = [str(p.value).encode() for p in ports] if encode else [p.value for p in ports]
        status = fn(c, vrs, nvr, buf, n)
        if status > 1:
            raise failed(fname, status)

    return push


def make_puller3(fn: Any, c: ctypes.c_void_p, group: list[tuple[PortState, FMUVariable]], fmi_type: str,
                  failed: Callable[[str, int], FMUError]) -> Callable[[], None]:
    """A function that reads the ports of one FMI 3 type in one call."""
    vrs, nvr, buf, n = _buffers3(group, fmi_type)
    ports = [p for p, _ in group]
    fname = fmi3.GETTERS[fmi_type]
    convert = fmi_type in ("Boolean", "String")

    def pull() -> None:
        status = fn(c, vrs, nvr, buf, n)
        if status > 1:
            raise failed(fname, status)
        for port, value in zip(ports, buf[:], strict=True):
            port.value = fmi3.from_c(fmi_type, value) if convert else value

    return pull
