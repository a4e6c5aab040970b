"""Write a run's results as CSV, Parquet or MATLAB files: ``cosimrun export RESULTS [--format F] [-o DIR]``.

RESULTS is a results file (finished or ``.partial``), a run directory or a job
of a sweep, ``<sweep dir>/<job>`` (also one that ran as a member of an
ensemble). The files go to DIR, by default ``export/`` beside the results file
(in ``<sweep dir>/<job>/`` for a member); the command prints where.

csv (default): one file per component, ``<component>.csv``, with the columns
``time`` (s), ``micro`` (the superdense index: 0, then 1, 2, ... for the
samples after an event at the same instant) and one per port, headed
``name [unit]`` when the port has a unit; plus ``events.csv`` (time, micro,
component, event) and ``mode_switches.csv`` (time, component, from_mode,
to_mode). Numbers are written in the shortest form that reads back to the
same float64, booleans as True/False, missing values as nan. pandas reads
them (``pd.read_csv``), and so does ``compare``.

parquet: the whole run as one file ``<results name>.parquet`` with one row per
sample of each component (``record`` = sample, ``component``, ``time``,
``micro``, and a column ``component.port`` per port, typed float64, int64,
bool or string, empty in the rows of other components), followed by the
events (``record`` = event, with ``event``) and mode switches
(``record`` = mode_switch, with ``from_mode``, ``to_mode``). Each port's
column keeps its unit and port type in the Parquet field metadata
(``units``, ``port_type``) and the schema metadata ``cosimrun`` holds the
run's attributes and every unit as JSON. Read one component with
``pd.read_parquet(path, filters=[("component", "==", "ball"), ("record", "==",
"sample")])``.

mat: one MATLAB file ``<results name>.mat`` (scipy.io.savemat, MATLAB 5 format,
compressed) with a struct per component (``time``, ``micro`` and one field per
port, as column vectors; text as cell arrays), the structs ``events`` and
``mode_switches``, and ``cosimrun`` (the run's experiment and status, and
``units`` and ``names``: per component, each port's unit and its original
``component.port`` name). Names are made MATLAB identifiers (letters, digits
and underscores, starting with a letter, at most 63 characters).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.errors import ConfigError, DataFileError, did_you_mean
from cosimrun.post.signals import open_source
from cosimrun.storage.results import DEFAULT_FILE

if TYPE_CHECKING:
    import pyarrow as pa

    from cosimrun.storage.results import Results

FORMATS = ("csv", "parquet", "mat")
TABLES = ("events", "mode_switches")
"""The run's tables, exported beside the components."""
_MATLAB_NAME_MAX = 63
_ROWS_PER_BATCH = 65536
"""Rows of one component written to Parquet at a time (bounds the memory of the other components' empty columns)."""


def export(results_path: str | os.PathLike[str], format: str = "csv",
           out_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Write the results of a run (file or run directory) in *format* to *out_dir*; return the files written.

    *out_dir* defaults to ``export/`` beside the results file.
    """
    if format not in FORMATS:
        raise ConfigError(None, f"unknown format {format!r}; one of {', '.join(FORMATS)}",
                          suggestion=next(iter(did_you_mean(format, FORMATS)), None))
    if format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise ConfigError(None, "--format parquet needs pyarrow, which is not installed: "
                                "pip install 'cosimrun[parquet]'")
    source = open_source(results_path)
    if source.results is None:
        raise DataFileError(f"{source.path}: export takes a results file or a run directory, not a CSV file",
                            path=str(source.path))
    results = source.results
    out = Path(out_dir) if out_dir is not None else source.directory / "export"
    out.mkdir(parents=True, exist_ok=True)
    own = results.path.name if source.directory == results.path.parent else DEFAULT_FILE  # a member: as if alone
    stem = own.removesuffix(".partial").rpartition(".")[0] or "results"
    if format == "csv":
        return _write_csv(results, out)
    if format == "parquet":
        return [_write_parquet(results, out / f"{stem}.parquet")]
    return [_write_mat(results, out / f"{stem}.mat")]


def unique_names(names: Iterable[str], taken: Iterable[str] = (), limit: int | None = None) -> list[str]:
    """*names* in order, each one equal to an earlier one or to one *taken* suffixed ``_2``, ``_3``, ...

    With *limit*, names are first cut to that many characters (and stay within it).
    """
    used = set(taken)
    out = []
    for name in names:
        base = name[:limit] if limit else name
        candidate, n = base, 1
        while candidate in used:
            n += 1
            suffix = f"_{n}"
            candidate = (base[: limit - len(suffix)] if limit else base) + suffix
        used.add(candidate)
        out.append(candidate)
    return out


# ---------------------------------------------------------------------------- csv
def _write_csv(results: Results, out: Path) -> list[Path]:
    frames = [(file, results.to_dataframe(comp).reset_index(), results.ports(comp))
              for comp, file in zip(results.components, unique_names(results.components, TABLES), strict=True)]
    frames += [(table, getattr(results, table), {}) for table in TABLES]
    written = []
    for file, frame, ports in frames:
        frame.columns = [f"{c} [{ports[c][0]}]" if c in ports and ports[c][0] else c for c in frame.columns]
        frame.to_csv(out / f"{file}.csv", index=False, na_rep="nan")
        written.append(out / f"{file}.csv")
    return written


# ---------------------------------------------------------------------------- parquet
def _arrow_type(kind: str) -> pa.DataType:
    import pyarrow as pa

    return {"real": pa.float64(), "int": pa.int64(), "bool": pa.bool_(), "event": pa.bool_(),
            "string": pa.string()}.get(kind, pa.float64())


def _write_parquet(results: Results, path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ports = {comp: results.ports(comp) for comp in results.components}
    fields = [pa.field("record", pa.string()), pa.field("component", pa.string()), pa.field("time", pa.float64()),
              pa.field("micro", pa.int32()), pa.field("event", pa.string()), pa.field("from_mode", pa.string()),
              pa.field("to_mode", pa.string())]
    for comp, specs in ports.items():
        for port, (unit, kind) in specs.items():
            meta = {"port_type": kind, **({"units": unit} if unit else {})}
            fields.append(pa.field(f"{comp}.{port}", _arrow_type(kind), metadata=meta))
    info = {key: results.attrs.get(key) for key in ("format", "format_version", "experiment", "status", "t0",
                                                    "tf", "dt", "master", "error")}
    info["units"] = {f"{c}.{p}": unit for c, specs in ports.items() for p, (unit, _kind) in specs.items()}
    schema = pa.schema(fields, metadata={"cosimrun": json.dumps(info, default=str)})
    with pq.ParquetWriter(path, schema) as writer:
        for batch in _parquet_batches(results, schema):
            writer.write_table(batch)
    return path


def _parquet_batches(results: Results, schema: pa.Schema) -> Iterator[pa.Table]:
    """The run's rows as tables of *schema*: each component's samples in batches, then events and mode switches."""
    for comp in results.components:
        frame = results.to_dataframe(comp)
        time = frame.index.to_numpy()
        for start in range(0, max(len(time), 1), _ROWS_PER_BATCH):
            rows = slice(start, start + _ROWS_PER_BATCH)
            columns = {"record": "sample", "component": comp, "time": time[rows],
                       "micro": frame["micro"].to_numpy()[rows]}
            columns.update({f"{comp}.{port}": frame[port].to_numpy()[rows] for port in frame.columns[1:]})
            yield _table(schema, columns, len(time[rows]))
    events = results.events
    yield _table(schema, {"record": "event", **{c: events[c].to_numpy() for c in events.columns}}, len(events))
    switches = results.mode_switches
    yield _table(schema, {"record": "mode_switch", **{c: switches[c].to_numpy() for c in switches.columns}},
                 len(switches))


def _table(schema: pa.Schema, columns: dict[str, Any], n: int) -> pa.Table:
    """*n* rows of *schema*: the given columns (a string repeated, or an array), nulls elsewhere."""
    import pyarrow as pa

    arrays = []
    for field in schema:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, str):
            arrays.append(pa.array([value] * n, field.type))
        else:
            arrays.append(pa.array(value, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


# ---------------------------------------------------------------------------- mat
def matlab_name(name: str) -> str:
    """*name* as a MATLAB identifier: other characters become ``_``, a leading non-letter gets an ``x`` first."""
    safe = re.sub(r"\W", "_", name, flags=re.ASCII)
    return (safe if safe[:1].isalpha() else f"x{safe}")[:_MATLAB_NAME_MAX]


def _mat_column(values: np.ndarray) -> np.ndarray:
    """A column as savemat writes it well: text as a cell array of strings, the rest as it is."""
    if values.dtype == object:
        cells = np.empty(len(values), dtype=object)
        cells[:] = [str(v) for v in values]
        return cells
    return values


def _write_mat(results: Results, path: Path) -> Path:
    from scipy.io import savemat

    variables = unique_names((matlab_name(c) for c in results.components), (*TABLES, "cosimrun"), _MATLAB_NAME_MAX)
    data: dict[str, Any] = {}
    units: dict[str, dict[str, str]] = {}
    names: dict[str, dict[str, str]] = {}
    for comp, var in zip(results.components, variables, strict=True):
        frame = results.to_dataframe(comp)
        specs = results.ports(comp)
        fields = unique_names((matlab_name(p) for p in specs), ("time", "micro"), _MATLAB_NAME_MAX)
        data[var] = {"time": frame.index.to_numpy(), "micro": frame["micro"].to_numpy(),
                     **{field: _mat_column(frame[p].to_numpy()) for p, field in zip(specs, fields, strict=True)}}
        units[var] = {field: unit or "" for (_p, (unit, _kind)), field in zip(specs.items(), fields, strict=True)}
        names[var] = {field: f"{comp}.{p}" for p, field in zip(specs, fields, strict=True)}
    for table in TABLES:
        frame = getattr(results, table)
        data[table] = {c: _mat_column(frame[c].to_numpy()) for c in frame.columns}
    data["cosimrun"] = {"experiment": results.experiment, "status": results.status, "units": units, "names": names}
    savemat(path, data, oned_as="column", long_field_names=True, do_compression=True)
    return path


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n", 2)[2].replace("``", "")
    parser.add_argument("results", metavar="RESULTS", help="a results file, a run directory or a job of a sweep "
                                                           "(<sweep dir>/<job>)")
    parser.add_argument("--format", choices=FORMATS, default="csv",
                        help="csv: a file per component (default); parquet: one file; mat: one MATLAB file")
    parser.add_argument("-o", "--output", metavar="DIR", help="the directory to write to (default: export/ "
                                                              "beside the results file)")


def run(args: argparse.Namespace) -> int:
    written = export(args.results, args.format, args.output)
    print(f"export: {len(written)} {'file' if len(written) == 1 else 'files'} in {written[0].parent}: "
          f"{', '.join(p.name for p in written)}")
    return 0
