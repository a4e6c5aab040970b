"""What cosimrun knows of an FMU: its variables (:class:`FMUVariable`), interfaces (:class:`FMUInterface`) and
model (:class:`FMUModel`), as :func:`~cosimrun.fmi.description.read_fmu` reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cosimrun.core.ports import PortType
from cosimrun.errors import ConfigError

PORT_TYPES: dict[str, PortType] = {
    "Real": PortType.REAL,
    "Integer": PortType.INT,
    "Enumeration": PortType.INT,
    "Boolean": PortType.BOOL,
    "String": PortType.STRING,
}

FMI3_KINDS: dict[str, str] = {
    "Float32": "Real", "Float64": "Real",
    "Int8": "Integer", "UInt8": "Integer", "Int16": "Integer", "UInt16": "Integer",
    "Int32": "Integer", "UInt32": "Integer", "Int64": "Integer", "UInt64": "Integer",
    "Enumeration": "Enumeration", "Boolean": "Boolean", "String": "String",
}
"""FMI 3.0 variable types -> the kind cosimrun maps them by (``Real``, ``Integer``, ``Enumeration``, ...)."""

INTEGER_RANGES: dict[str, tuple[int, int]] = {
    f"{sign}Int{bits}": ((0, 2**bits - 1) if sign else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
    for sign in ("", "U") for bits in (8, 16, 32, 64)
}
"""The value range of each FMI 3.0 integer type (checked when a value is set)."""


@dataclass(frozen=True)
class FMUVariable:
    """One scalar variable of an FMU, as cosimrun uses it."""

    name: str
    vr: int
    type: str
    """``Real``, ``Integer``, ``Enumeration``, ``Boolean`` or ``String`` (for FMI 3 the kind of its type)."""
    causality: str
    variability: str
    initial: str | None
    start: Any
    """The start value as a Python value (``None`` when the model description has none)."""
    unit: str | None
    """The unit in pint syntax (``None``: none or untranslatable, see ``unit_problem``)."""
    fmu_unit: str | None
    """The unit as the FMU writes it."""
    unit_problem: str | None = None
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    fmi_type: str = ""
    """The type as the FMI version names it (``Real`` ... for FMI 2, ``Float32``, ``UInt16`` ... for FMI 3)."""
    index: int | None = None
    """The element's position in its FMI 3 array variable (row-major), ``None`` for a scalar."""
    size: int = 1
    """Elements of the variable behind value reference ``vr`` (1 for a scalar)."""
    alias_of: str | None = None
    """The variable this one is an alias of (FMI 3 ``<Alias>``; FMI 2: the ``noAlias`` variable of its value
    reference), ``None`` for the variable itself."""
    negated: bool = False
    """FMI 2 ``negatedAlias``: the value is minus the FMU's."""
    scale: float = 1.0
    offset: float = 0.0
    """A Real's value is ``scale * FMU value + offset`` (an FMI 3 alias in its ``displayUnit``; -1 when negated)."""

    def __post_init__(self) -> None:
        if not self.fmi_type:
            object.__setattr__(self, "fmi_type", self.type)

    @property
    def converted(self) -> bool:
        """Whether the value differs from the FMU's (a negated alias, an alias in another unit)."""
        return self.negated or self.scale != 1.0 or self.offset != 0.0

    @property
    def slot(self) -> tuple[str, int, int]:
        """What identifies the FMU value behind the variable: its get/set function kind, value reference and
        element (aliases share it)."""
        return self.fmi_type if self.fmi_type not in ("Integer", "Enumeration") else "Integer", self.vr, \
            self.index or 0

    def to_port(self, value: Any) -> Any:
        """The FMU's *value* as this variable's value (see :attr:`scale`, :attr:`negated`)."""
        if value is None or not self.converted:
            return value
        return self.scale * value + self.offset if self.type == "Real" else -value

    def from_port(self, value: Any) -> Any:
        """This variable's *value* as the FMU's value (the inverse of :meth:`to_port`)."""
        if value is None or not self.converted:
            return value
        return (value - self.offset) / self.scale if self.type == "Real" else -value

    @property
    def port_type(self) -> PortType:
        return PORT_TYPES[self.type]

    @property
    def settable_start(self) -> bool:
        """True when a start value may be set before initialization."""
        if self.variability == "constant" or self.causality in ("independent", "calculatedParameter") \
                or self.converted:
            return False
        return self.causality in ("parameter", "input") or self.initial in ("exact", "approx")


@dataclass(frozen=True)
class FMUInterface:
    """One interface an FMU offers (``cs``: co-simulation, ``me``: model exchange) and its capability flags."""

    kind: str
    """``cs`` or ``me``."""
    identifier: str
    """The ``modelIdentifier``: the name of the shared library."""
    binary: str
    """The shared library's path in the archive for this platform."""
    has_binary: bool
    can_rollback: bool
    """``canGetAndSetFMUstate`` (FMI 2) / ``canGetAndSetFMUState`` (FMI 3)."""
    only_once_per_process: bool
    can_serialize: bool = False
    """``canSerializeFMUstate`` (FMI 2) / ``canSerializeFMUState`` (FMI 3): its FMU state can leave the process
    (checkpoints)."""
    variable_step: bool = True
    """``canHandleVariableCommunicationStepSize`` (co-simulation)."""
    can_interpolate_inputs: bool = False
    has_event_mode: bool = False
    """FMI 3 co-simulation ``hasEventMode``: the FMU can hand its events to the importer (early return)."""
    might_return_early: bool = False
    """FMI 3 co-simulation ``mightReturnEarlyFromDoStep``."""
    provides_intermediate_update: bool = False
    needs_completed_integrator_step: bool = True
    """Model exchange: ``completedIntegratorStepNotNeeded`` (FMI 2) / ``needsCompletedIntegratorStep`` (FMI 3)."""
    provides_evaluate_discrete_states: bool = False


INTERFACE_NAMES = {"cs": "co-simulation", "me": "model exchange"}
DEFAULT_EXPERIMENT = {"t0": "startTime", "tf": "stopTime", "dt": "stepSize", "tolerance": "tolerance"}
"""The run settings an FMU's ``DefaultExperiment`` may give, by the attribute that gives each."""


@dataclass
class FMUModel:
    """What cosimrun reads from one FMU file (cached per file version).

    ``identifier`` and the capability fields (``can_rollback`` ...) are those of
    the co-simulation interface when the FMU offers one, else of model
    exchange; :attr:`interfaces` holds both.
    """

    path: Path
    description: Any
    """FMPy's ``ModelDescription``."""
    identifier: str
    guid: str
    """``guid`` (FMI 2) or ``instantiationToken`` (FMI 3)."""
    variables: dict[str, FMUVariable]
    inputs: list[FMUVariable]
    outputs: list[FMUVariable]
    parameters: list[FMUVariable]
    states: list[FMUVariable]
    feedthrough: dict[str, set[str]]
    """Output variable -> input variables it depends on directly."""
    can_rollback: bool
    only_once_per_process: bool
    variable_step: bool
    can_interpolate_inputs: bool = False
    """``canInterpolateInputs``: the FMU takes input derivatives (``fmi2SetRealInputDerivatives``)."""
    fmi_version: str = "2.0"
    """``2.0`` or ``3.0``."""
    interfaces: dict[str, FMUInterface] = field(default_factory=dict)
    """The interfaces the FMU offers by kind (``cs``, ``me``), co-simulation first."""
    clocks: list[str] = field(default_factory=list)
    """Names of FMI 3 clock variables (cosimrun runs no clocked partitions)."""
    unsupported: list[str] = field(default_factory=list)
    """Inputs and outputs no port can carry (FMI 3 ``Binary``), as ``name (type)``."""
    binary_hint: str = ""
    """What binaries the archive has instead (for the message when one is missing)."""

    @property
    def label(self) -> str:
        return self.path.name

    @property
    def default_experiment(self) -> dict[str, float]:
        """The run settings (``t0``, ``tf``, ``dt``, ``tolerance``, see :data:`DEFAULT_EXPERIMENT`) the FMU's
        ``DefaultExperiment`` gives, each only where it gives it."""
        default = self.description.defaultExperiment
        if default is None:
            return {}
        given = {key: float_or_none(getattr(default, attr, None)) for key, attr in DEFAULT_EXPERIMENT.items()}
        return {key: value for key, value in given.items() if value is not None}

    @property
    def offers(self) -> str:
        """``co-simulation``, ``model exchange`` or ``co-simulation and model exchange``."""
        return " and ".join(INTERFACE_NAMES[k] for k in self.interfaces)

    def interface(self, kind: str) -> FMUInterface:
        """The interface *kind* (``cs``/``me``); ``ConfigError`` naming what the FMU offers, or the missing binary."""
        found = self.interfaces.get(kind)
        if found is None:
            raise ConfigError(None, f"{self.label} offers {self.offers} only, not {INTERFACE_NAMES.get(kind, kind)} "
                                    f"(interface {kind!r}); valid: {', '.join(self.interfaces)}")
        if not found.has_binary:
            raise ConfigError(None, f"{self.label} has no binary for this platform ({found.binary} is missing; "
                                    f"{self.binary_hint})")
        return found

    def check_supported(self) -> None:
        """``ConfigError`` for what cosimrun cannot run: FMI 3 clocks and inputs or outputs of type ``Binary``."""
        if self.clocks:
            raise ConfigError(None, f"{self.label} declares clocks ({', '.join(self.clocks)}); cosimrun does not run "
                                    "FMI 3 clocks (clocked or scheduled partitions): export the model without clocks")
        if self.unsupported:
            raise ConfigError(None, f"{self.label} has inputs or outputs no port can carry: "
                                    f"{', '.join(self.unsupported)} (ports are Float, Int, UInt, Boolean, Enumeration "
                                    "or String)")


def float_or_none(text: Any) -> float | None:
    try:
        return None if text is None else float(text)
    except (TypeError, ValueError):
        return None
