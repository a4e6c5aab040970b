"""What every part of :class:`~cosimrun.components.fmu.FMUComponent` shares: the model, messages, errors.

The component is one class assembled from a mixin per concern, each a
subclass of :class:`FMUBase` sharing ``self``: parameters
(:mod:`~cosimrun.components.fmu.parameters`), ports from the model
description (:mod:`~cosimrun.components.fmu.ports`), the FMI life cycle
(:mod:`~cosimrun.components.fmu.lifecycle`) and the step path
(:mod:`~cosimrun.components.fmu.step`). Each mixin sets up its own attributes
in ``__init__``. The FMI calls differ by version (:mod:`~cosimrun.fmi.fmi2`,
:mod:`~cosimrun.fmi.fmi3`), chosen by :attr:`FMUBase.is_fmi3`; the
logic around them is shared.
"""

from __future__ import annotations

from collections import deque

from cosimrun.core.component import CoSimComponent
from cosimrun.fmi import fmi3
from cosimrun.fmi.description import FMUModel
from cosimrun.fmi.errors import FMUError, status_name
from cosimrun.fmi.fmi2 import register_log_sink


class FMUBase(CoSimComponent):
    """The loaded model, the FMU's last log messages and how errors name the component."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.model: FMUModel | None = None
        self._messages: deque[str] = deque(maxlen=20)
        self._env = register_log_sink(self._messages)

    @property
    def fmu_label(self) -> str:
        """The FMU file name (or ``no FMU`` before ``path`` is set)."""
        return self.model.label if self.model is not None else "no FMU"

    @property
    def is_fmi3(self) -> bool:
        """True for an FMI 3.0 FMU (the FMI calls differ by version; the logic around them does not)."""
        return self.model is not None and self.model.fmi_version == "3.0"

    def _status(self, status: int) -> str:
        """The name of FMI status code *status* in this FMU's version (``fmi2Discard``, ``fmi3Error`` ...)."""
        return fmi3.status_name(status) if self.is_fmi3 else status_name(status)

    @property
    def interpolates_inputs(self) -> bool:  # type: ignore[override]
        """True for an FMI 2.0 FMU that declares ``canInterpolateInputs``: it gets input derivatives before each step.

        FMI 3.0 declares input derivatives as variables of their own; cosimrun
        does not set them, so an FMI 3 FMU gets each input's mean over the step.
        """
        return self.model is not None and self.model.can_interpolate_inputs and not self.is_fmi3

    @property
    def supports_rollback(self) -> bool:
        """True when the FMU declares ``canGetAndSetFMUstate``."""
        return self.model is not None and self.model.can_rollback

    def _where(self) -> str:
        return f"FMU component {self.name!r} ({self.fmu_label})"

    def _log_tail(self) -> str:
        if not self._messages:
            return ""
        return "; FMU log: " + " | ".join(list(self._messages)[-5:])

    def _error(self, message: str, t: float | None) -> FMUError:
        """An :class:`FMUError` of this component at simulation time *t*, ending with the FMU's last messages."""
        return FMUError(f"{self._where()}: {message}{self._log_tail()}", component=self.name, time=t)
