"""The builtin component library.

:data:`TYPES` is the one list of cosimrun's own component types. The registry
(:mod:`cosimrun.plugins`) serves them from this table, so they resolve without
package metadata (a source tree on ``sys.path``, stripped metadata), and adds
third-party types from the entry-point group ``cosimrun.components``. The
classes are also importable from this package (loaded on first access).
"""

from __future__ import annotations

from cosimrun._lazy import lazy_exports

TYPES: dict[str, str] = {
    "constant": "cosimrun.components.sources:Constant",
    "step": "cosimrun.components.sources:Step",
    "ramp": "cosimrun.components.sources:Ramp",
    "sine": "cosimrun.components.sources:Sine",
    "table": "cosimrun.components.sources:Table",
    "gain": "cosimrun.components.blocks:Gain",
    "sum": "cosimrun.components.blocks:Sum",
    "integrator": "cosimrun.components.blocks:Integrator",
    "saturation": "cosimrun.components.blocks:Saturation",
    "first_order_lag": "cosimrun.components.blocks:FirstOrderLag",
    "pid": "cosimrun.components.control:PID",
    "pendulum": "cosimrun.components.mechanics:Pendulum",
    "pendulum_linear": "cosimrun.components.mechanics:LinearPendulum",
    "pendulum_dae": "cosimrun.components.mechanics:CartesianPendulum",
    "bouncing_ball": "cosimrun.components.mechanics:BouncingBall",
    "mass_spring_damper": "cosimrun.components.mechanics:MassSpringDamper",
    "mass_spring_damper_force": "cosimrun.components.mechanics:MassSpringDamperForce",
    "multi": "cosimrun.components.multi:ConfiguredMultiComponent",
    "fmu": "cosimrun.components.fmu:FMUComponent",
}
"""Config type name -> ``"module:Class"`` of every builtin component."""

_EXPORTS: dict[str, str] = {ref.partition(":")[2]: ref.partition(":")[0] for ref in TYPES.values()}

__all__ = sorted(_EXPORTS)

MODULES: tuple[str, ...] = tuple(sorted(set(_EXPORTS.values())))
"""The modules of the builtin components (a sweep's local workers import them before their first job)."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
