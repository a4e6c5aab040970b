"""cosimrun: declarative co-simulation experiments."""

from cosimrun.core import (
    ComponentHistory,
    CoSimComponent,
    DenseTime,
    Event,
    EventIndicator,
    InternalEventInfo,
    PortHistory,
    PortSpec,
    PortState,
    PortType,
    SystemHistory,
    compile_conversion,
    ureg,
)

__version__ = "0.1.0"

__all__ = [
    "CoSimComponent",
    "ComponentHistory",
    "DenseTime",
    "Event",
    "EventIndicator",
    "InternalEventInfo",
    "PortHistory",
    "PortSpec",
    "PortState",
    "PortType",
    "SystemHistory",
    "__version__",
    "compile_conversion",
    "ureg",
]
