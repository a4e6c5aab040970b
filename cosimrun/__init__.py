"""cosimrun: declarative co-simulation experiments.

The names below are imported on first use (PEP 562), so that ``cosimrun``
commands that do not simulate (``--list-components``, a sweep's driver) do not
pay for pint and the engine, and importing the engine does not import h5py.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "ComponentHistory": "cosimrun.core",
    "CoSimComponent": "cosimrun.core",
    "DenseTime": "cosimrun.core",
    "Event": "cosimrun.core",
    "EventIndicator": "cosimrun.core",
    "InternalEventInfo": "cosimrun.core",
    "PortHistory": "cosimrun.core",
    "PortSpec": "cosimrun.core",
    "PortState": "cosimrun.core",
    "PortType": "cosimrun.core",
    "SystemHistory": "cosimrun.core",
    "compile_conversion": "cosimrun.core",
    "ureg": "cosimrun.core",
    "load_results": "cosimrun.storage",
    "load_sweep": "cosimrun.runner.load",
    "load_sweep_dataset": "cosimrun.runner.load",
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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cosimrun' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
