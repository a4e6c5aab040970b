"""Configs as plain data and as YAML text, as OmegaConf writes them, with libyaml's emitter.

``OmegaConf.to_yaml`` emits through PyYAML's pure-Python emitter: a few
milliseconds for a Hydra job config, paid several times per sweep job (the
``.hydra`` files, the results file's ``config_yaml``). :func:`dump` gives the
same text with the C emitter and OmegaConf's string representer (a private
API, see :mod:`cosimrun.runner._private`); without libyaml or that
representer it is ``OmegaConf.to_yaml``. :func:`resolved` resolves a config
once for both the plain container the run is built from and its YAML text;
:func:`task_overrides` gives a job's overrides as the user wrote them.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

from cosimrun.runner._private import PrivateAPIChanged, omegaconf_str_representer


@functools.cache
def _dumper() -> type | None:
    """libyaml's dumper with OmegaConf's string representer; None without either."""
    emitter = getattr(yaml, "CDumper", None)
    if emitter is None:  # PyYAML without libyaml
        return None
    try:
        representer = omegaconf_str_representer()
    except PrivateAPIChanged:
        return None

    class CDumper(emitter):  # type: ignore[misc, valid-type]
        """libyaml's dumper with OmegaConf's string representer (quotes strings that read as other types)."""

    CDumper.add_representer(str, representer)
    return CDumper


def dump(data: Any) -> str:
    """YAML text of a config (``DictConfig``/``ListConfig``, unresolved) or of plain data, as ``OmegaConf.to_yaml``."""
    from omegaconf import OmegaConf

    dumper = _dumper()
    if dumper is None:
        return OmegaConf.to_yaml(data)
    if OmegaConf.is_config(data):
        data = OmegaConf.to_container(data, resolve=False, enum_to_str=True)
    return yaml.dump(data, Dumper=dumper, default_flow_style=False, allow_unicode=True, sort_keys=False)


def resolved(cfg: Any) -> tuple[dict[str, Any], str]:
    """``(plain, text)``: *cfg* resolved once, as a plain dict and as ``OmegaConf.to_yaml(cfg, resolve=True)``."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if not isinstance(plain, dict):
        raise TypeError(f"expected a mapping config, got {type(plain).__name__}")
    return plain, dump(plain)


def task_overrides(hydra_cfg: Any) -> list[str]:
    """A job's overrides (``hydra.overrides.task`` of the ``hydra`` node *hydra_cfg*) as given, unresolved."""
    from omegaconf import OmegaConf

    return [str(o) for o in OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False)]
