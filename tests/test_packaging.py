"""The package list in pyproject.toml and the installed config packages."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("cosimrun", "hydra_plugins")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - {"cosimrun.conf"} <= listed, f"missing from pyproject packages: {sorted(found - listed)}"
    assert "cosimrun.conf" in listed


def test_configs_are_importable_package_data() -> None:
    conf = resources.files("cosimrun.conf")
    assert (conf / "config.yaml").is_file()
    masters = {p.name for p in (conf / "master").iterdir()}
    assert {"jacobi.yaml", "gauss_seidel.yaml", "ijcsa.yaml", "hybrid.yaml"} <= masters
    experiments = {p.name for p in (conf / "experiment").iterdir()}
    assert {"pendulum_switch.yaml", "bouncing_ball.yaml", "coupled_oscillators.yaml"} <= experiments
