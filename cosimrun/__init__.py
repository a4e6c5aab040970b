"""cosimrun: declarative co-simulation experiments.

The names below are imported on first use (PEP 562), so that ``cosimrun``
commands that do not simulate (``--list-components``, a sweep's driver) do not
pay for pint and the engine, and importing the engine does not import h5py.

Library use::

    from cosimrun import GaussSeidel, System

    system = System("demo")
    ...  # add_component, connect
    result = system.run(0.0, 10.0, 0.01, master=GaussSeidel())

:func:`create_component` builds any installed component type by its config name
(``create_component("pid", "ctrl", {"kp": 40.0})``), the builtins and plugins'.
``System.run`` takes the master explicitly (the engine has no default; the
``cosimrun`` command's is ``conf/master``). Errors raised on purpose come
from :mod:`cosimrun.errors`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosimrun._lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "System": ".system",
    "Recorder": ".system",
    "MemorySink": ".system",
    "RunResult": ".system",
    "Master": ".masters",
    "Jacobi": ".masters",
    "GaussSeidel": ".masters",
    "IJCSA": ".masters",
    "Hybrid": ".masters",
    "MultiComponent": ".core",
    "Hysteresis": ".core",
    "StateAdapter": ".core",
    "OdeComponent": ".core",
    "DaeComponent": ".core",
    "EquationComponent": ".core",
    "CosimrunError": ".errors",
    "ConfigError": ".errors",
    "SimulationError": ".errors",
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
    "create_component": ".plugins",
    "load_results": ".storage",
    "load_sweep": ".runner.load",
    "load_sweep_dataset": ".runner.load",
}

if TYPE_CHECKING:
    from cosimrun.core import (
        ComponentHistory,
        CoSimComponent,
        DaeComponent,
        DenseTime,
        EquationComponent,
        Event,
        EventIndicator,
        Hysteresis,
        InternalEventInfo,
        MultiComponent,
        OdeComponent,
        PortHistory,
        PortSpec,
        PortState,
        PortType,
        StateAdapter,
        SystemHistory,
        compile_conversion,
        ureg,
    )
    from cosimrun.errors import ConfigError, CosimrunError, SimulationError
    from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master
    from cosimrun.plugins import create_component
    from cosimrun.runner.load import load_sweep, load_sweep_dataset
    from cosimrun.storage import load_results
    from cosimrun.system import MemorySink, Recorder, RunResult, System


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "IJCSA",
    "CoSimComponent",
    "ComponentHistory",
    "ConfigError",
    "CosimrunError",
    "DaeComponent",
    "DenseTime",
    "EquationComponent",
    "Event",
    "EventIndicator",
    "GaussSeidel",
    "Hybrid",
    "Hysteresis",
    "InternalEventInfo",
    "Jacobi",
    "Master",
    "MemorySink",
    "MultiComponent",
    "OdeComponent",
    "PortHistory",
    "PortSpec",
    "PortState",
    "PortType",
    "Recorder",
    "RunResult",
    "SimulationError",
    "StateAdapter",
    "System",
    "SystemHistory",
    "__version__",
    "compile_conversion",
    "create_component",
    "load_results",
    "load_sweep",
    "load_sweep_dataset",
    "ureg",
]
