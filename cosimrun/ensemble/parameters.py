"""Member parameters: ``{"component.parameter": values}`` checked per member and laid out as arrays.

A parameter given one value (or the same value for every member) is set on the component as it is; one that
differs between members becomes a float array of shape ``(M,)``. Every member's value is checked by the
component's own parameter check, and the checks across parameters (``check_parameters``) run for every member,
so a member is refused exactly where its scalar run would be.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cosimrun.core.component import CoSimComponent
from cosimrun.core.ode import ContinuousComponent
from cosimrun.core.parameters import declared_parameters
from cosimrun.ensemble.modes import is_multi, parameter_owners
from cosimrun.errors import ConfigError, CosimrunError, UnknownNameError

_CONFIG_PATH = re.compile(r"components\.(?P<component>[^.]+)\.(?:modes\.(?P<mode>[^.]+)\.)?params\."
                          r"(?P<parameter>[^.]+)")
"""A parameter's path in an experiment config (of a multi component's mode: ``mode.parameter``)."""
_SWITCH_PATH = re.compile(r"(?:components\.)?(?P<component>[^.]+)\.(?P<setting>selector\.(?:lower|upper)|"
                          r"hysteresis\.dwell_time)")
"""A multi component's switch setting that may differ between members, as ``component.setting`` or its config path
(``components.pendulum.selector.lower``)."""
SWITCH_SETTINGS = ("selector.lower", "selector.upper", "hysteresis.dwell_time")
"""The switch settings of a ``multi`` component that members may have their own values of: a threshold selector's
two bounds, the dwell time."""
SOLVER_PARAMETERS = ("integrator", "substeps", "rtol", "atol", "max_substep")
"""Parameters of continuous components that every member shares (one integrator steps them all)."""


def split_key(key: str, components: Mapping[str, CoSimComponent]) -> tuple[str, str]:
    """``"mass1.stiffness"`` (or the config path ``"components.mass1.params.stiffness"``, as a sweep overrides it)
    -> ``("mass1", "stiffness")``, both names checked (with "did you mean")."""
    text = str(key)
    match = _CONFIG_PATH.fullmatch(text)
    if match:
        comp, dot, param = match["component"], ".", match["parameter"]
        if match["mode"] is not None:
            param = f"{match['mode']}.{param}"
    else:
        comp, dot, param = text.partition(".")
    if not dot or not param:
        raise ConfigError(str(key), "an ensemble parameter is named 'component.parameter'")
    if comp not in components:
        raise UnknownNameError("component", comp, components, "in the ensemble's parameters", key=str(key))
    if not parameter_owners(components[comp], param):
        known = set().union(*(o.parameters for o in _all_owners(components[comp])))
        raise UnknownNameError("parameter", param, known, f"of component {comp!r}", key=str(key))
    return comp, param


def _all_owners(comp: CoSimComponent) -> list[CoSimComponent]:
    """*comp*, or the modes of a multi component (which hold its parameters)."""
    models = getattr(comp, "models", None)
    return [comp, *models.values()] if isinstance(models, Mapping) else [comp]


def member_count(parameters: Mapping[str, Any], members: int | None) -> int:
    """The number of members: the length of the parameter arrays (all equal), else *members* (default 1)."""
    lengths = {key: np.shape(value)[0] for key, value in parameters.items() if np.ndim(value) == 1}
    for key, value in parameters.items():
        if np.ndim(value) > 1:
            raise ConfigError(key, f"must be one value or one value per member (shape (M,)), got shape "
                                   f"{np.shape(value)}")
    sizes = sorted(set(lengths.values()))
    if len(sizes) > 1:
        raise ConfigError(next(iter(lengths)), f"the parameter arrays differ in length ({', '.join(map(str, sizes))}); "
                                               "give every varying parameter one value per member")
    if members is not None:
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise ConfigError("members", f"must be an integer >= 1, got {members!r}")
        if sizes and sizes[0] != members:
            raise ConfigError("members", f"is {members} but the parameter arrays have {sizes[0]} values")
        return members
    if sizes and sizes[0] < 1:
        raise ConfigError(next(iter(lengths)), "an ensemble needs at least one member")
    return sizes[0] if sizes else 1


def rows_to_arrays(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The members' parameter dicts (a launcher's jobs) as one list of values per parameter; every row names
    the same parameters."""
    if not rows:
        raise ConfigError("members", "an ensemble needs at least one member")
    keys = list(rows[0])
    for i, row in enumerate(rows):
        if list(row) != keys and set(row) != set(keys):
            missing = sorted(set(keys) ^ set(row))
            raise ConfigError(missing[0], f"member {i} does not set the same parameters as member 0 "
                                          f"(differs in {', '.join(missing)})")
    return {key: [row[key] for row in rows] for key in keys}


class MemberParameters:
    """The checked parameters of an ensemble: per component, the shared values and the varying arrays."""

    def __init__(self, components: Mapping[str, CoSimComponent], parameters: Mapping[str, Any], members: int,
                 first: int = 0) -> None:
        self.members = members
        self.first = first
        """The index of the first of these members in the whole ensemble (for messages)."""
        self.shared: dict[str, dict[str, Any]] = {name: {} for name in components}
        self.varying: dict[str, dict[str, np.ndarray]] = {name: {} for name in components}
        self.given: dict[str, np.ndarray] = {}
        """Every given parameter, one value per member (for the results)."""
        self.switching: dict[str, dict[str, np.ndarray]] = {name: {} for name in components}
        """Per ``multi`` component, its switch settings given (:data:`SWITCH_SETTINGS`), one value per member."""
        switch_keys: dict[str, dict[str, str]] = {name: {} for name in components}
        for key, raw in parameters.items():
            setting = _SWITCH_PATH.fullmatch(str(key))
            if setting and setting["component"] in components:
                name = setting["component"]
                values = _switch_values(components[name], str(key), setting["setting"], raw, members, first)
                self.switching[name][setting["setting"]] = self.given[key] = values
                switch_keys[name][setting["setting"]] = str(key)
                continue
            comp_name, param = split_key(key, components)
            comp = components[comp_name]
            values = list(np.broadcast_to(np.asarray(raw, dtype=object), (members,)))
            checked = [_check(comp, key, param, v, self.first + i) for i, v in enumerate(values)]
            value0 = checked[0]
            if all(_same(v, value0) for v in checked[1:]):
                self.shared[comp_name][param] = value0
                self.given[key] = _column(checked)
                continue
            self._refuse_varying(comp, key, param, checked, self.first)
            self.varying[comp_name][param] = np.array(checked, dtype=float)
            self.given[key] = self.varying[comp_name][param]
        for name, comp in components.items():
            if self.varying[name] and hasattr(comp, "check_parameters"):
                self._check_members(comp)
            if self.switching[name]:
                _check_switching(comp, self.switching[name], switch_keys[name], first)

    @staticmethod
    def _refuse_varying(comp: CoSimComponent, key: str, param: str, checked: list[Any], first: int) -> None:
        comp, param = parameter_owners(comp, param)[0]
        if isinstance(comp, ContinuousComponent) and param in SOLVER_PARAMETERS:
            raise ConfigError(key, "is a solver setting, the same for all members of an ensemble (one integrator "
                                   "steps them all)")
        declared = declared_parameters(type(comp)).get(param)
        if declared is not None and declared.type != "float":
            raise ConfigError(key, f"must be the same for all members: only real-valued parameters may differ "
                                   f"between members, this one is of type {declared.type}")
        if param in getattr(type(comp), "shared_parameters", ()):
            raise ConfigError(key, f"must be the same for all members: component {comp.name!r} "
                                   f"({type(comp).__name__}) declares it shared (it sets time events or structure)")
        for i, value in enumerate(checked):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(key, f"member {first + i}: {value!r} cannot differ between members: only parameters "
                                       "that are plain numbers (in the parameter's unit) may vary in an ensemble")

    def _check_members(self, comp: CoSimComponent) -> None:
        """Run *comp*'s checks across parameters for every member (its scalar values set one member at a time)."""
        varying = self.varying[comp.name]
        owners = [(owner, own, p) for p in varying for owner, own in parameter_owners(comp, p)]
        saved = [(owner, own, owner.parameters[own]) for owner, own, _ in owners]
        columns = {p: arr.tolist() for p, arr in varying.items()}
        try:
            for i in range(self.members):
                for owner, own, p in owners:
                    owner.parameters[own] = columns[p][i]
                try:
                    comp.check_parameters()  # type: ignore[attr-defined]
                except ConfigError as exc:
                    raise ConfigError(exc.key if exc.key else comp.name,
                                      f"member {self.first + i}: {exc.message}") from None
        finally:
            for owner, p, value in saved:
                owner.parameters[p] = value

    def member(self, component: str, index: int) -> dict[str, Any]:
        """The parameters of member *index* of *component* (shared and varying), as scalars."""
        out = dict(self.shared[component])
        out.update({p: float(arr[index]) for p, arr in self.varying[component].items()})
        return out


def _switch_values(comp: CoSimComponent, key: str, setting: str, raw: Any, members: int, first: int) -> np.ndarray:
    """The members' values of the switch setting *setting* of *comp* (given as *key*), checked to be numbers of a
    setting the component has."""
    regions = getattr(comp, "_regions", None)
    if not is_multi(comp):
        raise ConfigError(key, f"component {comp.name!r} ({type(comp).__name__}) does not switch modes; "
                               f"{', '.join(SWITCH_SETTINGS)} belong to multi components")
    if setting.startswith("selector.") and (regions is None or len(regions.regions.bounds) != 1):
        raise ConfigError(key, f"component {comp.name!r}: members have their own bounds of a threshold selector only "
                               "(two modes, one lower and one upper bound)")
    if setting.startswith("hysteresis.") and comp.hysteresis is None:  # type: ignore[attr-defined]
        raise ConfigError(key, f"component {comp.name!r} has no hysteresis, so no dwell time to vary (give it "
                               "hysteresis: {dwell_time: ...})")
    values = list(np.broadcast_to(np.asarray(raw, dtype=object), (members,)))
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigError(key, f"member {first + i}: must be a number, got {value!r}")
    return np.array(values, dtype=float)


def _check_switching(comp: Any, settings: dict[str, np.ndarray], keys: dict[str, str], first: int) -> None:
    """Check every member's switch settings as its scalar component checks them (its regions' bounds, its dwell
    time), keyed by the name each setting was given as (*keys*)."""
    from cosimrun.core.regions import SwitchRegions
    from cosimrun.core.switching import Hysteresis

    regions = comp._regions.regions if comp._regions is not None else None
    lower, upper = settings.get("selector.lower"), settings.get("selector.upper")
    dwell = settings.get("hysteresis.dwell_time")
    for i in range(len(next(iter(settings.values())))):
        checks = []
        if regions is not None and (lower is not None or upper is not None):
            bound = (regions.bounds[0][0] if lower is None else float(lower[i]),
                     regions.bounds[0][1] if upper is None else float(upper[i]))
            checks.append((keys.get("selector.lower", keys.get("selector.upper")),
                           lambda b=bound: SwitchRegions(regions.port, regions.modes, [b], regions.use_abs)))
        if dwell is not None:
            checks.append((keys["hysteresis.dwell_time"], lambda d=float(dwell[i]): Hysteresis(d)))
        for key, check in checks:
            try:
                check()
            except ConfigError as exc:
                raise ConfigError(key, f"member {first + i}: {exc.message}") from None


def _check(comp: CoSimComponent, key: str, param: str, value: Any, index: int) -> Any:
    """*value* checked (and converted) by *comp*'s own parameter check, keyed *key* with the member named."""
    if isinstance(value, np.generic):
        value = value.item()
    try:
        checked = [owner._validate_parameter(own, value) for owner, own in parameter_owners(comp, param)]
        return checked[0]
    except ConfigError as exc:
        raise ConfigError(key, f"member {index}: {exc.message}") from None
    except ValueError as exc:
        if isinstance(exc, CosimrunError):
            raise
        raise ConfigError(key, f"member {index}: {value!r} is invalid: {exc}") from None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b) and type(a) is type(b)
    except (TypeError, ValueError):
        return a is b


def _column(values: list[Any]) -> np.ndarray:
    """The members' values of one parameter as an array (floats when they are numbers, else strings)."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=float)
    return np.array([str(v) for v in values], dtype=object)
