"""One results file per ensemble: every member's status, parameters, final values and histories over a
``member`` dimension, readable by xarray without cosimrun.

Layout of the group (``ensemble`` by default), written with h5netcdf (netCDF-4 dimensions)::

    dimensions  member (M), time (samples kept; under step control and with state events or mode switches:
                sample, each member's own instants)
    member(member), time(time)                coordinates (under step control and with events: time(sample,
                                              member), each member's own instants, NaN after its last sample)
    micro(sample, member)                     with events: each sample's micro step (0 at an accepted instant,
                                              k after the k-th micro step of the events there; -1 after the
                                              member's last sample), as a run's ``micro``
    status(member)                            complete | failed
    job(member), overrides(member)            a sweep's job number and overrides of each member
    failure(member), failure_time(member)     the cause ("" when complete) and the instant (NaN)
    parameter.<component>.<name>(member)      every given parameter, one value per member
    final.<component>.<port>(member)          final values (a failed member's: at its last sound point)
    stats.<name>(member)                      counts per member (ijcsa's iterations; hybrid: macro and trial steps,
                                              rollbacks, events; step control: accepted and rejected steps, ...,
                                              smallest_step and largest_step in seconds); members run one after
                                              the other: every statistic of the member's run, texts as strings
    event.member, .time, .micro, .component,  under the hybrid master, every event a member handled (dimension
    .name (event)                             event), as a run's events table with its member
    switch.member, .time, .component,         under the hybrid master with a multi component, every mode switch of
    .from_mode, .to_mode (switch)             a member (dimension switch), as a run's mode_switches with its member
    <component>.<port>(time, member)          the histories kept (``record_every``); NaN after a failure (under
                                              step control and with events over (sample, member), NaN after a
                                              member's last sample); an event port (attribute ``kind`` "event")
                                              as 1.0 where it is true, 0.0 where false
    connection(connection)                    the connections into real inputs whose coupling error is estimated
    coupling_error.unit(connection)           the input's unit ("" for none)
    coupling_error.<figure>(connection, member)  max, rms, time_of_max, range, relative of each member's
                                              estimate, as a run's ``/coupling_error`` holds them (NaN for a
                                              failed member)
    attributes                                format, system, master, t0, tf, dt, record_every (and its name as
                                              a run's setting, decimate: storage.decimate), members,
                                              master settings and statistics (JSON), data_crc32 (below)

Each variable of the group has its CRC-32 in the group's attribute ``data_crc32`` (JSON ``{name: [length,
CRC-32]}``, summed from the data written, as a run's results file keeps them): a resume takes over the members of
a file whose data still sums to them only (:func:`unreadable`).

Read it with ``xarray.open_dataset(path, engine="h5netcdf", group="ensemble")``. The file is written as
``<path>.partial`` and renamed when complete, as run results are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5netcdf
import h5py
import numpy as np

from cosimrun.errors import ResultsReadError
from cosimrun.storage.hdf5 import (
    CHECKSUMS_ATTR,
    COUPLING_NUMBERS,
    check_name,
    crc32,
    dataset_crc32,
    partial_path,
    to_attr,
    written_whole,
)
from cosimrun.storage.results import _TEXT_COLUMNS as TEXT_COLUMNS
from cosimrun.storage.results import TABLE_COLUMNS, PortSeries, Results

if TYPE_CHECKING:
    import pandas as pd

    from cosimrun.ensemble import EnsembleResult

FORMAT = "cosimrun-ensemble"
FORMAT_VERSION = 1
DEFAULT_GROUP = "ensemble"
COUPLING_PREFIX = "coupling_error."
"""The coupling-error figures' variables are named ``coupling_error.<figure>``."""
_STR = h5py.string_dtype("utf-8")


HISTORY_FILTERS = {"compression": "gzip", "compression_opts": 1, "shuffle": True}
"""Filters of the histories: deflate at its fastest after the byte shuffle, as in a run's file
(:mod:`cosimrun.storage.hdf5`): grouped by significance, the bytes of floats compress smaller and faster."""


def write_ensemble(path: str | os.PathLike[str], result: EnsembleResult, *, group: str = DEFAULT_GROUP,
                   attrs: dict[str, object] | None = None, jobs: Sequence[int] | None = None,
                   overrides: Sequence[str] | None = None) -> Path:
    """Write *result* to the group *group* of a new file *path* (replaced if it exists); returns *path*.

    The file is made in memory and written out in one piece: a full disk raises
    :class:`~cosimrun.errors.ResultsWriteError` and leaves no file
    (:func:`~cosimrun.storage.hdf5.written_whole`).

    *attrs* are extra attributes of the group (an experiment's name, a sweep's id); a sweep's ensemble also gives
    each member's job number (*jobs*, the variable ``job``) and overrides (*overrides*, ``overrides``).
    """
    check_name(group, "group")
    path = Path(path)
    partial = partial_path(path)
    partial.unlink(missing_ok=True)
    with written_whole(path, partial) as image, h5netcdf.File(image, "w") as f:
        _write_group(f.create_group(group), result, attrs, jobs, overrides)
    return path


class _SummedGroup:
    """An h5netcdf group whose new variables' CRC-32s are noted in :attr:`sums` from the data given (as a reader
    sums it: :func:`~cosimrun.storage.hdf5.crc32`), without reading back what was compressed."""

    def __init__(self, group: h5netcdf.Group) -> None:
        self.group = group
        self.sums: dict[str, list[int]] = {}

    def create_variable(self, name: str, dimensions: tuple[str, ...], dtype: Any = None, data: Any = None,
                        **kwargs: Any) -> h5netcdf.Variable:
        var = self.group.create_variable(name, dimensions, dtype=dtype, data=data, **kwargs)
        stored = np.asarray(data)
        self.sums[name] = [len(stored), crc32(stored.ravel() if stored.dtype == object else stored)]
        return var

    def __getattr__(self, name: str) -> Any:
        return getattr(self.group, name)


def _write_group(group: h5netcdf.Group, result: EnsembleResult, attrs: dict[str, object] | None,
                 jobs: Sequence[int] | None, overrides: Sequence[str] | None) -> None:
    """The variables and attributes of :func:`write_ensemble`'s *group*, and the variables' checksums."""
    members = result.members
    own_clocks = np.ndim(result.time) == 2
    samples = ("sample", "member") if own_clocks else ("time", "member")
    group.dimensions = {"member": members, samples[0]: len(result.time)}
    g: Any = _SummedGroup(group)
    g.create_variable("member", ("member",), data=np.arange(members, dtype=np.int64))
    g.create_variable("time", samples[:np.ndim(result.time)], data=np.asarray(result.time, dtype=float),
                      **({"chunks": _chunks(result.time.shape), **HISTORY_FILTERS} if own_clocks else {})
                      ).attrs["units"] = "s"
    g.create_variable("status", ("member",), dtype=_STR, data=np.asarray(result.status, dtype=object))
    failures = [result.failures.get(m) for m in range(members)]
    g.create_variable("failure", ("member",), dtype=_STR,
                      data=np.array(["" if fl is None else str(fl) for fl in failures], dtype=object))
    g.create_variable("failure_time", ("member",),
                      data=np.array([np.nan if fl is None else fl.time for fl in failures], dtype=float))
    if jobs is not None:
        g.create_variable("job", ("member",), data=np.asarray(jobs, dtype=np.int64))
    if overrides is not None:
        g.create_variable("overrides", ("member",), dtype=_STR, data=np.asarray(list(overrides), dtype=object))
    for key, values in result.parameters.items():
        values = np.asarray(values)
        if values.dtype.kind in "biuf":
            g.create_variable(f"parameter.{key}", ("member",), data=values.astype(float))
        else:
            g.create_variable(f"parameter.{key}", ("member",), dtype=_STR,
                              data=np.array([str(v) for v in values], dtype=object))
    for key, values in result.member_stats.items():
        values = np.asarray(values)
        if values.dtype.kind in "OUS":  # a text (how events were handled, ...)
            g.create_variable(f"stats.{key}", ("member",), dtype=_STR,
                              data=np.array([str(v) for v in values], dtype=object))
        else:
            g.create_variable(f"stats.{key}", ("member",), data=values.astype(float if values.dtype.kind == "f"
                                                                                else np.int64))
    _write_events(g, result)
    _write_switches(g, result)
    for key, values in result.final.items():
        var = g.create_variable(f"final.{key}", ("member",), data=np.asarray(values, dtype=float))
        _unit(var, result.units.get(key))
    if result.micro is not None:
        g.create_variable("micro", samples, data=np.asarray(result.micro, dtype=np.int32),
                          chunks=_chunks(result.micro.shape), **HISTORY_FILTERS)
    for key, values in result.history.items():
        var = g.create_variable(key, samples, data=np.asarray(values, dtype=float),
                                chunks=_chunks(values.shape), **HISTORY_FILTERS)
        _unit(var, result.units.get(key))
        if key in result.kinds:
            var.attrs["kind"] = result.kinds[key]
    _write_coupling_error(g, result)
    info = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "system": result.system, "master": result.master,
        "t0": result.t0, "tf": result.tf, "dt": result.dt, "record_every": result.record_every,
        "decimate": result.record_every,
        "members": members, "complete": int(result.stats.complete), "failed": int(result.stats.failed),
        "master_settings": json.dumps(result.master_settings, sort_keys=True, default=str),
        "stats": json.dumps(result.stats.as_dict(), sort_keys=True), **(attrs or {}),
    }
    for name, value in info.items():
        stored = to_attr(value)
        if stored is not None:
            g.attrs[name] = stored
    g.attrs[CHECKSUMS_ATTR] = json.dumps(g.sums)


def _write_member_rows(g: h5netcdf.Group, prefix: str, rows: Mapping[str, Any], columns: dict[str, str]) -> None:
    """A table with a row per event or switch of any member (*rows*: column -> values, ``member`` among them)
    over the dimension *prefix*: ``<prefix>.member`` and the columns *columns* (name -> variable suffix), times
    in seconds, micro steps as int32, texts as strings; nothing when it has no rows."""
    if not rows:
        return
    g.dimensions[prefix] = len(rows["member"])
    dim = (prefix,)
    g.create_variable(f"{prefix}.member", dim, data=np.asarray(rows["member"], dtype=np.int64))
    for column, suffix in columns.items():
        name = f"{prefix}.{suffix}"
        if column == "time":
            g.create_variable(name, dim, data=np.asarray(rows[column], dtype=float)).attrs["units"] = "s"
        elif column == "micro":
            g.create_variable(name, dim, data=np.asarray(rows[column], dtype=np.int32))
        else:
            g.create_variable(name, dim, dtype=_STR, data=np.asarray(rows[column], dtype=object))


EVENT_COLUMNS = {"time": "time", "micro": "micro", "component": "component", "event": "name"}
"""The events table's columns -> their variables' suffixes (``event.*``)."""
SWITCH_COLUMNS = {column: column for column in ("time", "component", "from_mode", "to_mode")}
"""The mode switches table's columns -> their variables' suffixes (``switch.*``)."""


def _write_events(g: h5netcdf.Group, result: EnsembleResult) -> None:
    """The events every member handled (the hybrid master), one row each over the dimension ``event``:
    ``event.member``, ``event.time``, ``event.micro``, ``event.component``, ``event.name``."""
    _write_member_rows(g, "event", result.events, EVENT_COLUMNS)


def _member_rows(path: Path, group: str, prefix: str, member: int, table: str,
                 columns: dict[str, str]) -> pd.DataFrame:
    """Member *member*'s rows of the table ``<prefix>.*`` of an ensemble file (rows per event or switch, their
    member in ``<prefix>.member``): its columns *columns* (name -> variable suffix), times as float64, micro steps
    as int32, texts as str; the empty table *table* when the file holds none."""
    import pandas as pd

    with h5py.File(path, "r") as f:
        g = f[group]
        if f"{prefix}.member" not in g:
            return _empty(table)
        rows = np.flatnonzero(np.asarray(g[f"{prefix}.member"][...]) == member)
        out = {}
        for column, suffix in columns.items():
            values = g[f"{prefix}.{suffix}"][...][rows]
            out[column] = (np.asarray(values, dtype=np.float64) if column == "time"
                           else np.asarray(values, dtype=np.int32) if column == "micro"
                           else np.array([_text(v) for v in values], dtype=object))
        return pd.DataFrame(out)


def _read_events(path: Path, group: str, member: int) -> pd.DataFrame:
    """Member *member*'s rows of the events table of an ensemble file (none when it holds no events)."""
    return _member_rows(path, group, "event", member, "events", EVENT_COLUMNS)


def _write_switches(g: h5netcdf.Group, result: EnsembleResult) -> None:
    """The mode switches every member made (the hybrid master with a multi component), one row each over the
    dimension ``switch``: ``switch.member``, ``switch.time``, ``switch.component``, ``switch.from_mode``,
    ``switch.to_mode``."""
    _write_member_rows(g, "switch", result.switches, SWITCH_COLUMNS)


def _read_switches(path: Path, group: str, member: int) -> pd.DataFrame:
    """Member *member*'s rows of the mode switches of an ensemble file (none when it holds none)."""
    return _member_rows(path, group, "switch", member, "mode_switches", SWITCH_COLUMNS)


def _write_coupling_error(g: h5netcdf.Group, result: EnsembleResult) -> None:
    """The coupling-error estimates over the dimensions ``connection`` and ``member`` (none without any)."""
    errors = result.coupling_error
    if errors is None or not errors.connections:
        return
    g.dimensions["connection"] = len(errors.connections)
    g.create_variable("connection", ("connection",), dtype=_STR, data=np.array(errors.connections, dtype=object))
    g.create_variable(f"{COUPLING_PREFIX}unit", ("connection",), dtype=_STR,
                      data=np.array([unit or "" for unit in errors.units], dtype=object))
    for name in COUPLING_NUMBERS:
        var = g.create_variable(f"{COUPLING_PREFIX}{name}", ("connection", "member"),
                                data=np.asarray(getattr(errors, name), dtype=float))
        if name == "time_of_max":
            var.attrs["units"] = "s"


def _unit(var: h5netcdf.Variable, unit: str | None) -> None:
    if unit:
        var.attrs["units"] = unit


def _chunks(shape: tuple[int, ...]) -> tuple[int, int]:
    """Chunks of about 1 MiB: whole rows of members, as many samples as fit."""
    samples, members = shape
    rows = max(1, min(samples, (1 << 17) // max(1, members)))
    return rows, max(1, min(members, 1 << 17))


def is_ensemble_file(path: str | os.PathLike[str], group: str = DEFAULT_GROUP) -> bool:
    """Whether *path* is an HDF5 file holding an ensemble (format ``cosimrun-ensemble``) in *group*."""
    path = Path(path)
    if not path.is_file() or not h5py.is_hdf5(path):
        return False
    try:
        with h5py.File(path, "r") as f:  # written whole and renamed: no writer to lock out (and xarray may hold it)
            g = f.get(group)
            return g is not None and _text(g.attrs.get("format")) == FORMAT
    except OSError:
        return False


def attr_value(value: Any) -> Any:
    """An attribute (or string element) of an ensemble file as a plain Python value."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.ravel()[0]
    if isinstance(value, bytes | np.bytes_):
        return value.decode("utf-8", errors="replace")
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class EnsembleSummary:
    """What a sweep's resume reads of an ensemble file: its group's attributes, each member's job number and status,
    the parameters by name (``comp.param``), the final values by port (``comp.port``) and the largest relative
    coupling error (NaN without estimates), one entry per member."""

    attrs: dict[str, Any]
    jobs: list[int]
    status: list[str]
    parameters: dict[str, np.ndarray]
    finals: dict[str, np.ndarray]
    coupling_error_max: np.ndarray


def read_summary(path: str | os.PathLike[str], group: str = DEFAULT_GROUP) -> EnsembleSummary | None:
    """The :class:`EnsembleSummary` of the ensemble file *path* (``None``: not one with job numbers, or damaged)."""
    try:
        with h5py.File(path, "r", locking=False) as f:
            g = f[group]
            attrs = {k: attr_value(v) for k, v in g.attrs.items()}
            if attrs.get("format") != FORMAT or "job" not in g:
                return None
            return EnsembleSummary(
                attrs, [int(j) for j in g["job"][...]], [_text(s) for s in g["status"][...]],
                {name[len("parameter."):]: np.asarray(g[name][...], dtype=float)
                 for name in g if name.startswith("parameter.")},
                {name[len("final."):]: np.asarray(g[name][...], dtype=float)
                 for name in g if name.startswith("final.")},
                _largest_relative(g))
    except (OSError, KeyError, ValueError):
        return None


def _largest_relative(g: h5py.Group) -> np.ndarray:
    """Each member's largest ``coupling_error.relative`` (a run's ``coupling_error_max``; NaN without estimates)."""
    members = int(attr_value(g.attrs["members"]))
    relative = g.get(f"{COUPLING_PREFIX}relative")
    if relative is None or not relative.shape[0]:
        return np.full(members, np.nan)
    return np.max(np.asarray(relative[...], dtype=float), axis=0)


def _text(value: Any) -> str:
    return str(attr_value(value))


class EnsembleMember:
    """Member *member* of an ensemble file, read as a run's results are (:class:`~cosimrun.storage.results.Results`):
    status, error, attributes and statistics, the components recorded, each component's histories as
    :class:`PortSeries` (and frames), trajectories, and the tables: its events (under the hybrid master), the
    coupling-error estimates as the member's own run has them, its mode switches
    (under the hybrid master), and steps, empty since ensembles keep no step log (under step control each member's
    samples are at its own accepted steps). The post commands read it as
    they read a run (``cosimrun plot|report|compare|export <sweep dir>/<job>``)."""

    def __init__(self, path: str | os.PathLike[str], member: int, *, group: str = DEFAULT_GROUP) -> None:
        self.path = Path(path)
        self.member = int(member)
        self.group = group
        with h5py.File(self.path, "r") as f:
            g = f[group]
            found = g.attrs.get("format")
            if _text(found) != FORMAT:
                raise ResultsReadError(f"{self.path}: not a cosimrun ensemble file (group {group!r})",
                                       path=str(self.path), expected=FORMAT,
                                       found=None if found is None else _text(found))
            members = int(attr_value(g.attrs["members"]))
            if not 0 <= self.member < members:
                raise IndexError(f"{self.path}: member {self.member} out of range (the ensemble has {members} members)")
            self.status = _text(g["status"][self.member])
            self.error = _text(g["failure"][self.member])
            self.experiment = _text(g.attrs.get("experiment", g.attrs.get("system", "")))
            self.job = int(g["job"][self.member]) if "job" in g else None
            group_attrs = {k: attr_value(v) for k, v in g.attrs.items()}
            self.stats: dict[str, Any] = {**json.loads(group_attrs.pop("stats", "{}")),
                                          **{name[len("stats."):]: attr_value(g[name][self.member])
                                             for name in g if name.startswith("stats.")}}
            self.attrs: dict[str, Any] = {**group_attrs, "status": self.status, "error": self.error,
                                          "member": self.member}
            if self.job is not None:
                self.attrs["job"] = self.job
            if "overrides" in g:
                self.attrs["overrides"] = _text(g["overrides"][self.member])
            if self.error:
                self.attrs["failure_time"] = float(g["failure_time"][self.member])
            self._ports: dict[str, dict[str, tuple[str | None, str]]] = {}
            for name, ds in g.items():
                if ds.ndim == 2 and name not in ("time", "micro") and not name.startswith(
                        ("final.", "parameter.", "stats.", COUPLING_PREFIX)):
                    comp, _, port = name.partition(".")
                    unit, kind = ds.attrs.get("units"), ds.attrs.get("kind")
                    self._ports.setdefault(comp, {})[port] = (None if unit is None else _text(unit),
                                                              "real" if kind is None else _text(kind))

    def __repr__(self) -> str:
        return f"EnsembleMember({str(self.path)!r}, member={self.member}, status={self.status!r})"

    @property
    def components(self) -> list[str]:
        """The components with recorded histories."""
        return list(self._ports)

    def ports(self, component: str) -> dict[str, tuple[str | None, str]]:
        """``{port: (unit, port type)}`` of *component*'s recorded outputs (``real``, or ``event``)."""
        return dict(self._check(component))

    def _check(self, component: str) -> dict[str, tuple[str | None, str]]:
        if component not in self._ports:
            from cosimrun.errors import UnknownNameError

            raise UnknownNameError("component", component, self._ports, f"in {self.path}")
        return self._ports[component]

    def history(self, component: str, ports: list[str] | None = None) -> dict[str, PortSeries]:
        """This member's samples of *component*'s ports (all recorded ports by default)."""
        known = self._check(component)
        names = list(known) if ports is None else list(ports)
        out = {}
        with h5py.File(self.path, "r") as f:
            g = f[self.group]
            stored = g["time"]
            time = np.asarray(stored[...] if stored.ndim == 1 else stored[:, self.member], dtype=float)
            kept = int(np.count_nonzero(~np.isnan(time)))  # under step control and events: its own instants
            time = time[:kept]
            micro = (np.asarray(g["micro"][:kept, self.member], dtype=np.int32) if "micro" in g
                     else np.zeros(kept, dtype=np.int32))  # without events: one sample per instant
            for port in names:
                if port not in known:
                    from cosimrun.errors import UnknownNameError

                    raise UnknownNameError("port", port, known, f"of component {component!r} in {self.path}")
                unit, kind = known[port]
                values = np.asarray(g[f"{component}.{port}"][:kept, self.member], dtype=float)
                out[port] = PortSeries(time, values if kind == "real" else values.astype(np.bool_), micro, unit,
                                       kind)
        return out

    def trajectory(self, component: str, port: str) -> tuple[np.ndarray, np.ndarray]:
        """``(time, values)`` of one port of this member."""
        series = self.history(component, [port])[port]
        return series.time, series.values

    @property
    def directory(self) -> Path:
        """The folder the member would have run in had it run alone, ``<sweep dir>/<job>`` (sharded as a sweep's
        job folders are, for an ensemble's file in ``<sweep dir>/ensembles/``), else ``<file>.member<N>`` beside
        the file: where the post commands write this member's plot, report and export."""
        if self.job is not None and self.path.parent.name == "ensembles":
            from cosimrun.runner.layout import job_subdir  # the sweep's folder layout, one rule for both

            sweep = self.path.parent.parent
            return sweep / job_subdir(sweep, self.job)
        return self.path.with_name(f"{self.path.stem}.member{self.member}")

    @property
    def config(self) -> dict[str, Any]:
        """``{}``: an ensemble's file keeps each member's overrides (``attrs["overrides"]``), not its config."""
        return {}

    def to_dataframe(self, component: str | None = None) -> pd.DataFrame:
        """A DataFrame indexed by ``time`` with a ``micro`` column and one column per recorded port of
        *component*, or, without one, of every component (``component.port`` columns), as a run's."""
        import pandas as pd

        if component is None:
            return Results._run_dataframe(self)  # type: ignore[arg-type]
        series = self.history(component)
        time = next(iter(series.values())).time
        micro = next(iter(series.values())).micro
        return pd.DataFrame({"micro": micro, **{port: s.values for port, s in series.items()}},
                            index=pd.Index(time, name="time"))

    @property
    def events(self) -> pd.DataFrame:
        """Columns ``time, micro, component, event``: the state events this member handled (under the hybrid
        master; none under the others), as its run's events table."""
        return _read_events(self.path, self.group, self.member)

    @property
    def mode_switches(self) -> pd.DataFrame:
        """Columns ``time, component, from_mode, to_mode``: the mode switches this member made (under the hybrid
        master with a multi component; none otherwise), as its run's."""
        return _read_switches(self.path, self.group, self.member)

    @property
    def coupling_error(self) -> pd.DataFrame:
        """The estimated coupling error per connection into a real input, as the member's own run stores it
        (:attr:`Results.coupling_error <cosimrun.storage.results.Results.coupling_error>`: largest relative first;
        no rows for a failed member)."""
        import pandas as pd

        with h5py.File(self.path, "r") as f:
            g = f[self.group]
            if f"{COUPLING_PREFIX}max" not in g:
                return _empty("coupling_error")
            numbers = {name: np.asarray(g[f"{COUPLING_PREFIX}{name}"][:, self.member], dtype=float)
                       for name in COUPLING_NUMBERS}
            connections = g["connection"].asstr()[...]
            units = g[f"{COUPLING_PREFIX}unit"].asstr()[...]
        if np.isnan(numbers["max"]).any():
            return _empty("coupling_error")
        order = np.argsort(-numbers["relative"], kind="stable")  # as a run sorts its estimates
        columns = {"connection": connections, "unit": units, **numbers}
        return pd.DataFrame({name: np.asarray(values, dtype=object if name in TEXT_COLUMNS else float)[order]
                             for name, values in columns.items()}, columns=list(TABLE_COLUMNS["coupling_error"]))

    @property
    def global_error(self) -> pd.DataFrame:
        """The global-error table's columns, no rows: ensembles do not estimate the global error."""
        return _empty("global_error")

    @property
    def steps(self) -> pd.DataFrame:
        """The step log's columns, no rows: ensembles keep no step log (under step control the member's samples are
        at its accepted steps, its step statistics in :attr:`stats`)."""
        return _empty("steps")


def _empty(table: str) -> pd.DataFrame:
    """A run's table *table* with its columns and no rows, as a results file without that table reads."""
    import pandas as pd

    dtypes = {"micro": np.int32, "accepted": bool}
    return pd.DataFrame({column: np.empty(0, dtype=object if column in TEXT_COLUMNS else
                                          dtypes.get(column, np.float64))
                         for column in TABLE_COLUMNS[table]})


def unreadable(path: str | os.PathLike[str]) -> str | None:
    """What of the ensemble file *path* cannot be trusted (a dataset whose storage is cut off or whose compressed
    chunks no longer decompress, as a disk fault or a copy that stopped leaves it, or whose data no longer has the
    CRC-32 written with it), or None when every dataset reads whole and sums as written: a resume takes over
    members of such a file only. Files written before checksums are read whole only."""
    try:
        with h5py.File(path, "r", locking=False) as f:
            datasets: list[h5py.Dataset] = []
            f.visititems(lambda _name, obj: datasets.append(obj) if isinstance(obj, h5py.Dataset) else None)
            sealed = {g.name: g for g in (f, *(ds.parent for ds in datasets)) if CHECKSUMS_ATTR in g.attrs}
            for group in sealed.values():
                problem = _mismatch(group)
                if problem:
                    return problem
            within = tuple(name.rstrip("/") + "/" for name in sealed)
            for ds in datasets:
                if not ds.name.startswith(within):
                    _crc(ds)
    except (_DatasetUnreadable, OSError, ValueError, RuntimeError, KeyError) as exc:
        return str(exc)
    return None


class _DatasetUnreadable(Exception):
    """A dataset of an ensemble file whose data does not read (the message names it)."""


def _mismatch(group: h5py.Group) -> str | None:
    """The first dataset of the sealed *group* that is missing, new or sums to another length or CRC-32 than its
    ``data_crc32`` entry (None: all agree)."""
    try:
        expected = json.loads(_text(group.attrs[CHECKSUMS_ATTR]))
    except ValueError:
        return f"{group.name}: the {CHECKSUMS_ATTR} attribute is not valid JSON"
    found = _checksums(group)
    for name in sorted(set(expected) | set(found)):
        if name not in found:
            return f"{group.name}/{name}: missing"
        if name not in expected:
            return f"{group.name}/{name}: not written with the file"
        if list(expected[name]) != found[name]:
            return f"{group.name}/{name}: CRC-32 mismatch (the data changed after it was written)"
    return None


_DIMENSION_ONLY = "This is a netCDF dimension but not a netCDF variable"
"""How netCDF-4 marks the dataset of a dimension without a variable of its name (its data is not written)."""


def _checksums(group: h5py.Group) -> dict[str, list[int]]:
    """``{dataset name within *group*: [length, CRC-32 of its data]}`` of every variable under *group* (netCDF's
    datasets of dimensions alone aside)."""
    sums: dict[str, list[int]] = {}

    def add(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and not _text(obj.attrs.get("NAME", "")).startswith(_DIMENSION_ONLY):
            sums[name] = [int(obj.shape[0]) if obj.ndim else 1, _crc(obj)]

    group.visititems(add)
    return sums


def _crc(ds: h5py.Dataset) -> int:
    """:func:`~cosimrun.storage.hdf5.dataset_crc32` of *ds*; a read that fails names the dataset."""
    try:
        return dataset_crc32(ds)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise _DatasetUnreadable(f"{ds.name}: {exc}") from exc


def load_member(path: str | os.PathLike[str], member: int, *, group: str = DEFAULT_GROUP) -> EnsembleMember:
    """Member *member* of the ensemble file *path* (a sweep index row's ``path`` and ``member``)."""
    return EnsembleMember(path, member, group=group)
