"""The code blocks of README.md and docs/, read as examples to run (see ``test_examples.py``).

A block is a fenced code block. An HTML comment on the line before it, ``<!-- example: ... -->``,
says how it is run, with ``;``-separated items:

- ``not run: REASON``: not run, for the reason given (last; kept to very few, each says why);
- ``file=PATH``: the block is written to ``PATH`` in the page's working directory, for later blocks;
- ``exit=N``: the commands of a ``bash`` or ``console`` block end with status N (default 0);
- ``setup=NAME``: a file the block needs is made first (see ``SETUPS`` in ``test_examples.py``);
- ``excerpt=PATH``: every line of the block (comments aside) is a line of the repository file PATH.

Languages: ``bash`` (run as one script, ``set -e``), ``console`` (``$ command`` lines, each followed by
its expected output, where ``...`` matches anything), ``python`` (executed), ``pycon`` (a doctest),
``yaml``/``toml`` (parsed, or written with ``file=``), ``text`` (only with ``file=`` or ``not run``).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
DIRECTIVE = re.compile(r"<!-- example: (?P<items>.*?) -->[ ]*$")
LANGUAGES = ("bash", "console", "python", "pycon", "yaml", "toml", "text")


@dataclass
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    lang: str
    body: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page of the documentation."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse_options(items: str) -> dict[str, str]:
    """``file=a.yaml; not run: why`` -> ``{"file": "a.yaml", "not run": "why"}`` (the reason comes last)."""
    options = {}
    items, marker, reason = items.partition("not run:")
    if marker:
        options["not run"] = reason.strip()
    for item in filter(None, (part.strip() for part in items.split(";"))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"example directive {item!r}: expected KEY=VALUE or 'not run: REASON'")
        options[key.strip()] = value.strip()
    return options


def blocks(path: Path) -> list[Block]:
    """The code blocks of the page at *path*, with the directive before each."""
    text = path.read_text(encoding="utf-8")
    page = str(path.relative_to(ROOT))
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        directive = DIRECTIVE.match(before)
        found.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group("lang"),
                           textwrap.dedent(match.group("body")),
                           parse_options(directive.group("items")) if directive else {}))
    return found


def console_commands(body: str) -> list[tuple[str, str]]:
    """The ``(command, expected output)`` pairs of a console block (``\\`` continues a command)."""
    pairs: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command + "\n" + lines[i]
            pairs.append((command, []))
        elif pairs:
            pairs[-1][1].append(line)
        else:
            raise ValueError(f"console block: output before the first '$ ' command: {line!r}")
        i += 1
    return [(command, "\n".join(output).strip("\n")) for command, output in pairs]
