"""Make ``component_testing`` (standalone stepping helpers) importable from these tests; the directory of the
FMUs they build."""

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(scope="session")
def fmu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the FMU tests build their FMUs, once per session (each builder writes its own file names)."""
    return tmp_path_factory.mktemp("fmus")
