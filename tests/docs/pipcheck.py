"""``pip`` as the documentation's examples run it: ``pip install X ...`` checks that X is installed here.

The examples run in the environment that README.md's own install command made, so an install
command of a page is checked rather than run: each requirement (a distribution name, or a project
directory such as ``.`` or ``./plugins/cosimrun-example``, relative to the working directory or
else to the repository root, with ``[extras]``) must name a distribution installed in this
environment, and each extra must be one the project declares. Exit status 1 names what is missing.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def project(path: str) -> tuple[str, dict[str, list[str]]]:
    """The name and optional dependencies of the project in directory *path*."""
    for base in (Path.cwd(), ROOT):
        pyproject = base / path / "pyproject.toml"
        if pyproject.is_file():
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
            return data["name"], data.get("optional-dependencies", {})
    raise SystemExit(f"pip (checked by the docs tests): no project in {path!r}")


def check(requirement: str) -> str | None:
    """What is missing for *requirement*, or None."""
    match = re.fullmatch(r"(?P<name>[^\[\]<>=!~ ]+)(\[(?P<extras>[^\]]*)\])?.*", requirement)
    if match is None:
        return f"cannot read {requirement!r}"
    name, extras = match.group("name"), [e.strip() for e in (match.group("extras") or "").split(",") if e.strip()]
    declared: dict[str, list[str]] = {}
    if name.startswith((".", "/")):
        name, declared = project(name)
        unknown = [e for e in extras if e not in declared]
        if unknown:
            return f"{requirement}: {name} has no extra {', '.join(unknown)}"
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return f"{requirement}: {name} is not installed"
    return None


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "install":
        print("pip (checked by the docs tests): only 'pip install' is expected in an example", file=sys.stderr)
        return 1
    requirements = [a for a in argv[1:] if not a.startswith("-")]
    missing = [m for m in map(check, requirements) if m]
    for line in missing:
        print(f"pip (checked by the docs tests): {line}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
