"""Append the config packages of installed cosimrun plugins to Hydra's search path."""

from __future__ import annotations

import importlib.resources
import importlib.util
from importlib.metadata import entry_points
from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from cosimrun.console import notice

CONFIG_GROUP = "cosimrun.configs"

_warned: set[tuple[str, str, str]] = set()
"""Entry points ``(name, value, distribution)`` already warned about: one warning per process each."""


def config_packages() -> list[tuple[str, str]]:
    """``(entry-point name, package)`` of every installed plugin config package.

    An entry point whose package cannot be found (a typo in the plugin's
    metadata) would otherwise add nothing, silently: it is left out with one
    notice naming the entry point, its distribution and the error. A package
    without experiment files (``experiment/*.yaml``, which a wheel leaves out
    unless they are listed as package data) is kept, with one notice.
    """
    packages = []
    for ep in entry_points(group=CONFIG_GROUP):
        problem = _problem(ep.value)
        if problem is None:
            packages.append((ep.name, ep.value))
            if not _has_experiments(ep.value):
                _warn(ep, f"{CONFIG_GROUP} entry point '{ep.name} = {ep.value}' of {{dist}} holds no experiment "
                          f"files ({ep.value.replace('.', '/')}/experiment/*.yaml); list them as package data "
                          "of the plugin, e.g. [tool.setuptools.package-data] "
                          f"\"{ep.value}\" = [\"experiment/*.yaml\"]")
        else:
            _warn(ep, f"ignoring {CONFIG_GROUP} entry point '{ep.name} = {ep.value}' of {{dist}}: {problem}")
    return sorted(packages)


def _has_experiments(package: str) -> bool:
    """Whether config package *package* holds an ``experiment/*.yaml`` file."""
    try:
        folder = importlib.resources.files(package) / "experiment"
        return any(entry.name.endswith(".yaml") for entry in folder.iterdir())
    except (OSError, ImportError, TypeError):  # no folder (or a package that cannot be read as files)
        return False


def _problem(package: str) -> str | None:
    """Why *package* cannot be a config package (a package Hydra reads as ``pkg://``); None when it can."""
    try:
        spec = importlib.util.find_spec(package)
    except Exception as exc:  # an invalid name, or a parent package that fails to import
        return f"{type(exc).__name__}: {exc}"
    if spec is None:
        return f"ModuleNotFoundError: No module named {package!r}"
    if spec.submodule_search_locations is None:
        return f"{package!r} is a module, not a package"
    return None


def _warn(ep: Any, message: str) -> None:
    """Notice *message* (``{dist}`` in it: the entry point's distribution) once per process and entry point."""
    from cosimrun.plugins import distribution_name

    dist = distribution_name(ep) or "an unknown distribution"
    key = (ep.name, ep.value, dist)
    if key in _warned:
        return
    _warned.add(key)
    notice(message.replace("{dist}", dist), stacklevel=3)


class CosimrunSearchPathPlugin(SearchPathPlugin):
    """Adds ``pkg://<package>`` for each ``cosimrun.configs`` entry point."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for name, package in config_packages():
            search_path.append(provider=f"cosimrun-plugin-{name}", path=f"pkg://{package}")
