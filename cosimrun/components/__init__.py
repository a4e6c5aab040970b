"""The builtin component library.

Every class here is registered in the entry-point group ``cosimrun.components``
(see ``pyproject.toml``) exactly like a third-party plugin, and is normally
created through :func:`cosimrun.plugins.create_component`. The classes are
also importable from this package (loaded on first access).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "Constant": "sources",
    "Step": "sources",
    "Ramp": "sources",
    "Sine": "sources",
    "Table": "sources",
    "Gain": "blocks",
    "Sum": "blocks",
    "Saturation": "blocks",
    "Integrator": "blocks",
    "FirstOrderLag": "blocks",
    "PID": "control",
    "Pendulum": "mechanics",
    "LinearPendulum": "mechanics",
    "BouncingBall": "mechanics",
    "MassSpringDamper": "mechanics",
    "MassSpringDamperForce": "mechanics",
    "MultiModel": "multi",
    "FMUComponent": "fmu",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
