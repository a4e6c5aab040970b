"""FMUComponent: an FMI 2.0 co-simulation FMU as a cosimrun component.

The component takes its ports, parameters, feedthrough and state from the
model description (:mod:`~cosimrun.components.fmu.description`), shares the
extracted files (:mod:`~cosimrun.components.fmu.extraction`) and calls the
FMU's library through ctypes (:mod:`~cosimrun.components.fmu.fmi2`). The class
is assembled from one mixin per concern (see :mod:`~cosimrun.components.fmu.base`).
"""

from __future__ import annotations

from typing import ClassVar

from cosimrun.components.fmu.lifecycle import FMULifecycle
from cosimrun.components.fmu.parameters import FMUParameters
from cosimrun.components.fmu.ports import FMUPorts
from cosimrun.components.fmu.step import FMUStepping


class FMUComponent(FMUStepping, FMUParameters, FMUPorts, FMULifecycle):
    """An FMI 2.0 co-simulation FMU (``path`` names the .fmu; its parameters become component parameters).

    Own parameters: ``path`` (the FMU file; ``example:NAME`` builds a shipped
    example), ``aliases`` (FMU variable -> port name), ``start`` (start values of
    variables by name), ``events`` (event name -> ``{port, direction, level,
    abs}``: indicator ``(|y| if abs else y) - level`` on an output), ``states``
    (variables that form the physical state; default: those with a
    ``derivative``), ``tolerance`` (passed to ``fmi2SetupExperiment``),
    ``logging`` (FMU debug logging) and ``private_copy`` (run from a private,
    writable copy of the extracted FMU instead of the shared read-only cache).
    See :mod:`cosimrun.components.fmu`.
    """

    FIRST_PARAMETERS: ClassVar[tuple[str, ...]] = ("path",)
    """Parameters a config builder should apply before the others (they define the rest)."""
