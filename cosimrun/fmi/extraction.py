"""Extracted FMUs: checked against size limits, streamed into one cache shared by every process of the user.

**Limits.** Before anything is written (and before ``modelDescription.xml`` is
parsed, see :func:`check_archive`), an FMU is refused when the sum of its zip
entries' declared sizes exceeds ``max_unpacked_size`` (default 2 GiB) or its
``modelDescription.xml`` exceeds ``max_description_size`` (default 64 MiB),
with an :class:`~cosimrun.errors.FMULimitError` naming the file, the size, the
limit and the environment variable that raises it. Entries are then streamed
with a byte budget: one that decompresses to more than it declares stops the
extraction. Entry names that leave the directory (``../x``, absolute paths,
drive letters, backslashes) are refused; symbolic-link entries become plain
files holding the link's text (as :mod:`zipfile` writes them), never links,
and an entry inside another entry that is a file or link is refused in one
line naming both.

**Cache.** An FMU is extracted once into ``<cache>/<sha256 of the file>/``,
reused by every later run and process (a sweep's workers share it). A process
extracts into ``<cache>/.tmp-*``, writes the manifest :data:`MANIFEST` (each
file's size and modification time) and renames the finished directory into
place; when another process won the race it uses the winner's. Each reuse
compares the entry with its manifest (no file is read): a damaged entry (a
file changed, removed or added) is extracted again and replaced, with a
warning. The cached
files are read-only (a run never changes them); a component that needs a
writable copy (``private_copy: true``, or a second instance of an FMU that
``canBeInstantiatedOnlyOncePerProcess``) gets a ``<cache>/.private-*`` copy,
removed when its last user is freed or at interpreter exit. Each use touches
the entry; the first use in a process removes entries unused for
``max_age_days``, and the ``.tmp-*`` directories and private copies of
processes that are gone (``.tmp-*`` after an hour in any case), so a killed
process leaks nothing for long.

Settings come from the environment (:meth:`FMUSettings.from_environment`):
``COSIMRUN_FMU_MAX_UNPACKED_SIZE``, ``COSIMRUN_FMU_MAX_DESCRIPTION_SIZE``
(sizes such as ``4GiB``, ``512 MiB`` or bytes),
``COSIMRUN_FMU_MAX_ARRAY_ELEMENTS`` and ``COSIMRUN_FMU_MAX_PORTS`` (counts
that :func:`~cosimrun.fmi.description.read_fmu` checks from the model
description before it makes a variable), ``COSIMRUN_FMU_CACHE`` (the
cache directory; default ``extracted/`` in cosimrun's cache directory,
``$COSIMRUN_CACHE_DIR`` or ``$XDG_CACHE_HOME/cosimrun`` or
``~/.cache/cosimrun``) and ``COSIMRUN_FMU_CACHE_MAX_AGE`` (days).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import logging
import math
import os
import re
import shutil
import socket
import stat
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cosimrun.errors import ConfigError, FMUError, FMUFileError, FMULimitError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; the cache works without them, cleanup may race a user
    fcntl = None  # type: ignore[assignment]

MiB = 1 << 20
GiB = 1 << 30

ENV_MAX_UNPACKED = "COSIMRUN_FMU_MAX_UNPACKED_SIZE"
ENV_MAX_DESCRIPTION = "COSIMRUN_FMU_MAX_DESCRIPTION_SIZE"
ENV_MAX_ARRAY_ELEMENTS = "COSIMRUN_FMU_MAX_ARRAY_ELEMENTS"
ENV_MAX_PORTS = "COSIMRUN_FMU_MAX_PORTS"
ENV_CACHE = "COSIMRUN_FMU_CACHE"
ENV_MAX_AGE = "COSIMRUN_FMU_CACHE_MAX_AGE"

TMP_MAX_AGE_S = 3600.0
"""Age after which an unfinished ``.tmp-*`` extraction is taken as abandoned and removed."""

_log = logging.getLogger("cosimrun.fmu")

_DESCRIPTION = "modelDescription.xml"
_ENTRY = re.compile(r"[0-9a-f]{64}")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": MiB, "gib": GiB, "tib": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([a-z]*)\s*", re.IGNORECASE)


def cache_directory() -> Path:
    """cosimrun's cache directory (extracted FMUs, built examples, pint's parsed unit definitions):
    ``$COSIMRUN_CACHE_DIR``, else the user cache dir."""
    env = os.environ.get("COSIMRUN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "cosimrun"


def parse_size(text: str) -> int:
    """Bytes in *text*: ``2GiB``, ``512 MiB``, ``1.5GB``, ``1048576``; ``ValueError`` otherwise."""
    match = _SIZE.fullmatch(text)
    unit = match[2].lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ConfigError(None, f"{text!r} is not a size (write e.g. 4GiB, 512MiB or a number of bytes)")
    return int(float(match[1]) * _UNITS[unit])


def parse_count(text: str) -> int:
    """The whole number in *text*: ``100000``, ``100_000``; ``ValueError`` otherwise."""
    return int(text.strip())


def format_size(n: int) -> str:
    """``1.0 GiB (1073741824 bytes)``."""
    for unit, factor in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


@dataclass(frozen=True)
class FMUSettings:
    """Limits and cache of FMU extraction (see the module docstring; read from the environment)."""

    max_unpacked_size: int = 2 * GiB
    """Largest sum of the declared sizes of an FMU's files."""
    max_description_size: int = 64 * MiB
    """Largest ``modelDescription.xml``."""
    max_array_elements: int = 100_000
    """Most elements of the FMI 3 array variables of a model together (each becomes a variable of its own)."""
    max_ports: int = 2_000
    """Most inputs and outputs of a model (array elements counted one by one)."""
    cache: Path | None = None
    """The cache directory (``None``: ``extracted/`` in :func:`cache_directory`)."""
    max_age_days: float = 30.0
    """Cached FMUs unused for longer are removed."""

    @property
    def cache_root(self) -> Path:
        return self.cache if self.cache is not None else cache_directory() / "extracted"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> FMUSettings:
        """The defaults, overridden by ``COSIMRUN_FMU_*`` variables; ``ConfigError`` names a bad one."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for var, field, parse in ((ENV_MAX_UNPACKED, "max_unpacked_size", parse_size),
                                  (ENV_MAX_DESCRIPTION, "max_description_size", parse_size),
                                  (ENV_MAX_ARRAY_ELEMENTS, "max_array_elements", parse_count),
                                  (ENV_MAX_PORTS, "max_ports", parse_count),
                                  (ENV_MAX_AGE, "max_age_days", float)):
            text = env.get(var, "").strip()
            if not text:
                continue
            try:
                value = parse(text)
            except ValueError:
                value = -1
            if not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
                what = ("a number of days > 0" if field == "max_age_days" else
                        "a whole number > 0" if parse is parse_count else "a size such as 4GiB or 512MiB")
                raise ConfigError(None, f"environment variable {var}={text!r} is not {what}")
            values[field] = value
        if env.get(ENV_CACHE, "").strip():
            values["cache"] = Path(env[ENV_CACHE]).expanduser()
        return cls(**values)  # type: ignore[arg-type]


def _limit_error(path: Path, what: str, size: int, limit: int, setting: str) -> FMULimitError:
    raise_to = f"{math.ceil(size / MiB)}MiB"
    return FMULimitError(
        f"FMU {str(path)!r}: {what} {format_size(size)}, above the limit of {format_size(limit)}; "
        f"if you trust this FMU, raise the limit: {setting}={raise_to}",
        path=str(path), size=size, limit=limit, setting=setting)


def count_limit_error(path: Path, what: str, count: int, limit: int, setting: str) -> FMULimitError:
    """The error of an FMU whose model description declares *count* (> *limit*) of *what* (array elements, ports),
    refused before they are made; *setting* is the environment variable that raises the limit."""
    return FMULimitError(
        f"FMU {str(path)!r}: its modelDescription.xml declares {count} {what}, above the limit of {limit}; "
        f"if you trust this FMU, raise the limit: {setting}={count}",
        path=str(path), size=count, limit=limit, setting=setting)


def _safe_name(name: str) -> PurePosixPath | None:
    """The relative path of zip entry *name*; ``None`` when it would leave the extraction directory."""
    if "\\" in name or ":" in name or name.startswith("/"):
        return None
    relative = PurePosixPath(name)  # drops "." parts; "./" is the directory itself
    return None if ".." in relative.parts else relative


def check_archive(zf: zipfile.ZipFile, path: Path, settings: FMUSettings) -> None:
    """Refuse an FMU whose entries leave the directory or exceed the limits, from the zip directory alone."""
    total = 0
    files: dict[PurePosixPath, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        relative = _safe_name(info.filename)
        if relative is None:
            raise FMUFileError(f"FMU {str(path)!r} is refused: its entry {info.filename!r} points outside the "
                               "FMU's directory (absolute path, '..', drive letter or backslash)")
        if not info.is_dir() and relative.parts:
            files[relative] = info
        total += info.file_size
    for relative, info in files.items():
        outer = next((files[parent] for parent in relative.parents if parent in files), None)
        if outer is not None:
            kind = "a symbolic link, not a directory (cosimrun extracts no links)" \
                if stat.S_ISLNK(outer.external_attr >> 16) else "a file, not a directory"
            raise FMUFileError(f"FMU {str(path)!r} is refused: its entry {info.filename!r} lies inside its entry "
                               f"{outer.filename!r}, which is {kind}")
    try:
        description = zf.getinfo(_DESCRIPTION).file_size
    except KeyError:
        description = 0
    if description > settings.max_description_size:
        raise _limit_error(path, f"{_DESCRIPTION} is", description, settings.max_description_size,
                           ENV_MAX_DESCRIPTION)
    if total > settings.max_unpacked_size:
        raise _limit_error(path, "its files unpack to", total, settings.max_unpacked_size, ENV_MAX_UNPACKED)


def _extract(zf: zipfile.ZipFile, path: Path, target: Path) -> None:
    """Extract the checked FMU *zf* (file *path*) into the empty directory *target*, each entry within its size."""
    for info in zf.infolist():
        relative = _safe_name(info.filename)
        assert relative is not None  # check_archive refused the others
        out = target.joinpath(relative)
        if info.is_dir() or out == target:
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        budget = info.file_size
        with zf.open(info) as src, open(out, "wb") as dst:
            while chunk := src.read(MiB):
                budget -= len(chunk)
                if budget < 0:
                    raise FMUFileError(f"FMU {str(path)!r} is refused: its entry {info.filename!r} decompresses "
                                       f"to more than its declared {format_size(info.file_size)}")
                dst.write(chunk)


MANIFEST = ".cosimrun-manifest.json"
"""The file of a cache entry listing its files with their sizes and modification times, written at extraction."""


def _listing(root: Path) -> dict[str, list[int]]:
    """Every file under *root* but the manifest: relative path -> ``[size, mtime_ns]`` (links as themselves)."""
    found = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            file = os.path.join(dirpath, name)
            relative = os.path.relpath(file, root).replace(os.sep, "/")
            if relative != MANIFEST:
                info = os.lstat(file)
                found[relative] = [info.st_size, info.st_mtime_ns]
    return found


def _write_manifest(root: Path) -> None:
    (root / MANIFEST).write_text(json.dumps(_listing(root), sort_keys=True))


def _damage(entry: Path) -> str | None:
    """What is wrong with cache entry *entry* (a file changed, missing or added since its extraction), ``""`` when
    it has no manifest (extracted before there were manifests), ``None`` when it is intact: a cheap check of sizes
    and modification times, no file is read."""
    try:
        recorded = json.loads((entry / MANIFEST).read_text())
    except FileNotFoundError:
        return ""  # extracted by a version without manifests: replaced without a word
    except (OSError, ValueError):
        return "its manifest is unreadable"
    if not isinstance(recorded, dict):
        return "its manifest is not a mapping"
    try:
        found = _listing(entry)
    except OSError as exc:
        return f"it cannot be listed ({exc})"
    for name in sorted(recorded.keys() | found.keys()):
        if name not in found:
            return f"{name} is missing"
        if name not in recorded:
            return f"{name} was added"
        if found[name] != recorded[name]:
            return f"{name} changed"
    return None


def _set_writable(root: Path, writable: bool) -> None:
    """Make the tree at *root* read-only (files 0444, directories 0555) or writable by its owner."""
    dirs = []
    for dirpath, _, filenames in os.walk(root):
        if writable:
            os.chmod(dirpath, 0o755)
        dirs.append(dirpath)
        for name in filenames:
            file = os.path.join(dirpath, name)
            if not os.path.islink(file):
                os.chmod(file, 0o644 if writable else 0o444)
    if not writable:
        for dirpath in reversed(dirs):
            os.chmod(dirpath, 0o555)


def _remove(path: Path) -> None:
    """Remove a (possibly read-only) directory tree; missing is fine."""
    with contextlib.suppress(OSError):
        _set_writable(path, True)
    shutil.rmtree(path, ignore_errors=True)


_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())


def _temp_dir(root: Path, kind: str) -> Path:
    """A new ``.kind-host-pid-xxxx`` directory in *root* (the pid is read now: workers are forked)."""
    return Path(tempfile.mkdtemp(prefix=f".{kind}-{_HOST}-{os.getpid()}-", dir=root))


def _owner_alive(name: str) -> bool | None:
    """Whether the process that made ``.kind-host-pid-xxxx`` still runs (``None``: it ran on another host)."""
    try:
        host, pid, _ = name.split("-", 1)[1].rsplit("-", 2)
        if host != _HOST:
            return None
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (ValueError, OSError):  # not our name pattern, or another user's process
        return True
    return True


@contextlib.contextmanager
def _locked(root: Path, exclusive: bool, wait: bool = False) -> Iterator[bool]:
    """Hold the cache's advisory lock: shared by users, exclusive for cleanup (non-blocking unless *wait*: the
    repair of a damaged entry); yields success."""
    if fcntl is None:
        yield True
        return
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB)) if exclusive else fcntl.LOCK_SH)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _clean(root: Path, settings: FMUSettings) -> None:
    """Remove stale entries and the temporary dirs and private copies of dead processes (skipped when busy).

    A ``.tmp-*`` extraction goes when its process is gone or after an hour, a
    ``.private-*`` copy when its process is gone (from another host, whose
    processes cannot be asked: after the cache's age limit).
    """
    now = time.time()
    with _locked(root, exclusive=True) as ok:
        if not ok:
            return
        for entry in root.iterdir():
            try:
                age = now - entry.lstat().st_mtime
            except OSError:
                continue
            name, max_age = entry.name, settings.max_age_days * 86400.0
            if _ENTRY.fullmatch(name):
                stale = age > max_age
            elif name.startswith(".tmp-"):
                stale = age > TMP_MAX_AGE_S or _owner_alive(name) is False
            elif name.startswith(".private-"):
                alive = _owner_alive(name)
                stale = alive is False or (alive is None and age > max_age)
            else:
                stale = False
            if stale and entry.is_dir() and not entry.is_symlink():
                _remove(entry)


_CLEANED: set[Path] = set()
"""Cache directories this process has cleaned."""
_HASHES: dict[tuple[str, int, int], str] = {}


def _file_hash(path: Path) -> str:
    """SHA-256 of the file at *path* (computed once per file version and process)."""
    info = path.stat()
    key = (str(path), info.st_mtime_ns, info.st_size)
    digest = _HASHES.get(key)
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(MiB), b""):
                h.update(chunk)
        digest = _HASHES[key] = h.hexdigest()
    return digest


def cached_extraction(path: Path, settings: FMUSettings | None = None) -> Path:
    """The read-only extracted directory of FMU *path* in the cache, extracted now when it is not there.

    Safe against other threads and processes doing the same; the first call
    in a process for a cache directory also cleans it (see :func:`_clean`).
    """
    settings = settings or FMUSettings.from_environment()
    root = settings.cache_root
    try:
        digest = _file_hash(path)
    except OSError as exc:
        raise FMUFileError(f"cannot read FMU {str(path)!r}: {exc}") from exc
    entry = root / digest
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if root not in _CLEANED:
            _CLEANED.add(root)
            _clean(root, settings)
        with _locked(root, exclusive=False):
            damage = _damage(entry) if entry.is_dir() else None
            if entry.is_dir() and damage is None:
                os.utime(entry)
                return entry
    except OSError as exc:
        raise FMUFileError(f"cannot use the FMU cache {str(root)!r} (set {ENV_CACHE} to another directory): "
                           f"{exc}") from exc
    tmp: Path | None = None
    try:
        with zipfile.ZipFile(path) as zf:
            check_archive(zf, path, settings)  # before anything of the FMU is written
            tmp = _temp_dir(root, "tmp")
            _extract(zf, path, tmp)
        _write_manifest(tmp)
        _set_writable(tmp, False)
        if damage is not None:
            _replace_damaged(root, entry, path, damage)
        with _locked(root, exclusive=False):
            try:
                os.rename(tmp, entry)
            except OSError:
                if not entry.is_dir():
                    raise
                _remove(tmp)  # another process was faster (or repaired the entry): use its copy
            os.utime(entry)
    except FMUError:
        if tmp is not None:
            _remove(tmp)
        raise
    except (OSError, zipfile.BadZipFile, EOFError, NotImplementedError, RuntimeError) as exc:
        if tmp is not None:
            _remove(tmp)
        reason = str(exc).replace(f"{tmp}{os.sep}", "") if tmp is not None else str(exc)  # paths in the FMU
        raise FMUFileError(f"cannot extract FMU {str(path)!r}: {reason}") from exc
    return entry


def _replace_damaged(root: Path, entry: Path, path: Path, damage: str) -> None:
    """Move the damaged cache *entry* of FMU *path* aside (removed at once; a process still using its files keeps
    them) for a fresh extraction to take its place, unless another process has repaired it meanwhile."""
    with _locked(root, exclusive=True, wait=True):
        if not entry.is_dir() or _damage(entry) is None:
            return
        if damage:
            _log.warning("the cached extraction of FMU %r was damaged (%s); extracted again", str(path), damage)
        grave = _temp_dir(root, "tmp")  # a name the cleanup removes should this process die now
        grave.rmdir()
        os.rename(entry, grave)  # in the same directory: allowed although the entry is read-only
    _remove(grave)


@dataclass
class Extraction:
    """An extracted FMU directory in use: shared (the read-only cache entry) or a private, writable copy."""

    key: str
    directory: Path
    shared: bool
    users: int = 0


_EXTRACTIONS: dict[str, Extraction] = {}
_EXTRACTION_LOCK = threading.Lock()
_PRIVATE = itertools.count(1)
_DEFERRED: list[Extraction] = []
"""Releases that found the lock taken: a finalizer (``__del__`` of an FMU component the garbage collector runs
while its thread holds the lock) must not wait for it; the next holder drops them."""


@contextlib.contextmanager
def _extractions() -> Iterator[dict[str, Extraction]]:
    """Hold the lock on the process's extractions, dropping deferred releases on entry and on exit."""
    with _EXTRACTION_LOCK:
        _drop_deferred()
        try:
            yield _EXTRACTIONS
        finally:
            _drop_deferred()


def _drop_deferred() -> None:
    while _DEFERRED:
        _drop(_DEFERRED.pop())


def _drop(ex: Extraction) -> None:
    """Drop one use of *ex* (the lock held); the last use forgets it and removes a private copy."""
    ex.users -= 1
    if ex.users <= 0 and _EXTRACTIONS.get(ex.key) is ex:
        del _EXTRACTIONS[ex.key]
        if not ex.shared:
            _remove(ex.directory)


def acquire_extraction(path: Path, *, once_per_process: bool = False, private: bool = False) -> Extraction:
    """The extracted directory of *path*: the cache entry, shared by every user in the process.

    A writable private copy instead when *private*, or when *once_per_process*
    (``canBeInstantiatedOnlyOncePerProcess``) and another user holds the
    shared one (its library must be loaded from another file).
    """
    with _extractions():
        entry = cached_extraction(path)
        key = entry.name
        ex = _EXTRACTIONS.get(key)
        if private or (once_per_process and ex is not None and ex.users > 0):
            directory = _temp_dir(entry.parent, "private")
            try:
                shutil.copytree(entry, directory, dirs_exist_ok=True)
                _set_writable(directory, True)
            except OSError as exc:
                _remove(directory)
                raise FMUFileError(f"cannot copy the extracted FMU {str(path)!r} to {str(directory)!r}: {exc}") from exc
            key, ex = f"{key}#{next(_PRIVATE)}", None
            ex = _EXTRACTIONS[key] = Extraction(key, directory, shared=False)
        elif ex is None:
            ex = _EXTRACTIONS[key] = Extraction(key, entry, shared=True)
        ex.users += 1
        return ex


def release_extraction(ex: Extraction, *, wait: bool = True) -> None:
    """Drop one use; the last user's release forgets it (and removes it when it is a private copy).

    A finalizer passes ``wait=False``: the garbage collector may run it on a thread that holds the lock (inside
    :func:`acquire_extraction`), where waiting would deadlock; a taken lock then leaves the release to its holder.
    """
    if not _EXTRACTION_LOCK.acquire(blocking=wait):
        _DEFERRED.append(ex)
        return
    try:
        _drop(ex)
        _drop_deferred()
    finally:
        _EXTRACTION_LOCK.release()


def extracted_directories() -> list[Path]:
    """Directories of extracted FMUs in use in this process (for tests and diagnostics)."""
    with _extractions() as extractions:
        return [ex.directory for ex in extractions.values()]


@atexit.register
def _remove_private_copies() -> None:
    with _extractions():
        for ex in _EXTRACTIONS.values():
            if not ex.shared:
                _remove(ex.directory)
        _EXTRACTIONS.clear()

