"""Read a results file written by :class:`~cosimrun.storage.hdf5.HDF5Writer`.

Metadata (attributes, statistics, component names) is read when the file is
loaded; port data, events and mode switches are read on demand, each time
opening the file briefly, so a ``.partial`` file of a running job can be looked
at (with HDF5 file locking off, see :func:`load_results`).

A file is checked before anything of it is read (:func:`readable_length`), when
it is loaded and, while its run still writes it or once another file replaced it,
again before a read: every dataset of a component or table must be
one-dimensional, of the dtype its port type says, declare no more samples than
the file stores data for (nor more bytes than its stored bytes can unpack to),
and, once the run closed the file (status ``complete``, ``failed`` or
``interrupted``), have the length recorded at close and the length of the other
datasets of its group. A damaged file is refused with a
:class:`~cosimrun.errors.ResultsReadError` naming the file and the dataset,
before any memory is allocated for it. The ``.partial`` file of a running job is
read to the length its datasets have in common, as far as their data reaches.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import h5py
import numpy as np

from cosimrun.core.steplog import STEP_COLUMNS
from cosimrun.errors import ResultsReadError, UnknownNameError
from cosimrun.storage.chunkfile import read_ref, split_address
from cosimrun.storage.hdf5 import (
    CHECKSUMS_ATTR,
    COUPLING_NUMBERS,
    FORMAT,
    GLOBAL_ERROR_NUMBERS,
    PORT_TYPES,
    partial_path,
    run_address,
    written_path,
)

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

    from cosimrun.storage.ensemble import EnsembleMember

_PARTIAL = ".partial"
CLOSED_STATUSES = ("complete", "failed", "interrupted")
"""The statuses of a file its run closed: its datasets no longer grow, so their lengths must agree."""
MAX_EXPANSION = 1100
"""How many bytes of data one stored byte may unpack to. The filters a results file is written with
(``storage.compression``: gzip at most 1032 times, by the DEFLATE format; lzf about 90 times; shuffle and
none once) give no more, so a dataset declaring more is refused before it is read."""
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("time", "micro", "component", "event"),
    "mode_switches": ("time", "component", "from_mode", "to_mode"),
    "coupling_error": ("connection", "unit", *COUPLING_NUMBERS),
    "steps": STEP_COLUMNS,
    "global_error": ("output", "unit", *GLOBAL_ERROR_NUMBERS),
}
"""The columns read of each table group (a table's pure dimension, e.g. ``switch``, holds no data)."""
_TEXT_COLUMNS = frozenset({"component", "event", "from_mode", "to_mode", "connection", "unit", "output"})
_KINDS = {"integer": "an integer", "number": "a number", "text": "text", "any": "a number or text"}
_VLEN_BYTES = 16
"""Bytes a variable-length string takes in a dataset (its length and global heap address)."""


@dataclass(frozen=True)
class PortSeries:
    """One port's recorded samples; unpacks as ``time, values = series``."""

    time: np.ndarray
    values: np.ndarray
    micro: np.ndarray
    unit: str | None
    port_type: str

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.time, self.values))

    def __len__(self) -> int:
        return len(self.time)


def _py(value: Any) -> Any:
    """An HDF5 attribute value as a plain Python value (str, int, float, list)."""
    if isinstance(value, bytes | np.bytes_):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        return [_py(v) for v in value.tolist()] if value.dtype.kind in "OSU" else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_column(ds: h5py.Dataset, n: int | None = None) -> np.ndarray:
    """A dataset's values (its first *n*): strings as ``str`` objects, CF booleans (``dtype="bool"``) as ``bool``."""
    n = ds.shape[0] if n is None else n
    if h5py.check_string_dtype(ds.dtype) is not None:
        out = np.empty(n, dtype=object)
        out[:] = ds.asstr()[:n] if n else []
        return out
    data = ds[:n]
    if _py(ds.attrs.get("dtype")) == "bool":
        return data.astype(bool)
    return data


def _damaged(path: Path, message: str, expected: str, found: str) -> ResultsReadError:
    return ResultsReadError(f"{path} is damaged: {message}", path=str(path), expected=expected, found=found)


def recorded_lengths(path: Path, f: h5py.File) -> dict[str, int] | None:
    """The length of each dataset as recorded when the run closed *f* (``data_crc32``), ``{}`` for a file
    closed without a record (written before it existed), ``None`` while the file is not closed."""
    if _py(f.attrs.get("status")) not in CLOSED_STATUSES:
        return None
    text = f.attrs.get(CHECKSUMS_ATTR)
    if text is None:
        return {}
    try:
        record = json.loads(_py(text))
        return {str(name): int(entry[0]) for name, entry in record.items()}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        raise _damaged(path, f"its {CHECKSUMS_ATTR} attribute is not a JSON map of dataset lengths",
                       "a JSON map of dataset lengths", str(_py(text))[:80]) from None


def _want(name: str, ds: h5py.Dataset, component: bool) -> str:
    """What *ds* must hold: ``integer``, ``number``, ``text`` or ``any`` of those (by its name in a table,
    else by its port type); ``port_type`` for a port type that is none of cosimrun's."""
    if name == "micro":
        return "integer"
    if name == "time":
        return "number"
    if not component:
        return "text" if name in _TEXT_COLUMNS else "number"
    kind = str(_py(ds.attrs.get("port_type", "")))
    if kind and kind not in PORT_TYPES:
        return "port_type"
    if kind == "string":
        return "text"
    return "number" if kind else "any"


def _dtype_problem(name: str, ds: h5py.Dataset, dtype: np.dtype, component: bool) -> str | None:
    """Why *ds* (of *dtype*) cannot be read as its place in the file says (``None``: it can)."""
    if ds.ndim != 1:
        return f"has shape {ds.shape}, not one dimension"
    want = _want(name, ds, component)
    if want == "port_type":
        return f"has port_type {_py(ds.attrs['port_type'])!r}, not one of {', '.join(PORT_TYPES)}"
    text = h5py.check_string_dtype(dtype) is not None
    number = not text and dtype.kind in "biuf"
    ok = {"integer": number and dtype.kind in "iu", "number": number, "text": text, "any": number or text}[want]
    return None if ok else f"has dtype {dtype}, not {_KINDS[want]}"


def _stored(ds: h5py.Dataset, item_bytes: int) -> tuple[int, int]:
    """How many elements of *ds* the file holds data for (its allocated chunks', or its contiguous bytes'
    worth), and the bytes it stores."""
    size = ds.id.get_storage_size()
    chunks = ds.chunks
    if chunks is not None:
        return ds.id.get_num_chunks() * chunks[0], size
    return size // item_bytes, size


@dataclass(frozen=True)
class Damage:
    """One thing wrong with a results file: *where* (a dataset's or group's path), what is wrong there, and
    what was expected and found."""

    where: str
    problem: str
    expected: str
    found: str

    @property
    def message(self) -> str:
        return f"{self.where} {self.problem}"


def _members(f: h5py.File, group_name: str, found: dict[str, h5py.Dataset]) -> Iterator[Damage]:
    """Fill *found* with the datasets of *f*'s group *group_name* by name; a member that is no dataset,
    or a link, is damage."""
    if not isinstance(f.get(group_name, getlink=True), h5py.HardLink) or not isinstance(f[group_name], h5py.Group):
        kind = type(f.get(group_name, getlink=True)).__name__
        yield Damage(f"/{group_name}", "is not a group", "a group", kind)
        return
    group = f[group_name]
    for name in group:
        link = group.id.links.get_info(name.encode()).type
        ds = group[name] if link == h5py.h5l.TYPE_HARD else None
        if not isinstance(ds, h5py.Dataset):
            kind = {h5py.h5l.TYPE_SOFT: "a soft link", h5py.h5l.TYPE_EXTERNAL: "an external link"}.get(
                link, "a group" if isinstance(ds, h5py.Group) else "no dataset")
            yield Damage(f"/{group_name}/{name}", f"is {kind}, not a dataset", "a dataset", kind)
            continue
        found[name] = ds


def group_damage(f: h5py.File, group_name: str, read: Sequence[str] | None, recorded: dict[str, int] | None,
                 readable: list[int]) -> Iterator[Damage]:
    """Every problem of the datasets *read* (all without it) of *f*'s group *group_name* (see the module
    docstring), appending to *readable* how many samples of each sound one can be read. A component's
    ``time`` and ``micro`` are always checked with its ports.

    *recorded* is :func:`recorded_lengths` of *f* (``None``: the file is not closed; its datasets are read to
    the length they have in common, as far as their stored data reaches).
    """
    group_name = group_name.strip("/")
    members: dict[str, h5py.Dataset] = {}
    damaged = False
    for damage in _members(f, group_name, members):
        damaged = True
        yield damage
    if damaged and not members:  # not a group, or nothing in it to check further
        return
    lengths = {name: ds.shape[0] if ds.ndim else 1 for name, ds in members.items()}
    component = group_name.startswith("components/")
    if read is None:
        read = list(members)
    if component:  # a component's samples are on its time axis
        read = ["time", "micro", *(name for name in read if name not in ("time", "micro"))]
    for name in read:
        damage = _dataset_damage(f"/{group_name}", name, members.get(name), lengths.get(name, 0), recorded,
                                 readable, ", ".join(members))
        if damage is not None:
            damaged = True
            yield damage
    if not damaged and recorded is not None and len(set(lengths.values())) > 1:
        found = ", ".join(f"{name} {n}" for name, n in lengths.items())
        yield Damage(f"/{group_name}", f"has datasets of different lengths ({found}) in a file closed "
                     f"{_py(f.attrs.get('status'))}", "equal lengths", found)


def _dataset_damage(group: str, name: str, ds: h5py.Dataset | None, n: int, recorded: dict[str, int] | None,
                    readable: list[int], names: str) -> Damage | None:
    """The first problem of dataset *name* of *group* (``None``: none; its readable length is appended to
    *readable*)."""
    where = f"{group}/{name}"
    if ds is None:
        return Damage(group, f"has no dataset {name!r}", name, names)
    dtype = ds.dtype
    problem = _dtype_problem(name, ds, dtype, group.startswith("/components/"))
    if problem is not None:
        return Damage(where, problem, "one dimension of numbers or text", str(dtype))
    item_bytes = _VLEN_BYTES if dtype.kind == "O" else max(dtype.itemsize, 1)
    try:
        held, size = _stored(ds, item_bytes)
    except (RuntimeError, OSError) as exc:  # HDF5 finds its storage beyond the end the file declares
        if recorded is None:  # a file being written, read between its writes: none of it is readable yet
            readable.append(0)
            return None
        return Damage(where, f"has storage HDF5 cannot read ({exc})", "readable storage", "none")
    if recorded is not None:
        if n > held:
            return Damage(where, f"declares {n} samples but holds data for {held}", f"at most {held} samples",
                          f"{n} samples")
        if recorded.get(where, n) != n:
            return Damage(where, f"has {n} samples but {recorded[where]} were written", f"{recorded[where]} samples",
                          f"{n} samples")
    n = min(n, held)
    if n * item_bytes > MAX_EXPANSION * size:
        return Damage(where, f"declares {n} samples ({n * item_bytes} bytes) in {size} stored bytes, more than "
                      f"compression packs (at most {MAX_EXPANSION} times)", f"at most {MAX_EXPANSION * size} bytes",
                      f"{n * item_bytes} bytes")
    readable.append(n)
    return None


def readable_length(path: Path, f: h5py.File, group_name: str, read: Sequence[str] | None,
                    recorded: dict[str, int] | None) -> int:
    """The number of samples of the datasets *read* (all without it) of *f*'s group *group_name* to read,
    after checking them: the first :func:`group_damage` is raised as a :class:`ResultsReadError`."""
    readable: list[int] = []
    for damage in group_damage(f, group_name, read, recorded, readable):
        raise _damaged(path, damage.message, damage.expected, damage.found)
    return min(readable, default=0)


class Results:
    """The contents of one results file, or of the group of a shared file that holds one run (see
    ``load_results``)."""

    def __init__(self, path: str | os.PathLike[str], *, locking: bool | str = False, group: str | None = None
                 ) -> None:
        self.path = Path(path)
        self.group = group
        """The group of :attr:`path` that holds the run (a job of a chunk's file); ``None``: the file's root."""
        self._locking = locking
        self._identity: tuple[int, ...] = ()
        self._recorded: dict[str, int] | None = None
        self._checked: dict[str, int] = {}
        with self._open() as f:
            self.attrs: dict[str, Any] = {k: _py(v) for k, v in f.attrs.items() if not k.startswith("_")}
            if self.attrs.get("format") != FORMAT:
                found = self.attrs.get("format")
                raise ResultsReadError(f"{self.path} is not a cosimrun results file (format={found!r})",
                                       path=str(self.path), expected=FORMAT,
                                       found=None if found is None else str(found))
            self.stats: dict[str, Any] = {k: _py(v) for k, v in f["stats"].attrs.items()} if "stats" in f else {}
            self.components: list[str] = []
            self._check_file(f)

    def _check_file(self, f: h5py.File) -> None:
        """Refuse a damaged file (see :func:`readable_length`) and list its components."""
        for name in ("components", "stats"):
            if name in f and not isinstance(f[name], h5py.Group):
                raise _damaged(self.path, f"/{name} is not a group", "a group", type(f[name]).__name__)
        self.components = list(f["components"]) if "components" in f else []
        for comp in self.components:
            self._length(f, f"components/{comp}")
        for table, columns in TABLE_COLUMNS.items():
            if table in f:
                self._length(f, table, columns)

    def _length(self, f: h5py.File, group_name: str, read: Sequence[str] | None = None) -> int:
        """:func:`readable_length` of a group of *f*. A closed file no longer changes: its lengths recorded at
        close are parsed once and each group is checked once (its datasets have one length, whatever is
        read); the file of a running job is checked at every read, as it grows."""
        key = group_name.strip("/")
        if key in self._checked:
            return self._checked[key]
        if self._recorded is None:
            self._recorded = recorded_lengths(self.path, f)
        n = readable_length(self.path, f, group_name, read, self._recorded)
        if self._recorded is not None:
            self._checked[key] = n
        return n

    @contextlib.contextmanager
    def _open(self) -> Iterator[h5py.Group]:
        """The run's root (the file, or its :attr:`group`) open for reading until the end of the block."""
        with self._open_file() as f:
            if self.group is None:
                yield f
                return
            if not isinstance(f.get(self.group), h5py.Group):
                raise FileNotFoundError(f"{self.path} has no group {self.group}: no run there (or its worker died "
                                        "before the run's first flush)")
            yield f[self.group]

    def _open_file(self) -> h5py.File:
        path = self.path
        if not path.exists() and path.name.endswith(_PARTIAL):
            finished = path.with_name(path.name[: -len(_PARTIAL)])
            if finished.exists():  # the run closed its file since it was loaded
                path = self.path = finished
        try:
            f = h5py.File(path, "r", locking=self._locking)
        except OSError as exc:
            if "locking flag" not in str(exc):
                raise
            # already open in this process with the other locking flag (e.g. by a writer): share that
            f = h5py.File(path, "r", locking=not self._locking if isinstance(self._locking, bool) else True)
        stat = os.fstat(f.id.get_vfd_handle())  # the file opened, even if the path was replaced since
        identity = (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if identity != self._identity:  # another file (a job run again) or one still written: check it anew
            self._identity, self._recorded, self._checked = identity, None, {}
        return f

    @property
    def address(self) -> str:
        """:attr:`path`, or ``<path>::<group>`` for a run in a group (what :func:`load_results` reads)."""
        return str(self.path) if self.group is None else run_address(self.path, self.group)

    def __repr__(self) -> str:
        return f"Results({self.address!r}, status={self.status!r}, components={self.components})"

    # ------------------------------------------------------------------ metadata
    @property
    def status(self) -> str:
        """``running``, ``complete``, ``failed`` or ``interrupted`` (as loaded)."""
        return str(self.attrs.get("status", ""))

    @property
    def experiment(self) -> str:
        return str(self.attrs.get("experiment", ""))

    @property
    def error(self) -> str:
        return str(self.attrs.get("error", ""))

    @property
    def stop_time(self) -> float | None:
        """Where a component asked to end the run (an FMU's ``terminateSimulation``; root attribute ``stop_time``):
        the run completed there, before ``tf``. ``None`` for a run that was not stopped."""
        value = self.attrs.get("stop_time")
        return None if value is None else float(value)

    @property
    def stop_component(self) -> str:
        """The component that asked to end the run (``""``: none)."""
        return str(self.attrs.get("stop_component", ""))

    @property
    def stop_reason(self) -> str:
        """Why it asked, e.g. ``asked to terminate (fmi2DoStep returned fmi2Discard with fmi2Terminated)``."""
        return str(self.attrs.get("stop_reason", ""))

    @cached_property
    def config(self) -> dict[str, Any]:
        """The resolved config (root attribute ``config_yaml``) as a dict; ``{}`` when absent."""
        text = self.attrs.get("config_yaml")
        if not text:
            return {}
        import yaml

        loaded = yaml.safe_load(text)
        return loaded if isinstance(loaded, dict) else {"value": loaded}

    def _check(self, component: str) -> str:
        if component not in self.components:
            raise UnknownNameError("component", component, self.components, f"in {self.path.name}")
        return component

    # ------------------------------------------------------------------ histories
    def ports(self, component: str) -> dict[str, tuple[str | None, str]]:
        """``{port: (unit or None, port_type)}`` of *component*."""
        with self._open() as f:
            group = f["components"][self._check(component)]
            return {
                name: (_py(ds.attrs.get("units")), str(_py(ds.attrs.get("port_type", ""))))
                for name, ds in group.items()
                if name not in ("time", "micro")
            }

    def history(self, component: str, ports: list[str] | None = None) -> dict[str, PortSeries]:
        """``{port: PortSeries}`` of *component* (all ports, or those named)."""
        with self._open() as f:
            group = f["components"][self._check(component)]
            recorded = [n for n in group if n not in ("time", "micro")]
            names = recorded if ports is None else list(ports)
            for name in names:
                if name not in recorded:
                    raise UnknownNameError("port", name, recorded, f"of component {component!r}")
            n = self._length(f, f"/components/{component}", ("time", "micro", *names))
            time, micro = group["time"][:n], group["micro"][:n]
            return {
                name: PortSeries(
                    time,
                    read_column(group[name], n),
                    micro,
                    _py(group[name].attrs.get("units")),
                    str(_py(group[name].attrs.get("port_type", ""))),
                )
                for name in names
            }

    def trajectory(self, component: str, port: str, as_unit: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(time, values)`` of one port, converted to *as_unit* when given."""
        series = self.history(component, [port])[port]
        if as_unit is None or as_unit == series.unit:
            return series.time, series.values
        from cosimrun.core.units import compile_conversion

        conv = compile_conversion(series.unit, as_unit)
        return series.time, conv.scale * series.values.astype(np.float64) + conv.offset

    def to_dataframe(self, component: str | None = None) -> pd.DataFrame:
        """A DataFrame indexed by ``time`` with a ``micro`` column and one column per port of *component*,
        or, without one, of the whole run (see :meth:`_run_dataframe`)."""
        import pandas as pd

        if component is None:
            return self._run_dataframe()
        series = self.history(component)
        with self._open() as f:
            group = f["components"][self._check(component)]
            n = min((len(s) for s in series.values()), default=None)
            if n is None:
                n = self._length(f, f"/components/{component}", ("time", "micro"))
            time, micro = group["time"][:n], group["micro"][:n]
        data = {"micro": micro, **{name: s.values for name, s in series.items()}}
        return pd.DataFrame(data, index=pd.Index(time, name="time"))

    def _run_dataframe(self) -> pd.DataFrame:
        """Every component's ports as ``component.port`` columns on the union of their sample instants.

        Rows are superdense instants ``(time, micro)`` in order: an instant with events
        has a row per micro step (``time`` repeats, ``micro`` counts 0, 1, ...), as in a
        component's own frame. A port has a value where its component recorded a sample
        and is missing (NaN) elsewhere: nothing is interpolated or held, so every value
        is one the run recorded.
        """
        import pandas as pd

        frames = []
        for comp in self.components:
            frame = self.to_dataframe(comp)
            keys = pd.MultiIndex.from_arrays([frame.index.to_numpy(), frame["micro"].to_numpy()],
                                             names=["time", "micro"])
            frames.append(frame.drop(columns="micro").set_axis(keys).add_prefix(f"{comp}."))
        if not frames:
            return pd.DataFrame({"micro": np.zeros(0, dtype=np.int32)}, index=pd.Index([], name="time"))
        whole = pd.concat(frames, axis=1, join="outer", sort=True)
        return whole.reset_index(level="micro")

    def to_xarray(self, component: str) -> xr.Dataset:
        """The component group read by xarray (``engine="h5netcdf"``), loaded into memory."""
        import xarray as xr

        self._check(component)
        with self._open() as f:  # also resolves a .partial path renamed since loading
            self._length(f, f"components/{component}")
        # a Python file object: no HDF5 file locking, and works while a writer in this process has the file open
        where = f"components/{component}" if self.group is None else f"{self.group}/components/{component}"
        with open(self.path, "rb") as fh, xr.open_dataset(fh, engine="h5netcdf", group=where) as ds:
            return ds.load()

    # ------------------------------------------------------------------ tables
    def _table(self, group_name: str, columns: tuple[str, ...]) -> pd.DataFrame:
        import pandas as pd

        with self._open() as f:
            if group_name not in f:
                return pd.DataFrame({c: [] for c in columns})
            group = f[group_name]
            n = self._length(f, group_name, columns)
            return pd.DataFrame({c: read_column(group[c], n) for c in columns})

    @cached_property
    def events(self) -> pd.DataFrame:
        """Columns ``time, micro, component, event`` in superdense time order."""
        return self._table("events", TABLE_COLUMNS["events"])

    @cached_property
    def mode_switches(self) -> pd.DataFrame:
        """Columns ``time, component, from_mode, to_mode``."""
        return self._table("mode_switches", TABLE_COLUMNS["mode_switches"])

    @cached_property
    def coupling_error(self) -> pd.DataFrame:
        """The estimated coupling error per connection into a real input: columns ``connection, unit, max, rms,
        time_of_max, range, relative`` (``relative`` = ``max`` / ``range``), largest relative first; empty for
        a run that did not complete or was written before the estimates existed."""
        return self._table("coupling_error", TABLE_COLUMNS["coupling_error"])

    @cached_property
    def global_error(self) -> pd.DataFrame:
        """The estimated global error per recorded real output of a run under ``master.global_error: estimate``:
        columns ``output, unit, max, time_of_max, scale, tolerance, ratio`` (``ratio`` = ``max`` / ``tolerance``,
        ``tolerance`` = ``atol + rtol * scale``), largest ratio first; empty for a run without the estimate."""
        return self._table("global_error", TABLE_COLUMNS["global_error"])

    @cached_property
    def steps(self) -> pd.DataFrame:
        """Every step a run under ``step_control: error`` tried: columns ``time`` (its start), ``step``,
        ``error`` (the error norm, <= 1 within tolerance) and ``accepted``; empty under fixed steps."""
        table = self._table("steps", STEP_COLUMNS)
        table["accepted"] = table["accepted"].astype(bool)
        return table


DEFAULT_FILE = "results.h5"
"""The results file a run writes unless ``storage.file`` names another."""


@overload
def load_results(path: str | os.PathLike[str], *, locking: bool | str = False, member: None = None) -> Results: ...


@overload
def load_results(path: str | os.PathLike[str], *, locking: bool | str = False,
                 member: int) -> Results | EnsembleMember: ...


def load_results(path: str | os.PathLike[str], *, locking: bool | str = False,
                 member: int | None = None) -> Results | EnsembleMember:
    """Open a results file; ``<path>.partial`` is used when only the unfinished file exists.

    *path* may also be a run's directory: its ``results.h5`` is read, else the
    one results file in it (a custom ``storage.file``), finished or ``.partial``.
    A job of a sweep is read by the same address ``<sweep dir>/<job>`` whether it
    ran on its own (its folder) or as a member of an ensemble (the member of the
    ensemble's file the sweep index names: :func:`cosimrun.runner.load.sweep_job`).
    An ensemble's file (a sweep's ``ensembles/*.h5``) is read for one *member*
    (:class:`cosimrun.storage.ensemble.EnsembleMember`). A job of a sweep under
    ``storage.layout: per_chunk`` is the group of its chunk's file: *path* is then its
    address ``<chunk file>::/runs/<job>`` (the sweep index's ``path``), or the job's
    folder, whose ``results.ref`` points there (:mod:`cosimrun.storage.chunkfile`).

    HDF5 file locking is off by default (*locking*) so that the file of a job
    still running can be read; such a read sees the state of the writer's last
    flush (read again for newer data).
    """
    ref = read_ref(path) if member is None and Path(path).is_dir() else None
    file, group = split_address(ref or path)
    if group is not None:
        if member is not None:
            raise ResultsReadError(f"{path} is a run's group, not an ensemble's file: it has no member {member}",
                                   path=str(path), expected="an ensemble's file", found="a run's group")
        if not file.is_file():
            raise FileNotFoundError(f"no results file {file} (of {path})")
        return Results(file, locking=locking, group=group)
    path = Path(path)
    found = _results_at(path)
    if found is None and member is None:
        from cosimrun.runner.load import sweep_job  # the sweep index is read (while it grows too) by the runner

        job = sweep_job(path)
        if job is not None:
            path, member = job
            found = _results_at(path)
    if found is None:
        raise _none_in(path, "found none") if path.is_dir() else FileNotFoundError(f"no results file {path}")
    path = written_path(found)
    if member is not None or path.suffix == ".h5" and path.parent.name == "ensembles":
        from cosimrun.storage.ensemble import FORMAT as ENSEMBLE_FORMAT
        from cosimrun.storage.ensemble import is_ensemble_file, load_member

        if is_ensemble_file(path):
            if member is None:
                raise ResultsReadError(f"{path} is an ensemble's file: give the member to read (member=N, the sweep "
                                       "index's 'member' column), or read a job at its address <sweep dir>/<job>",
                                       path=str(path), expected=FORMAT, found=ENSEMBLE_FORMAT)
            return load_member(path, member)
        if member is not None:
            raise ResultsReadError(f"{path} is no ensemble's file: it has no member {member}", path=str(path),
                                   expected=ENSEMBLE_FORMAT, found=None)
    return Results(path, locking=locking)


def _results_at(path: Path) -> Path | None:
    """The results file *path* names (finished or ``.partial``): itself, or in a run directory its
    ``results.h5``, else its only results file (by final name); ``None`` where there is none. A directory with
    several is a ``FileNotFoundError`` naming them."""
    if not path.is_dir():
        return path if path.exists() or partial_path(path).exists() else None
    default = path / DEFAULT_FILE
    if default.exists() or partial_path(default).exists():
        return default
    names = sorted({p.name.removesuffix(_PARTIAL) for p in path.iterdir() if _is_results_file(p)})
    if len(names) > 1:
        raise _none_in(path, f"found several: {', '.join(names)}")
    return path / names[0] if names else None


def _none_in(directory: Path, found: str) -> FileNotFoundError:
    """No single results file in run directory *directory*: what was looked for, and what was *found*."""
    return FileNotFoundError(f"no results file in directory {directory}: looked for {DEFAULT_FILE} (or "
                             f"{DEFAULT_FILE}{_PARTIAL}) and for a single cosimrun results file, {found}")


def _is_results_file(path: Path) -> bool:
    """Whether *path* is a file with the root attribute ``format = cosimrun-results``."""
    if not path.is_file() or not h5py.is_hdf5(path):
        return False
    try:
        with h5py.File(path, "r", locking=False) as f:
            return _py(f.attrs.get("format")) == FORMAT
    except OSError:
        return False
