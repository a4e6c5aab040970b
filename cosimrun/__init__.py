"""cosimrun: declarative co-simulation experiments.

The names below are imported on first use (PEP 562), so that ``cosimrun``
commands that do not simulate (``--list-components``, a sweep's driver) do not
pay for pint and the engine, and importing the engine does not import h5py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosimrun._lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "ComponentHistory": ".core",
    "CoSimComponent": ".core",
    "DenseTime": ".core",
    "Event": ".core",
    "EventIndicator": ".core",
    "InternalEventInfo": ".core",
    "PortHistory": ".core",
    "PortSpec": ".core",
    "PortState": ".core",
    "PortType": ".core",
    "SystemHistory": ".core",
    "compile_conversion": ".core",
    "ureg": ".core",
    "load_results": ".storage",
    "load_sweep": ".runner.load",
    "load_sweep_dataset": ".runner.load",
}

if TYPE_CHECKING:
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
    from cosimrun.runner.load import load_sweep, load_sweep_dataset
    from cosimrun.storage import load_results


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

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
    "load_results",
    "load_sweep",
    "load_sweep_dataset",
    "ureg",
]
