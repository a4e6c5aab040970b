"""The error family reaches the whole library API: nothing is raised on purpose as a plain built-in error.

The scan reads every module of ``cosimrun/`` with :mod:`ast` and lists each
``raise ValueError(...)``, ``raise TypeError(...)`` and ``raise RuntimeError(...)``;
the few that guard an internal invariant (never a user's input) are allowed
below with their reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import cosimrun

PACKAGE = Path(cosimrun.__file__).parent
PLAIN = {"ValueError", "TypeError", "RuntimeError"}

ALLOWED: dict[tuple[str, str], str] = {
    ("core/ode/component.py", "restore_state"):
        "a master handing a component a snapshot that is not its own, or one taken at another time",
    ("core/multi.py", "restore_state"):
        "a master handing a multi component a snapshot that is not its own, or one of another mode",
}
"""``(module, function)``: why a plain error is right there."""


def plain_raises(root: Path = PACKAGE) -> list[tuple[str, int, str, str]]:
    """``(module, line, function, exception)`` of every plain ``raise`` of :data:`PLAIN` under *root*."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if not isinstance(node, ast.Raise) or node.exc is None:
                    continue
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in PLAIN:
                    found.append((module, node.lineno, func.name, exc.id))
    return sorted(set(found))


def test_the_scan_finds_a_plain_raise(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text("def f(x):\n    if x:\n        raise ValueError('bad')\n    raise KeyError(x)\n")
    assert plain_raises(tmp_path) == [("mod.py", 3, "f", "ValueError")]


def test_the_library_raises_no_plain_value_type_or_runtime_error() -> None:
    found = [f"cosimrun/{module}:{line} {func}: raise {exc}" for module, line, func, exc in plain_raises()
             if (module, func) not in ALLOWED]
    assert found == []


def test_every_allowed_raise_still_exists() -> None:
    present = {(module, func) for module, _, func, _ in plain_raises()}
    assert set(ALLOWED) <= present
