"""Signals of a finished (or running) run, read the same way from a results file, a run directory or a CSV.

A :class:`Signal` is one recorded quantity, named ``component.port`` (a CSV
column keeps its header's name), with its samples in superdense time: samples
at one instant are told apart by ``micro`` (0 before an event, 1, 2, ... after).
:func:`open_source` gives a :class:`Source` whatever the path is, and
:func:`select` picks signals by ``fnmatch`` patterns (``ball.*``, ``*.h``),
failing with one line that lists what exists when a pattern matches nothing.
The plot, compare and export commands all read through here.
"""

from __future__ import annotations

import csv
import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cosimrun.errors import DataFileError, UnknownNameError

if TYPE_CHECKING:
    import pandas as pd

    from cosimrun.storage.ensemble import EnsembleMember
    from cosimrun.storage.results import Results

_UNIT_IN_HEADER = re.compile(r"^\s*(?P<name>.*?)(?P<gap>\s*)[\[(](?P<unit>[^\])]*)[\])]\s*$")
"""``name [unit]`` or ``name (unit)`` in a CSV header (``y[1]``, indices right after the name, is an array element)."""
_INDICES = re.compile(r"[\d,\s]+")
"""What an array element's brackets hold: ``y[2]``, ``A[1,2]``."""
_INDEX_PATTERN = re.compile(r"\[([\d,\s*?]*)\]")
"""Brackets in a signal pattern that name array elements (``y[1]``, ``A[*,2]``) rather than a character class."""
TIME_COLUMNS = ("time", "Time", "t", "TIME")


@dataclass(frozen=True)
class Signal:
    """One quantity's samples: ``time``, ``values``, ``micro`` (superdense index) and its unit."""

    name: str
    time: np.ndarray
    values: np.ndarray
    micro: np.ndarray
    unit: str | None = None
    kind: str = "REAL"
    """``REAL``, ``INT``, ``BOOL``, ``STRING`` or ``EVENT`` (as the results file records port types)."""

    @property
    def component(self) -> str:
        """The part of the name before the first dot (``""`` for a CSV column without one)."""
        return self.name.partition(".")[0] if "." in self.name else ""

    @property
    def port(self) -> str:
        """The part of the name after the first dot (the whole name without one)."""
        return self.name.partition(".")[2] if "." in self.name else self.name

    @property
    def is_numeric(self) -> bool:
        return self.values.dtype.kind in "biuf"


@dataclass
class Source:
    """What a path holds: its signals by name, plus events and mode switches when it is a results file."""

    path: Path
    kind: str
    """``results`` or ``csv``."""
    units: dict[str, str | None]
    """Unit (or ``None``) of every signal by name, in file order."""
    results: Results | EnsembleMember | None = None
    _csv: dict[str, Signal] = field(default_factory=dict, repr=False)

    @property
    def names(self) -> list[str]:
        """Every signal's name, in file order."""
        return list(self.units)

    def signals(self, names: Iterable[str]) -> list[Signal]:
        """The signals named (each name as :meth:`names` lists it)."""
        names = list(names)
        if self.results is None:
            return [self._csv[n] for n in names]
        by_component: dict[str, list[str]] = {}
        for name in names:
            comp, _, port = name.partition(".")
            by_component.setdefault(comp, []).append(port)
        read: dict[str, Signal] = {}
        for comp, ports in by_component.items():
            for port, series in self.results.history(comp, ports).items():
                read[f"{comp}.{port}"] = Signal(f"{comp}.{port}", np.asarray(series.time, dtype=np.float64),
                                                series.values, np.asarray(series.micro), series.unit,
                                                series.port_type or "REAL")
        return [read[n] for n in names]

    @property
    def events(self) -> pd.DataFrame:
        """``time, micro, component, event`` (empty for a CSV)."""
        import pandas as pd

        if self.results is None:
            return pd.DataFrame({"time": [], "micro": [], "component": [], "event": []})
        return self.results.events

    @property
    def mode_switches(self) -> pd.DataFrame:
        """``time, component, from_mode, to_mode`` (empty for a CSV)."""
        import pandas as pd

        if self.results is None:
            return pd.DataFrame({"time": [], "component": [], "from_mode": [], "to_mode": []})
        return self.results.mode_switches

    @property
    def label(self) -> str:
        """A short name for legends and messages: the run directory's name (a member's job's), or the file's."""
        if self.kind == "results" and self.path.name.endswith((".h5", ".h5.partial")):
            return self.directory.name or self.path.name
        return self.path.name

    @property
    def directory(self) -> Path:
        """Where the commands write what they make of this source by default (``plot.png``, ``report.html``,
        ``export/``): the run directory, for a member of an ensemble the job's ``<sweep dir>/<job>``."""
        folder = getattr(self.results, "directory", None)
        return folder if isinstance(folder, Path) else self.path.parent


def open_source(path: str | os.PathLike[str], *, member: int | None = None) -> Source:
    """A results file (finished or ``.partial``), a run directory, a job of a sweep (``<sweep dir>/<job>``, also
    a member of an ensemble), an ensemble's file with *member*, or a CSV as a :class:`Source`.

    ``FileNotFoundError`` or a :class:`~cosimrun.errors.DataFileError` (a ``ValueError``) with one line saying
    what the path is not.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        if not path.is_file():
            raise FileNotFoundError(f"no CSV file {path}")
        signals = read_csv(path)
        return Source(path, "csv", {n: s.unit for n, s in signals.items()}, _csv=signals)
    from cosimrun.runner.load import sweep_job
    from cosimrun.storage.results import load_results

    if member is None and not path.exists() and not Path(f"{path}.partial").exists():
        job = sweep_job(path)
        if job is None:
            raise FileNotFoundError(f"no results file or run directory {path}")
        path, member = job
    results = load_results(path, member=member)
    units: dict[str, str | None] = {}
    for comp in results.components:
        for port, (unit, _kind) in results.ports(comp).items():
            units[f"{comp}.{port}"] = unit
    return Source(results.path, "results", units, results)


def read_csv(path: Path) -> dict[str, Signal]:
    """Signals of a CSV with a time column and one column per signal (``name [unit]`` headers allowed).

    Rows with a repeated time are samples at one instant (before and after an
    event, as in the Modelica Association's ``*_out.csv`` reference results):
    they get ``micro`` 0, 1, ... in file order, unless a ``micro`` column gives
    them (as ``cosimrun export`` writes). A column of numbers is ``REAL``, of
    ``true``/``false`` only ``BOOL``, of anything else ``STRING``.
    """
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise DataFileError(f"{path}: the CSV file is empty", path=str(path)) from None
        rows = [row for row in reader if row]
    names, units = [], []
    for cell in header:
        match = _UNIT_IN_HEADER.match(cell)
        if match and not match["gap"] and cell.rstrip().endswith("]") and _INDICES.fullmatch(match["unit"]):
            match = None  # y[1]: an element of the array y, no unit
        names.append(match["name"] if match else cell.strip())
        units.append((match["unit"].strip() or None) if match else None)
    time_col = next((i for i, n in enumerate(names) if n in TIME_COLUMNS), None)
    if time_col is None:
        raise DataFileError(f"{path}: no time column (the header must name one of {', '.join(TIME_COLUMNS)})",
                            path=str(path))
    short = next((i for i, row in enumerate(rows) if len(row) != len(names)), None)
    if short is not None:
        raise DataFileError(f"{path}: data row {short + 1} has {len(rows[short])} cells, the header {len(names)}",
                            path=str(path), row=short + 1)
    by_column = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    columns = [_csv_column(list(cells)) for cells in by_column]
    time, kind = columns[time_col]
    if kind != "REAL":
        raise DataFileError(f"{path}: every cell of the time column {names[time_col]!r} must be a number",
                            path=str(path))
    if np.any(np.diff(time) < 0):
        row = int(np.flatnonzero(np.diff(time) < 0)[0]) + 2
        raise DataFileError(f"{path}: time decreases at data row {row}", path=str(path), row=row)
    micro_col = next((i for i, n in enumerate(names) if n == "micro" and columns[i][1] == "REAL"), None)
    micro = superdense_micro(time) if micro_col is None else columns[micro_col][0].astype(np.int64)
    return {
        name: Signal(name, time, values, micro, unit, kind)
        for i, (name, unit, (values, kind)) in enumerate(zip(names, units, columns, strict=True))
        if i not in (time_col, micro_col)
    }


def _csv_column(cells: list[str]) -> tuple[np.ndarray, str]:
    """A CSV column's values and kind: numbers as float64 ``REAL``, true/false as ``BOOL``, else ``STRING``."""
    try:
        return np.array(cells, dtype=np.float64), "REAL"
    except ValueError:
        pass
    lowered = [cell.strip().lower() for cell in cells]
    if set(lowered) <= {"true", "false"}:
        return np.array([cell == "true" for cell in lowered], dtype=bool), "BOOL"
    text = np.empty(len(cells), dtype=object)
    text[:] = cells
    return text, "STRING"


def superdense_micro(time: np.ndarray) -> np.ndarray:
    """``micro`` index of sorted sample times: 0 at a new instant, counting up over repeated ones."""
    n = len(time)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = time[1:] != time[:-1]
    starts = np.flatnonzero(new)
    run_start = np.repeat(starts, np.diff(np.append(starts, n)))
    return np.arange(n) - run_start


def select(names: Iterable[str], patterns: Iterable[str] | None, where: str = "") -> list[str]:
    """The names matching any ``fnmatch`` pattern (all names without patterns), in the order given.

    A pattern without a dot also matches the port part (``h`` selects
    ``ball.h``). Brackets holding indices name FMI 3 array elements, not a
    character class: ``ss.y[1]`` is that element, ``ss.y[*]`` every element of
    ``y``. ``UnknownNameError`` names a pattern that matches nothing.
    """
    names = list(names)
    if not patterns:
        return names
    chosen: dict[str, None] = {}
    for given in patterns:
        pattern = _INDEX_PATTERN.sub(lambda m: f"[[]{m[1]}[]]", given)  # fnmatch's [[] and []] are literal
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)
                or ("." not in given and fnmatch.fnmatchcase(n.rpartition(".")[2], pattern))]
        if not hits:
            raise UnknownNameError("signal", given, names, where)
        chosen.update(dict.fromkeys(hits))
    return list(chosen)
