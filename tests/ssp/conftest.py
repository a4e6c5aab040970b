"""Fixtures of the SSP tests: the FMUs (built once per session), the archive and the hand-written experiment."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from fmus import builders  # noqa: E402  (tests/fmus; tests/ is on sys.path, see tests/conftest.py)
from ssp_system import FILES, HAND_WRITTEN, SSD, MakeSSP  # noqa: E402


@pytest.fixture(scope="session")
def fmus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three FMUs, built once per session."""
    directory = tmp_path_factory.mktemp("ssp_fmus")
    return {"pendulum.fmu": builders.pendulum(directory), "feedthrough.fmu": builders.feedthrough(directory),
            "feedthrough_kN.fmu": builders.feedthrough_in(directory, "kN")}


@pytest.fixture
def make_ssp(fmus: dict[str, Path], tmp_path: Path) -> MakeSSP:
    """``make_ssp(ssd=SSD, name="loop.ssp", files=None)``: the archive in ``tmp_path``, with the FMUs and
    :data:`FILES` (entry -> text; *files* replace or add entries)."""

    def make(ssd: str = SSD, name: str = "loop.ssp", files: dict[str, str] | None = None) -> Path:
        path = tmp_path / name
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("SystemStructure.ssd", ssd)
            for file_name, fmu in fmus.items():
                zf.write(fmu, f"resources/{file_name}")
            for entry, text in {**FILES, **(files or {})}.items():
                zf.writestr(entry, text)
        return path

    return make


@pytest.fixture
def hand_written(fmus: dict[str, Path], tmp_path: Path) -> Path:
    """A config directory holding the hand-written experiment ``loop_by_hand``."""
    directory = tmp_path / "by_hand"
    (directory / "experiment").mkdir(parents=True)
    text = (HAND_WRITTEN.replace("FEEDTHROUGH_KN", str(fmus["feedthrough_kN.fmu"]))
            .replace("FEEDTHROUGH", str(fmus["feedthrough.fmu"])).replace("PENDULUM", str(fmus["pendulum.fmu"])))
    (directory / "experiment" / "loop_by_hand.yaml").write_text(text)
    return directory
