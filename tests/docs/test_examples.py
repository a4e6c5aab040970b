"""Every example of README.md and docs/ runs, and shows what it prints (see ``doc_examples.py`` for the rules).

The blocks of one page run in order in one working directory (a temporary one), so a page's later
examples use the files its earlier ones made, as a reader following it would. Shell commands run as
subprocesses with this environment's ``cosimrun``, ``python`` and ``dask`` (``cosimrun`` forked from a
process that imported it once, see ``forkserver.py``, and ``conftest.py`` for the environment); ``pip
install`` is replaced by a check that what it would install is installed here (``pipcheck.py``), as the
tests run in the environment the README's own install command made.
"""

from __future__ import annotations

import doctest
import os
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from doc_examples import LANGUAGES, ROOT, Block, blocks, console_commands, pages

MOST_NOT_RUN = 6
"""Blocks deliberately not run (each with its reason in the page): kept to very few."""

CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _fmu_setup(builder: str, *args: Any, **kwargs: Any) -> Callable[[Path, str], None]:
    """A setup writing the test FMU that ``tests/fmus/builders.py``'s *builder* makes to the given path."""
    def make(workdir: Path, target: str) -> None:
        from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

        built = getattr(builders, builder)(workdir / ".build" / target.replace("/", "_"), *args, **kwargs)
        destination = workdir / target
        destination.parent.mkdir(parents=True, exist_ok=True)
        built.replace(destination)

    return make


def _ssp_setup(workdir: Path, target: str) -> None:
    """The SSP archive of ``tests/ssp/ssp_system.py`` (the example pendulum and two gain FMUs), as its tests make it."""
    import importlib.util
    import zipfile

    from fmus import builders

    spec = importlib.util.spec_from_file_location("ssp_system", ROOT / "tests" / "ssp" / "ssp_system.py")
    assert spec is not None and spec.loader is not None
    system = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(system)
    build = workdir / ".build" / "ssp"
    build.mkdir(parents=True, exist_ok=True)
    fmus = {"pendulum.fmu": builders.pendulum(build), "feedthrough.fmu": builders.feedthrough(build),
            "feedthrough_kN.fmu": builders.feedthrough_in(build, "kN")}
    (workdir / target).parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(workdir / target, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("SystemStructure.ssd", system.SSD)
        for name, fmu in fmus.items():
            zf.write(fmu, f"resources/{name}")
        for entry, text in system.FILES.items():
            zf.writestr(entry, text)


SETUPS: dict[str, Callable[[Path, str], None]] = {
    "me-ball-fmu": _fmu_setup("me_bouncing_ball", fmi3=True),
    "ss-fmu": _fmu_setup("state_space3"),
    "ssp": _ssp_setup,
}
"""``setup=NAME:PATH`` makes a file a page's example needs at PATH in its working directory."""


def _shell(command: str, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=workdir, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=600)


def _matches(expected: str, got: str) -> bool:
    return CHECKER.check_output(expected.strip() + "\n", got.strip() + "\n", FLAGS)


def run_block(block: Block, workdir: Path, env: dict[str, str], namespace: dict[str, Any]) -> None:
    """Run one block; a failure names the page, the line and what differed."""
    options = block.options
    if "setup" in options:
        name, _, target = options["setup"].partition(":")
        SETUPS[name](workdir, target)
    if "excerpt" in options:
        source = (ROOT / options["excerpt"]).read_text(encoding="utf-8").splitlines()
        stripped = {line.split(" #")[0].rstrip() for line in source}
        for line in block.body.splitlines():
            code = line.split(" #")[0].rstrip()
            assert not code or code in stripped, f"{block.where}: {code!r} is not in {options['excerpt']}"
    if "file" in options:
        target = workdir / options["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.body, encoding="utf-8")
    expected_exit = int(options.get("exit", "0"))
    if block.lang == "bash":
        done = _shell(block.body, workdir, env)
        assert done.returncode == expected_exit, \
            f"{block.where}: exit {done.returncode}, expected {expected_exit}:\n{done.stdout}"
    elif block.lang == "console":
        for command, expected in console_commands(block.body):
            done = _shell(command, workdir, env)
            assert done.returncode == expected_exit, \
                f"{block.where}: `{command}` exited {done.returncode}, expected {expected_exit}:\n{done.stdout}"
            assert _matches(expected, done.stdout), \
                f"{block.where}: `{command}` printed\n{done.stdout}\nexpected\n{expected}"
    elif block.lang in ("python", "pycon"):
        _run_python(block, workdir, namespace)
    elif block.lang == "yaml" and "file" not in options:
        yaml.safe_load(block.body)
    elif block.lang == "toml" and "file" not in options:
        tomllib.loads(block.body)
    elif block.lang == "text":
        assert "file" in options, f"{block.where}: a text block is a file (file=PATH), else give it a command"


def _run_python(block: Block, workdir: Path, namespace: dict[str, Any]) -> None:
    before = Path.cwd()
    os.chdir(workdir)
    try:
        if block.lang == "python":
            exec(compile(block.body, block.where, "exec"), namespace)  # noqa: S102 - the example is the test
            return
        test = doctest.DocTestParser().get_doctest(block.body, namespace, block.where, block.page, block.line)
        runner = doctest.DocTestRunner(optionflags=FLAGS)
        report: list[str] = []
        runner.run(test, out=report.append, clear_globs=False)
        assert runner.failures == 0, "".join(report)
    finally:
        os.chdir(before)


ALL = [block for page in pages() for block in blocks(page)]


def test_every_block_is_known_and_only_a_few_are_not_run() -> None:
    unknown = [f"{b.where} ({b.lang or 'no language'})" for b in ALL if b.lang not in LANGUAGES]
    assert not unknown, f"blocks of no known language (one of {', '.join(LANGUAGES)}): {unknown}"
    not_run = [b for b in ALL if "not run" in b.options]
    assert all(b.options["not run"] for b in not_run), "a block not run must say why"
    assert len(not_run) <= MOST_NOT_RUN, [b.where for b in not_run]
    assert len(ALL) > 50  # the pages were read


@pytest.mark.slow
@pytest.mark.parametrize("page", [str(p.relative_to(ROOT)) for p in pages()])
def test_the_examples_of_a_page_run(page: str, example_env: dict[str, str], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COSIMRUN_CACHE_DIR", "MPLBACKEND"):
        monkeypatch.setenv(name, example_env[name])
    namespace: dict[str, Any] = {"__name__": "__example__"}
    for block in (b for b in ALL if b.page == page and "not run" not in b.options):
        run_block(block, tmp_path, example_env, namespace)
