"""Co-simulation stepping of one FMU instance: one compiled function around ``fmi2Set*``, ``fmi2DoStep`` and
``fmi2Get*`` (or their FMI 3 counterparts), a step the FMU ends early, and the step split around its C call.

:class:`Stepper` is built once per instance (after instantiation) from the
ports behind the FMU's values; :class:`Requests` holds what the instance asks
of the master (an event to handle, the end of the run). A step the FMU ends
early (``fmi2Discard`` with a last successful time inside the step, an FMI 3
early return, a request to terminate inside the step) raises
:class:`~cosimrun.errors.StepDiscarded` with ``reached`` the instant the FMU
is at, its outputs read there: the component takes that time.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from cosimrun.core.component import step_size_error
from cosimrun.core.crashsite import NAN
from cosimrun.errors import StepDiscarded, StepEndedEarly
from cosimrun.fmi import fmi3
from cosimrun.fmi.errors import FMUError, FMULog
from cosimrun.fmi.fmi2 import FMI2_LAST_SUCCESSFUL_TIME, FMI2_TERMINATED, GETTERS, SETTERS, Instance, fast_functions
from cosimrun.fmi.model import FMUInterface
from cosimrun.fmi.pool import RUNNER, SNAPSHOT_FAILED, CStepJob, FMIStepRunner
from cosimrun.fmi.values import (
    KINDS2,
    chain,
    groups3,
    make_derivative_pusher,
    make_puller,
    make_puller3,
    make_pusher,
    make_pusher3,
    nothing,
    port_group,
)

if TYPE_CHECKING:
    from cosimrun.core.component import CoSimComponent
    from cosimrun.fmi.ports import ValuePorts

VARIABLE_STEP_FLAG = "canHandleVariableCommunicationStepSize=false"
"""Why an FMU is stepped by one step size only (the reason text of the fixed-step contract)."""

EARLY_RETURN_EVENT = "early_return"
"""The event recorded where an FMI 3 FMU returned early from ``fmi3DoStep`` at an event it handled there."""
STEP_END_EVENT = "event"
"""The event of an FMI 3 FMU that asks for event handling at the end of a step (``eventHandlingNeeded``)."""


class Requests:
    """What an FMU instance asks of the master: an event to handle after a step, the end of the run."""

    __slots__ = ("pending_event", "stop_requested")

    def __init__(self) -> None:
        self.pending_event: str | None = None
        self.stop_requested: str | None = None

    def request_stop(self, how: str) -> None:
        """The FMU asks to terminate the simulation; *how*: the FMI call that said so."""
        self.stop_requested = f"asked to terminate ({how})"

    def clear(self) -> None:
        self.pending_event = self.stop_requested = None


class Stepper:
    """The step path of one co-simulation instance *inst* (``fmi2Component``/``fmi3Instance`` of library *dll*).

    *ports* are the ports behind the FMU's values, *interface* its
    co-simulation capabilities, *log* names it in errors and *now* gives the
    component's time (for a failed call between steps). :meth:`step` is the
    compiled step; an FMU with ``canHandleVariableCommunicationStepSize``
    false is only ever stepped by one step size (:attr:`fixed_step`).
    """

    def __init__(self, inst: Instance, dll: Any, interface: FMUInterface, ports: ValuePorts, *, feedthrough: bool,
                 interpolates_inputs: bool, log: FMULog, now: Callable[[], float], requests: Requests) -> None:
        self.inst, self.log, self.now, self.requests = inst, log, now, requests
        self.fmi3 = isinstance(inst, fmi3.Instance)
        self.fixed_step_only = not interface.variable_step
        self.event_mode = self.fmi3 and interface.has_event_mode
        """Whether the FMU hands its events to cosimrun (FMI 3 ``hasEventMode``): it may then return early."""
        self.can_rollback = interface.can_rollback
        self.fixed_step: float | None = None
        """The one step size of an FMU that cannot handle variable steps: that of its first step since it was
        instantiated; ``None`` before it, and for FMUs that can."""
        self.push_on_read = feedthrough
        self.push_all: Callable[[], None] = nothing
        self.pull_all: Callable[[], None] = nothing
        self.job: CStepJob
        self.begin: Callable[[float], None]
        self.finish: Callable[[float, float, int], None]
        step = self._bind3(ports) if self.fmi3 else self._bind2(dll, ports, interpolates_inputs)
        self.step: Callable[[float, float], None] = self._keep_fixed_step(step) if self.fixed_step_only else step
        """Set the inputs, step from *t* by *dt*, read the outputs (raises as :meth:`_step_failed` says)."""

    def _call_failed(self, fname: str, status: int) -> FMUError:
        return self.log.call_failed(fname, status, self.now())

    def _bind2(self, dll: Any, ports: ValuePorts, interpolates_inputs: bool) -> Callable[[float, float], None]:
        """Compile the per-step input push and output pull of an FMI 2.0 FMU.

        They call the FMU through function pointers without ctypes argument
        conversion (``argtypes``) on pre-built arguments of the exact C types:
        the value references, the sizes and the value buffers are allocated once
        here, so a step costs three foreign calls and no allocation besides the
        two ``c_double`` times.
        """
        inst = self.inst
        fast = fast_functions(dll)
        c = inst.c
        ins, outs = ports.inputs, ports.outputs
        pushers: list[Callable[[], None]] = [] if ports.alias_push is nothing else [ports.alias_push]
        pullers: list[Callable[[], None]] = []
        for kinds in KINDS2:
            group = port_group(ins, kinds)
            if group is not None:
                pushers.append(make_pusher(fast[SETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
            group = port_group(outs, kinds)
            if group is not None:
                pullers.append(make_puller(fast[GETTERS[kinds[0]]], c, *group, kinds[0], self._call_failed))
        if interpolates_inputs and port_group(ins, ("Real",)) is not None:
            pushers.append(make_derivative_pusher(dll, c, *port_group(ins, ("Real",)), self._call_failed))
        if ports.alias_pull is not nothing:
            pullers.append(ports.alias_pull)
        self.push_all = push_all = chain(pushers)
        self.pull_all = pull_all = chain(pullers)
        do_step = fast["fmi2DoStep"]
        no_prior = ctypes.c_int(0 if self.can_rollback else 1)
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

        self.job = CStepJob(step=address(do_step), instance=c.value, version=2, no_prior=no_prior.value)
        self.begin, self.finish = (lambda t: push_all()), finish
        return step

    def _bind3(self, ports: ValuePorts) -> Callable[[float, float], None]:
        """The step path of an FMI 3.0 FMU: one ``fmi3Set*``/``fmi3Get*`` call per FMI type, arrays whole, and
        ``fmi3DoStep`` with its early return and event mode (see :meth:`_step_ended`)."""
        inst = self.inst
        c, f = inst.c, inst.f
        pushers = [ports.alias_push, *(make_pusher3(f[fmi3.SETTERS[t]], c, group, t, self._call_failed)
                                       for t, group in groups3(ports.inputs))]
        pullers = [make_puller3(f[fmi3.GETTERS[t]], c, group, t, self._call_failed)
                   for t, group in groups3(ports.outputs)]
        pullers.append(ports.alias_pull)
        self.push_all = push_all = chain(pushers)
        self.pull_all = pull_all = chain(pullers)
        do_step = f["fmi3DoStep"]
        no_prior = not self.can_rollback
        result = fmi3.StepResult()
        refs = result.refs
        step_failed, step_ended = self._step_failed, self._step_ended
        requests = self.requests

        def begin(t: float) -> None:
            if requests.pending_event is not None:
                self.handle_pending_event(t)
                if requests.stop_requested is not None:
                    raise self.stepped_after_stop(t)
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

        job = CStepJob(step=address(do_step), instance=c.value, version=3, no_prior=int(no_prior))
        job.out[:] = [ctypes.addressof(v) for v in (result.event, result.terminate, result.early, result.last)]
        self.job, self.begin, self.finish = job, begin, finish
        return step

    def call(self, name: str, t: float, *args: Any) -> None:
        """Call the FMI function *name* on the instance at simulation time *t*; a failure raises FMUError."""
        inst = self.inst
        status = inst.f[name](inst.c, *args)
        if status > 1:
            raise self.log.error(f"{name} returned {self.log.status(status)} at t={t:.12g}", t)

    def settle_events(self, t: float, enter: bool = False) -> None:
        """Handle the FMU's event at *t* in its event mode: enter it (with *enter*), update the discrete states until
        they settle, then return to step mode (FMI 3.0, ``eventModeUsed``); an FMU that asks to terminate there
        stays in event mode with a stop request (:attr:`Requests.stop_requested`)."""
        if enter:
            self.call("fmi3EnterEventMode", t)
        if fmi3.update_discrete_states(self.inst, t, lambda message: self.log.error(message, t)):
            self.requests.request_stop("fmi3UpdateDiscreteStates returned terminateSimulation")
            return
        self.call("fmi3EnterStepMode", t)

    def push_inputs(self, t: float) -> None:
        """Set every input from its port (in initialization mode)."""
        self.push_all()

    def initialized(self, t0: float) -> None:
        """Initialization mode has ended: with event mode used, an FMI 3 FMU is in event mode, settled here."""
        if self.event_mode:
            self.settle_events(t0)

    def handle_pending_event(self, t: float) -> None:
        """Handle the event the last step left (:attr:`Requests.pending_event`, at *t*) in event mode; the outputs
        after it."""
        self.requests.pending_event = None
        self.settle_events(t, enter=True)
        self.pull_all()

    def stepped_after_stop(self, t: float) -> FMUError:
        """The error of a step from *t* after the FMU asked to terminate (:attr:`Requests.stop_requested`): a master
        that does not end the run there, or an FMU inside a multi-model component."""
        return stepped_after_stop(self.log, self.requests, t)

    def read_outputs(self) -> None:
        """Read every output from the FMU now, between steps.

        Inputs are set again first when an output depends on them directly:
        between two steps the master may have changed them (loop iteration),
        and FMI 2.0 lets outputs be read after that.
        """
        if self.push_on_read:
            self.push_all()
        self.pull_all()

    def _step_ended(self, t: float, dt: float, result: fmi3.StepResult, first: bool) -> bool:
        """After an ``fmi3DoStep`` from *t* by *dt* that asked for attention: terminate, event or early return.

        An event at the step's end (``eventHandlingNeeded`` without early
        return) is handled there in event mode. An early return at
        ``lastSuccessfulTime`` inside the step raises :class:`StepDiscarded`
        with the FMU's outputs at that instant, before its event,
        and ``event="early_return"``, as FMI 2's discard does: the masters make
        it the communication point of every component (no search: the FMU names
        the instant), record the sample before the event and an
        ``early_return`` event there, then the component's ``handle_event``
        handles it in the FMU's event mode and they record the sample after it
        (micro 1). The FMU handles a pending event itself before its next step
        if nobody did.
        An early return at the step's start (an event due at once)
        is handled and the step taken again (``True``: step again; once only,
        the *first* time). ``terminateSimulation`` ends the step at
        ``lastSuccessfulTime`` with a stop request (see :meth:`_terminated`).
        """
        end = t + dt
        requests = self.requests
        if result.terminate.value:
            self._terminated(t, dt, result.last.value, "fmi3DoStep returned terminateSimulation")
            return False
        if not result.early.value:
            if result.event.value and self.event_mode:
                requests.pending_event = STEP_END_EVENT  # the sample before it is taken first
            return False
        last = result.last.value
        eps = 4.0 * math.ulp(max(abs(t), abs(end)))
        message = f"fmi3DoStep from t={t:.12g} with step {dt:.6g} returned early at t={last:.12g}"
        if not math.isfinite(last) or last < t - eps or last > end + eps:
            raise self.log.error(f"{message}, outside the step", t)
        at_end = abs(last - end) <= eps
        if result.event.value and self.event_mode and at_end:
            requests.pending_event = EARLY_RETURN_EVENT
            return False
        if result.event.value and self.event_mode and last <= t + eps:
            self.settle_events(last, enter=True)
            if requests.stop_requested is not None:
                raise self.log.error(f"{message}, its start, and {requests.stop_requested} there: cosimrun ends a "
                                     "run where an FMU asks to terminate only at a time it reached in a step", t)
        if at_end:
            return False
        if last <= t + eps:
            if not (first and result.event.value):
                raise self.log.error(f"{message}, its start, " + ("again after handling its event there"
                                                                 if result.event.value else "without an event"), t)
            return True
        if self.fixed_step_only:
            raise self.log.error(f"{message}; it cannot handle variable communication step sizes "
                                 f"({VARIABLE_STEP_FLAG}), so it cannot step on from there", t)
        self.pull_all()
        event = EARLY_RETURN_EVENT if result.event.value else None
        if event is not None and self.event_mode:
            requests.pending_event = event
        raise StepDiscarded(f"{self.log.where}: {message}" + (" (an event of the FMU, handled there)" if event else ""),
                            component=self.log.name, time=t, last_successful_time=last, event=event)

    def _keep_fixed_step(self, step: Callable[[float, float], None]) -> Callable[[float, float], None]:
        """*step*, refusing any step size other than the first (:attr:`fixed_step`) with a clear FMUError."""
        check = self.check_fixed_step

        def fixed(t: float, dt: float) -> None:
            check(t, dt)
            step(t, dt)

        return fixed

    def check_fixed_step(self, t: float, dt: float) -> None:
        """Refuse a step size other than the first (:attr:`fixed_step`, set here by the first) with an FMUError.

        Two step sizes count as one when they differ by rounding only: the
        difference of two grid times ``t0 + k*dt`` is ``dt`` to a few ulp of ``t``.
        """
        h = self.fixed_step
        if h is None:
            self.fixed_step = dt
        elif abs(dt - h) > 1e-9 * h + 4.0 * math.ulp(abs(t) + h):
            raise self.log.error(
                f"the FMU cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}), so every "
                f"step must be {h:.12g} like its first, but it was asked to step from t={t:.12g} with {dt:.12g}",
                t,
            )

    def _step_failed(self, status: int, t: float, dt: float) -> None:
        """Raise for an ``fmi2DoStep`` that did not return OK or Warning (or return: the step counts as done).

        ``fmi2Discard`` with a last successful time ``t_last`` inside the step
        (``t < t_last < t + dt``, as FMI 2.0 lets an FMU end a step early) raises
        :class:`StepDiscarded` with the FMU's outputs at ``t_last``, nothing
        recorded: the master decides whether that instant becomes a
        communication point. A ``t_last`` within rounding (a few ulp) of
        ``t + dt`` is the step done. Any other discard (no last successful
        time, none past ``t``, a fixed-step FMU that could not step on from
        ``t_last``), ``fmi2Error`` and ``fmi2Fatal`` raise :class:`FMUError`.
        With ``fmi2Terminated`` the FMU asks to end the run at ``t_last``
        (see :meth:`_terminated`).
        """
        log = self.log
        prefix = "fmi3" if self.fmi3 else "fmi2"
        message = f"{prefix}DoStep from t={t:.12g} with step {dt:.6g} returned {log.status(status)}"
        last = self._status_value("fmi2GetRealStatus", FMI2_LAST_SUCCESSFUL_TIME, ctypes.c_double) \
            if status == 2 and not self.fmi3 else None
        if last is None or not math.isfinite(last):
            raise log.error(message, t)
        message += f" (last successful time {last:.12g})"
        end = t + dt
        eps = 4.0 * math.ulp(max(abs(t), abs(end)))
        if self._status_value("fmi2GetBooleanStatus", FMI2_TERMINATED, ctypes.c_int):
            self._terminated(t, dt, last, "fmi2DoStep returned fmi2Discard with fmi2Terminated")
            return
        if abs(last - end) <= eps:
            return
        if not t + eps < last < end:
            raise log.error(message, t)
        if self.fixed_step_only:
            raise log.error(f"{message}; it cannot handle variable communication step sizes ({VARIABLE_STEP_FLAG}), "
                            "so it cannot step on from there", t)
        self.pull_all()
        raise StepDiscarded(f"{log.where}: {message}{log.tail()}", component=log.name, time=t,
                            last_successful_time=last)

    def _terminated(self, t: float, dt: float, last: float, how: str) -> None:
        """The FMU asks to end the simulation at its last successful time *last* of the step from *t* by *dt*
        (*how*: the FMI call that said so): a stop request, the step done when *last* is its end; inside the step,
        :class:`StepDiscarded` at *last* (with the FMU's outputs there), so that the masters bring every component
        to that instant, where the run ends."""
        end = t + dt
        eps = 4.0 * math.ulp(max(abs(t), abs(end)))
        message = f"{how} in the step from t={t:.12g} with step {dt:.6g} at t={last:.12g}"
        log = self.log
        if not (math.isfinite(last) and t + eps < last <= end + eps):
            raise log.error(f"{message}, not after the step's start and within the step: cosimrun ends a run "
                            "where an FMU asks to terminate only at a time it reached in a step", t)
        self.requests.request_stop(how)
        if abs(last - end) <= eps:
            return
        self.pull_all()
        raise StepDiscarded(f"{log.where}: {message}{log.tail()}", component=log.name, time=t,
                            last_successful_time=last)

    def _status_value(self, function: str, kind: int, c_type: Any) -> Any:
        """The value ``fmi2Get*Status(kind)`` reports (``None`` when the FMU does not provide it)."""
        inst = self.inst
        fn = inst.f.get(function)
        if fn is None:
            return None
        value = c_type()
        try:
            if fn(inst.c, kind, ctypes.byref(value)) > 1:
                return None
        except Exception:  # a status query must not hide the step's own failure
            return None
        return value.value

    def unbind(self) -> None:
        """Free the FMU state the C step saved (the instance is about to be freed); stepping refuses from now on."""
        self.push_all = self.pull_all = nothing
        if self.job.state:
            self.inst.free_state(ctypes.c_void_p(self.job.state))
            self.job.state = None


def stepped_after_stop(log: FMULog, requests: Requests, t: float) -> FMUError:
    """The error of a step from *t* after the FMU asked to terminate: a master that does not end the run there,
    or an FMU inside a multi-model component."""
    return log.error(f"asked to step from t={t:.12g} after it {requests.stop_requested}; a run ends where an FMU "
                     "asks to terminate only when the FMU is a component of the system itself (not a mode of "
                     "a multi-model component)", t)


class FMUCStep:
    """An FMU's step split around ``fmi2DoStep``/``fmi3DoStep`` (:class:`~cosimrun.core.cstep.CStep`).

    ``begin`` does what ``do_step`` does before the call (the fixed-step
    check, an FMI 3 pending event, the inputs) and ``end`` what it does after
    it (the status, outputs, time, recording), with the same code, so a step
    taken this way computes what ``do_step`` computes. The state a speculative
    job saves (``fmi2GetFMUstate``, after the inputs were set) is kept in the
    job and reused, and freed with the instance. *comp* is the component
    stepped: its time and the end of its step (``_stepped``) are its own.
    """

    __slots__ = ("comp", "stepper", "job", "address", "_begin", "_finish", "_set_state", "_state_function",
                 "_set_function", "_fixed_step_only", "site")
    runner: ClassVar[FMIStepRunner] = RUNNER
    """Starts the pool that runs these jobs (:mod:`cosimrun.fmi.pool`: the native pool, or Python threads)."""

    def __init__(self, comp: CoSimComponent, stepper: Stepper, site: memoryview | None = None) -> None:
        self.site = site
        """Where the step's time is kept while its job runs (:mod:`cosimrun.core.crashsite`)."""
        inst = stepper.inst
        job = stepper.job
        self._state_function, self._set_function = ("fmi3GetFMUState", "fmi3SetFMUState") if stepper.fmi3 \
            else ("fmi2GetFMUstate", "fmi2SetFMUstate")
        get_state = inst.f.get(self._state_function) if stepper.can_rollback else None
        self._set_state = inst.f.get(self._set_function)
        job.get_state = address(get_state) if get_state is not None else None
        self.comp, self.stepper, self.job, self.address = comp, stepper, job, ctypes.addressof(job)
        self._begin, self._finish = stepper.begin, stepper.finish
        self._fixed_step_only = stepper.fixed_step_only

    def begin(self, t: float, h: float, snapshot: bool) -> None:
        """Check the step, set the inputs and the job's arguments (*snapshot*: save the state first)."""
        stepper = self.stepper
        if not h > 0.0:
            raise step_size_error(self.comp.name, t, h)
        if stepper.requests.stop_requested is not None:
            raise stepper.stepped_after_stop(t)
        if self._fixed_step_only:
            stepper.check_fixed_step(t, h)
        self._begin(t)
        job = self.job
        job.t, job.h, job.snapshot = t, h, snapshot and job.get_state is not None
        if self.site is not None:
            self.site[0] = t

    def end(self, t: float, h: float) -> None:
        """The outcome of the job: raises as ``do_step`` does, else reads the outputs and records the step."""
        comp = self.comp
        status = self.job.status
        if self.site is not None:
            self.site[0] = NAN
        log = self.stepper.log
        if status == SNAPSHOT_FAILED:
            raise log.error(f"{self._state_function} returned {log.status(self.job.state_status)} at t={t:.12g}", t)
        try:
            self._finish(t, h, status)
        except StepEndedEarly as exc:
            comp.t = exc.reached
            raise
        comp.t = t = t + h
        comp._stepped(t)

    def undo(self) -> None:
        """Return the FMU to the state its job saved before stepping (its ports were never updated)."""
        stepper = self.stepper
        inst = stepper.inst
        assert self._set_state is not None and self.job.state
        status = self._set_state(inst.c, ctypes.c_void_p(self.job.state))
        if status > 1:
            t = self.comp.t
            raise stepper.log.error(f"{self._set_function} returned {stepper.log.status(status)} at t={t:.12g}", t)
        stepper.requests.pending_event = None


def address(function: Any) -> int:
    """The address of a ctypes function pointer."""
    return ctypes.cast(function, ctypes.c_void_p).value or 0
