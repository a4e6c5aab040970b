"""The files a run reads besides its config (FMUs, tables), by content.

A run records them in its results (the root attribute ``inputs``) and a sweep job in its fingerprint: a resume
runs a job again when one of them changed since (its config alone cannot say), and takes it over when they hold
the same bytes, whatever their times. A file's digest is computed once per process and version of the file
(its size, modification and change times, inode), so that a worker's jobs of one FMU read it once.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cosimrun.runner.configtext import input_files

_digests: dict[tuple[str, int, int, int, int], str] = {}
_KEPT = 4096


def digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of the file *path* (hex, 32 digits); None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (os.fspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    found = _digests.get(key)
    if found is None:
        sha = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    sha.update(block)
        except OSError:
            return None
        if len(_digests) >= _KEPT:
            _digests.clear()
        found = _digests[key] = sha.hexdigest()[:32]
    return found


def recorded(cfg: Mapping[str, Any]) -> str:
    """What a run of the plain config *cfg* records of its input files: ``{path: digest}`` as JSON, ``""`` when it
    reads none."""
    found = {str(path): digest(path) for path in input_files(cfg)}
    return json.dumps(found, sort_keys=True) if found else ""


def changed(text: str) -> str | None:
    """The first input file of a record (:func:`recorded`) that is missing or holds other bytes now (None when
    all are as recorded, or the record is empty or unreadable)."""
    try:
        files = json.loads(text) if text else {}
    except ValueError:
        return None
    if not isinstance(files, dict):
        return None
    for path, was in files.items():
        if digest(Path(path)) != was:
            return str(path)
    return None
