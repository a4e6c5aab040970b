"""Engine defaults the config layer shares: each written once here, imported by the engine and by the schema.

A module of constants only, importing nothing, so that the config schema can read
it without loading the engine (the ``cosimrun`` command composes its config, and a
sweep's driver runs, without pint, scipy or the components).
"""

from __future__ import annotations

DEFAULT_FLUSH_INTERVAL = 2000
"""Samples buffered per port before the recorder hands a block to its sink (``storage.flush_interval``)."""
DEFAULT_FLUSH_SECONDS = 5.0
"""Seconds after which the recorder hands over what it buffered, full block or not (``storage.flush_seconds``)."""
