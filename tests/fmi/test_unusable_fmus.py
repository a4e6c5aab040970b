"""FMU files that cannot be used end in one line naming the file and what is wrong, exit status 2, no traceback.

Each FMU is crafted here with :mod:`zipfile` from a test FMU built by the suite
(``tests/fmus``): an array of 50 million elements, more ports than allowed, a
symbolic link, a model description that is not FMI or claims the wrong
version, a model-exchange declaration over a co-simulation library, a library
that does not load or lacks the FMI functions, invalid value references. The
command runs in-process (``cosimrun.cli.main``); the cache of extracted FMUs is
the test's own. Also: a damaged cache entry is extracted again (the next run
succeeds with the same results), and ``action=describe`` never loads an FMU's
library.
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import sys
import threading
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

from cosimrun import cli
from cosimrun.components.fmu import cli as fmu_cli
from cosimrun.errors import ConfigError, FMUFileError, FMULimitError
from cosimrun.fmi import extraction as ex
from cosimrun.fmi.description import read_fmu
from cosimrun.storage import load_results

EXIT_CONFIG = 2
EXPERIMENT = """\
# @package _global_
name: plant_run
run: {t0: 0.0, tf: 1.0, dt: 0.125}
components:
  src:
    type: sine
    params: {amplitude: 3.0, frequency: 0.5, unit: N}
  plant:
    type: fmu
    params: {path: null}
connections:
  - src.y -> plant.u
"""


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with the experiment ``plant_run`` in ``cfg/``, and a cache of this test only."""
    for var in (ex.ENV_MAX_UNPACKED, ex.ENV_MAX_DESCRIPTION, ex.ENV_MAX_ARRAY_ELEMENTS, ex.ENV_MAX_PORTS,
                ex.ENV_MAX_AGE, builders.LOAD_MARKER):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(ex.ENV_CACHE, str(tmp_path / "cache"))
    (tmp_path / "cfg" / "experiment").mkdir(parents=True)
    (tmp_path / "cfg" / "experiment" / "plant_run.yaml").write_text(EXPERIMENT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """The logging handlers as before the test: an in-process ``cosimrun`` run leaves Hydra's handler on the test's
    captured stderr, closed after it."""
    loggers = [logging.getLogger(), logging.getLogger("cosimrun"), logging.getLogger("cosimrun.fmu")]
    saved = [(logger, list(logger.handlers), logger.level) for logger in loggers]
    yield
    for logger, handlers, level in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test FMUs these tests start from (built once)."""
    directory = tmp_path_factory.mktemp("fmus")
    builders.feedthrough(directory)
    builders.bouncing_ball3(directory)
    builders.feedthrough_marking_load(directory)
    builders.feedthrough_without_functions(directory)
    return directory


def files_of(fmu: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(fmu) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def write_fmu(path: Path, files: Mapping[str | zipfile.ZipInfo, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in files.items():
            zf.writestr(name, content)
    return path


def run(monkeypatch: pytest.MonkeyPatch, fmu: Path | str, *args: str) -> int:
    """``cosimrun --config-dir cfg +experiment=plant_run`` on *fmu* in-process: its exit status."""
    monkeypatch.setattr(sys, "argv", ["cosimrun", "--config-dir", "cfg", "+experiment=plant_run",
                                      f"components.plant.params.path={fmu}", "hydra.run.dir=run", *args])
    try:
        cli.main()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def one_line(stderr: str, prefix: str = "cosimrun: error: ") -> str:
    """The single line of *stderr* (no traceback), without *prefix*."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def refused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fmu: Path) -> str:
    """The one line of a run of *fmu* refused with exit status 2 (nothing left behind: no run directory)."""
    code = run(monkeypatch, fmu)
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG, err
    assert not Path("run").exists()
    return one_line(err)


def info_refused(capsys: pytest.CaptureFixture[str], fmu: Path) -> str:
    """The one line of ``python -m cosimrun.components.fmu info FMU`` refused with exit status 2 (without the
    prefix that names the component the command makes, ``fmu``)."""
    assert fmu_cli.main(["info", str(fmu)]) == EXIT_CONFIG
    captured = capsys.readouterr()
    assert captured.out == ""
    return one_line(captured.err, "error: component 'fmu': parameter 'path': ")


def at_path(fmu: Path, message: str) -> str:
    """The line of a file refused when ``path`` is set."""
    return f"components.plant.params.path: '{fmu}' is invalid: component 'plant': parameter 'path': {message}"


# ---------------------------------------------------------------------------- limits from the description
def huge_array(built: Path, tmp_path: Path) -> Path:
    """The FMI 3 ball with its arrays ``gain`` (input) and ``scaled`` (output) of 50 million elements each."""
    files = files_of(built / "bouncing_ball3.fmu")
    xml = files["modelDescription.xml"].decode()
    assert xml.count('<Dimension start="3"/>') == 2
    files["modelDescription.xml"] = xml.replace('<Dimension start="3"/>', '<Dimension start="50000000"/>').encode()
    return write_fmu(tmp_path / "huge_array.fmu", files)


def test_an_array_of_50_million_elements_is_refused_from_the_description(
        built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fmu = huge_array(built, tmp_path)
    assert fmu.stat().st_size < 10_000
    message = (f"FMU '{fmu}': its modelDescription.xml declares 100000000 array elements (gain[50000000], "
               "scaled[50000000]), above the limit of 100000; if you trust this FMU, raise the limit: "
               "COSIMRUN_FMU_MAX_ARRAY_ELEMENTS=100000000")
    assert refused(monkeypatch, capsys, fmu) == at_path(fmu, message)
    assert info_refused(capsys, fmu) == message
    tracemalloc.start()
    try:
        with pytest.raises(FMULimitError) as info:
            read_fmu(fmu)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (info.value.size, info.value.limit, info.value.setting) == (10**8, 10**5, ex.ENV_MAX_ARRAY_ELEMENTS)
    assert isinstance(info.value, ConfigError)
    assert peak < 32 << 20  # one element variable each would take gigabytes
    assert not (tmp_path / "cache").exists()  # nothing extracted


def test_the_array_and_port_limits_come_from_the_environment(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fmu = built / "bouncing_ball3.fmu"  # arrays gain[3] (input) and scaled[3] (output)
    model = read_fmu(fmu)
    ports = len(model.inputs) + len(model.outputs)
    assert ports == 12  # gain[1..3]; h, v, scaled[1..3], bounces, h32, falling, phase
    monkeypatch.setenv(ex.ENV_MAX_ARRAY_ELEMENTS, "5")
    with pytest.raises(FMULimitError, match=re.escape(
            "declares 6 array elements (gain[3], scaled[3]), above the limit of 5; if you trust this FMU, raise "
            "the limit: COSIMRUN_FMU_MAX_ARRAY_ELEMENTS=6")):
        read_fmu(fmu)  # the cached model is checked again: the limits may change between reads
    monkeypatch.setenv(ex.ENV_MAX_ARRAY_ELEMENTS, "6")
    monkeypatch.setenv(ex.ENV_MAX_PORTS, str(ports - 1))
    with pytest.raises(FMULimitError) as info:
        read_fmu(fmu)
    assert str(info.value) == (f"FMU '{fmu}': its modelDescription.xml declares {ports} inputs and outputs, above "
                               f"the limit of {ports - 1}; if you trust this FMU, raise the limit: "
                               f"COSIMRUN_FMU_MAX_PORTS={ports}")
    monkeypatch.setenv(ex.ENV_MAX_PORTS, str(ports))
    assert read_fmu(fmu) is model
    monkeypatch.setenv(ex.ENV_MAX_PORTS, "many")
    with pytest.raises(ConfigError) as error:
        read_fmu(fmu)
    assert str(error.value) == "environment variable COSIMRUN_FMU_MAX_PORTS='many' is not a whole number > 0"
    monkeypatch.delenv(ex.ENV_MAX_PORTS)
    settings = ex.FMUSettings.from_environment()
    assert (settings.max_array_elements, settings.max_ports) == (6, 2000)


# ---------------------------------------------------------------------------- links
def test_a_symlink_entry_holding_the_library_is_refused_in_one_line(
        built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    link = zipfile.ZipInfo("binaries/linux64")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    fmu = write_fmu(tmp_path / "linked.fmu", {link: str(tmp_path), **files_of(built / "feedthrough.fmu")})
    message = (f"FMU '{fmu}' is refused: its entry 'binaries/linux64/feedthrough.so' lies inside its entry "
               "'binaries/linux64', which is a symbolic link, not a directory (cosimrun extracts no links)")
    assert refused(monkeypatch, capsys, fmu) == at_path(fmu, message)
    with pytest.raises(FMUFileError) as info:
        ex.cached_extraction(fmu)
    assert str(info.value) == message
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".lock"]  # nothing written


def test_an_entry_inside_a_file_entry_is_refused(built: Path, tmp_path: Path) -> None:
    fmu = write_fmu(tmp_path / "nested.fmu", {**files_of(built / "feedthrough.fmu"), "resources": b"a file",
                                              "resources/data.txt": b"inside it"})
    with pytest.raises(FMUFileError) as info:
        read_fmu(fmu)
    assert str(info.value) == (f"FMU '{fmu}' is refused: its entry 'resources/data.txt' lies inside its entry "
                               "'resources', which is a file, not a directory")
    assert not (tmp_path / "cache").exists()


# ---------------------------------------------------------------------------- malformed FMUs
def feedthrough_with(built: Path, name: str, edit: Callable[[dict[str, bytes]], None]) -> Path:
    """The ``feedthrough`` FMU as *name*, its files changed by *edit*."""
    files = files_of(built / "feedthrough.fmu")
    edit(files)
    return write_fmu(built / name, files)


def description(old: str, new: str) -> Callable[[dict[str, bytes]], None]:
    def edit(files: dict[str, bytes]) -> None:
        assert old.encode() in files["modelDescription.xml"]
        files["modelDescription.xml"] = files["modelDescription.xml"].replace(old.encode(), new.encode())

    return edit


def html(files: dict[str, bytes]) -> None:
    files["modelDescription.xml"] = b'<?xml version="1.0" encoding="UTF-8"?>\n<html><body>not FMI</body></html>'


CS = ('<CoSimulation modelIdentifier="feedthrough" canHandleVariableCommunicationStepSize="true"\n'
      '    canGetAndSetFMUstate="true" canNotUseMemoryManagementFunctions="true"/>')
ME = '<ModelExchange modelIdentifier="feedthrough" canGetAndSetFMUstate="true"/>'

DESCRIPTION_CASES = [
    ("not_fmi", html, "'{fmu}' is not an FMU: its modelDescription.xml is no FMI model description (root element "
                      "<html>, not <fmiModelDescription>)"),
    ("fmi2_as_3", description('fmiVersion="2.0"', 'fmiVersion="3.0"'),
     "'{fmu}': modelDescription.xml says fmiVersion=\"3.0\" but declares its variables as FMI 2.0 does "
     "(<ScalarVariable> elements); the FMU was exported wrongly"),
    ("vr_text", description('name="k" valueReference="2"', 'name="k" valueReference="two"'),
     "'{fmu}': invalid FMI 2.0 modelDescription.xml: line 14: Element 'ScalarVariable', attribute "
     "'valueReference': 'two' is not a valid value of the atomic type 'xs:unsignedInt'."),
    ("vr_negative", description('name="k" valueReference="2"', 'name="k" valueReference="-1"'),
     "'{fmu}': variable 'k' has valueReference=-1; a value reference is an integer from 0 to 4294967295"),
]


@pytest.mark.parametrize(("name", "edit", "message"), DESCRIPTION_CASES, ids=[c[0] for c in DESCRIPTION_CASES])
def test_a_malformed_model_description_is_refused_in_one_line(
        built: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str,
        edit: Callable[[dict[str, bytes]], None], message: str) -> None:
    fmu = feedthrough_with(built, f"{name}.fmu", edit)
    expected = message.format(fmu=fmu)
    assert refused(monkeypatch, capsys, fmu) == at_path(fmu, expected)  # the schema problem is said once
    assert info_refused(capsys, fmu) == expected


def test_a_usable_description_with_schema_problems_is_warned_about_once(
        built: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fmu = feedthrough_with(built, "lenient.fmu", description('canNotUseMemoryManagementFunctions="true"',
                                                            'canNotUseMemoryManagementFunctions="true" extra="1"'))
    t, y = plant_output(monkeypatch, fmu)
    assert y == pytest.approx(6.0 * np.sin(math.pi * t), rel=0, abs=1e-12)
    line = one_line(capsys.readouterr().err, "cosimrun: warning: ")
    assert line == (f"'{fmu}': modelDescription.xml has problems (continuing): line 5: Element 'CoSimulation', "
                    "attribute 'extra': The attribute 'extra' is not allowed.")


def me_over_cs_library(built: Path) -> Path:
    return feedthrough_with(built, "me_over_cs.fmu", description(CS, ME))


def not_a_library(built: Path) -> Path:
    def edit(files: dict[str, bytes]) -> None:
        files["binaries/linux64/feedthrough.so"] = b"not a shared library"

    return feedthrough_with(built, "not_a_library.fmu", edit)


LIBRARY_CASES = [
    (me_over_cs_library, "its shared library binaries/linux64/feedthrough.so does not export "
                         "fmi2CompletedIntegratorStep, which FMI 2.0 model exchange needs: it is a co-simulation "
                         "library, but the FMU declares model exchange"),
    (not_a_library, "its shared library binaries/linux64/feedthrough.so does not load: file too short"),
    (lambda built: built / "feedthrough_nofunctions.fmu",
     r"its shared library binaries/linux64/feedthrough.so does not export fmi2\w+, which FMI 2.0 co-simulation "
     r"needs"),
]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the libraries are built for linux64")
@pytest.mark.parametrize(("make", "message"), LIBRARY_CASES, ids=["me_over_cs", "not_a_library", "no_functions"])
def test_a_library_that_cannot_run_is_refused_in_one_line(
        built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        make: Callable[[Path], Path], message: str) -> None:
    fmu = make(built)
    code = run(monkeypatch, fmu)
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG, err
    line = one_line(err)
    assert re.fullmatch(re.escape(f"FMU component 'plant' ({fmu.name}): ") + (
        message if "\\w" in message else re.escape(message)), line), line
    assert Path.cwd() == tmp_path  # FMPy changes into the library's directory; a failed load left it there
    assert not Path("run").exists()


# ---------------------------------------------------------------------------- the cache
def plant_output(monkeypatch: pytest.MonkeyPatch, fmu: Path) -> tuple[np.ndarray, np.ndarray]:
    """Run ``plant_run`` on *fmu*: the times and the plant's output ``y``."""
    assert run(monkeypatch, fmu) == 0
    [results] = Path("run").glob("*.h5")
    t, y = load_results(results).history("plant")["y"]
    results.unlink()
    return np.asarray(t), np.asarray(y)


@pytest.mark.slow
def test_a_damaged_cache_entry_is_extracted_again(
        built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fmu = built / "feedthrough.fmu"
    t, y = plant_output(monkeypatch, fmu)
    assert t == pytest.approx(np.arange(9) * 0.125, abs=1e-15)
    assert y == pytest.approx(2.0 * 3.0 * np.sin(2 * math.pi * 0.5 * t), rel=0, abs=1e-12)  # y = k u, k = 2
    assert capsys.readouterr().err == ""
    [entry] = [p for p in (tmp_path / "cache").iterdir() if p.name != ".lock"]
    library = entry / "binaries" / "linux64" / "feedthrough.so"
    os.chmod(library, 0o644)
    library.write_bytes(b"overwritten")
    second = plant_output(monkeypatch, fmu)
    assert np.array_equal(second[0], t) and np.array_equal(second[1], y)
    assert one_line(capsys.readouterr().err, "cosimrun: warning: ") == (
        f"the cached extraction of FMU '{fmu}' was damaged (binaries/linux64/feedthrough.so changed); extracted "
        "again")
    assert library.read_bytes() == files_of(fmu)["binaries/linux64/feedthrough.so"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".lock", entry.name]  # nothing else left
    third = plant_output(monkeypatch, fmu)  # intact again: used as it is
    assert np.array_equal(third[1], y) and capsys.readouterr().err == ""


def contents(entry: Path) -> dict[str, bytes]:
    """The files of cache entry *entry* but its manifest, by path in the FMU."""
    return {p.relative_to(entry).as_posix(): p.read_bytes() for p in entry.rglob("*")
            if p.is_file() and p.name != ex.MANIFEST}


@pytest.mark.parametrize("damage", ["removed", "added", "truncated", "manifest"])
def test_each_kind_of_damage_is_found_and_repaired(built: Path, tmp_path: Path, damage: str) -> None:
    fmu = built / "feedthrough.fmu"
    entry = ex.cached_extraction(fmu)
    description = entry / "modelDescription.xml"
    expected = contents(entry)
    inode = description.stat().st_ino
    assert ex.cached_extraction(fmu) == entry and description.stat().st_ino == inode  # intact: reused
    ex._set_writable(entry, True)
    if damage == "removed":
        description.unlink()
    elif damage == "added":
        (entry / "resources").mkdir()
        (entry / "resources" / "extra.txt").write_text("not from the FMU")
    elif damage == "truncated":
        description.write_bytes(description.read_bytes()[:100])
    else:
        (entry / ex.MANIFEST).write_text("{not json")
    assert ex._damage(entry)
    assert ex.cached_extraction(fmu) == entry
    assert contents(entry) == expected == {name: data for name, data in files_of(fmu).items()}
    assert ex._damage(entry) is None
    assert all(p.stat().st_mode & 0o222 == 0 for p in entry.rglob("*"))  # read-only again


def test_threads_finding_the_same_damage_repair_it_once(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    fmu = built / "feedthrough.fmu"
    entry = ex.cached_extraction(fmu)
    ex._set_writable(entry, True)
    (entry / "modelDescription.xml").write_text("damaged")
    extract = ex._extract

    def slow(*args: object) -> None:
        time.sleep(0.2)  # every thread has found the damage and is extracting at once
        extract(*args)

    monkeypatch.setattr(ex, "_extract", slow)
    start = threading.Barrier(4)
    results: list[Path] = []

    def use() -> None:
        start.wait()
        results.append(ex.cached_extraction(fmu))

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [entry] * 4
    assert [r.getMessage() for r in caplog.records] == [  # one thread replaced it, the others used its copy
        f"the cached extraction of FMU '{fmu}' was damaged (modelDescription.xml changed); extracted again"]
    assert ex._damage(entry) is None and contents(entry) == files_of(fmu)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".lock", entry.name]  # no .tmp-* left


# ---------------------------------------------------------------------------- describe
def test_describe_reads_the_model_description_only(
        built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fmu = built / "feedthrough_marker.fmu"
    marker = tmp_path / "loaded.txt"
    monkeypatch.setenv(builders.LOAD_MARKER, str(marker))
    assert run(monkeypatch, fmu, "action=describe") == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "  plant (FMUComponent)\n    in  u: real [N]\n    out y: real [N]\n" in captured.out
    assert "  src.y -> plant.u\n" in captured.out
    assert not marker.exists()  # the library's constructor never ran
    assert not (tmp_path / "cache").exists()  # not even extracted
    assert not Path("run").exists()
    t, y = plant_output(monkeypatch, fmu)  # a run loads it
    assert marker.read_text() == f"loaded {os.getpid()}\n"
    assert y == pytest.approx(6.0 * np.sin(math.pi * t), rel=0, abs=1e-12)


def test_an_archive_whose_directory_is_damaged_is_refused_in_one_line(
        built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A zip file that still looks like one (its end record found) but whose entries do not read: one line naming
    the file, not the operating system's ``[Errno 22] Invalid argument`` alone."""
    data = bytearray((built / "feedthrough.fmu").read_bytes())
    data[-3] ^= 0xFF  # the archive comment's length: the entries' offsets no longer point at them
    fmu = tmp_path / "damaged.fmu"
    fmu.write_bytes(bytes(data))
    line = refused(monkeypatch, capsys, fmu)
    assert line.startswith(at_path(fmu, f"'{fmu}' is not a readable FMU archive: "))
    assert "\n" not in line
