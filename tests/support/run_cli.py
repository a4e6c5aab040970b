"""Run the cosimrun command with the test-only component types registered.

Usage: ``python tests/support/run_cli.py ARGS...`` (same arguments as ``cosimrun``). The
test-only types are registered on import, so a sweep's local dask workers, which import
this main module again, know them too. With ``COSIMRUN_TESTS_ALWAYS_PARALLEL`` set, the
batches of the masters' ``parallel`` setting step in parallel whatever their timing says
(as the ``always_parallel`` fixture of ``tests/masters/test_parallel.py``), so that what a
test makes happen in a parallel step happens there on a loaded machine too.
"""

import importlib.metadata
import os
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

if os.environ.get("COSIMRUN_TESTS_ALWAYS_PARALLEL"):
    from cosimrun.masters import parallel

    parallel.Batch.parallel_now = lambda self: True

if __name__ == "__main__":  # a sweep's dask workers import this module too (as __mp_main__): the types, not the run
    from cosimrun.cli import main

    sys.argv = ["cosimrun", *sys.argv[1:]]
    main()
