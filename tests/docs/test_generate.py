"""The documentation's generated reference pages (``docs/hooks/generate.py``) say what the code says."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

import pytest
from doc_examples import ROOT

from cosimrun.config import schema
from cosimrun.config.build import MASTERS
from cosimrun.post.commands import COMMANDS
from cosimrun.reference import TABLE_END, TABLE_START, markdown_table

spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "hooks" / "generate.py")
assert spec is not None and spec.loader is not None
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)


def _row(table: str, key: str) -> list[str]:
    """The cells of the row of *key* in a generated markdown table."""
    for line in table.splitlines():
        if line.startswith(f"| `{key}` |"):
            return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
    raise AssertionError(f"no row for {key!r}")


def test_every_schema_key_is_listed_with_its_type_default_and_unit() -> None:
    text = generate.config_keys()
    assert _row(text, "run.dt") == ["`run.dt`", "`float`", "`0.01`", "`s`", "Macro (communication) step."]
    assert _row(text, "storage.flush_interval")[2] == f"`{schema.StorageSettings().flush_interval}`"
    assert _row(text, "storage.compression")[1:3] == ["`str \\| None`", "`'gzip'`"]
    for cls, prefix in [(schema.RunSettings, "run."), (schema.StorageSettings, "storage."),
                        (schema.ComponentConfig, "components.NAME."), (schema.ConnectionConfig, "")]:
        for field in dataclasses.fields(cls):
            _row(text, prefix + field.name)
    assert _row(text, "components.NAME.type")[2] == "required"


def test_every_master_setting_is_listed_under_its_master() -> None:
    text = generate.master_settings()
    for name, cls in MASTERS.items():
        section = text.split(f"### `master={name}`")[1].split("### `master=")[0]
        for field in dataclasses.fields(cls):
            assert _row(section, f"master.{field.name}")[2] == generate._value(getattr(cls(), field.name))
    hybrid = text.split("### `master=hybrid`")[1]
    assert "`master.time_tolerance` | `float` | `1e-10`" in hybrid


def test_docstrings_become_markdown() -> None:
    assert generate.markdown_of_rst(":class:`~cosimrun.config.schema.ComponentConfig` or ``x``") == \
        "`ComponentConfig` or `x`"
    assert "Component name -> `ComponentConfig`" in generate.config_keys()


def test_every_command_has_its_help_on_the_commands_page() -> None:
    text = generate.cli()
    for name in COMMANDS:
        assert f"## `cosimrun {name}`" in text
    assert "## `cosimrun ssp import`" in text and "--rtol" in text and "--set NAME=VALUE" in text


def test_the_component_table_is_the_reference_modules() -> None:
    page = (ROOT / "docs" / "reference" / "components.md").read_text(encoding="utf-8")
    built = generate.expand(page)
    assert TABLE_START not in page and markdown_table() in built
    assert built.count(TABLE_START) == built.count(TABLE_END) == 1


def test_an_unknown_marker_fails_the_build() -> None:
    with pytest.raises(KeyError, match="unknown generator 'config-key'"):
        generate.expand("a\n<!-- generate: config-key -->\nb")


def test_every_marker_of_the_pages_is_known() -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        for name in generate.MARKER.findall(page.read_text(encoding="utf-8")):
            assert name in generate.GENERATORS, f"{page}: {name}"
