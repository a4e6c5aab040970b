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


def __getattr__(name: str):
    """``load_results``, ``load_sweep``, ``load_sweep_dataset`` on first use, so importing the engine
    does not import h5py."""
    if name == "load_results":
        from cosimrun.storage import load_results

        return load_results
    if name in ("load_sweep", "load_sweep_dataset"):
        from cosimrun.runner import load

        return getattr(load, name)
    raise AttributeError(f"module 'cosimrun' has no attribute {name!r}")


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
