"""MkDocs hook: the reference pages' generated parts, made from the code at build time.

A page holds a marker ``<!-- generate: NAME -->`` on a line of its own; the build
replaces it with the markdown of :data:`GENERATORS` ``[NAME]``:

- ``config-keys``: every config key (``name``, ``run.*``, ``storage.*``, a component's
  and a connection's keys), from the schema dataclasses of :mod:`cosimrun.config.schema`;
- ``master-settings``: each master's ``master.*`` settings, from its settings dataclass;
- ``launcher-settings``, ``sweeper-settings``: ``hydra.launcher.*`` and ``hydra.sweeper.*``;
- ``components``: the builtin component table of :func:`cosimrun.reference.markdown_table`;
- ``cli``: the help of every ``cosimrun`` command, as the commands print it.

Type, default and unit come from the dataclass field (a unit from ``field(metadata={"unit": ...})``),
the description from the docstring written under the field. Nothing here is copied by hand.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

MARKER = re.compile(r"^<!-- generate: ([a-z-]+) -->$", re.MULTILINE)


def field_docs(cls: type) -> dict[str, str]:
    """The docstrings written under the fields of dataclass *cls* and its bases (the nearest class wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, after in zip(body, body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def _type_name(annotation: Any) -> str:
    """The annotation as written (``str | None``), also when it was evaluated."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or repr(annotation)
    if not isinstance(annotation, str | type):
        text = repr(annotation)
    return text.replace("typing.", "").replace("NoneType", "None")


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def _value(value: Any) -> str:
    if value is dataclasses.MISSING or value == "???":
        return "required"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`]+)`")


def markdown_of_rst(text: str) -> str:
    """A docstring's reST inline markup as markdown: ``x`` -> `x`, :class:`~a.B` -> `B`."""
    return ROLE.sub(r"`\1`", text).replace("``", "`")


def _cell(text: str) -> str:
    return markdown_of_rst(text).replace("|", "\\|")


def settings_table(cls: type, prefix: str, skip: tuple[str, ...] = ()) -> str:
    """A markdown table of the fields of dataclass *cls*: key, type, default, unit, meaning."""
    docs = field_docs(cls)
    rows = ["| key | type | default | unit | meaning |", "| --- | --- | --- | --- | --- |"]
    for field in dataclasses.fields(cls):
        if field.name.startswith("_") or field.name in skip:
            continue
        kind = _type_name(field.type)
        unit = field.metadata.get("unit", "")
        rows.append(f"| `{prefix}{field.name}` | `{_cell(kind)}` | {_value(_default(field))} | "
                    f"{f'`{unit}`' if unit else ''} | {_cell(docs.get(field.name, ''))} |")
    return "\n".join(rows)


def _class_doc(cls: type) -> str:
    return markdown_of_rst(" ".join(inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0].split()))


def config_keys() -> str:
    """Every key of an experiment's config, section by section, from :mod:`cosimrun.config.schema`."""
    from cosimrun.config import schema

    sections = [
        ("Top level", schema.CosimConfig, "", ("run", "storage")),
        ("`run`", schema.RunSettings, "run.", ()),
        ("`storage`", schema.StorageSettings, "storage.", ()),
        ("A component: `components.NAME`", schema.ComponentConfig, "components.NAME.", ()),
        ("A multi component: `components.NAME` with `type: multi`", schema.MultiComponentConfig,
         "components.NAME.", ()),
        ("A connection written as a mapping: `connections[i]`", schema.ConnectionConfig, "", ()),
    ]
    parts = []
    for title, cls, prefix, skip in sections:
        parts += [f"### {title}", "", _class_doc(cls), "", settings_table(cls, prefix, skip), ""]
    return "\n".join(parts)


def master_settings() -> str:
    """The ``master.*`` settings of each master, from its settings dataclass (``master=NAME`` selects one)."""
    from cosimrun.config.build import MASTERS

    parts = []
    for name, cls in MASTERS.items():
        parts += [f"### `master={name}` (`{cls.__name__}`)", "", _class_doc(cls), "",
                  settings_table(cls, "master."), ""]
    return "\n".join(parts)


def launcher_settings() -> str:
    """The ``hydra.launcher.*`` settings of the dask launcher."""
    from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncherConf

    return "\n".join([_class_doc(DaskLauncherConf), "", settings_table(DaskLauncherConf, "hydra.launcher.")])


def sweeper_settings() -> str:
    """The ``hydra.sweeper.*`` settings of the default sweeper."""
    from hydra_plugins.cosimrun_sweeper.sweeper import CosimrunSweeperConf

    return "\n".join([_class_doc(CosimrunSweeperConf), "", settings_table(CosimrunSweeperConf, "hydra.sweeper.")])


def components() -> str:
    """The builtin component table, as :mod:`cosimrun.reference` makes it."""
    from cosimrun.reference import markdown_table

    return markdown_table()


def _subparsers(parser: Any) -> list[Any]:
    import argparse

    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *_subparsers(sub)]
    return found


def cli() -> str:
    """The help of ``cosimrun`` and of each of its commands, as ``--help`` prints it."""
    import os

    from cosimrun.cli import usage
    from cosimrun.post.commands import COMMANDS, parser

    os.environ.setdefault("COLUMNS", "100")
    parts = ["## `cosimrun`", "", "```text", usage(), "```", ""]
    for name in COMMANDS:
        command = parser(name)
        for each in [command, *_subparsers(command)]:
            parts += [f"## `{each.prog}`", "", "```text", each.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "config-keys": config_keys,
    "master-settings": master_settings,
    "launcher-settings": launcher_settings,
    "sweeper-settings": sweeper_settings,
    "components": components,
    "cli": cli,
}


def expand(markdown: str) -> str:
    """*markdown* with each generate marker replaced by its generated text (an unknown name raises)."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"unknown generator {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: expand the page's generate markers."""
    return expand(markdown)
