"""The ensemble engine is engine: no HDF5, no Hydra, no dask, no config or storage layer (storage/ensemble.py
writes its file)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENSEMBLE = Path(__file__).resolve().parents[2] / "cosimrun" / "ensemble"
OUTER = ("hydra", "omegaconf", "dask", "distributed", "h5py", "h5netcdf", "netCDF4", "xarray", "cosimrun.config",
         "cosimrun.runner", "cosimrun.storage", "cosimrun.cli")


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(ENSEMBLE.glob("*.py")), ids=lambda p: p.name)
def test_the_ensemble_engine_imports_no_outer_layer(path: Path) -> None:
    bad = sorted(m for m in imported(path) if any(m == o or m.startswith(f"{o}.") for o in OUTER))
    assert not bad, f"cosimrun/ensemble/{path.name} imports {bad}"
