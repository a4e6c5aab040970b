"""The builtin component library.

Every class here is registered in the entry-point group ``cosimrun.components``
(see ``pyproject.toml``) exactly like a third-party plugin, and is normally
created through :func:`cosimrun.plugins.create_component`. The classes are
also importable from this package (loaded on first access).
"""

from __future__ import annotations

from cosimrun._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Constant": ".sources",
    "Step": ".sources",
    "Ramp": ".sources",
    "Sine": ".sources",
    "Table": ".sources",
    "Gain": ".blocks",
    "Sum": ".blocks",
    "Saturation": ".blocks",
    "Integrator": ".blocks",
    "FirstOrderLag": ".blocks",
    "PID": ".control",
    "Pendulum": ".mechanics",
    "LinearPendulum": ".mechanics",
    "BouncingBall": ".mechanics",
    "MassSpringDamper": ".mechanics",
    "MassSpringDamperForce": ".mechanics",
    "MultiModel": ".multi",
    "FMUComponent": ".fmu",
}

__all__ = sorted(_EXPORTS)

MODULES: tuple[str, ...] = tuple(sorted({__name__ + module for module in _EXPORTS.values()}))
"""The modules of the builtin components (a sweep's local workers import them before their first job)."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
