"""The component data model: ports with units, events, histories, components.

Names are imported from their modules on first use (PEP 562): importing one
module of the package (``cosimrun.core.events``) does not create the unit
registry or import the integrators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosimrun._lazy import lazy_exports

_LAZY = {
    "CoSimComponent": ".component",
    "EquationComponent": ".equations",
    "DenseTime": ".events",
    "Event": ".events",
    "EventIndicator": ".events",
    "InternalEventInfo": ".events",
    "ComponentHistory": ".history",
    "PortHistory": ".history",
    "SystemHistory": ".history",
    "Hysteresis": ".switching",
    "ModeSwitch": ".switching",
    "ModeSwitching": ".switching",
    "StateAdapter": ".switching",
    "MultiComponent": ".multi",
    "SwitchRegions": ".regions",
    "INTEGRATORS": ".ode",
    "OdeComponent": ".ode",
    "StateEvent": ".ode",
    "DaeComponent": ".dae",
    "PortSpec": ".ports",
    "PortState": ".ports",
    "PortType": ".ports",
    "UnitConversion": ".units",
    "compile_conversion": ".units",
    "ureg": ".units",
}

if TYPE_CHECKING:
    from cosimrun.core.component import CoSimComponent
    from cosimrun.core.dae import DaeComponent
    from cosimrun.core.equations import EquationComponent
    from cosimrun.core.events import DenseTime, Event, EventIndicator, InternalEventInfo
    from cosimrun.core.history import ComponentHistory, PortHistory, SystemHistory
    from cosimrun.core.multi import MultiComponent
    from cosimrun.core.ode import INTEGRATORS, OdeComponent, StateEvent
    from cosimrun.core.ports import PortSpec, PortState, PortType
    from cosimrun.core.regions import SwitchRegions
    from cosimrun.core.switching import Hysteresis, ModeSwitch, ModeSwitching, StateAdapter
    from cosimrun.core.units import UnitConversion, compile_conversion, ureg


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "INTEGRATORS",
    "CoSimComponent",
    "ComponentHistory",
    "DaeComponent",
    "DenseTime",
    "EquationComponent",
    "Event",
    "EventIndicator",
    "Hysteresis",
    "InternalEventInfo",
    "ModeSwitch",
    "ModeSwitching",
    "MultiComponent",
    "OdeComponent",
    "PortHistory",
    "PortSpec",
    "PortState",
    "PortType",
    "StateAdapter",
    "StateEvent",
    "SwitchRegions",
    "SystemHistory",
    "UnitConversion",
    "compile_conversion",
    "ureg",
]
