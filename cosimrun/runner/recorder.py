"""Transitional alias: :func:`finish` moved to :mod:`cosimrun.runner.ledger`; ``cosimrun/cli.py`` imports it here.

Delete this module once ``cli.py`` imports ``cosimrun.runner.ledger``.
"""

from cosimrun.runner.ledger import finish

__all__ = ["finish"]
