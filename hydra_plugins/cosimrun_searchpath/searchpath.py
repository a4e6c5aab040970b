"""Append the config packages of installed cosimrun plugins to Hydra's search path."""

from __future__ import annotations

from importlib.metadata import entry_points

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

CONFIG_GROUP = "cosimrun.configs"


def config_packages() -> list[tuple[str, str]]:
    """``(entry-point name, package)`` of every installed plugin config package."""
    return sorted((ep.name, ep.value) for ep in entry_points(group=CONFIG_GROUP))


class CosimrunSearchPathPlugin(SearchPathPlugin):
    """Adds ``pkg://<package>`` for each ``cosimrun.configs`` entry point."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for name, package in config_packages():
            search_path.append(provider=f"cosimrun-plugin-{name}", path=f"pkg://{package}")
