"""Streaming HDF5 writer for run results, laid out netCDF4-style.

Layout (see ``DESIGN.md``, "HDF5 results")::

    /                       root attributes (format, status, experiment, t0, tf, ...)
    /components/<comp>/     unlimited ``time`` dimension scale, ``micro``, one dataset per port
    /events/                time, micro, component, event over an ``event`` dimension
    /mode_switches/         time, component, from_mode, to_mode over a ``switch`` dimension
    /stats                  master statistics as attributes

The file is written as ``<path>.partial`` and renamed to ``<path>`` by
:meth:`HDF5Writer.close`, so a file under the final name was closed properly
(its ``status`` says whether the run completed). Data is flushed chunk by chunk:
a crash keeps everything flushed so far in the ``.partial`` file. At close the
writer records each dataset's length and the CRC-32 of the data it wrote
(``data_crc32``), which :func:`cosimrun.storage.verify.verify_results` checks.

Write errors (a full disk, a file-size limit) never leave a damaged file when
they can be foreseen: before adding data the writer checks that the file-size
limit and the free space leave room for what it has to write plus a reserve
for closing; when they do not it raises :class:`~cosimrun.errors.ResultsWriteError`
without writing. :meth:`HDF5Writer.close` then drops what was added since the
last flush and records the status, so the file keeps every sample up to its
last flushed block. When the HDF5 library itself fails to write, nothing more
is written and the file is released as it is (``.partial``, status
``running``), so HDF5 never flushes a broken cache at exit. Each change to the
file is whole or undone: an interrupt half-way through an append drops it.

Dimension scales carry the ``_Netcdf4Dimid``/``_Netcdf4Coordinates`` attributes
netCDF-C writes, groups track creation order, booleans are ``int8`` with the CF
attribute ``dtype="bool"`` (xarray decodes them back to ``bool``) and strings are
variable-length UTF-8, so h5py, xarray (``engine="h5netcdf"``), netCDF-C tools and
HDFView read the file without cosimrun.

The module is longer than most: it is one class, :class:`HDF5Writer`, whose
every write shares the same state (what changed since the last flush, the undo
of the change in progress, the room check, the checksums), so it stays whole.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import functools
import io
import json
import math
import os
import re
import threading
import time as _time
import traceback as _traceback
import weakref
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from cosimrun.errors import (
    ConfigError,
    DuplicateNameError,
    MissingNameError,
    ResultsDataError,
    ResultsStateError,
    ResultsWriteError,
    UnknownNameError,
)

try:
    import resource
except ImportError:  # not on Windows: no file-size limit to honour
    resource = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from cosimrun.core.history import ComponentHistory, SystemHistory
    from cosimrun.system.system import RunResult

FORMAT = "cosimrun-results"
FORMAT_VERSION = 1
STATUSES = ("running", "complete", "failed", "interrupted")
PORT_TYPES = ("real", "int", "bool", "string", "event")
RESERVED_PORT_NAMES = frozenset({"time", "micro"})
CHECKSUMS_ATTR = "data_crc32"
"""Root attribute written at close: ``{dataset path: [length, CRC-32 of its data]}`` as JSON."""
_RESERVED_ROOT_ATTRS = frozenset({"format", "format_version", "status", CHECKSUMS_ATTR})
_PURE_DIM = "This is a netCDF dimension but not a netCDF variable."
_STR = h5py.string_dtype("utf-8")
_DTYPES: dict[str, Any] = {"real": np.float64, "int": np.int64, "bool": np.int8, "event": np.int8, "string": _STR}
CLOSE_RESERVE = 32 * 1024
"""Bytes kept free for closing a file (status, error, traceback, checksums) beyond what a flush writes: what
:meth:`HDF5Writer.close` needs with a traceback of some kilobytes, small enough that a file-size limit of a few
hundred kilobytes still keeps the blocks that fit."""
_CHUNK_OVERHEAD = 1024
"""Bytes a flush may write for a changed compressed dataset besides its data (chunk index, object header)."""
_CACHED_ITEM_BYTES = 16
"""Bytes per row of the chunk cache of a dataset a writer keeps open: two chunks of complex or 16-byte items, the
last one a run appends to and the one it filled. HDF5's default (1 MB per dataset) would keep a long run's
chunks in memory as long as the run."""
_CLOSE_BASE = 8 * 1024
"""Bytes closing writes besides the error, the traceback and the checksums (attributes, metadata)."""
_ERRNO = re.compile(r"errno = (\d+)")
_EVENTS = "/events/event"
"""The events table's dimension (and column): its length is the file's number of events."""
ADDRESS_SEP = "::"
"""Between a shared file and the group that holds one run in a results address: ``chunk.h5::/runs/12``."""


def run_address(path: str | os.PathLike[str], group: str) -> str:
    """The results address of the run in *group* of the shared file *path* (``chunk.h5::/runs/12``)."""
    return f"{os.fspath(path)}{ADDRESS_SEP}/{group.strip('/')}"


def write_error(path: str | os.PathLike[str], exc: BaseException | int) -> ResultsWriteError:
    """A :class:`ResultsWriteError` for writing *path*: *exc* is an h5py error (whose message names the OS
    error), an ``OSError`` or an errno."""
    if isinstance(exc, int):
        code: int | None = exc
        reason = ""
    else:
        found = _ERRNO.search(str(exc))
        code = int(found.group(1)) if found else getattr(exc, "errno", None)
        reason = (str(exc).splitlines() or [type(exc).__name__])[0]
    if code:
        reason = f"[Errno {code}] {os.strerror(code)}"
    return ResultsWriteError(str(path), reason, code)


def abandon_file(f: h5py.File) -> None:
    """Release *f* without writing anything more: HDF5's writes go to the null device.

    After a failed write HDF5 cannot flush its cache, so closing the file (or the
    library's clean-up at exit, which crashes on it) would only fail again. What
    the file held at its last successful flush stays on disk.
    """
    with contextlib.suppress(Exception):
        fd = f.id.get_vfd_handle()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, fd)
        os.close(null)
    with contextlib.suppress(Exception):
        f.close()


def check_room(f: h5py.File | h5py.Group, path: str | os.PathLike[str], nbytes: int) -> None:
    """Raise :class:`ResultsWriteError` for *path* (writing nothing) unless *nbytes* more fit in the open file *f*
    (or the file of the group *f*) under the file-size limit and in the free space of the file system: HDF5 does
    not recover from a failed write."""
    if resource is not None:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY:
            file = f if isinstance(f, h5py.File) else f.file  # made for the size only: h5py makes a new one
            if file.id.get_filesize() + nbytes > limit:
                raise write_error(path, _errno.EFBIG)
    fs = os.statvfs(os.path.dirname(os.fspath(path)) or ".")
    if nbytes > fs.f_bavail * fs.f_frsize:
        raise write_error(path, _errno.ENOSPC)


@contextlib.contextmanager
def written_whole(path: str | os.PathLike[str], tmp: str | os.PathLike[str]) -> Iterator[h5py.File]:
    """A new HDF5 file made in memory; at the end of the block it is written to *tmp* in one piece and renamed to
    *path*.

    A full disk or a file-size limit then fails an ordinary write, which raises
    :class:`ResultsWriteError` and leaves *path* as it was (and no *tmp*), instead
    of one of HDF5's, which it cannot recover from. The file's image is held once,
    in a growing buffer (HDF5's in-memory driver would need a second copy to write it).
    """
    buffer = io.BytesIO()
    with h5py.File(buffer, "w", track_order=True) as f:
        yield f
    tmp = Path(tmp)
    try:
        with open(tmp, "wb") as out:
            out.write(buffer.getbuffer())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise write_error(path, exc) from exc


@contextlib.contextmanager
def writing(path: str | os.PathLike[str], mode: str, **kwargs: Any) -> Iterator[h5py.File]:
    """``h5py.File(path, mode, **kwargs)`` closed at the end of the block; a write error in the block or at
    closing releases the file (:func:`abandon_file`) and raises :class:`ResultsWriteError` instead of h5py's
    ``RuntimeError`` and a crash at exit."""
    try:
        f = h5py.File(path, mode, **kwargs)
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        yield f
    except BaseException as exc:
        abandon_file(f)
        if isinstance(exc, OSError | RuntimeError) and not isinstance(exc, ResultsWriteError):
            raise write_error(path, exc) from exc
        raise
    try:
        f.close()
    except (OSError, RuntimeError) as exc:
        abandon_file(f)
        raise write_error(path, exc) from exc


TABLE_DIMENSIONS = {"events": "event", "mode_switches": "switch", "coupling_error": "connection", "steps": "attempt",
                    "global_error": "output"}
"""The dimension of each table group."""
COUPLING_NUMBERS = ("max", "rms", "time_of_max", "range", "relative")
"""The numeric columns of ``/coupling_error`` (besides ``connection`` and ``unit``)."""
GLOBAL_ERROR_NUMBERS = ("max", "time_of_max", "scale", "tolerance", "ratio")
"""The numeric columns of ``/global_error`` (besides ``output`` and ``unit``)."""


def partial_path(path: str | os.PathLike[str]) -> Path:
    """The name a results file has while it is being written: ``<path>.partial``."""
    path = Path(path)
    return path.with_name(path.name + ".partial")


def written_path(path: str | os.PathLike[str]) -> Path:
    """*path*, or its ``.partial`` file while only that exists (a run that did not close its file)."""
    path = Path(path)
    return partial_path(path) if not path.exists() and partial_path(path).exists() else path


def check_name(name: str, what: str = "name") -> str:
    """Return *name* if it can name an HDF5 group or dataset, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not name:
        raise ConfigError(None, f"{what} must be a non-empty string, got {name!r}")
    if "/" in name:
        raise ConfigError(None, f"{what} {name!r} contains '/', which HDF5 reserves as the path separator")
    if name in (".", "..") or "\x00" in name:
        raise ConfigError(None, f"{what} {name!r} is not a valid HDF5 name")
    return name


def to_attr(value: Any) -> Any:
    """Convert *value* to something h5py stores natively (never pickled); ``None`` means skip.

    Strings become UTF-8, bools ``int8``, sequences arrays (strings: variable-length
    UTF-8), mappings and mixed sequences a JSON string, anything else ``str(value)``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return np.int8(bool(value))
    if isinstance(value, int | float | np.integer | np.floating):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.astype(np.int8) if value.dtype.kind == "b" else value
    if isinstance(value, list | tuple | np.ndarray):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            return np.array(items, dtype=_STR)
        if all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) for v in items):
            return np.asarray(items)
        return json.dumps(items, default=str)
    return str(value)


def set_attr(obj: h5py.HLObject, name: str, value: Any, *, new: bool = False) -> None:
    """``obj.attrs[name] = value``, stored alike, without h5py's checks and conversions (which a results file's few
    hundred attributes notice): an attribute of a string, a number or a numeric array is created (an existing one
    deleted first, as h5py does; with *new* the caller knows there is none, and HDF5 is not asked) and written
    directly, with HDF5 types made once per process; anything else goes through h5py."""
    key = name.encode("utf-8")
    data = _attr_data(value)
    if data is None:
        obj.attrs[name] = value
        return
    if not new and h5py.h5a.exists(obj.id, key):  # replaced as h5py replaces it: deleted, then made anew
        h5py.h5a.delete(obj.id, key)
    file_type, memory_type = _attr_types(data.dtype)
    space = _SCALAR_SPACE if data.shape == () else h5py.h5s.create_simple(data.shape)
    h5py.h5a.create(obj.id, key, file_type, space).write(data, mtype=memory_type)


def _attr_data(value: Any) -> np.ndarray | None:
    """The array :func:`set_attr` writes for *value* (a string, a number or a numeric array), None for anything
    else (left to h5py)."""
    if isinstance(value, str):
        return np.array(value, dtype=_STR)
    if isinstance(value, float | int | np.integer | np.floating) and not isinstance(value, bool):
        return np.asarray(value)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        return np.ascontiguousarray(value)
    return None


_ATTR_TYPES: dict[str, tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]] = {}
"""``dtype.str`` -> the file and memory types :func:`set_attr` writes an attribute of that dtype with (only its
UTF-8 strings are of object dtype)."""
_SCALAR_SPACE = h5py.h5s.create(h5py.h5s.SCALAR)


def _attr_types(dtype: np.dtype) -> tuple[h5py.h5t.TypeID, h5py.h5t.TypeID]:
    """The HDF5 types of an attribute of *dtype* in the file and in memory, made once per process."""
    types = _ATTR_TYPES.get(dtype.str)
    if types is None:
        types = _ATTR_TYPES[dtype.str] = (h5py.h5t.py_create(dtype, logical=True), _memory_type(dtype))
    return types


_MEMORY_TYPES: dict[str, h5py.h5t.TypeID] = {}
"""``dtype.str`` -> the HDF5 type h5py reads an array of that dtype from in memory (:func:`_memory_type`)."""


def _memory_type(dtype: np.dtype) -> h5py.h5t.TypeID | None:
    """The HDF5 memory type h5py writes an array of *dtype* (a number, a bool or an object of text) from, made once
    per process; None for other dtypes (h5py makes it for each write)."""
    if dtype.kind not in "biufO":
        return None
    found = _MEMORY_TYPES.get(dtype.str)
    if found is None:  # objects go to HDF5 as h5py's Python-object type whatever their metadata (vlen str)
        found = _MEMORY_TYPES[dtype.str] = h5py.h5t.py_create(dtype)
    return found


def modify_attr(obj: h5py.HLObject, name: str, value: Any) -> None:
    """``obj.attrs.modify(name, value)`` for an attribute *obj* has, of the type and shape of *value* (what
    :func:`set_attr` stores for it): written in place through HDF5 directly, from the array :func:`set_attr` would
    write (h5py's checks and the attribute's type read back first, which a results file's root attributes
    notice)."""
    attr = h5py.h5a.open(obj.id, name.encode("utf-8"))
    data = _attr_data(value)
    if data is None:
        attr.write(np.asarray(value, order="C", dtype=None if isinstance(value, np.ndarray) else attr.dtype))
    else:
        attr.write(data, mtype=_attr_types(data.dtype)[1])


def _root_attrs(items: Mapping[str, Any] | None) -> dict[str, Any]:
    """Root attributes *items* as stored (:func:`to_attr`), ``None`` values left out; the writer's own refused."""
    items = items or {}
    reserved = _RESERVED_ROOT_ATTRS & items.keys()
    if reserved:
        raise ConfigError(None, f"root attributes {sorted(reserved)} are managed by the writer")
    converted = {check_name(key, "attribute name"): to_attr(value) for key, value in items.items()}
    return {key: value for key, value in converted.items() if value is not None}


def _port_layout(ports: Mapping[str, tuple[str | None, Any]]) -> dict[str, tuple[str | None, str]]:
    """*ports* (``{port: (unit or None, port type or its name)}``) with units as text and types by name: how a
    layout declared up front is kept and compared with the ports :meth:`HDF5Writer.add_component` is given."""
    return {port: (None if unit is None else str(unit), str(getattr(kind, "value", kind)))
            for port, (unit, kind) in ports.items()}


def _signature(value: Any) -> tuple[Any, ...]:
    """What an attribute's stored type depends on: equal signatures, equal HDF5 types and shapes."""
    if isinstance(value, str):
        return ("str",)
    data = np.asarray(value)
    return (type(value).__name__, data.dtype.str, data.shape)


def _placeholder(value: Any) -> Any:
    """A value stored with the type and shape of *value* (an image's root attributes hold these until a run
    writes its own in place)."""
    if isinstance(value, str):
        return ""
    if isinstance(value, np.ndarray):
        return np.zeros_like(value)
    return type(value)(0)


@dataclass(frozen=True)
class _Layout:
    """An empty results file of one layout, as :func:`_layout_image` keeps it."""

    image: bytes
    """The file's image."""
    dimid: int
    """The next netCDF dimension id."""
    scales: tuple[tuple[bytes, bytes, tuple[bytes, ...]], ...]
    """``(group, its dimension scale, the group's other datasets)`` for each group of the file that has a scale:
    what :func:`_copy_layout` attaches anew, without looking for it in the file."""
    dtypes: Mapping[str, np.dtype]
    """Every dataset's dtype by its path (``/components/k/y``): what a run's writes go by without asking HDF5 for
    each file."""


_LAYOUTS: dict[tuple[Any, ...], _Layout] = {}
"""Images of empty results files by layout, most recently used last (:func:`_layout_image`)."""
_LAYOUTS_KEPT = 8
_layouts_lock = threading.Lock()


def _layout_image(key: tuple[Any, ...], root: Mapping[str, Any], filters: Mapping[str, Any], chunk_size: int,
                  components: Mapping[str, Mapping[str, tuple[str | None, str]]]) -> _Layout:
    """The empty results file with root attributes *root* and *components*: made in memory by the writer's own
    code the first time, then kept for the process (at most :data:`_LAYOUTS_KEPT` layouts)."""
    with _layouts_lock:
        kept = _LAYOUTS.pop(key, None)
        if kept is None:
            builder = HDF5Writer("layout.h5", experiment=root["experiment"],
                                 attrs={k: v for k, v in root.items() if k not in ("experiment", "started")},
                                 compression=filters.get("compression"),
                                 compression_opts=filters.get("compression_opts"), chunk_size=chunk_size,
                                 _in_memory=True)
            for name, ports in components.items():
                builder.add_component(name, ports)
            builder.file.flush()
            kept = _Layout(builder.file.id.get_file_image(), builder._dimid, _scales(builder.file),
                           _dataset_dtypes(builder.file))
            builder.file.close()
            if len(_LAYOUTS) >= _LAYOUTS_KEPT:
                del _LAYOUTS[next(iter(_LAYOUTS))]
        _LAYOUTS[key] = kept
        return kept


def _dataset_dtypes(f: h5py.File) -> dict[str, np.dtype]:
    """The dtype of every dataset of *f* by its absolute path (:attr:`_Layout.dtypes`)."""
    found: dict[str, np.dtype] = {}
    f.visititems(lambda name, obj: found.update({f"/{name}": obj.dtype}) if isinstance(obj, h5py.Dataset) else None)
    return found


CHUNK_ROWS = 4096
"""Rows per HDF5 chunk of a run's datasets, at most (:func:`chunk_rows`)."""
SMALLEST_CHUNK = 64


def chunk_rows(samples: int) -> int:
    """Rows per HDF5 chunk for a run expected to record about *samples* samples: the power of two that holds them,
    from :data:`SMALLEST_CHUNK` to :data:`CHUNK_ROWS`. A short run then compresses a few rows per dataset rather
    than whole chunks of 4096 mostly empty rows, and its file is no larger; a run recording more samples than
    expected only adds chunks."""
    return min(CHUNK_ROWS, max(SMALLEST_CHUNK, 1 << max(samples - 1, 0).bit_length()))


COMPACT_ATTRS = 256
"""Attributes the root and ``/stats`` keep in their object header before HDF5 moves them to dense storage (a
B-tree and a heap, which make each one written several times dearer): a run's root holds about 25 and its
``/stats`` about 30, where HDF5's default moves them at 8. Readers see no difference."""


def _creation_order(file: bool = False) -> h5py.h5p.PropGCID:
    """Creation properties of a group (of a file with *file*) that track and index the creation order of links
    and attributes, as h5py's ``track_order=True`` does, and keep up to :data:`COMPACT_ATTRS` attributes
    compact."""
    plist = h5py.h5p.create(h5py.h5p.FILE_CREATE if file else h5py.h5p.GROUP_CREATE)
    order = h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED
    plist.set_link_creation_order(order)
    plist.set_attr_creation_order(order)
    plist.set_attr_phase_change(COMPACT_ATTRS, COMPACT_ATTRS - 1)
    if file:
        plist.set_obj_track_times(False)  # as h5py creates a file
    return plist


@functools.lru_cache(maxsize=2)
def _file_access(in_memory: bool = False) -> h5py.h5p.PropFAID:
    """The access properties of a results file (made once): as h5py's ``File(..., locking=False)`` sets them, or
    its in-memory driver without a file on disk."""
    access = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    access.set_libver_bounds(h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST)
    if in_memory:
        access.set_fapl_core(backing_store=False)
    else:  # other processes may read the file while it is written (see ``load_results``)
        access.set_file_locking(False, ignore_when_disabled=False)
    return access


@functools.lru_cache(maxsize=16)
def _dataset_access(chunk_size: int) -> h5py.h5p.PropDAID:
    """The access properties of the datasets a writer of chunks of *chunk_size* rows keeps open: a chunk cache of
    :data:`_CACHED_ITEM_BYTES` per row, made once per process and size (HDF5 copies them into each dataset)."""
    access = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
    access.set_chunk_cache(521, 2 * chunk_size * _CACHED_ITEM_BYTES, 1.0)
    return access


def _new_file(path: Path, *, in_memory: bool = False) -> h5py.File:
    """A new results file at *path* (in memory only with *in_memory*), without HDF5 file locking, its root made by
    :func:`_creation_order`."""
    fid = h5py.h5f.create(os.fsencode(path), h5py.h5f.ACC_TRUNC, fapl=_file_access(in_memory),
                          fcpl=_creation_order(file=True))
    return h5py.File(fid)


def _write_new(path: Path, data: bytes) -> None:
    """Write *data* to the file *path*, made anew; its folder is made when it is missing, not looked for before
    each file."""
    try:
        with open(path, "wb") as out:
            out.write(data)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            out.write(data)


def open_to_write(path: str | os.PathLike[str]) -> h5py.File:
    """The results file (or a chunk's file) *path* opened to be written, without HDF5 file locking: as
    ``h5py.File(path, "r+", locking=False)``, with the access properties made once."""
    return h5py.File(h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDWR, fapl=_file_access()))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _version() -> str:
    from cosimrun import __version__

    return __version__


class HDF5Writer:
    """Write one run's results to an HDF5 file, chunk by chunk.

    Use as a context manager: leaving the block normally closes with status
    ``complete``; an exception closes with ``failed`` (``interrupted`` for
    ``KeyboardInterrupt``) plus the error and traceback, keeping what was
    written, and is re-raised.

    A write that fails raises :class:`~cosimrun.errors.ResultsWriteError`; every
    later write raises it again, and :meth:`close` ends the file as described
    in the module docstring (never ``complete``).

    :meth:`close` may be called from another thread than the one writing (the
    command's watchdog does, see :meth:`close_open`) while that one is stuck
    outside the writer; two closes never interleave.

    *components* (``{component: {port: (unit, port type)}}``) declares up front
    the components :meth:`add_component` will add: the file is then made from
    an image of the empty file of that layout, kept for the process, and a
    sweep's jobs of one experiment do not create its groups, datasets and
    attributes one by one (the file holds the same objects in the same order).

    With an open *file* and a *group* the run is written into that new group of
    a file shared with other runs (a chunk of a sweep's jobs,
    :mod:`cosimrun.storage.chunkfile`) instead of a file of its own at *path*
    (then the shared file's name): the group holds what the file's root would,
    made from the same image (copied in, its dimension scales attached to the
    group's own), and :meth:`close` flushes it as it would the file, status
    last, but neither closes nor renames the shared file. :attr:`address`
    names the run either way.
    """

    _open: weakref.WeakSet[HDF5Writer] = weakref.WeakSet()
    """The writers whose file is open, for :meth:`close_open`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        experiment: str = "",
        attrs: Mapping[str, Any] | None = None,
        compression: str | None = "gzip",
        compression_opts: Any = 4,
        chunk_size: int = CHUNK_ROWS,
        components: Mapping[str, Mapping[str, tuple[str | None, str]]] | None = None,
        file: h5py.File | None = None,
        group: str | None = None,
        _in_memory: bool = False,
    ) -> None:
        if chunk_size < 1:
            raise ConfigError("chunk_size", f"must be positive, got {chunk_size}")
        if (file is None) != (group is None):
            raise ConfigError("group", "a results group is written into an open file: give both file and group")
        self.path = Path(path)
        self.group = group
        """The group of the open *file* that holds the run (a chunk of a sweep's file, see
        :mod:`cosimrun.storage.chunkfile`); ``None`` for a run in a file of its own, at *path*."""
        self.partial_path = partial_path(self.path) if group is None else self.path
        """The file written until it is closed: ``<path>.partial``, or the shared file itself for a run's group."""
        self.chunk_size = int(chunk_size)
        self._filters: dict[str, Any] = {}
        if compression is not None:
            self._filters = {"compression": compression}
            if compression_opts is not None:
                self._filters["compression_opts"] = compression_opts
        self._lengths: dict[str, int] = {}
        self._ports: dict[str, dict[str, str]] = {}
        self._last: dict[str, dict[str, Any]] = {}
        self._checksums: dict[str, tuple[int, int]] = {}
        """``(length, CRC-32)`` of the data written to each dataset, by HDF5 path, stored at close (see
        :func:`crc32`)."""
        self._dimid = 0
        self._start = _time.perf_counter()
        self._datasets: dict[str, h5py.h5d.DatasetID] = {}
        """The datasets written so far, by HDF5 path, open until the file is closed (:meth:`_open_dataset`)."""
        self._dtypes: dict[str, np.dtype] = {}
        """The dtype of each dataset by HDF5 path, as far as known: from the layout's image, else read once
        (:meth:`_dtype`)."""
        self._stats: set[str] = set()
        """The statistics written to ``/stats`` (the group is made empty): the others are new attributes."""
        self._since_flush: dict[str, tuple[h5py.h5d.DatasetID, int, tuple[int, int] | None]] = {}
        """Datasets changed since the last flush, with their length and CRC at that flush."""
        self._undo: dict[str, tuple[h5py.h5d.DatasetID, int, tuple[int, int] | None]] = {}
        """The same for the change in progress (see :meth:`_change`)."""
        self._flushed: tuple[dict[str, int], dict[str, dict[str, Any]]] = ({}, {})
        """Sample counts and last values of the components at the last flush."""
        self._pending = 0
        """Bytes the next flush may write: data added since the last one and a chunk per changed dataset."""
        self._failed: ResultsWriteError | None = None
        self._damaged = False
        """Whether the HDF5 library failed half-way through a write (the file on disk may be inconsistent)."""
        self._file: h5py.File | None = None
        self._closing = threading.RLock()
        """Held while the file is closed, so that a close from another thread waits for the one in progress."""
        self._left = self._unclosed()
        """Where the file is once closed: :attr:`path`, or the ``.partial`` file when it could not be closed."""
        self._declared: dict[str, dict[str, tuple[str | None, str]]] = {}
        """Components the file was made with (*components*) that :meth:`add_component` has not named yet."""
        try:
            if file is not None:
                if components is None:
                    links = h5py.h5p.create(h5py.h5p.LINK_CREATE)
                    links.set_create_intermediate_group(True)
                    self._file = _RunGroup(h5py.h5g.create(file.id, group.encode("utf-8"), lcpl=links,
                                                           gcpl=_creation_order()))
                    self._init_layout(experiment, attrs)
                else:
                    self._from_layout(experiment, attrs, components, file)
                HDF5Writer._open.add(self)
                return
            if _in_memory:
                self._file = _new_file(self.partial_path, in_memory=True)
                self._init_layout(experiment, attrs)
                return
            if components is None:
                self.partial_path.parent.mkdir(parents=True, exist_ok=True)
                # no HDF5 file lock: other processes may read the file while it is written (see ``load_results``)
                self._file = _new_file(self.partial_path)
                self._init_layout(experiment, attrs)
            else:
                self._from_layout(experiment, attrs, components)
            HDF5Writer._open.add(self)
        except BaseException as exc:
            if file is not None:
                with contextlib.suppress(Exception):  # the file stays the chunk's: only the group goes
                    del file[group]
            elif self._file is not None:
                self._abandon()
            if file is None:
                self.partial_path.unlink(missing_ok=True)
            if isinstance(exc, OSError | RuntimeError) and not isinstance(exc, ResultsWriteError):
                raise self._write_error(exc) from exc
            raise

    def _init_layout(self, experiment: str, attrs: Mapping[str, Any] | None) -> None:
        f = self.file
        set_attr(f, "_NCProperties", np.bytes_(f"version=2,cosimrun={_version()},hdf5={h5py.version.hdf5_version}"))
        set_attr(f, "format", FORMAT)
        set_attr(f, "format_version", np.int32(FORMAT_VERSION))
        set_attr(f, "status", "running")
        set_attr(f, "experiment", str(experiment))
        set_attr(f, "cosimrun_version", _version())
        set_attr(f, "started", _now())
        if attrs:
            self.set_attrs(attrs)
        f.create_group("components", track_order=True)
        events = f.create_group("events", track_order=True)
        self._columns(events, "event", {"time": np.float64, "micro": np.int32, "component": _STR, "event": _STR})
        set_attr(events["time"], "units", "s")
        switches = f.create_group("mode_switches", track_order=True)
        self._columns(switches, "switch", {"time": np.float64, "component": _STR, "from_mode": _STR, "to_mode": _STR})
        set_attr(switches["time"], "units", "s")
        self._estimates_table("coupling_error", COUPLING_NUMBERS)
        h5py.h5g.create(f.id, b"stats", gcpl=_creation_order())
        f.flush()

    def _from_layout(self, experiment: str, attrs: Mapping[str, Any] | None,
                     components: Mapping[str, Mapping[str, tuple[str | None, str]]], file: h5py.File | None = None
                     ) -> None:
        """Make the file from the image of an empty file of the same layout: made once per process and layout
        (:func:`_layout_image`), written out (or copied into :attr:`group` of *file*), then given this run's root
        attributes in place.

        The file holds what :meth:`_init_layout` and one :meth:`add_component` per entry of *components* would
        write, in the same order, each object once: a sweep's jobs, whose files share a layout, skip creating
        them one by one. :meth:`add_component` then only checks that it names a component as declared.
        """
        root = {"experiment": str(experiment), "started": _now(), **_root_attrs(attrs)}
        declared = {name: _port_layout(ports) for name, ports in components.items()}
        key = (tuple((name, _signature(value)) for name, value in root.items()), tuple(sorted(self._filters.items())),
               self.chunk_size, tuple((name, tuple(ports.items())) for name, ports in declared.items()))
        layout = _layout_image(key, {name: _placeholder(value) for name, value in root.items()}, self._filters,
                               self.chunk_size, declared)
        self._dimid = layout.dimid
        self._dtypes = dict(layout.dtypes)
        if file is None:
            _write_new(self.partial_path, layout.image)
            self._file = open_to_write(self.partial_path)
        else:
            self._file, self._datasets = _copy_layout(layout, file, str(self.group), _dataset_access(self.chunk_size))
        for name, value in root.items():  # in place: each has the type and shape of its placeholder
            modify_attr(self._file, name, value)
        if file is None:  # a run's group is flushed when it closes: until then a reader may not find it at all
            self._file.flush()
        self._declared = declared

    # ------------------------------------------------------------------ internals
    @property
    def file(self) -> h5py.File:
        """The open ``h5py.File`` (``RuntimeError`` once closed)."""
        if self._file is None:
            raise ResultsStateError(f"results file {self.path} is already closed", path=str(self.path))
        return self._file

    @property
    def closed(self) -> bool:
        return self._file is None

    @property
    def damaged(self) -> bool:
        """Whether the HDF5 library failed half-way through a write: the file on disk may be unreadable."""
        return self._damaged

    def _unclosed(self) -> Path:
        """What :meth:`close` returns while the run is not closed: the ``.partial`` file, or the group's address."""
        return self.partial_path if self.group is None else Path(self.address)

    @property
    def address(self) -> str:
        """Where the run's results are: :attr:`path`, or ``<path>::<group>`` for a run in a group of a shared file
        (what :func:`~cosimrun.storage.results.load_results` reads)."""
        return str(self.path) if self.group is None else run_address(self.path, self.group)

    def _dataset(self, group: h5py.Group, name: str, dtype: Any) -> h5py.Dataset:
        filters = dict(self._filters)
        if filters and np.dtype(dtype).kind in "iuf" and np.dtype(dtype).itemsize > 1:
            filters = {**filters, "shuffle": True}
        return group.create_dataset(
            name, shape=(0,), maxshape=(None,), dtype=dtype, chunks=(self.chunk_size,), **filters
        )

    def _scale(self, group: h5py.Group, dim: str, dtype: Any = None) -> tuple[h5py.Dataset, int]:
        """Create the unlimited dimension *dim*: a coordinate variable when *dtype* is given, else a pure dimension;
        ``(its dataset, its netCDF dimension id)``."""
        ds = self._dataset(group, dim, np.float32 if dtype is None else dtype)
        ds.make_scale(dim if dtype is not None else f"{_PURE_DIM}{0:10d}")
        dimid = self._dimid
        set_attr(ds, "_Netcdf4Dimid", np.int32(dimid))
        if dtype is not None:
            set_attr(ds, "_Netcdf4Coordinates", np.array([dimid], dtype=np.int32))
        self._dimid += 1
        return ds, dimid

    def _attach(self, ds: h5py.Dataset, scale: tuple[h5py.Dataset, int]) -> None:
        ds.dims[0].attach_scale(scale[0])
        set_attr(ds, "_Netcdf4Coordinates", np.array([scale[1]], dtype=np.int32))

    def _columns(self, group: h5py.Group, dim: str, columns: Mapping[str, Any]) -> None:
        scale = self._scale(group, dim, columns.get(dim))
        for name, dtype in columns.items():
            if name != dim:
                self._attach(self._dataset(group, name, dtype), scale)

    def _open_dataset(self, path: str) -> h5py.h5d.DatasetID:
        """The dataset at *path* (absolute in the run's root), opened by HDF5 directly (a few times faster than
        ``file[path]``, and without h5py's ``Dataset`` around it) the first time and kept open while the run
        writes: its appends and flushes do not open it again."""
        dsid = self._datasets.get(path)
        if dsid is None or not dsid.valid:
            dsid = self._datasets[path] = h5py.h5d.open(self.file.id, path[1:].encode("utf-8"),
                                                        _dataset_access(self.chunk_size))
        return dsid

    def _dtype(self, path: str, dsid: h5py.h5d.DatasetID) -> np.dtype:
        """The dtype of the dataset *dsid* at *path*, read from HDF5 once per file (known from the layout image of a
        file made from one)."""
        dtype = self._dtypes.get(path)
        if dtype is None:
            dtype = self._dtypes[path] = dsid.dtype
        return dtype

    def _changed(self, path: str, length: int) -> h5py.h5d.DatasetID:
        """The dataset at *path*, now *length* long, noted (with its length and CRC) as about to change."""
        entry = self._since_flush.get(path)
        if entry is None:
            dsid = self._open_dataset(path)
            entry = self._since_flush[path] = (dsid, length, self._checksums.get(path))
            dtype = self._dtype(path, dsid)
            itemsize = 16 if dtype.kind == "O" else dtype.itemsize
            if self._filters:  # its last chunk is compressed again, at most at the size of what it holds
                self._pending += (length % self.chunk_size) * itemsize + _CHUNK_OVERHEAD
            else:  # a new chunk takes its whole size on disk
                self._pending += self.chunk_size * itemsize
        if path not in self._undo:
            self._undo[path] = (entry[0], length, self._checksums.get(path))
        return entry[0]

    def _extend(self, path: str, start: int, data: np.ndarray) -> None:
        dsid = self._changed(path, start)
        dsid.set_extent((start + len(data),))  # what ``Dataset.resize`` does, without its checks of the chunk layout
        if len(data):
            _write_at(dsid, start, data, self._dtypes[path])
            stored = _stored_bytes(data)
            self._checksums[path] = (start + len(data), zlib.crc32(stored, self._checksums.get(path, (0, 0))[1]))
            self._pending += len(stored) + (24 * len(data) if data.dtype == object else 0)

    # ------------------------------------------------------------------ write errors
    @contextlib.contextmanager
    def _change(self) -> Iterator[None]:
        """One change to the file: undone if it stops half-way (an interrupt, an error); an HDF5
        write error becomes :class:`ResultsWriteError`; after a write error nothing is written."""
        if self._failed is not None:
            raise self._failed
        self.file  # noqa: B018 -- raises once the file is closed, before anything is caught below
        self._undo = {}
        lengths, last = dict(self._lengths), dict(self._last)
        try:
            yield
        except BaseException as exc:
            self._revert(self._undo)
            self._lengths, self._last = lengths, last
            if isinstance(exc, ResultsWriteError):
                self._failed = self._failed or exc
                raise
            if isinstance(exc, OSError | RuntimeError):
                self._damaged = True
                self._failed = self._write_error(exc)
                raise self._failed from exc
            raise
        finally:
            self._undo = {}

    def _write_error(self, exc: BaseException | int) -> ResultsWriteError:
        return write_error(self.partial_path, exc)

    def _check_room(self, nbytes: int) -> None:
        check_room(self.file, self.partial_path, nbytes)

    def _check_before(self, nbytes: int) -> bool:
        """Check that adding *nbytes* (raw) leaves room for the next flush and for closing; when only
        compressing them can make them fit, return ``True``: :meth:`_check_after` decides once they are added
        (they are in HDF5's chunk cache until the flush)."""
        try:
            self._check_room(self._pending + nbytes + CLOSE_RESERVE)
        except ResultsWriteError:
            if not self._filters.get("compression") == "gzip":
                raise
            return True
        return False

    def _check_after(self) -> None:
        """Raise unless the next flush fits with the reserve for closing, counting each chunk it writes as
        HDF5 compresses it (not its raw size, as :attr:`_pending` does)."""
        self._check_room(min(self._pending, self._flush_bytes()) + CLOSE_RESERVE)

    def _flush_bytes(self) -> int:
        """What the next flush writes: every chunk changed since the last flush, compressed with the
        dataset's filters (exactly what the deflate filter produces), and strings at their stored size."""
        total = 0
        for dsid, length, _ in self._since_flush.values():
            ds = h5py.Dataset(dsid)
            n = ds.shape[0]
            if ds.dtype.kind == "O" or ds.compression != "gzip":
                total += self.chunk_size * 16 + len(_stored_bytes(ds[length:n])) + 24 * (n - length)
                continue
            size = self.chunk_size
            for first in range(length // size * size, n, size):
                chunk = np.zeros(size, dtype=ds.dtype)
                chunk[: min(size, n - first)] = ds[first:min(first + size, n)]
                raw = chunk.view(np.uint8)
                if ds.shuffle:
                    raw = raw.reshape(size, ds.dtype.itemsize).T
                total += len(zlib.compress(raw.tobytes(), ds.compression_opts)) + _CHUNK_OVERHEAD
        return total

    def _revert(self, changed: Mapping[str, tuple[h5py.h5d.DatasetID, int, tuple[int, int] | None]]) -> None:
        """Give the *changed* datasets back their length and CRC (a failure marks the file damaged)."""
        try:
            for path, (dsid, length, crc) in changed.items():
                if dsid.shape[0] != length:
                    dsid.set_extent((length,))
                if crc is None:
                    self._checksums.pop(path, None)
                else:
                    self._checksums[path] = crc
        except (OSError, RuntimeError, ValueError) as exc:
            self._damaged = True
            self._failed = self._failed or self._write_error(exc)

    def _abandon(self) -> None:
        """Release the file without writing anything more (:func:`abandon_file`)."""
        HDF5Writer._open.discard(self)
        f, self._file = self._file, None
        self._left = self._unclosed()
        if f is not None:  # the whole file: after a failed write HDF5 cannot flush it (a chunk opens another)
            abandon_file(f.file)
        self._since_flush, self._datasets = {}, {}

    # ------------------------------------------------------------------ attributes
    def set_attrs(self, attrs: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        """Set root attributes (``config_yaml``, ``overrides``, ``t0``, ...); ``None`` values are skipped."""
        converted = _root_attrs({**(attrs or {}), **more})
        with self._change():
            for key, value in converted.items():
                set_attr(self.file, key, value)

    # ------------------------------------------------------------------ components
    def add_component(self, name: str, ports: Mapping[str, tuple[str | None, str]]) -> None:
        """Create ``/components/<name>`` with a ``time`` dimension, ``micro`` and one dataset per port.

        *ports* maps a port name to ``(unit or None, port_type)`` with port_type
        one of ``real``, ``int``, ``bool``, ``string``, ``event``.
        """
        check_name(name, "component name")
        if name in self._lengths:
            raise DuplicateNameError(f"component {name!r} is already in {self.partial_path.name}")
        specs: dict[str, str] = {}
        for port, (_unit, port_type) in ports.items():
            check_name(port, f"port name of {name!r}")
            if port in RESERVED_PORT_NAMES:
                raise ConfigError(None, f"port name {port!r} of {name!r} clashes with the {port!r} coordinate of "
                                  "the file")
            kind = str(getattr(port_type, "value", port_type))
            if kind not in _DTYPES:
                raise UnknownNameError("port type", kind, PORT_TYPES, f"of port {name}.{port}")
            specs[port] = kind
        declared = self._declared.get(name)
        if declared is not None and declared != _port_layout(ports):
            raise ResultsStateError(f"component {name!r} was declared with other ports when "
                                    f"{self.partial_path.name} was made", path=str(self.partial_path))
        with self._change():
            self._check_room(CLOSE_RESERVE)
            if self._declared.pop(name, None) is not None:  # in the file since it was made
                self._ports[name] = specs
                self._lengths[name] = 0
                return
            group = self.file["components"].create_group(name, track_order=True)
            time = self._scale(group, "time", np.float64)
            set_attr(time[0], "units", "s")
            micro = self._dataset(group, "micro", np.int32)
            self._attach(micro, time)
            set_attr(micro, "long_name", "superdense micro step")
            for port, kind in specs.items():
                ds = self._dataset(group, port, _DTYPES[kind])
                self._attach(ds, time)
                unit = ports[port][0]
                if unit is not None:
                    set_attr(ds, "units", str(unit))
                set_attr(ds, "port_type", kind)
                if kind in ("bool", "event"):
                    set_attr(ds, "dtype", "bool")
            self._ports[name] = specs
            self._lengths[name] = 0

    @property
    def components(self) -> list[str]:
        """Names of the components added so far."""
        return list(self._lengths)

    def ports(self, component: str) -> dict[str, str]:
        """``{port: port_type}`` of a component added with :meth:`add_component`."""
        return dict(self._ports[self._known(component)])

    def n_samples(self, component: str) -> int:
        """How many samples of *component* are in the file (an append counts whole once it returned or was
        stopped after its last write, and not at all when it was stopped before)."""
        return self._lengths[self._known(component)]

    def n_events(self) -> int:
        """How many events are in the file: none before the writer wrote one (it makes its file, or group, with an
        empty ``/events``, and opens ``/events/event`` to write it), else the dataset's length."""
        self.file  # noqa: B018 -- raises once the file is closed
        if _EVENTS not in self._datasets:
            return 0
        return int(self._open_dataset(_EVENTS).shape[0])

    def _known(self, component: str) -> str:
        if component not in self._lengths:
            raise UnknownNameError("component", component, self._lengths, "(it was not added to the results file)")
        return component

    def append(
        self,
        component: str,
        time: Any,
        micro: Any,
        values: Mapping[str, Any],
        *,
        flush: bool = True,
    ) -> None:
        """Append a chunk of samples of *component*: times, micro indices (or ``None``) and ``{port: values}``.

        Every port of the component must be given, each with one value per time.
        The file is flushed afterwards unless *flush* is false.
        """
        specs = self._ports[self._known(component)]
        t = np.asarray(time, dtype=np.float64).reshape(-1)
        n = len(t)
        m = np.zeros(n, dtype=np.int32) if micro is None else np.broadcast_to(np.asarray(micro, dtype=np.int32), (n,))
        if specs.keys() != values.keys():
            missing, extra = sorted(specs.keys() - values.keys()), sorted(values.keys() - specs.keys())
            if not missing:
                raise UnknownNameError("port", extra[0], specs, f"of component {component!r}")
            raise MissingNameError(f"append to {component!r}: missing ports {missing}, unknown ports {extra}")
        columns: dict[str, np.ndarray] = {}
        for port, kind in specs.items():
            v = _column(values[port], kind)
            if len(v) != n:
                raise ResultsDataError(f"append to {component!r}: port {port!r} has {len(v)} values for {n} times",
                                       component=component, port=port)
            columns[port] = v
        if n:
            prefix = f"/components/{component}/"
            start = self._lengths[component]
            with self._change():
                compressed = self._check_before(sum(v.nbytes for v in columns.values()) + 12 * n)
                for port, v in columns.items():
                    self._extend(prefix + port, start, v)
                self._extend(prefix + "micro", start, m)
                self._extend(prefix + "time", start, t)
                if compressed:
                    self._check_after()
                self._last[component] = {port: v[-1] for port, v in columns.items()}
                self._lengths[component] = start + n
        if flush:
            self.flush()

    def final_values(self) -> dict[str, Any]:
        """``{"comp.port": last value}`` of every port written so far, event ports left out.

        The same values :func:`cosimrun.storage.summary.final_values` reads back
        from the file, without reading (and decompressing) it.
        """
        out: dict[str, Any] = {}
        for comp, last in self._last.items():
            kinds = self._ports[comp]
            for port, value in last.items():
                if kinds[port] != "event":
                    out[f"{comp}.{port}"] = stored_scalar(value, kinds[port])
        return out

    # ------------------------------------------------------------------ events, switches, stats
    def write_events(self, rows: Iterable[Any], *, flush: bool = True) -> int:
        """Append events: ``(DenseTime, component, event)``, ``(t, component, event)`` or
        ``(t, micro, component, event)`` rows. Returns the number written."""
        t, m, comp, ev = [], [], [], []
        for row in rows:
            row = tuple(row)
            if len(row) == 4:
                when, micro, c, e = row
            elif len(row) == 3:
                when, c, e = row
                micro = getattr(when, "micro", 0)
            else:
                raise ResultsDataError(f"event row must have 3 or 4 fields, got {row!r}")
            t.append(float(getattr(when, "t", when)))
            m.append(int(micro))
            comp.append(str(c))
            ev.append(str(e))
        self._append_table(
            "events",
            {
                "time": np.array(t, dtype=np.float64),
                "micro": np.array(m, dtype=np.int32),
                "component": _strings(comp),
                "event": _strings(ev),
            },
        )
        if flush:
            self.flush()
        return len(t)

    def write_mode_switches(self, rows: Iterable[Any], *, flush: bool = True) -> int:
        """Append mode switches: objects with ``time, component, from_mode, to_mode`` (``ModeSwitch``),
        mappings with those keys, or 4-tuples. Returns the number written."""
        cols: dict[str, list[Any]] = {"time": [], "component": [], "from_mode": [], "to_mode": []}
        for row in rows:
            if isinstance(row, Mapping):
                fields = [row[k] for k in cols]
            elif hasattr(row, "to_mode"):
                fields = [getattr(row, k) for k in cols]
            else:
                fields = list(row)
                if len(fields) != 4:
                    raise ResultsDataError(f"mode switch row must have 4 fields, got {row!r}")
            for key, value in zip(cols, fields, strict=True):
                cols[key].append(value)
        self._append_table(
            "mode_switches",
            {
                "time": np.array([float(getattr(x, "t", x)) for x in cols["time"]], dtype=np.float64),
                **{k: _strings([str(x) for x in cols[k]]) for k in ("component", "from_mode", "to_mode")},
            },
        )
        if flush:
            self.flush()
        return len(cols["time"])

    def write_coupling_error(self, rows: Iterable[Any]) -> int:
        """Store the estimated coupling error per connection (``CouplingError`` objects) in ``/coupling_error``."""
        return self._append_estimates("coupling_error", rows, COUPLING_NUMBERS)

    def write_global_error(self, rows: Iterable[Any]) -> int:
        """Store the estimated global error per recorded real output (``GlobalError`` objects, see
        :mod:`cosimrun.masters.global_error`) in ``/global_error`` (over the dimension ``output``), created by the
        first call: only a run under ``master.global_error: estimate`` has the table."""
        if "global_error" not in self.file:
            with self._change():
                self._estimates_table("global_error", GLOBAL_ERROR_NUMBERS)
        return self._append_estimates("global_error", rows, GLOBAL_ERROR_NUMBERS)

    def _estimates_table(self, name: str, numbers: tuple[str, ...]) -> None:
        """Create the table *name* of estimates: over its dimension, the estimate's name (the dimension's own
        column), its unit and the float columns *numbers*, ``time_of_max`` in seconds."""
        group = self.file.create_group(name, track_order=True)
        dim = TABLE_DIMENSIONS[name]
        self._columns(group, dim, {dim: _STR, "unit": _STR, **dict.fromkeys(numbers, np.float64)})
        set_attr(group["time_of_max"], "units", "s")

    def _append_estimates(self, name: str, rows: Iterable[Any], numbers: tuple[str, ...]) -> int:
        """Append one row per estimate object of *rows* to the table *name* (see :meth:`_estimates_table`)."""
        rows = list(rows)
        dim = TABLE_DIMENSIONS[name]
        self._append_table(
            name,
            {
                dim: _strings([getattr(r, dim) for r in rows]),
                "unit": _strings([r.unit or "" for r in rows]),
                **{k: np.array([float(getattr(r, k)) for r in rows], dtype=np.float64) for k in numbers},
            },
        )
        return len(rows)

    def write_steps(self, columns: Mapping[str, np.ndarray]) -> int:
        """Store the steps a run under error control tried in ``/steps`` (columns ``time, step, error,
        accepted`` over the dimension ``attempt``; see :class:`~cosimrun.core.steplog.StepLog`)."""
        if "steps" not in self.file:
            with self._change():
                group = self.file.create_group("steps", track_order=True)
                self._columns(group, "attempt", {k: v.dtype for k, v in columns.items()})
                set_attr(group["time"], "units", "s")
                set_attr(group["step"], "units", "s")
        self._append_table("steps", columns)
        return len(next(iter(columns.values()), ()))

    def _append_table(self, group_name: str, columns: Mapping[str, np.ndarray]) -> None:
        n = len(next(iter(columns.values())))
        if not n:
            return
        dim = f"/{group_name}/{TABLE_DIMENSIONS[group_name]}"
        start = self._open_dataset(dim).shape[0]
        with self._change():
            compressed = self._check_before(sum(v.nbytes for v in columns.values()) + 32 * n)
            if dim.rpartition("/")[2] not in columns:
                self._changed(dim, start).set_extent((start + n,))
            for name, data in columns.items():
                self._extend(f"/{group_name}/{name}", start, data)
            if compressed:
                self._check_after()

    def write_stats(self, stats: Mapping[str, Any] | Any) -> None:
        """Store master statistics (a mapping or an object with ``as_dict()``) as ``/stats`` attributes."""
        if not isinstance(stats, Mapping):
            stats = stats.as_dict()
        converted = {check_name(key, "statistic name"): to_attr(value) for key, value in stats.items()}
        with self._change():
            group = h5py.Group(h5py.h5g.open(self.file.id, b"stats"))  # as ``file["stats"]``, without its lookups
            for key, value in converted.items():
                if value is not None:
                    new = key not in self._stats
                    self._stats.add(key)  # before: an interrupt may land once the attribute is made
                    set_attr(group, key, value, new=new)

    # ------------------------------------------------------------------ life cycle
    def flush(self) -> None:
        """Flush everything written so far to disk (:class:`ResultsWriteError` when it does not fit)."""
        with self._change():
            if self._since_flush and self._check_before(0):
                self._check_after()
            self.file.flush()
        self._since_flush = {}
        self._pending = 0
        self._flushed = (dict(self._lengths), dict(self._last))

    def close(
        self, status: str = "complete", error: BaseException | str | None = None, traceback: str | None = None
    ) -> Path:
        """Record *status* (and the error), close the file and rename it to :attr:`path`; return where it is.

        The status goes to disk in a flush of its own after everything else, so
        a file never says ``complete`` without its data. After a write error the
        file keeps what its last flush wrote and is closed as *status*
        (``failed`` for ``complete``, the write error for a missing *error*); when
        even that cannot be written it stays ``<path>.partial`` with status
        ``running``, and that path is returned. A write error while closing as
        ``complete`` is raised with the file still open, to be closed again as
        ``failed``. Closing twice does nothing.
        """
        if status not in STATUSES or status == "running":
            raise ConfigError("status", f"must be one of complete, failed, interrupted, got {status!r}")
        with self._closing:
            if self._file is None:
                return self._left
            return self._close(status, error, traceback)

    @classmethod
    def close_open(cls, status: str, error: str) -> list[tuple[Path, str]]:
        """Close every open results file of the process as *status* with *error*, keeping what its writer was
        given; ``[(where it is, its status)]``.

        The last resort of a process that must end while its main thread is stuck (in an FMU's C code,
        outside the writer): from another thread, just before ``os._exit``.
        """
        closed = []
        for writer in list(cls._open):
            try:
                path = writer.close(status, error)
            except Exception:  # a file that cannot be closed stays as it is: .partial, running
                path = writer._unclosed()
            closed.append((path, status if path == writer.path else "running"))
        return closed

    def _close(self, status: str, error: BaseException | str | None, traceback: str | None) -> Path:
        if isinstance(error, BaseException):
            if traceback is None:
                traceback = "".join(_traceback.format_exception(error))
            error = f"{type(error).__name__}: {error}"
        if self._failed is None:
            try:
                with self._change():
                    self._check_room(self._pending + self._closing_bytes(error, traceback))
                    self._write_end(status, error, traceback)
                return self._release()
            except ResultsWriteError:
                if status == "complete":
                    raise
        return self._close_after_error(status, error, traceback)

    def _closing_bytes(self, error: str | None, traceback: str | None) -> int:
        """Bytes closing may write: the end attributes (measured: 2 to 11 kB besides the texts, for 3 to 120
        datasets)."""
        texts = len((error or "").encode("utf-8", "replace")) + len((traceback or "").encode("utf-8", "replace"))
        return _CLOSE_BASE + texts + 64 * len(self._checksums)

    def _write_end(self, status: str, error: str | None, traceback: str | None) -> None:
        """Write the end attributes and flush, then the status and flush again."""
        f = self.file
        set_attr(f, "finished", _now())
        set_attr(f, "wall_time_s", _time.perf_counter() - self._start)
        set_attr(f, "error", "" if error is None else str(error))
        set_attr(f, "traceback", traceback or "")
        set_attr(f, CHECKSUMS_ATTR, json.dumps(
            {name: [length, crc] for name, (length, crc) in sorted(self._checksums.items())}
        ))
        f.flush()
        set_attr(f, "status", status)
        f.flush()

    def _close_after_error(self, status: str, error: str | None, traceback: str | None) -> Path:
        """Close after a write error: back to the last flush, then the status if it fits, else abandon."""
        assert self._failed is not None
        if status == "complete":
            status = "failed"
        if error is None:
            error = f"{type(self._failed).__name__}: {self._failed}"
        if not self._damaged:
            self._revert(self._since_flush)
            lengths, last = self._flushed
            self._lengths = {comp: lengths.get(comp, 0) for comp in self._lengths}
            self._last = dict(last)
        if not self._damaged:
            try:
                self._check_room(self._closing_bytes(error, traceback))
                self._write_end(status, error, traceback)
                return self._release()
            except (OSError, RuntimeError):
                pass
        self._abandon()
        return self._left

    def _release(self) -> Path:
        """Close the (flushed) file and give it its final name; a run's group only lets go of the file."""
        HDF5Writer._open.discard(self)
        f, self._file = self.file, None
        self._since_flush, self._datasets = {}, {}
        if self.group is None:
            f.close()
            os.replace(self.partial_path, self.path)
        self._left = self.path
        return self.path

    def __enter__(self) -> HDF5Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._file is None:
            return
        if exc is None:
            try:
                self.close("complete")
            except ResultsWriteError as err:
                self.close("failed", err)
                raise
        else:
            self.close("interrupted" if isinstance(exc, KeyboardInterrupt) else "failed", exc)

    def __repr__(self) -> str:
        state = "closed" if self._file is None else "open"
        return f"HDF5Writer({str(self.path)!r}, {state}, components={self.components})"


def _copy_layout(layout: _Layout, file: h5py.File, group: str, access: h5py.h5p.PropDAID
                 ) -> tuple[_RunGroup, dict[str, h5py.h5d.DatasetID]]:
    """The root of the empty file *layout* copied into the new *group* of *file*, its dimension scales attached
    anew, and the datasets that took, opened with *access*, by path in the group (what
    :meth:`HDF5Writer._open_dataset` keeps: the run's writes do not open them again).

    HDF5 copies the references of a dataset to its dimension scale (``DIMENSION_LIST``, and the scale's
    ``REFERENCE_LIST``) as they are, pointing into the image: each table and component group gets them back
    written in place, to its own scale (its ``time`` or its table's dimension) and datasets.
    """
    name = group.encode("utf-8")
    h5py.h5o.copy(_image_file(layout.image).id, b".", file.id, name)
    root = h5py.h5g.open(file.id, name)
    opened: dict[str, h5py.h5d.DatasetID] = {}
    for where, scale, names in layout.scales:
        prefix = f"/{where.decode('utf-8')}/"
        for dataset, dsid in _reattach(h5py.h5g.open(root, where), scale, names, access).items():
            opened[prefix + dataset.decode("utf-8")] = dsid
    return _RunGroup(root), opened


def _scales(f: h5py.File) -> tuple[tuple[bytes, bytes, tuple[bytes, ...]], ...]:
    """:attr:`_Layout.scales` of the empty results file *f*: its component groups and tables, in file order."""
    groups = [(f"components/{name}", "time") for name in f["components"]]
    groups += [(name, dim) for name, dim in TABLE_DIMENSIONS.items() if name in f]
    return tuple((where.encode("utf-8"), dim.encode("utf-8"),
                  tuple(name.encode("utf-8") for name in f[where] if name != dim)) for where, dim in groups)


_IMAGE_FILES: dict[bytes, h5py.File] = {}
"""The layout images (:func:`_layout_image`) open for reading, by image: copied from again and again."""


def _image_file(image: bytes) -> h5py.File:
    """*image* open for reading, kept with the images the process keeps (:data:`_LAYOUTS_KEPT`)."""
    with _layouts_lock:
        source = _IMAGE_FILES.get(image)
        if source is None:
            kept = {layout.image for layout in _LAYOUTS.values()}
            for old in [old for old in _IMAGE_FILES if old not in kept]:
                _IMAGE_FILES.pop(old).close()
            source = _IMAGE_FILES[image] = h5py.File(h5py.h5f.open_file_image(image))
        return source


_DIMENSION_LIST = h5py.vlen_dtype(h5py.ref_dtype)
_REFERENCE_LIST = np.dtype([("dataset", h5py.ref_dtype), ("dimension", np.uint32)])


def _reattach(gid: h5py.h5g.GroupID, scale: bytes, names: tuple[bytes, ...], access: h5py.h5p.PropDAID
              ) -> dict[bytes, h5py.h5d.DatasetID]:
    """Point the datasets *names* of group *gid* at its dimension scale *scale*, and the scale at them, in place;
    the datasets (the scale too), opened with *access*, by name."""
    ref = h5py.h5r.create(gid, scale, h5py.h5r.OBJECT)
    dims = np.empty(1, dtype=_DIMENSION_LIST)
    dims[0] = np.array([ref], dtype=h5py.ref_dtype)
    rows = []
    opened = {}
    for name in names:
        dsid = opened[name] = h5py.h5d.open(gid, name, access)
        h5py.h5a.open(dsid, b"DIMENSION_LIST").write(dims)
        rows.append((h5py.h5r.create(gid, name, h5py.h5r.OBJECT), 0))
    dsid = opened[scale] = h5py.h5d.open(gid, scale, access)
    h5py.h5a.open(dsid, b"REFERENCE_LIST").write(np.array(rows, dtype=_REFERENCE_LIST))
    return opened


class _RunGroup(h5py.Group):
    """The group of a shared file a run is written into, standing for the run's own file: flushed as a file is."""

    def flush(self) -> None:
        h5py.h5f.flush(self.id)


def _write_at(dsid: h5py.h5d.DatasetID, start: int, data: np.ndarray, dtype: np.dtype | None = None) -> None:
    """``ds[start:start + len(data)] = data`` for the one-dimensional dataset *dsid* (of *dtype*, when the caller
    knows it) and array *data*, through HDF5's write directly: h5py's slicing, which an append of a few samples
    notices, is skipped. The data goes to HDF5 as h5py gives it (strings as the dataset's type, numbers in their
    own type for HDF5 to convert), from memory types made once per process."""
    file_space = dsid.get_space()
    file_space.select_hyperslab((start,), (len(data),))
    if dtype is None:
        dtype = dsid.dtype
    if dtype.kind == "O":
        data = np.asarray(data, dtype=dtype.base, order="C")
    else:
        data = np.ascontiguousarray(data)
    dsid.write(_memory_space(len(data)), file_space, data, mtype=_memory_type(data.dtype))


@functools.lru_cache(maxsize=64)
def _memory_space(n: int) -> h5py.h5s.SpaceID:
    """The dataspace of *n* values in memory that :func:`_write_at` writes from (never selected on: shared)."""
    return h5py.h5s.create_simple((n,))


def crc32(data: np.ndarray, value: int = 0) -> int:
    """CRC-32 of a column as stored, continuing from *value*: numbers by their bytes, strings as
    UTF-8 each followed by a NUL byte (so reading a dataset back gives the same sum)."""
    return zlib.crc32(_stored_bytes(data), value)


_CRC_BLOCK = 1 << 20
"""Values read at a time by :func:`dataset_crc32` (whole rows, and whole chunks of rows where it is chunked)."""


def dataset_crc32(ds: h5py.Dataset) -> int:
    """:func:`crc32` of the data of *ds* in C order (the sum :class:`HDF5Writer` and the ensemble writer record),
    read a block of whole rows at a time: a history may be large."""
    if not ds.ndim:
        return crc32(np.atleast_1d(ds[()]))
    row = math.prod(ds.shape[1:])
    step = max(1, _CRC_BLOCK // max(1, row))
    if ds.chunks:
        step = max(ds.chunks[0], step - step % ds.chunks[0])
    value = 0
    for start in range(0, ds.shape[0], step):
        block = np.asarray(ds[start:start + step])
        value = crc32(block.ravel() if block.dtype == object else block, value)
    return value


def _stored_bytes(data: np.ndarray) -> bytes | np.ndarray:
    """The bytes :func:`crc32` sums (their length is about what the column takes on disk)."""
    if data.dtype == object:
        return b"".join(_utf8(v) + b"\0" for v in data)
    return np.ascontiguousarray(data).view(np.uint8)


def _utf8(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


def stored_scalar(value: Any, kind: str) -> Any:
    """One stored sample of a port of type *kind* as a Python value (``str``, ``bool``, ``int``, ``float``)."""
    if kind == "string":
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if kind in ("bool", "event"):
        return bool(value)
    return value.item() if isinstance(value, np.generic) else value


def _strings(items: Iterable[Any]) -> np.ndarray:
    out = list(items)
    arr = np.empty(len(out), dtype=object)
    arr[:] = out
    return arr


def _column(values: Any, kind: str) -> np.ndarray:
    """*values* as a 1-D array of the storage dtype of *kind*."""
    if kind == "string":
        arr = np.asarray(values, dtype=object).reshape(-1)
        return _strings(v if isinstance(v, str) else str(v) for v in arr)
    arr = np.asarray(values).reshape(-1)
    if kind in ("bool", "event"):
        return arr.astype(bool).astype(np.int8)
    return arr.astype(_DTYPES[kind], copy=False)


# ---------------------------------------------------------------------- whole runs
def write_history(writer: HDF5Writer, history: SystemHistory | Mapping[str, ComponentHistory]) -> int:
    """Write every sample of in-memory histories (a library run's ``RunResult.history``) to *writer*.

    Components not yet in the file are added with their ports; the samples
    go after what the file holds already. Returns the number of samples written.
    """
    histories = history if isinstance(history, Mapping) else history.get_all_histories()
    written = 0
    for name, comp_hist in histories.items():
        ports = comp_hist.get_all_histories()
        if name not in writer.components:
            writer.add_component(name, {p: (h.unit, h.port_type) for p, h in ports.items()})
        ports = {p: ports[p] for p in writer.ports(name)}
        start = writer.n_samples(name)
        lengths = {len(h) for h in ports.values()}
        if len(lengths) > 1:
            raise ResultsDataError(f"ports of {name!r} were recorded on different time axes: lengths "
                                   f"{sorted(lengths)}", component=name)
        stop = lengths.pop() if lengths else 0
        if stop < start:
            raise ResultsStateError(f"history of {name!r} shrank to {stop} samples but {start} are already in "
                                    "the file", path=str(writer.partial_path))
        if stop == start:
            continue
        time = micro = None
        values = {}
        for port, h in ports.items():
            t, v, m = h.slice(start, stop)
            if time is None:
                time, micro = t, m
            elif not np.array_equal(t, time):
                raise ResultsDataError(f"port {port!r} of {name!r} was recorded on its own time axis",
                                       component=name, port=port)
            values[port] = _strings(v) if v.dtype == object else v
        writer.append(name, time, micro, values, flush=False)
        written += stop - start
    writer.flush()
    return written


def write_run_summary(writer: HDF5Writer, result: RunResult) -> None:
    """Write what a run adds to its samples and events: mode switches, statistics (plus the
    simulation's ``wall_time_s`` in ``/stats``) and the root attributes ``system, master, t0, tf, dt``.

    They reach the disk with the writer's next flush, at the latest when it closes the file."""
    writer.write_mode_switches(result.mode_switches, flush=False)
    writer.write_coupling_error(result.coupling_errors)
    if result.steps is not None:
        writer.write_steps(result.steps)
    if result.global_errors:
        writer.write_global_error(result.global_errors)
    stats = result.stats if isinstance(result.stats, Mapping) else result.stats.as_dict()
    writer.write_stats({**stats, "wall_time_s": result.wall_time_s})
    writer.set_attrs(system=result.system, master=result.master, t0=result.t0, tf=result.tf, dt=result.dt)


def write_run_result(writer: HDF5Writer, result: RunResult) -> None:
    """Write a library run (``System.run`` with its default memory sink) to a results file:
    its histories and events, then :func:`write_run_summary`. Call it once per file."""
    write_history(writer, result.history)
    writer.write_events(result.events, flush=False)
    write_run_summary(writer, result)
    writer.flush()
