"""The example collector itself: a stale example fails, a changed exit status fails, directives are read."""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_examples import Block, blocks, console_commands, parse_options
from test_examples import run_block


def test_directives_and_console_blocks_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_options("file=a.yaml; exit=2") == {"file": "a.yaml", "exit": "2"}
    assert parse_options("not run: needs a cluster; a scheduler") == {"not run": "needs a cluster; a scheduler"}
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_options("file a.yaml")
    assert console_commands("$ echo a \\\n  b\na b\n$ true\n") == [("echo a \\\n  b", "a b"), ("true", "")]
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- example: exit=2 -->\n```console\n$ false\n```\n\n  ```bash\n  echo x\n  ```\n")
    monkeypatch.setattr("doc_examples.ROOT", tmp_path)
    found = blocks(page)
    assert [(b.lang, b.line, b.options, b.body) for b in found] == [
        ("console", 4, {"exit": "2"}, "$ false\n"), ("bash", 8, {}, "echo x\n")]


def _block(lang: str, body: str, **options: str) -> Block:
    return Block("page.md", 1, lang, body, options)


def test_a_stale_output_or_exit_status_fails(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    run_block(_block("console", "$ echo 'took 1.5 s'\ntook ... s\n"), tmp_path, env, {})
    with pytest.raises(AssertionError, match="printed"):
        run_block(_block("console", "$ echo 'took 1.5 s'\nneeded ... s\n"), tmp_path, env, {})
    with pytest.raises(AssertionError, match="exited 0, expected 2"):
        run_block(_block("console", "$ true\n", exit="2"), tmp_path, env, {})
    with pytest.raises(AssertionError, match="exit 1, expected 0"):
        run_block(_block("bash", "true\nfalse\ntrue\n"), tmp_path, env, {})


def test_files_python_and_doctests_run_in_the_pages_directory(tmp_path: Path) -> None:
    namespace: dict = {}
    run_block(_block("yaml", "a: 1\n", file="conf/x.yaml"), tmp_path, {}, namespace)
    assert (tmp_path / "conf" / "x.yaml").read_text() == "a: 1\n"
    run_block(_block("python", "from pathlib import Path\nx = Path('conf/x.yaml').read_text()\n"), tmp_path, {},
              namespace)
    run_block(_block("pycon", ">>> x\n'a: 1\\n'\n"), tmp_path, {}, namespace)
    with pytest.raises(AssertionError, match="Failed example"):
        run_block(_block("pycon", ">>> x\n'a: 2\\n'\n"), tmp_path, {}, namespace)
    with pytest.raises(AssertionError, match="is not in"):
        run_block(_block("toml", "name = \"other\"\n", excerpt="pyproject.toml"), tmp_path, {}, namespace)
