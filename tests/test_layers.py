"""Layer boundaries (DESIGN.md): the engine imports no outer layer, system/core no master, components no config
layer, storage no master; only storage opens HDF5 files; no import cycles among the modules of ``cosimrun/``."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cosimrun"


def _from_base(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module a ``from ... import`` statement of *path* imports from (relative imports resolved)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    base = node.module or ""
    if node.level:
        parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{parent}.{base}" if base else parent
    return base


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved), at any depth of the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, path)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _under(module: str, *roots: str) -> bool:
    """Whether *module* is one of *roots* or inside one of them."""
    return any(module == root or module.startswith(f"{root}.") for root in roots)


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


HDF5_MODULES = ("h5py", "h5netcdf", "netCDF4", "tables")
"""Libraries that open HDF5 (or netCDF-4) files."""
HDF5_ENGINES = frozenset({"h5netcdf", "netcdf4"})
"""xarray's engines for HDF5 files: naming one (``xr.open_dataset(..., engine="h5netcdf")``) opens a file directly."""


def _outside_storage() -> list[Path]:
    plugins = (PACKAGE.parent / "hydra_plugins").rglob("*.py")
    return sorted(p for p in [*PACKAGE.rglob("*.py"), *plugins] if not p.is_relative_to(PACKAGE / "storage"))


@pytest.mark.parametrize("path", _outside_storage(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_storage_opens_hdf5_files(path: Path) -> None:
    """Results files and sweep indexes are read and written in ``cosimrun/storage/`` only (imports at any depth)."""
    bad = sorted(m for m in imported_modules(path) if _under(m, *HDF5_MODULES))
    engines = sorted(
        {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
         if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in HDF5_ENGINES}
    )
    assert not bad and not engines, (
        f"{path.relative_to(PACKAGE.parent)} opens HDF5 files itself ({', '.join(bad + engines)}): ask cosimrun.storage"
    )


@pytest.mark.parametrize("path", modules_under("components", "fmi"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_components_import_no_config_layer(path: Path) -> None:
    """Components (and the FMI subsystem) are built from plain values: no config, Hydra or runner import at any
    depth of the file."""
    config_layer = ("cosimrun.config", "cosimrun.runner", "hydra", "omegaconf")
    bad = sorted(m for m in imported_modules(path) if _under(m, *config_layer))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: the config builder passes components plain values"


@pytest.mark.parametrize("path", modules_under("storage"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_storage_imports_no_master(path: Path) -> None:
    """Storage writes what a run hands it (the step log's columns come from ``core.steplog``), at any depth."""
    bad = sorted(m for m in imported_modules(path) if _under(m, "cosimrun.masters"))
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def module_name(path: Path) -> str:
    """The dotted name of a module file (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements *node* runs when it is imported: not those in function bodies (lazy imports, run
    when called) nor in ``if TYPE_CHECKING:`` blocks (never run); class bodies and try/with/if blocks do run."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:
                yield from _import_time_nodes(ast.Module(body=[stmt], type_ignores=[]))
        elif isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        else:
            yield from _import_time_nodes(child)


def import_graph() -> nx.DiGraph:
    """Module -> the ``cosimrun`` modules it imports when it is imported (``from a import b`` is an edge to the
    module ``a.b`` if there is one, else to ``a``). Only the imports written count: the package Python loads
    before one of its modules is no edge, else every package whose ``__init__`` re-exports its modules would
    make a cycle with each of them."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for name, path in paths.items():
        for node in _import_time_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _from_base(node, path)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            graph.add_edges_from((name, target, {"line": node.lineno}) for target in targets
                                 if target in paths and target != name)
    return graph


def test_no_import_cycles_outside_type_checking() -> None:
    """No import cycle among the modules of ``cosimrun/`` as they are imported: module-level imports count,
    including those in class bodies and try/if blocks; imports under ``if TYPE_CHECKING:`` (never run) and inside
    functions (deliberate lazy imports, run at the first call, when every module is loaded) do not."""
    graph = import_graph()
    cycles = []
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            sub = graph.subgraph(component)
            cycle = nx.find_cycle(sub, source=min(component))
            cycles.append(" -> ".join(f"{a} (line {sub.edges[a, b]['line']})" for a, b in cycle) + f" -> {cycle[0][0]}"
                          + f"  [strongly connected: {', '.join(sorted(component))}]")
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))
