"""The extraction cache: one extracted directory per FMU file and process, removed after its last user.

Directories are keyed by the file's SHA-256, so every component of the same FMU
shares one; an FMU that declares ``canBeInstantiatedOnlyOncePerProcess`` gets a
private copy per user (``private=True``). The last :func:`release_extraction`
removes the directory, and whatever is left is removed at interpreter exit.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from cosimrun.components.fmu.errors import FMUError


@dataclass
class Extraction:
    """One extracted FMU directory and how many users hold it."""

    key: str
    directory: Path
    users: int = 0


_EXTRACTIONS: dict[str, Extraction] = {}
_EXTRACTION_LOCK = threading.Lock()
_HASHES: dict[tuple[str, int, int], str] = {}
_PRIVATE = itertools.count(1)


def _file_hash(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    digest = _HASHES.get(key)
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        digest = _HASHES[key] = h.hexdigest()
    return digest


def acquire_extraction(path: Path, private: bool = False) -> Extraction:
    """The extracted directory of *path*, shared by every user in the process (unless *private*)."""
    import fmpy

    key = _file_hash(path)
    with _EXTRACTION_LOCK:
        ex = _EXTRACTIONS.get(key)
        if ex is not None and private and ex.users > 0:
            key, ex = f"{key}#{next(_PRIVATE)}", None
        if ex is None:
            directory = Path(tempfile.mkdtemp(prefix="cosimrun-fmu-"))
            try:
                fmpy.extract(str(path), str(directory))
            except Exception as exc:
                shutil.rmtree(directory, ignore_errors=True)
                raise FMUError(f"cannot extract FMU {str(path)!r}: {exc}") from exc
            ex = _EXTRACTIONS[key] = Extraction(key, directory)
        ex.users += 1
        return ex


def release_extraction(ex: Extraction) -> None:
    """Drop one use; the last user's release removes the directory."""
    with _EXTRACTION_LOCK:
        ex.users -= 1
        if ex.users <= 0 and _EXTRACTIONS.get(ex.key) is ex:
            del _EXTRACTIONS[ex.key]
            shutil.rmtree(ex.directory, ignore_errors=True)


def extracted_directories() -> list[Path]:
    """Directories currently holding extracted FMUs (for tests and diagnostics)."""
    with _EXTRACTION_LOCK:
        return [ex.directory for ex in _EXTRACTIONS.values()]


@atexit.register
def _remove_extractions() -> None:
    with _EXTRACTION_LOCK:
        for ex in _EXTRACTIONS.values():
            shutil.rmtree(ex.directory, ignore_errors=True)
        _EXTRACTIONS.clear()


