"""SSP (System Structure and Parameterization) import: an ``.ssp`` archive as a cosimrun experiment.

``cosimrun ssp import SYSTEM.ssp DIR`` (:mod:`cosimrun.ssp.cli`) writes
``DIR/experiment/NAME.yaml`` and the FMUs under ``DIR/fmus/NAME/``, ready for
``cosimrun --config-dir DIR +experiment=NAME``. :mod:`~cosimrun.ssp.reader`
reads the archive and refuses what it does not map, :mod:`~cosimrun.ssp.mapping`
maps it onto a config checked against the FMUs, :mod:`~cosimrun.ssp.importer`
writes it all or nothing.
"""

from cosimrun.ssp.importer import ImportResult, import_ssp
from cosimrun.ssp.reader import SSPError

__all__ = ["ImportResult", "SSPError", "import_ssp"]
