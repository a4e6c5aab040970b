"""Model exchange of one FMU instance: the continuous-time calls and the inputs in the modes FMI allows them.

:class:`Exchange` is built once per instance (after instantiation), as the
co-simulation :class:`~cosimrun.fmi.step.Stepper` is: continuous Real inputs
that reach the integrator go with the continuous-time calls
(:class:`~cosimrun.fmi.me.ContinuousTimeCalls`), other continuous inputs are
held over a step, discrete inputs are set in event mode only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cosimrun.core.ports import PortState
from cosimrun.fmi.errors import FMULog
from cosimrun.fmi.fmi2 import Instance
from cosimrun.fmi.me import FMI2_API, FMI3_API, ContinuousTimeCalls, EventOutcome
from cosimrun.fmi.model import FMUVariable
from cosimrun.fmi.ports import ValuePorts
from cosimrun.fmi.step import Requests
from cosimrun.fmi.values import chain, transfer


def continuous(var: FMUVariable) -> bool:
    """Whether input *var* may change in continuous-time mode: a continuous Real (any FMI float)."""
    return var.type == "Real" and var.variability == "continuous"


def integrated(var: FMUVariable) -> bool:
    """Whether input *var* reaches the integrator (and its polynomial): a continuous Real (FMI 2), a continuous
    scalar Float64 (FMI 3)."""
    return continuous(var) and var.fmi_type in ("Real", "Float64") and var.index is None


class Exchange:
    """The model-exchange calls of instance *inst* of library *dll*.

    *ports* are the ports behind the FMU's values; *integrated* the input
    ports whose values reach the integrator, in the order of its input vector,
    with their value references *real_vrs*; *n_states* and *n_indicators* the
    sizes of the state and event indicator vectors. *log* names the FMU in
    errors, *now* gives the component's time, *requests* takes a request to
    terminate.
    """

    def __init__(self, inst: Instance, dll: Any, ports: ValuePorts, integrated: Sequence[PortState],
                 real_vrs: list[int], n_states: int, n_indicators: int, *, fmi3: bool, log: FMULog,
                 now: Callable[[], float], requests: Requests) -> None:
        def failed(fname: str, status: int) -> Any:
            return log.call_failed(fname, status, now())

        chosen = {id(p) for p in integrated}
        held = [(p, v) for p, v in ports.inputs if id(p) not in chosen and continuous(v)]
        discrete = [(p, v) for p, v in ports.inputs if not continuous(v)]
        self.integrated = list(integrated)
        self.alias_push = ports.alias_push
        self.push_held = transfer(inst, held, failed)
        """Sets the continuous inputs the integrator does not see (FMI 3 Float32 and arrays): held over a step."""
        self.push_discrete = transfer(inst, discrete, failed)
        self.discrete_ports = [p for p, _ in discrete]
        """The ports of the discrete inputs (set in event mode only)."""
        self.discrete_set: list[Any] = []
        """Their values last set in the FMU."""
        self.pull_all = chain([transfer(inst, ports.outputs, failed, read=True), ports.alias_pull])
        self.calls = ContinuousTimeCalls(FMI3_API if fmi3 else FMI2_API, inst.f, dll, inst.c, n_states,
                                         n_indicators, real_vrs, log.error, requests.request_stop)
        self.next_event_time: float | None = None
        """The FMU's next time event (``nextEventTime`` of its last event iteration)."""

    def push_inputs(self, t: float) -> None:
        """Set every input from its port in initialization mode (the real ones with the continuous-time calls'
        buffer)."""
        self.alias_push()
        self.calls.set_inputs(np.array([p.value for p in self.integrated], dtype=float), t)
        self.push_held()
        self.set_discrete()

    def set_discrete(self) -> None:
        """Set the discrete inputs (in initialization or event mode) and remember what was set."""
        self.push_discrete()
        self.discrete_set = [p.value for p in self.discrete_ports]

    def discrete_changed(self) -> bool:
        """Whether a discrete input differs from what was last set in the FMU."""
        ports = self.discrete_ports
        return bool(ports) and [p.value for p in ports] != self.discrete_set

    def initialized(self, t0: float) -> None:
        """The first event iteration (the FMU is in event mode after initialization); then continuous-time mode."""
        self.next_event_time = self.calls.event_iteration(t0, enter=False).next_event_time

    def event(self, t: float, x: np.ndarray, u: np.ndarray) -> EventOutcome:
        """The event iteration at *t* with the FMU at states *x* and real inputs *u* (the discrete ones set in event
        mode); :attr:`next_event_time` from it."""
        calls = self.calls
        self.alias_push()
        calls.set_continuous(t, x, u)
        self.push_held()
        outcome = calls.event_iteration(t, in_event_mode=self.set_discrete)
        self.next_event_time = outcome.next_event_time
        return outcome

    def unbind(self) -> None:
        """The instance is about to be freed: the component reads nothing from it from now on."""
