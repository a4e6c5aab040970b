"""The exit codes of the ``cosimrun`` command, and :func:`fail`, its one-line error exit.

======  ==========================================================================
code    meaning
======  ==========================================================================
0       every run (every job of a sweep) completed
1       a run, or a job of a sweep, failed (its results file says why)
2       bad input: the command line, a config or a sweep directory in use; nothing ran
130     interrupted by SIGINT (Ctrl-C); what finished is kept, the rest is ``interrupted``
143     terminated by SIGTERM; as for 130
141     stdout was closed before cosimrun finished writing to it (``cosimrun ... | head``): it stops
        quietly, as a tool that SIGPIPE ends (128 + 13, what a shell reports for one); a run's results
        file is whole and says its status
======  ==========================================================================
"""

from __future__ import annotations

import sys
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143
EXIT_SIGPIPE = 141


def fail(message: str, code: int = EXIT_CONFIG) -> NoReturn:
    """Print ``cosimrun: error: <message>`` on stderr and exit with *code*.

    ``SystemExit`` passes through Hydra's error reporting (which catches
    ``Exception`` only), so this also works from inside a launcher or sweeper.
    """
    print(f"cosimrun: error: {message}", file=sys.stderr)
    sys.exit(code)
