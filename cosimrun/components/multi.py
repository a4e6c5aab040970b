"""``multi``: a multi-model component built from already-built sub-components (modes).

The config layer builds one component per mode and hands them over together
with a selector spec, e.g.::

    ConfiguredMultiComponent(
        "pendulum", models={"nonlinear": p1, "linear": p2}, initial_mode="linear",
        selector={"type": "threshold", "port": "q", "above": "nonlinear", "below": "linear",
                  "upper": 0.35, "lower": 0.25, "abs": True},
        hysteresis={"dwell_time": 0.05})

or builds everything from registry specs with :meth:`ConfiguredMultiComponent.from_specs`.
Selector types (mapped onto :class:`~cosimrun.core.regions.SwitchRegions`):

- ``threshold``: ``port``, ``above``, ``below``, ``upper``, ``lower`` (default:
  ``upper``), ``abs`` (default false);
- ``regions``: ``port``, ``modes`` (list, lowest region first), ``bounds``
  (list of ``[lower, upper]`` pairs, one per boundary), ``abs``.

Bounds are numbers in the port's unit or quantities such as ``"20 deg"``.
An invalid selector or hysteresis raises a :class:`~cosimrun.errors.ConfigError`
keyed ``selector`` or ``hysteresis``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pint

from cosimrun.core.component import CoSimComponent
from cosimrun.core.multi import Hysteresis, MultiComponent, SwitchRegions
from cosimrun.core.ports import PortType
from cosimrun.core.units import Q_
from cosimrun.errors import ConfigError, UnknownNameError, suggest

HYSTERESIS_KEYS = ("dwell_time",)
"""The keys of a ``hysteresis`` mapping (:class:`~cosimrun.core.multi.Hysteresis`)."""
SELECTOR_KEYS: dict[str, tuple[set[str], set[str]]] = {
    "threshold": ({"port", "above", "below", "upper"}, {"type", "lower", "abs"}),
    "regions": ({"port", "modes", "bounds"}, {"type", "abs"}),
}
"""Selector type -> (required keys, optional keys)."""


class ConfiguredMultiComponent(MultiComponent):
    """The ``multi`` component type: a :class:`MultiComponent` whose selector and hysteresis come from config specs.

    Built from sub-components, not from parameters: the registry's
    ``create_component("multi", name, params, models=..., initial_mode=...)``
    passes them to the constructor. ``set_parameters`` forwards each parameter
    to every mode that has it (:class:`~cosimrun.errors.UnknownNameError` if none has).
    """

    requires_models: ClassVar[bool] = True
    """Marks component classes whose constructor needs ``models`` and ``initial_mode``."""

    def __init__(
        self,
        name: str,
        models: Mapping[str, CoSimComponent],
        initial_mode: str,
        selector: Mapping[str, Any] | SwitchRegions | None = None,
        hysteresis: Mapping[str, Any] | Hysteresis | float | None = None,
        group: str | None = None,
    ) -> None:
        super().__init__(name, models, initial_mode, group=group)
        self.hysteresis = self._make_hysteresis(hysteresis)
        if selector is not None:
            regions = selector if isinstance(selector, SwitchRegions) else self._make_regions(selector)
            try:
                self.set_switch_regions(regions)
            except ValueError as exc:
                raise ConfigError("selector", str(exc)) from None

    @classmethod
    def from_specs(
        cls,
        name: str,
        modes: Mapping[str, Mapping[str, Any]],
        initial_mode: str,
        selector: Mapping[str, Any] | None = None,
        hysteresis: Mapping[str, Any] | float | None = None,
    ) -> ConfiguredMultiComponent:
        """Build every mode with the registry from ``{mode: {type, params}}``; sub-components are named
        ``f"{name}__{mode}"``."""
        from cosimrun.plugins import create_component

        if not isinstance(modes, Mapping) or not modes:
            raise ConfigError("modes", f"multi component {name!r}: 'modes' must be a non-empty mapping of mode "
                                       "name to {type, params}")
        models = {}
        for mode, spec in modes.items():
            if not isinstance(spec, Mapping) or "type" not in spec:
                raise ConfigError(f"modes.{mode}", f"multi component {name!r}: mode {mode!r} needs a 'type' (and "
                                                   f"optional 'params'), got {spec!r}")
            extra = set(spec) - {"type", "params"}
            if extra:
                raise ConfigError(f"modes.{mode}", f"multi component {name!r}: mode {mode!r} has unknown key(s) "
                                                   f"{sorted(extra)} (valid: type, params)")
            models[mode] = create_component(spec["type"], f"{name}__{mode}", dict(spec.get("params") or {}))
        return cls(name, models, initial_mode, selector=selector, hysteresis=hysteresis)

    # ------------------------------------------------------------------ specs
    def _make_hysteresis(self, spec: Mapping[str, Any] | Hysteresis | float | None) -> Hysteresis | None:
        if spec is None or isinstance(spec, Hysteresis):
            return spec
        if isinstance(spec, Mapping):
            for key in spec:
                if key not in HYSTERESIS_KEYS:
                    raise UnknownNameError("key", key, HYSTERESIS_KEYS, f"in the hysteresis of {self.name!r}",
                                           key=f"hysteresis.{key}")
        try:
            if isinstance(spec, Mapping):
                return Hysteresis(**spec)
            return Hysteresis(spec)
        except (TypeError, ValueError) as exc:
            raise ConfigError("hysteresis",
                              f"multi component {self.name!r}: invalid hysteresis {spec!r}: {exc}") from None

    def _make_regions(self, spec: Mapping[str, Any]) -> SwitchRegions:
        where = f"multi component {self.name!r}: selector"
        if not isinstance(spec, Mapping):
            raise ConfigError("selector", f"{where} must be a mapping like {{type: threshold, port: q, ...}}, "
                              f"got {spec!r}")
        kind = spec.get("type", "threshold")
        if kind not in SELECTOR_KEYS:
            raise ConfigError("selector.type", f"{where} type {kind!r} is unknown{suggest(str(kind), SELECTOR_KEYS)} "
                              f"(valid: {', '.join(SELECTOR_KEYS)})")
        required, optional = SELECTOR_KEYS[kind]
        missing = sorted(required - set(spec))
        if missing:
            raise ConfigError("selector", f"{where} of type {kind!r} lacks {', '.join(missing)} (required: "
                              f"{', '.join(sorted(required))}; optional: {', '.join(sorted(optional))})")
        valid = required | optional
        for key in spec:
            if key not in valid:
                raise ConfigError(f"selector.{key}", f"{where} of type {kind!r} has unknown key {key!r}"
                                  f"{suggest(key, valid)} (valid: {', '.join(sorted(valid))})")
        port = spec["port"]
        outputs = [n for n, s in self.output_specs.items() if s.type is not PortType.EVENT]
        if port not in outputs:  # first: the bounds are read in its unit
            raise UnknownNameError("output port", str(port), outputs,
                                   f"for the selector of multi component {self.name!r}", key="selector.port")
        use_abs = spec.get("abs", False)
        try:
            if kind == "threshold":
                upper = self._bound(port, spec["upper"])
                lower = self._bound(port, spec.get("lower", spec["upper"]))
                return SwitchRegions.threshold(port, spec["below"], spec["above"], lower, upper, use_abs)
            bounds = [[self._bound(port, b) for b in pair] if _is_list(pair) else pair for pair in spec["bounds"]]
            return SwitchRegions(port, list(spec["modes"]), bounds, use_abs)
        except (TypeError, ValueError) as exc:
            raise ConfigError("selector", f"{where}: {exc.message if isinstance(exc, ConfigError) else exc}") from None

    def _bound(self, port: str, value: Any) -> Any:
        """A bound as a number in the unit of output *port* (quantities are converted)."""
        if isinstance(value, str):
            try:
                value = Q_(value)
            except Exception as exc:  # pint raises several unrelated types
                raise ConfigError(None, f"bound {value!r} is not a number or quantity ({exc})") from None
        if not isinstance(value, pint.Quantity):
            return value
        spec = self.output_specs.get(port)
        if spec is None:
            raise UnknownNameError("output port", port, self.output_specs)
        try:
            return float(value.to(spec.unit or "dimensionless").magnitude)
        except pint.DimensionalityError:
            raise ConfigError(None, f"bound {value} cannot be converted to the unit {spec.unit_name!r} of port "
                                    f"{port!r}") from None

    # ------------------------------------------------------------------ parameters
    def set_parameters(self, **parameters: Any) -> None:
        """Set each parameter on every mode that has it."""
        known = set().union(*(m.parameters for m in self.models.values()))
        for name in parameters:
            if name not in known:
                raise UnknownNameError("parameter", name, known, f"of any mode of multi component {self.name!r}")
        for model in self.models.values():
            own = {k: v for k, v in parameters.items() if k in model.parameters}
            if own:
                model.set_parameters(**own)

    def get_parameters(self, *names: str) -> dict[str, Any]:
        """Parameters of the active mode."""
        return self.active_comp.get_parameters(*names)

    def check_parameters(self) -> None:
        """Run every mode's cross-parameter checks."""
        for model in self.models.values():
            check = getattr(model, "check_parameters", None)
            if callable(check):
                check()


def _is_list(value: Any) -> bool:
    """A non-string sequence (lists, tuples, OmegaConf ListConfig)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)
