"""Layer boundaries (DESIGN.md): the engine imports no outer layer, and system/core no master."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cosimrun"


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved), at any depth of the file."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def modules_under(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", modules_under("system", "core"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_system_and_core_do_not_import_masters(path: Path) -> None:
    bad = sorted(m for m in imported_modules(path) if m == "cosimrun.masters" or m.startswith("cosimrun.masters."))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: a master is passed in, never imported"


@pytest.mark.parametrize("path", modules_under("core", "system", "masters"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_engine_imports_no_outer_layer(path: Path) -> None:
    outer = ("hydra", "omegaconf", "dask", "distributed", "h5py", "cosimrun.config", "cosimrun.runner",
             "cosimrun.storage", "cosimrun.cli")
    bad = sorted(m for m in imported_modules(path) if m.split(".")[0] in outer or m.startswith(outer))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_importing_and_running_a_system_loads_no_master_module_it_was_not_given() -> None:
    code = (
        "import sys\n"
        "import cosimrun.system, cosimrun.core.multi, cosimrun.core.ode\n"
        "print(sorted(m for m in sys.modules if m.startswith('cosimrun.masters')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
