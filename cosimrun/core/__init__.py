"""The component data model: ports with units, events, histories, components."""

from cosimrun.core.component import CoSimComponent
from cosimrun.core.equations import EquationComponent
from cosimrun.core.events import DenseTime, Event, EventIndicator, InternalEventInfo
from cosimrun.core.history import ComponentHistory, PortHistory, SystemHistory
from cosimrun.core.ode import INTEGRATORS, OdeComponent, StateEvent
from cosimrun.core.ports import PortSpec, PortState, PortType
from cosimrun.core.units import UnitConversion, compile_conversion, ureg

__all__ = [
    "INTEGRATORS",
    "EquationComponent",
    "OdeComponent",
    "StateEvent",
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
    "UnitConversion",
    "compile_conversion",
    "ureg",
]
