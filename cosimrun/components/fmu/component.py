"""FMUComponent: an FMI 2.0 or 3.0 co-simulation FMU as a cosimrun component.

The component delegates to its :class:`~cosimrun.fmi.instance.FMUInstance`
(:mod:`cosimrun.fmi`: the model description, the extracted files, the FMI
calls) through :class:`~cosimrun.components.fmu.base.FMUBase`; what is its
own is the step: :meth:`FMUComponent.do_step` written out around the compiled
step of a :class:`~cosimrun.fmi.step.Stepper`, ended by the base component's
end of a step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from cosimrun.components.fmu.base import INTERFACES, FMUBase
from cosimrun.components.fmu.build import resolve_example
from cosimrun.core import crashsite
from cosimrun.core.component import NO_EVENTS, CoSimComponent, step_size_error
from cosimrun.core.crashsite import NAN
from cosimrun.errors import ConfigError, FMUError, StepEndedEarly
from cosimrun.fmi.description import read_fmu
from cosimrun.fmi.fmi2 import Instance
from cosimrun.fmi.model import FMUModel
from cosimrun.fmi.ports import ValuePorts
from cosimrun.fmi.step import VARIABLE_STEP_FLAG, FMUCStep, Requests, Stepper

__all__ = ["VARIABLE_STEP_FLAG", "FMUComponent"]


class FMUComponent(FMUBase):
    """An FMI 2.0 or 3.0 co-simulation FMU (``path`` names the .fmu; its parameters become component parameters).

    Own parameters: ``path`` (the FMU file; ``example:NAME`` builds a shipped
    example), ``aliases`` (FMU variable -> port name), ``start`` (start values of
    variables by name), ``events`` (event name -> ``{port, direction, level,
    abs}``: indicator ``(|y| if abs else y) - level`` on an output), ``states``
    (variables that form the physical state; default: those with a
    ``derivative``), ``tolerance`` (passed to ``fmi2SetupExperiment``),
    ``logging`` (FMU debug logging) and ``private_copy`` (run from a private,
    writable copy of the extracted FMU instead of the shared read-only cache),
    ``interface`` (``cs``; ``me`` is another class, see :meth:`resolve_class`).
    See :mod:`cosimrun.components.fmu`.

    **FMI 3.0 early return.** An FMI 3 FMU with event mode that returns early
    from ``fmi3DoStep`` at one of its events has the event handled there in
    its event mode and raises :class:`~cosimrun.errors.StepDiscarded` at that
    instant, which the masters handle as below.

    **A step ended early.** FMI 2.0 lets ``fmi2DoStep`` return ``fmi2Discard``
    after computing only part of the step; the master may then ask for
    ``fmi2LastSuccessfulTime`` and simulate up to there. ``do_step`` raises
    :class:`~cosimrun.errors.StepDiscarded` when that time lies inside the step,
    with the component's time and outputs there and nothing recorded, and
    every master makes that instant the communication point of all
    components: those stepped past it roll back and step to it, the others
    step to it, and the run goes on from there with a ``discard`` event in
    its event log and ``stats.discards`` counted. A discard the run cannot
    follow (no last successful time, none past the step's start, a component
    that would have to roll back and cannot) fails the run with one line
    saying why. An FMU that asks to terminate (``fmi2Terminated``, FMI 3's
    ``terminateSimulation``) sets ``stop_requested``: the run ends there, complete.

    **FMUs that cannot handle variable communication step sizes**
    (``canHandleVariableCommunicationStepSize="false"``, the default of FMI
    2.0 when the attribute is missing) are stepped by ``run.dt`` only, as the
    standard requires: a run that certainly breaks that (``run.tf`` off the
    grid ``t0 + k*dt``, a component's ``max_step`` below ``dt``) is refused
    before its first step, and whatever would cut a step during the run (a
    time event, a state event the hybrid master locates, another FMU's
    discard) fails it at that moment, naming the cause. cosimrun neither moves
    such an event to the grid nor drops the last partial step silently (FMPy's
    ``simulate_fmu`` keeps such an FMU on its grid and ends before a partial
    last step): a ``complete`` run took every step it was asked for. The
    component itself takes one step size only, that of its first step
    (:attr:`fixed_step`), also when used on its own.
    """

    FIRST_PARAMETERS: ClassVar[tuple[str, ...]] = ("path",)
    """Parameters a config builder should apply before the others (they define the rest)."""

    steps_in_parallel: ClassVar[bool] = True
    """The step's work is ``fmi2DoStep``/``fmi3DoStep`` (:meth:`c_step`), which the masters' parallel stepper
    calls on native threads; the FMU's log messages come back through a ctypes callback, which takes the GIL."""
    fixed_step_reason: ClassVar[str] = VARIABLE_STEP_FLAG

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._stepper: Stepper | None = None
        self._requests = Requests()
        """The requests of the bound instance (read at every step; a placeholder without one)."""
        self._fast_step: Any = self._not_running
        self._c_step: FMUCStep | None = None
        self._site: memoryview | None = None

    @property
    def fixed_step_only(self) -> bool:  # type: ignore[override]
        """True when the FMU declares ``canHandleVariableCommunicationStepSize`` false: all its steps have one size
        (the reason, :data:`~cosimrun.fmi.step.VARIABLE_STEP_FLAG`)."""
        return self.fmu is not None and not self.fmu.interface.variable_step

    @property
    def may_discard(self) -> bool:  # type: ignore[override]
        """Whether ``do_step`` may end early with :class:`~cosimrun.errors.StepDiscarded`, leaving the FMU at its
        last successful time.

        Masters keep what they need to bring the other components to that
        instant. A fixed-step FMU cannot go on from there, so its discards are
        failures (``False``).
        """
        return self.fmu is not None and self.fmu.interface.variable_step

    @property
    def fixed_step(self) -> float | None:
        """The one step size of an FMU that cannot handle variable steps: that of its first step since it was
        instantiated (``initialize``, ``set_state``); ``None`` before it, and for FMUs that can."""
        return self._stepper.fixed_step if self._stepper is not None else None

    @property
    def interpolates_inputs(self) -> bool:  # type: ignore[override]
        """True for an FMI 2.0 FMU that declares ``canInterpolateInputs``: it gets input derivatives before each step.

        FMI 3.0 declares input derivatives as variables of their own; cosimrun
        does not set them, so an FMI 3 FMU gets each input's mean over the step.
        """
        return self.fmu is not None and self.fmu.interface.can_interpolate_inputs and not self.fmu.fmi3

    @property
    def leaves_events(self) -> bool:  # type: ignore[override]
        """True for an FMI 3 FMU with event mode: its events wait for the master (:attr:`pending_event`)."""
        return self.fmu is not None and self.fmu.event_mode

    # ------------------------------------------------------------------ coupled initialization
    def enter_initialization(self, t0: float) -> None:
        """Initialize at *t0* with the FMU left in Initialization Mode: its outputs are read from its inputs there
        (``fmi2SetReal``/``fmi2GetReal``, the FMI 3 calls likewise) until :meth:`exit_initialization`."""
        self._hold_initialization = True
        try:
            self.initialize(t0)
        finally:
            self._hold_initialization = False

    def exit_initialization(self, t0: float) -> None:
        """Set the inputs the ports hold, leave Initialization Mode and read the outputs (once, after
        :meth:`enter_initialization`)."""
        fmu = self.fmu
        if fmu is not None and fmu.initializing is not None:
            fmu.exit_initialization()
            self._read_outputs()

    def _bind(self, inst: Instance, dll: Any, ports: ValuePorts) -> Stepper:
        """The compiled step path of a new instance (:class:`~cosimrun.fmi.step.Stepper`)."""
        fmu = self.fmu
        assert fmu is not None
        self._stepper = stepper = Stepper(
            inst, dll, fmu.interface, ports, feedthrough=any(self.direct_feedthrough.values()),
            interpolates_inputs=self.interpolates_inputs, log=fmu.log, now=self._now, requests=fmu.requests)
        self._fast_step = stepper.step
        self._requests = fmu.requests
        self._site = crashsite.slot(self.name)
        self._c_step = FMUCStep(self, stepper, self._site)
        return stepper

    def record_native_steps(self, slot: memoryview | None) -> None:
        """Keep the time of each step in *slot* while it runs in C (:mod:`cosimrun.core.crashsite`)."""
        self._site = slot
        if self._c_step is not None:
            self._c_step.site = slot

    def _unbind(self) -> None:
        """Stepping refuses until the next instance is bound."""
        self._stepper = self._c_step = self._site = None
        self._fast_step = self._not_running

    def c_step(self) -> FMUCStep | None:
        """The step split around ``fmi2DoStep``/``fmi3DoStep`` (:class:`~cosimrun.fmi.step.FMUCStep`), while the
        FMU is instantiated."""
        return self._c_step

    def _not_running(self, *args: Any) -> None:
        raise FMUError(f"{self._where()}: the FMU is not instantiated; call initialize(t0) first "
                       "(after reset or free, too)", component=self.name, time=self.t)

    # ------------------------------------------------------------------ the base class's step machinery
    def do_step(self, t: float, dt: float) -> None:
        """Advance from *t* to *t + dt*: set the inputs, ``fmi2DoStep``, read the outputs, record them.

        The contract of :meth:`CoSimComponent.do_step`, written out so that a
        step is one compiled call around the three FMI calls (see
        :class:`~cosimrun.fmi.step.Stepper`); a step the FMU ends early leaves
        the component at the instant it reached.
        """
        if not dt > 0.0:
            raise step_size_error(self.name, t, dt)
        if self._requests.stop_requested is not None:
            assert self._stepper is not None
            raise self._stepper.stepped_after_stop(t)
        site = self._site  # the time of the step in C, for a crash there (cosimrun.core.crashsite)
        if site is not None:
            site[0] = t
        try:
            self._fast_step(t, dt)
        except StepEndedEarly as exc:
            self.t = exc.reached
            raise
        finally:
            if site is not None:
                site[0] = NAN
        self.t = t = t + dt
        self._stepped(t)

    def _do_step_internal(self, t: float, dt: float) -> None:
        try:
            self._fast_step(t, dt)  # also reads the outputs: _update_output_states after it finds them fresh
        except StepEndedEarly as exc:
            self.t = exc.reached
            raise

    def _update_output_states(self, t: float | None = None, event_names: Sequence[str] = NO_EVENTS) -> None:
        if self._stepper is not None:
            self._stepper.read_outputs()

    def _handle_events_internal(self, event_names: list[str], t: float) -> None:
        """An FMI 3 early return's event waits here: handled in the FMU's event mode (see
        :class:`~cosimrun.fmi.step.Stepper`)."""
        if self.pending_event is not None:
            assert self._stepper is not None
            self._stepper.handle_pending_event(t)

    @classmethod
    def resolve_class(cls, params: Mapping[str, Any]) -> type[CoSimComponent]:
        """The class ``type: fmu`` builds for *params*: this one (co-simulation) or model exchange.

        Model exchange (:class:`cosimrun.components.fmu.me.ModelExchangeFMU`)
        when ``interface: me`` or the FMU offers model exchange only; reads the
        model description only. An ``interface`` the FMU does not offer is a
        :class:`~cosimrun.errors.ConfigError` keyed ``params.interface``; an
        unreadable ``path`` is left to ``set_parameters`` to report.
        """
        interface = params.get("interface")
        if interface is not None and interface not in INTERFACES:
            raise ConfigError("params.interface", f"{interface!r} is not an FMU interface; valid: cs (co-simulation), "
                                                  "me (model exchange)")
        model = _model_or_none(params.get("path"))
        if model is not None:
            offered = model.interfaces
            if interface is None:
                interface = "cs" if "cs" in offered else "me"
            elif interface not in offered:
                raise ConfigError("params.interface", f"{interface!r}: {model.label} offers {model.offers} only "
                                                      f"(valid: {', '.join(offered)})")
        if interface != "me":
            if "integrator" in params:
                raise ConfigError("params.integrator", "an integrator applies to model exchange only; this FMU runs "
                                                       "as co-simulation (interface: me if it offers model exchange)")
            return cls
        try:
            from cosimrun.components.fmu.me import ModelExchangeFMU
        except ImportError as exc:
            raise ConfigError("params.interface", f"'me': model-exchange FMUs cannot be run in this installation "
                                                  f"(cosimrun.components.fmu.me does not load: {exc})") from None
        return ModelExchangeFMU


def _model_or_none(path: Any) -> FMUModel | None:
    """The model description of FMU *path* (``example:NAME`` too), or ``None`` when it cannot be read."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    text = os.fspath(path)
    try:
        return read_fmu(resolve_example(text[len("example:"):]) if text.startswith("example:") else Path(text))
    except (ValueError, FMUError):
        return None
