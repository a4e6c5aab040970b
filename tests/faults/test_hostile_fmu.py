"""Hostile FMU files are refused before they cost disk, memory or files outside the cache; the extraction cache.

The malicious archives are built here with :mod:`zipfile`: a zip bomb, an
oversized ``modelDescription.xml``, entries that climb out (``../x``), absolute
paths, symbolic links, an entry that lies about its size, XXE and
billion-laughs model descriptions. Each test checks the error line and every
file left behind: the cache holds nothing but its lock file and no other
directory (the test's own, the system temp dir) gained a file.
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)

from cosimrun.components.fmu import FMUComponent
from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError, FMUError, FMULimitError
from cosimrun.fmi import extraction as ex

MiB = 1 << 20
XML = builders._feedthrough_xml()


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache and a system temp dir of this test only (the cache is returned)."""
    for var in (ex.ENV_MAX_UNPACKED, ex.ENV_MAX_DESCRIPTION, ex.ENV_MAX_AGE):
        monkeypatch.delenv(var, raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv(ex.ENV_CACHE, str(cache))
    (tmp_path / "systmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "systmp"))
    return cache


@pytest.fixture(scope="module")
def feedthrough_fmu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builders.feedthrough(tmp_path_factory.mktemp("fmus"))


def archive(path: Path, entries: Mapping[str | zipfile.ZipInfo, str | bytes], xml: bool = True) -> Path:
    """A deflated zip at *path* with a valid modelDescription.xml (unless not *xml*) and *entries*."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if xml:
            zf.writestr("modelDescription.xml", XML)
        for name, content in entries.items():
            zf.writestr(name, content)
    return path


def left_behind(tmp_path: Path, *expected: Path) -> list[str]:
    """Every file under *tmp_path* except *expected* and the cache's lock file."""
    keep = {*expected, tmp_path / "cache" / ".lock"}
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and p not in keep)


def refused_at_path(fmu: Path) -> str:
    with pytest.raises(ValueError) as info:
        FMUComponent("x").set_parameters(path=str(fmu))
    return str(info.value)


def refused_at_extraction(fmu: Path) -> FMUError:
    with pytest.raises(FMUError) as info:
        ex.cached_extraction(fmu)
    return info.value


# ---------------------------------------------------------------------------- sizes
def test_zip_bomb_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = archive(tmp_path / "bomb.fmu", {"resources/zeros.bin": bytes(16 * MiB)})
    assert bomb.stat().st_size < 64 * 1024  # highly compressible
    monkeypatch.setenv(ex.ENV_MAX_UNPACKED, "8MiB")
    total = 16 * MiB + len(XML)
    line = (f"FMU '{bomb}': its files unpack to 16.0 MiB ({total} bytes), above the limit of 8.0 MiB "
            f"(8388608 bytes); if you trust this FMU, raise the limit: COSIMRUN_FMU_MAX_UNPACKED_SIZE=17MiB")
    assert refused_at_path(bomb) == f"component 'x': parameter 'path': {line}"
    error = refused_at_extraction(bomb)
    assert isinstance(error, FMULimitError) and str(error) == line
    assert (error.size, error.limit, error.setting) == (total, 8 * MiB, "COSIMRUN_FMU_MAX_UNPACKED_SIZE")
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"plant": {"type": "fmu", "params": {"path": str(bomb)}}}})
    assert str(info.value) == (f"components.plant.params.path: {str(bomb)!r} is invalid: component 'plant': "
                               f"parameter 'path': {line}")
    assert left_behind(tmp_path, bomb) == []
    monkeypatch.setenv(ex.ENV_MAX_UNPACKED, "17MiB")  # raised: extracted
    entry = ex.cached_extraction(bomb)
    assert (entry / "resources" / "zeros.bin").stat().st_size == 16 * MiB


def _declare_size(path: Path, name: str, size: int) -> None:
    """Rewrite the uncompressed size of entry *name* in its local header and the central directory."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            if data[start + name_at:start + name_at + len(encoded)] == encoded:
                struct.pack_into("<I", data, start + size_at, size)
            start += 4
    path.write_bytes(bytes(data))


def test_declared_sizes_are_checked_against_the_default_limit(tmp_path: Path) -> None:
    fmu = archive(tmp_path / "huge.fmu", {"resources/data.bin": b"x" * 1000})
    _declare_size(fmu, "resources/data.bin", 3 * (1 << 30))
    line = refused_at_path(fmu)
    assert "its files unpack to 3.0 GiB" in line and "above the limit of 2.0 GiB (2147483648 bytes)" in line
    assert line.endswith("raise the limit: COSIMRUN_FMU_MAX_UNPACKED_SIZE=3073MiB")
    assert left_behind(tmp_path, fmu) == []


def test_entry_larger_than_declared_stops_the_extraction_without_leftovers(tmp_path: Path) -> None:
    fmu = archive(tmp_path / "liar.fmu", {"resources/a.bin": b"a" * 100_000, "resources/b.bin": b"b" * 1000})
    _declare_size(fmu, "resources/a.bin", 1000)  # decompresses to 100 times what it declares
    # zipfile stops at the declared size and then finds the checksum wrong (the byte budget of the
    # extraction would stop a reader that went on)
    assert str(refused_at_extraction(fmu)) == f"cannot extract FMU '{fmu}': Bad CRC-32 for file 'resources/a.bin'"
    assert left_behind(tmp_path, fmu) == []
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [".lock"]  # no partial extraction


def refused_with_peak_memory(fmu: Path) -> tuple[str, int]:
    """The error line of reading *fmu* and the peak of Python memory allocated meanwhile."""
    tracemalloc.start()
    try:
        line = refused_at_path(fmu)
        return line, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_oversized_model_description_is_refused_without_reading_it(tmp_path: Path) -> None:
    size = 65 * MiB
    padded = XML.replace("<CoSimulation", " " * (size - len(XML)) + "<CoSimulation", 1)
    fmu = archive(tmp_path / "big.fmu", {"modelDescription.xml": padded}, xml=False)
    line, peak = refused_with_peak_memory(fmu)
    assert line == (f"component 'x': parameter 'path': FMU '{fmu}': modelDescription.xml is 65.0 MiB ({size} "
                    "bytes), above the limit of 64.0 MiB (67108864 bytes); if you trust this FMU, raise the limit: "
                    "COSIMRUN_FMU_MAX_DESCRIPTION_SIZE=65MiB")
    assert peak < 4 * MiB  # the 65 MiB were never read
    assert left_behind(tmp_path, fmu) == []


def test_a_limit_met_at_extraction_names_the_component(isolated: Path, feedthrough_fmu: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    f = FMUComponent("plant")
    f.set_parameters(path=str(feedthrough_fmu))
    monkeypatch.setenv(ex.ENV_MAX_UNPACKED, "1KiB")  # lowered between loading the description and the run
    with pytest.raises(FMULimitError) as info:
        f.initialize(0.0)
    size = sum(i.file_size for i in zipfile.ZipFile(feedthrough_fmu).infolist())
    assert str(info.value) == (
        f"FMU component 'plant' (feedthrough.fmu): FMU '{feedthrough_fmu}': its files unpack to "
        f"{ex.format_size(size)}, above the limit of 1.0 KiB (1024 bytes); if you trust this FMU, raise the "
        f"limit: COSIMRUN_FMU_MAX_UNPACKED_SIZE={-(-size // MiB)}MiB")
    assert (info.value.component, info.value.time, info.value.limit) == ("plant", 0.0, 1024)
    assert [p.name for p in isolated.iterdir()] == [".lock"]


def test_limits_from_the_environment_are_checked(monkeypatch: pytest.MonkeyPatch, feedthrough_fmu: Path) -> None:
    monkeypatch.setenv(ex.ENV_MAX_DESCRIPTION, "1KiB")
    assert "modelDescription.xml is" in refused_at_path(feedthrough_fmu)
    monkeypatch.setenv(ex.ENV_MAX_DESCRIPTION, "lots")
    with pytest.raises(ConfigError) as info:
        ex.FMUSettings.from_environment()
    assert str(info.value) == ("environment variable COSIMRUN_FMU_MAX_DESCRIPTION_SIZE='lots' is not a size "
                               "such as 4GiB or 512MiB")
    monkeypatch.setenv(ex.ENV_MAX_DESCRIPTION, "1.5 GB")
    monkeypatch.setenv(ex.ENV_MAX_AGE, "0")
    with pytest.raises(ConfigError, match=r"COSIMRUN_FMU_CACHE_MAX_AGE='0' is not a number of days > 0$"):
        ex.FMUSettings.from_environment()
    monkeypatch.setenv(ex.ENV_MAX_AGE, "7")
    settings = ex.FMUSettings.from_environment()
    assert (settings.max_description_size, settings.max_unpacked_size, settings.max_age_days) == (1.5e9, 2 << 30, 7)


# ---------------------------------------------------------------------------- paths and links
@pytest.mark.parametrize("name", ["../evil.txt", "resources/../../evil.txt", "/ABS/evil.txt", "C:/evil.txt",
                                  "..\\evil.txt"])
def test_entries_leaving_the_directory_are_refused(tmp_path: Path, name: str) -> None:
    absolute = tmp_path / "abs" / "evil.txt"
    fmu = archive(tmp_path / "slip.fmu", {name.replace("/ABS", str(absolute.parent)): b"owned"})
    shown = name.replace("/ABS", str(absolute.parent))
    line = (f"FMU '{fmu}' is refused: its entry {shown!r} points outside the FMU's directory "
            "(absolute path, '..', drive letter or backslash)")
    assert refused_at_path(fmu) == f"component 'x': parameter 'path': {line}"
    assert str(refused_at_extraction(fmu)) == line
    assert left_behind(tmp_path, fmu) == [] and not absolute.exists()
    assert not (tmp_path.parent / "evil.txt").exists()


def test_symlink_entries_become_plain_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    link = zipfile.ZipInfo("resources/link")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    fmu = archive(tmp_path / "links.fmu", {link: str(secret)})
    entry = ex.cached_extraction(fmu)
    extracted = entry / "resources" / "link"
    assert not extracted.is_symlink() and extracted.read_text() == str(secret)  # the link's text, not a link
    assert secret.read_text() == "TOPSECRET"
    assert left_behind(tmp_path, fmu, secret, entry / "modelDescription.xml", entry / ex.MANIFEST, extracted) == []


# ---------------------------------------------------------------------------- XML
def _with_doctype(doctype: str, reference: str, where: str) -> str:
    head, rest = XML.split("<fmiModelDescription", 1)
    body = "<fmiModelDescription" + rest
    if where == "attribute":
        body = body.replace('description="', f'description="{reference}', 1)
    else:
        body = body.replace("</fmiModelDescription>",
                            f'<Annotations><Tool name="x">{reference}</Tool></Annotations></fmiModelDescription>')
    return f"{head}<!DOCTYPE fmiModelDescription [{doctype}]>\n{body}"


@pytest.mark.parametrize(("where", "reason"), [("attribute", "reference to external entity in attribute"),
                                               ("content", "undefined entity &xxe;")])
def test_external_entities_are_not_resolved(tmp_path: Path, where: str, reason: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    xml = _with_doctype(f'<!ENTITY xxe SYSTEM "file://{secret}">', "&xxe;", where)
    fmu = archive(tmp_path / "xxe.fmu", {"modelDescription.xml": xml}, xml=False)
    line = refused_at_path(fmu)
    assert line.startswith(f"component 'x': parameter 'path': '{fmu}': modelDescription.xml is not well-formed "
                           f"XML: {reason}")
    assert "TOPSECRET" not in line
    assert left_behind(tmp_path, fmu, secret) == []


def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    entities = '<!ENTITY a "lollollollol">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
    fmu = archive(tmp_path / "lol.fmu", {"modelDescription.xml": _with_doctype(entities, "&j;", "attribute")},
                  xml=False)
    line, peak = refused_with_peak_memory(fmu)
    assert line.startswith(f"component 'x': parameter 'path': '{fmu}': modelDescription.xml is not well-formed "
                           "XML: limit on input amplification factor")
    assert peak < 16 * MiB  # 10**9 expansions would need gigabytes
    assert left_behind(tmp_path, fmu) == []


# ---------------------------------------------------------------------------- the cache
def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under *root* with its mode and content (files)."""
    return {str(p.relative_to(root)): (p.stat().st_mode, p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


def test_same_fmu_is_extracted_once_and_never_modified(isolated: Path, feedthrough_fmu: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    extract = ex._extract
    monkeypatch.setattr(ex, "_extract", lambda *args: calls.append(args) or extract(*args))
    a = FMUComponent("a")
    a.set_parameters(path=str(feedthrough_fmu))
    a.initialize(0.0)
    assert a.fmu is not None and a.fmu.library.extraction is not None
    entry = a.fmu.library.extraction.directory
    before = tree(entry)
    a.do_step(0.0, 0.1)
    a.free()
    b = FMUComponent("b")
    b.set_parameters(path=str(feedthrough_fmu))
    b.initialize(0.0)
    b.do_step(0.0, 0.1)
    b.free()
    assert ex.cached_extraction(feedthrough_fmu) == entry and len(calls) == 1
    assert tree(entry) == before and all(mode & 0o222 == 0 for mode, _ in before.values())
    assert sorted(p.name for p in isolated.iterdir()) == [".lock", entry.name]
    # another process uses the same files (not extracted again: the same inode)
    inode = (entry / "modelDescription.xml").stat().st_ino
    code = ("from pathlib import Path; from cosimrun.fmi.extraction import cached_extraction; "
            f"print(cached_extraction(Path({str(feedthrough_fmu)!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == entry and (entry / "modelDescription.xml").stat().st_ino == inode


def test_concurrent_extraction_in_threads_keeps_one_copy(isolated: Path, feedthrough_fmu: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    extract = ex._extract

    def slow(*args: object) -> None:
        time.sleep(0.2)  # every thread is extracting at once
        extract(*args)

    monkeypatch.setattr(ex, "_extract", slow)
    start = threading.Barrier(6)
    results: list[Path] = []

    def use() -> None:
        start.wait()
        results.append(ex.cached_extraction(feedthrough_fmu))

    threads = [threading.Thread(target=use) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and len(set(results)) == 1
    assert sorted(p.name for p in isolated.iterdir()) == [".lock", results[0].name]  # no .tmp-* left


@pytest.mark.slow
def test_concurrent_extraction_in_processes_keeps_one_copy(isolated: Path, feedthrough_fmu: Path) -> None:
    code = ("import time; from pathlib import Path; from cosimrun.fmi import extraction as ex\n"
            "extract = ex._extract\n"
            "ex._extract = lambda *a: (time.sleep(0.3), extract(*a))\n"
            f"print(ex.cached_extraction(Path({str(feedthrough_fmu)!r})))\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    paths = {Path(out.strip()) for out, _ in outputs}
    assert len(paths) == 1
    assert sorted(p.name for p in isolated.iterdir()) == [".lock", paths.pop().name]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _aged(path: Path, seconds: float) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_stale_entries_and_leftovers_are_cleaned_on_use(isolated: Path, feedthrough_fmu: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ex.ENV_MAX_AGE, "2")  # days
    day, host, me, dead = 86400.0, ex._HOST, os.getpid(), _dead_pid()
    stale = _aged(isolated / ("a" * 64), 3 * day)
    (stale / "binaries").mkdir()
    (stale / "binaries" / "lib.so").write_bytes(b"old")
    ex._set_writable(stale, False)
    _aged(stale, 3 * day)
    recent = _aged(isolated / ("b" * 64), 1 * day)
    old_tmp = _aged(isolated / f".tmp-otherhost-{me}-x1", 2 * 3600)
    young_tmp_of_dead = _aged(isolated / f".tmp-{host}-{dead}-x2", 60)
    young_tmp_of_other_host = _aged(isolated / f".tmp-otherhost-{dead}-x3", 60)
    private_of_dead = _aged(isolated / f".private-{host}-{dead}-x4", 60)
    private_of_me = _aged(isolated / f".private-{host}-{me}-x5", 3 * day)  # older than the age limit: in use
    private_of_other_host = _aged(isolated / f".private-otherhost-{me}-x6", 3 * day)
    other = isolated / "notes.txt"
    other.write_text("not ours")
    entry = ex.cached_extraction(feedthrough_fmu)
    assert sorted(p.name for p in isolated.iterdir()) == sorted(
        [".lock", entry.name, recent.name, young_tmp_of_other_host.name, private_of_me.name, other.name])
    assert not any(p.exists() for p in (stale, old_tmp, young_tmp_of_dead, private_of_dead, private_of_other_host))


@pytest.mark.slow
def test_a_killed_extraction_leaves_only_a_temp_dir_the_next_use_removes(isolated: Path,
                                                                          feedthrough_fmu: Path) -> None:
    code = ("import os; from pathlib import Path; from cosimrun.fmi import extraction as ex\n"
            "print(os.getpid(), flush=True)\n"
            "ex._set_writable = lambda *a: os._exit(9)\n"  # dies after extracting, before the rename
            f"ex.cached_extraction(Path({str(feedthrough_fmu)!r}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    [leftover] = [p for p in isolated.iterdir() if p.name != ".lock"]
    assert leftover.name.startswith(f".tmp-{ex._HOST}-{proc.stdout.strip()}-")
    entry = ex.cached_extraction(feedthrough_fmu)
    assert sorted(p.name for p in isolated.iterdir()) == [".lock", entry.name]


def test_an_unusable_cache_directory_says_how_to_move_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         feedthrough_fmu: Path) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(ex.ENV_CACHE, str(tmp_path / "file" / "cache"))
    error = refused_at_extraction(feedthrough_fmu)
    assert str(error).startswith(f"cannot use the FMU cache '{tmp_path / 'file' / 'cache'}' "
                                 "(set COSIMRUN_FMU_CACHE to another directory): ")
