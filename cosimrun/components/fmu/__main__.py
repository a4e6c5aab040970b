"""``python -m cosimrun.components.fmu build-example DIR`` | ``info MODEL.fmu``."""

import sys

from cosimrun.components.fmu.cli import main

if __name__ == "__main__":
    sys.exit(main())
