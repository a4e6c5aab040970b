"""Run the cosimrun command with the test-only component types registered.

Usage: ``python tests/support/run_cli.py ARGS...`` (same arguments as ``cosimrun``).
"""

import importlib.metadata
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_entry_points = importlib.metadata.entry_points
EXTRA = [importlib.metadata.EntryPoint("faulty", "tests.support.faulty:Faulty", "cosimrun.components")]


def entry_points(**params):
    found = _entry_points(**params)
    if params.get("group") == "cosimrun.components":
        return [*found, *EXTRA]
    return found


importlib.metadata.entry_points = entry_points

from cosimrun.cli import main  # noqa: E402

sys.argv = ["cosimrun", *sys.argv[1:]]
main()
