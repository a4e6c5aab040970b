"""An FMU file read again in the same process (every job of a warm worker reads its FMU): a file version whose
archive and declarations passed the checks under the current limits is not opened again; another version of the
file, or other limits, are checked as on the first read."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

from cosimrun.components.fmu import build as fmu_build
from cosimrun.errors import FMUFileError, FMULimitError
from cosimrun.fmi import description
from cosimrun.fmi import extraction as ex
from cosimrun.fmi.description import read_fmu


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.feedthrough(tmp_path_factory.mktemp("memo"))


@pytest.fixture
def fmu(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of a feedthrough FMU of this test only, read with the default limits and nothing remembered of other
    tests."""
    for var in (ex.ENV_MAX_UNPACKED, ex.ENV_MAX_DESCRIPTION, ex.ENV_MAX_ARRAY_ELEMENTS, ex.ENV_MAX_PORTS):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(description, "_CHECKED", set())
    return Path(shutil.copy2(built, tmp_path / built.name))


def _refuse_opening(monkeypatch: pytest.MonkeyPatch) -> None:
    def opened(*args: object, **kwargs: object) -> None:
        raise AssertionError("the archive was opened again")

    monkeypatch.setattr(zipfile, "ZipFile", opened)
    monkeypatch.setattr(zipfile, "is_zipfile", opened)


def test_a_checked_file_version_is_not_opened_again(fmu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = read_fmu(fmu)
    with monkeypatch.context() as patched:
        _refuse_opening(patched)
        assert read_fmu(fmu) is model


def test_other_limits_check_the_file_again(fmu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = read_fmu(fmu)
    monkeypatch.setenv(ex.ENV_MAX_PORTS, "1")
    with pytest.raises(FMULimitError, match="inputs and outputs, above the limit of 1"):
        read_fmu(fmu)
    monkeypatch.setenv(ex.ENV_MAX_DESCRIPTION, "10")
    monkeypatch.delenv(ex.ENV_MAX_PORTS)
    with pytest.raises(FMULimitError, match="modelDescription.xml is"):
        read_fmu(fmu)
    monkeypatch.delenv(ex.ENV_MAX_DESCRIPTION)
    assert read_fmu(fmu) is model


def test_a_rewritten_file_is_checked_again(fmu: Path, tmp_path: Path) -> None:
    read_fmu(fmu)
    original = tmp_path / "original.fmu"
    shutil.copy2(fmu, original)
    with zipfile.ZipFile(fmu, "a") as zf:  # the same file, now with an entry outside the FMU's directory
        zf.writestr("../outside.txt", "x")
    stat = original.stat()
    os.utime(fmu, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(FMUFileError, match="points outside the FMU's directory"):
        read_fmu(fmu)
    shutil.copy2(original, fmu)  # the version checked before, as it was
    assert read_fmu(fmu).path is not None


def test_an_example_fmus_digest_is_its_own() -> None:
    example = fmu_build.EXAMPLES["pendulum"]
    assert fmu_build._digest("pendulum", example) == example.digest()
    other = fmu_build.Example("pendulum", "", example.model_description, example.source + "\n", {})
    assert fmu_build._digest("pendulum", other) == other.digest() != example.digest()


def test_a_file_rewritten_in_place_with_its_size_and_time_kept_is_checked_again(fmu: Path) -> None:
    """Same size, modification time set back: the status change time still tells the versions apart."""
    model = read_fmu(fmu)
    stat = fmu.stat()
    data = bytearray(fmu.read_bytes())
    data[-3] ^= 0xFF  # the end of the archive's directory record: no longer a zip archive
    fmu.write_bytes(bytes(data))
    os.utime(fmu, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (fmu.stat().st_size, fmu.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    with pytest.raises(FMUFileError, match="is not a readable FMU archive: "):
        read_fmu(fmu)
    assert model.path is not None
