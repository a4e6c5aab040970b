"""One results file per chunk of sweep jobs (``storage.layout: per_chunk``), a group per job.

A dask worker runs a chunk's jobs one after the other (:func:`cosimrun.runner.worker.run_hydra_chunk`). Under
:func:`chunk_results` the runs of those jobs whose ``storage.layout`` is ``per_chunk`` add the group
``/runs/<job number>`` to the chunk's file instead of creating a file each:
``<sweep dir>/chunks/<shard>/chunk-<first job>-<launch>-<attempt>.h5`` (``<shard>`` is ``<first job // 1000>k``),
made when the first such job starts, opened anew for each job after it and closed when the chunk ends. A group
holds what a run's own file holds at its root (attributes with ``status``, ``config_yaml`` and the checksums,
components, tables) and reaches the disk when its run closes it, status last: a worker killed in the middle of a
chunk keeps every job it finished, and the group of the job it was running says ``running`` (the driver runs that
job again, in another file).

A run in a group is addressed as ``<file>::<group>`` (:func:`split_address`), the address the sweep index's
``path`` column holds and :func:`~cosimrun.storage.results.load_results` reads. The job's folder gets a pointer
to it, ``results.ref`` (:func:`write_ref`), so that the job's folder is read the same way whatever the layout.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py

from cosimrun.storage.hdf5 import ADDRESS_SEP, open_to_write, run_address

REF_FILE = "results.ref"
"""In a job's folder under ``per_chunk``: the address of the job's results (one line, relative to the folder)."""
RUNS = "runs"
"""The group of a chunk's file that holds one group per job, named by job number."""


def split_address(path: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """``(file, group)`` of a results address ``<file>::<group>``; ``(path, None)`` for a plain file path."""
    text = os.fspath(path)
    file, sep, group = text.partition(ADDRESS_SEP)
    return (Path(file), group) if sep else (Path(text), None)


@contextlib.contextmanager
def open_results(path: str | os.PathLike[str], locking: bool | str = False) -> Iterator[h5py.Group]:
    """The root of the results at *path* opened for reading: a file, or for an address ``<file>::<group>`` the
    group (``FileNotFoundError`` naming the address when the file has no such group)."""
    file, group = split_address(path)
    with h5py.File(file, "r", locking=locking) as f:
        if group is None:
            yield f
            return
        if group not in f:
            raise FileNotFoundError(f"{file} has no group {group} (no run at {path})")
        yield f[group]


def write_ref(job_dir: str | os.PathLike[str], address: str) -> None:
    """Point *job_dir* at the results *address* (:data:`REF_FILE`, the path relative to the folder)."""
    file, group = split_address(address)
    Path(job_dir).mkdir(parents=True, exist_ok=True)
    rel = Path(os.path.relpath(file, job_dir)).as_posix()
    Path(job_dir, REF_FILE).write_text(f"{run_address(rel, str(group))}\n", encoding="utf-8")


def read_ref(job_dir: str | os.PathLike[str]) -> str | None:
    """The results address :data:`REF_FILE` in *job_dir* points at (``None`` without one)."""
    try:
        text = Path(job_dir, REF_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    file, group = split_address(text)
    return run_address(os.path.normpath(Path(job_dir, file)), group) if group else None


def drop_ref(job_dir: str | os.PathLike[str]) -> None:
    """Remove a pointer an earlier run under ``per_chunk`` left in *job_dir* (the job now writes its own file)."""
    with contextlib.suppress(OSError):
        Path(job_dir, REF_FILE).unlink()


@dataclass
class ChunkFile:
    """The results file of one chunk of jobs, opened when its first job asks for it (:meth:`file`)."""

    path: Path
    num: int = -1
    """The job of the chunk running now (its group is ``/runs/<num>``)."""
    _file: h5py.File | None = field(default=None, repr=False)
    _tried: int = 0
    _opened_for: int = field(default=-1, repr=False)
    """The job the file was opened (or made) for."""

    def file(self) -> h5py.File:
        """The open file: made at :attr:`path` the first time, beside it (``-<n>`` before the suffix) when a file of
        that name exists already or a write error made HDF5 let go of the first.

        Each job gets the file opened anew (the last job left it flushed whole): HDF5 keeps the metadata of every
        object a file has opened in its cache, and a flush goes over all of it, so that the jobs of a chunk would
        each flush the metadata of all the jobs before it."""
        if self._file is not None and self._file.id.valid:
            if self._opened_for == self.num:
                return self._file
            where = self._file.filename
            self._file.close()
            self._file = None
            with contextlib.suppress(OSError):  # gone meanwhile: the job goes to a new file beside it
                self._file = open_to_write(where)
                self._opened_for = self.num
                return self._file
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            path = self.path.with_stem(f"{self.path.stem}-{self._tried}") if self._tried else self.path
            self._tried += 1
            try:
                self._file = h5py.File(path, "x", track_order=True, locking=False)
            except FileExistsError:
                continue
            self._file.create_group(RUNS, track_order=True)
            self._file.flush()  # a file readers can open from the start, whenever its worker dies
            self._opened_for = self.num
            return self._file

    @property
    def group(self) -> str:
        """The group of the job running now."""
        return f"{RUNS}/{self.num}"

    def close(self) -> None:
        if self._file is not None and self._file.id.valid:
            self._file.close()
        self._file = None


_current: contextvars.ContextVar[ChunkFile | None] = contextvars.ContextVar("cosimrun_chunk_file", default=None)


def current_chunk() -> ChunkFile | None:
    """The chunk whose jobs run now (inside :func:`chunk_results`), else ``None``."""
    return _current.get()


@contextlib.contextmanager
def chunk_results(path: str | os.PathLike[str]) -> Iterator[ChunkFile]:
    """Runs under ``per_chunk`` in this block write into the chunk file *path* (:attr:`ChunkFile.num` says whose
    group); the file is closed at the end."""
    chunk = ChunkFile(Path(path))
    token = _current.set(chunk)
    try:
        yield chunk
    finally:
        _current.reset(token)
        chunk.close()
