"""Read a results file written by :class:`~cosimrun.storage.hdf5.HDF5Writer`.

Metadata (attributes, statistics, component names) is read when the file is
loaded; port data, events and mode switches are read on demand, each time
opening the file briefly, so a ``.partial`` file of a running job can be looked
at (with HDF5 file locking off, see :func:`load_results`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from cosimrun.errors import ResultsReadError, UnknownNameError
from cosimrun.storage.hdf5 import FORMAT, partial_path, written_path

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

_PARTIAL = ".partial"


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


def read_column(ds: h5py.Dataset) -> np.ndarray:
    """A dataset's values: strings as ``str`` objects, CF booleans (``dtype="bool"``) as ``bool``."""
    if h5py.check_string_dtype(ds.dtype) is not None:
        out = np.empty(ds.shape[0], dtype=object)
        out[:] = ds.asstr()[...] if ds.shape[0] else []
        return out
    data = ds[...]
    if _py(ds.attrs.get("dtype")) == "bool":
        return data.astype(bool)
    return data


class Results:
    """The contents of one results file (see ``load_results``)."""

    def __init__(self, path: str | os.PathLike[str], *, locking: bool | str = False) -> None:
        self.path = Path(path)
        self._locking = locking
        with self._open() as f:
            self.attrs: dict[str, Any] = {k: _py(v) for k, v in f.attrs.items() if not k.startswith("_")}
            if self.attrs.get("format") != FORMAT:
                found = self.attrs.get("format")
                raise ResultsReadError(f"{self.path} is not a cosimrun results file (format={found!r})",
                                       path=str(self.path), expected=FORMAT,
                                       found=None if found is None else str(found))
            self.stats: dict[str, Any] = {k: _py(v) for k, v in f["stats"].attrs.items()} if "stats" in f else {}
            self.components: list[str] = list(f["components"]) if "components" in f else []

    def _open(self) -> h5py.File:
        path = self.path
        if not path.exists() and path.name.endswith(_PARTIAL):
            finished = path.with_name(path.name[: -len(_PARTIAL)])
            if finished.exists():  # the run closed its file since it was loaded
                path = self.path = finished
        try:
            return h5py.File(path, "r", locking=self._locking)
        except OSError as exc:
            if "locking flag" not in str(exc):
                raise
            # already open in this process with the other locking flag (e.g. by a writer): share that
            return h5py.File(path, "r", locking=not self._locking if isinstance(self._locking, bool) else True)

    def __repr__(self) -> str:
        return f"Results({str(self.path)!r}, status={self.status!r}, components={self.components})"

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
            # a running writer may have grown some datasets first: read the common length
            n = min(group[name].shape[0] for name in ("time", "micro", *names))
            time, micro = group["time"][:n], group["micro"][:n]
            return {
                name: PortSeries(
                    time,
                    read_column(group[name])[:n],
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
            n = min((len(s) for s in series.values()), default=group["time"].shape[0])
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
        self._open().close()  # resolves a .partial path renamed since loading
        # a Python file object: no HDF5 file locking, and works while a writer in this process has the file open
        with open(self.path, "rb") as fh, xr.open_dataset(fh, engine="h5netcdf", group=f"components/{component}") as ds:
            return ds.load()

    # ------------------------------------------------------------------ tables
    def _table(self, group_name: str, columns: tuple[str, ...]) -> pd.DataFrame:
        import pandas as pd

        with self._open() as f:
            if group_name not in f:
                return pd.DataFrame({c: [] for c in columns})
            group = f[group_name]
            n = min(group[c].shape[0] for c in columns)
            return pd.DataFrame({c: read_column(group[c])[:n] for c in columns})

    @cached_property
    def events(self) -> pd.DataFrame:
        """Columns ``time, micro, component, event`` in superdense time order."""
        return self._table("events", ("time", "micro", "component", "event"))

    @cached_property
    def mode_switches(self) -> pd.DataFrame:
        """Columns ``time, component, from_mode, to_mode``."""
        return self._table("mode_switches", ("time", "component", "from_mode", "to_mode"))

    @cached_property
    def coupling_error(self) -> pd.DataFrame:
        """The estimated coupling error per connection into a real input: columns ``connection, unit, max, rms,
        time_of_max, range, relative`` (``relative`` = ``max`` / ``range``), largest relative first; empty for
        a run that did not complete or was written before the estimates existed."""
        from cosimrun.storage.hdf5 import COUPLING_NUMBERS

        with self._open() as f:
            present = "coupling_error" in f
        if not present:
            import pandas as pd

            return pd.DataFrame({c: [] for c in ("connection", "unit", *COUPLING_NUMBERS)})
        return self._table("coupling_error", ("connection", "unit", *COUPLING_NUMBERS))

    @cached_property
    def steps(self) -> pd.DataFrame:
        """Every step a run under ``step_control: error`` tried: columns ``time`` (its start), ``step``,
        ``error`` (the error norm, <= 1 within tolerance) and ``accepted``; empty under fixed steps."""
        from cosimrun.core.steplog import STEP_COLUMNS

        with self._open() as f:
            present = "steps" in f
        if not present:
            import pandas as pd

            return pd.DataFrame({c: [] for c in STEP_COLUMNS})
        table = self._table("steps", STEP_COLUMNS)
        table["accepted"] = table["accepted"].astype(bool)
        return table

DEFAULT_FILE = "results.h5"
"""The results file a run writes unless ``storage.file`` names another."""


def load_results(path: str | os.PathLike[str], *, locking: bool | str = False) -> Results:
    """Open a results file; ``<path>.partial`` is used when only the unfinished file exists.

    *path* may also be a run's directory: its ``results.h5`` is read, else the
    one results file in it (a custom ``storage.file``), finished or ``.partial``.

    HDF5 file locking is off by default (*locking*) so that the file of a job
    still running can be read; such a read sees the state of the writer's last
    flush (read again for newer data).
    """
    path = Path(path)
    if path.is_dir():
        path = _results_in(path)
    path = written_path(path)
    if not path.exists():
        raise FileNotFoundError(f"no results file {path}")
    return Results(path, locking=locking)


def _results_in(directory: Path) -> Path:
    """The results file of a run directory: ``results.h5``, else its only results file (by final name)."""
    default = directory / DEFAULT_FILE
    if default.exists() or partial_path(default).exists():
        return default
    names = sorted({p.name.removesuffix(_PARTIAL) for p in directory.iterdir() if _is_results_file(p)})
    if len(names) == 1:
        return directory / names[0]
    found = f"found several: {', '.join(names)}" if names else "found none"
    raise FileNotFoundError(
        f"no results file in directory {directory}: looked for {DEFAULT_FILE} (or {DEFAULT_FILE}{_PARTIAL}) "
        f"and for a single cosimrun results file, {found}"
    )


def _is_results_file(path: Path) -> bool:
    """Whether *path* is a file with the root attribute ``format = cosimrun-results``."""
    if not path.is_file() or not h5py.is_hdf5(path):
        return False
    try:
        with h5py.File(path, "r", locking=False) as f:
            return _py(f.attrs.get("format")) == FORMAT
    except OSError:
        return False
