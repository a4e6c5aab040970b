"""FMUComponent: an FMI 2.0 or 3.0 co-simulation FMU as a cosimrun component.

The component takes its ports, parameters, feedthrough and state from the
model description (:mod:`~cosimrun.fmi.description`), shares the
extracted files (:mod:`~cosimrun.fmi.extraction`) and calls the
FMU's library through ctypes (:mod:`~cosimrun.fmi.fmi2`,
:mod:`~cosimrun.fmi.fmi3`). The class
is assembled from one mixin per concern (see :mod:`~cosimrun.components.fmu.base`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from cosimrun.components.fmu.build import resolve_example
from cosimrun.components.fmu.lifecycle import FMULifecycle
from cosimrun.components.fmu.parameters import INTERFACES, FMUParameters
from cosimrun.components.fmu.ports import FMUPorts
from cosimrun.components.fmu.step import FMUStepping
from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ConfigError
from cosimrun.fmi.description import FMUModel, read_fmu
from cosimrun.fmi.errors import FMUError


class FMUComponent(FMUStepping, FMUParameters, FMUPorts, FMULifecycle):
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
