"""``cosimrun plot|report|compare|export ...`` (the result commands) and ``cosimrun ssp ...``, dispatched by their
first word.

A first word that is a command name is not a Hydra override, so
``cosimrun +experiment=...`` and ``cosimrun -m ...`` are untouched. Each command
module gives ``add_arguments(parser)`` and ``run(args) -> exit code``; a bad
argument, a missing file or an unknown signal ends with one line on stderr and
exit status 2 (:func:`cosimrun.exits.fail`).
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module
from typing import NoReturn

from cosimrun.exits import fail

COMMANDS = {
    "plot": "cosimrun.post.plot",
    "report": "cosimrun.post.report",
    "compare": "cosimrun.post.compare",
    "export": "cosimrun.post.export",
    "ssp": "cosimrun.ssp.cli",
    "simulate": "cosimrun.runner.simulate",
}
"""Command name -> module."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (``cosimrun NAME: error: ...``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        fail(f"{self.prog.removeprefix('cosimrun ')}: {message} (see '{self.prog} --help')")


def is_command(argv: list[str]) -> bool:
    """Whether the command line starts with a result command's name."""
    return bool(argv) and argv[0] in COMMANDS


def parser(name: str) -> argparse.ArgumentParser:
    """The argument parser of command *name*."""
    module = import_module(COMMANDS[name])
    summary = (module.__doc__ or "").strip().splitlines()[0]
    result = _Parser(prog=f"cosimrun {name}", description=summary,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(result)
    return result


def main(argv: list[str]) -> NoReturn:
    """Run the command named by ``argv[0]`` with the rest of *argv*; exit with its status."""
    from cosimrun.errors import CosimrunError

    name = argv[0]
    args = parser(name).parse_args(argv[1:])
    try:
        code = import_module(COMMANDS[name]).run(args)
    except BrokenPipeError:  # stdout closed (| head): cosimrun.cli.main exits quietly
        raise
    except (CosimrunError, OSError, ValueError) as exc:
        fail(f"{name}: {exc}")
    sys.exit(code)
