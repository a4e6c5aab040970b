"""``cosimrun export``: CSV, Parquet and MATLAB files that pandas and scipy read back to the same values.

Two runs: a results file written directly with every port type (real, int,
bool, string, event), samples before and after an event (``micro``), events,
mode switches and names MATLAB does not take; and the ``pendulum_switch`` run
of ``conftest.py`` (events, mode switches). Float64 values must come back
exactly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import scipy.io
from conftest import Cli

from cosimrun.post import commands
from cosimrun.post.compare import compare
from cosimrun.post.export import export, matlab_name, unique_names
from cosimrun.post.signals import read_csv
from cosimrun.storage import HDF5Writer, load_results

PLANT = {
    "time": np.array([0.0, 0.5, 0.5, 1.0]),
    "micro": np.array([0, 0, 1, 0], dtype=np.int32),
    "x": np.array([0.1 + 0.2, 1 / 3, -1e-300, 2.5e10]),
    "n": np.array([1, -2, 3, 2**40], dtype=np.int64),
    "on": np.array([True, False, True, False]),
    "label": np.array(["a, b", 'say "hi"', "naïve", "x"], dtype=object),
    "hit": np.array([False, False, True, False]),
}
STAGE = {"time": np.array([0.0, 0.25, 1.0]), "out.y": np.array([20.0, 21.5, np.pi])}
EVENTS = pd.DataFrame({"time": [0.5, 0.75], "micro": [0, 0], "component": ["plant", "2nd-stage"],
                       "event": ["hit", "trip"]})
SWITCHES = pd.DataFrame({"time": [0.0, 0.5], "component": ["plant", "plant"], "from_mode": ["a", "b"],
                         "to_mode": ["b", "a"]})


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results file with every port type, an event instant with two samples, events and mode switches."""
    path = tmp_path_factory.mktemp("kinds") / "results.h5"
    with HDF5Writer(path, experiment="kinds") as writer:
        writer.add_component("plant", {"x": ("m", "real"), "n": (None, "int"), "on": (None, "bool"),
                                       "label": (None, "string"), "hit": (None, "event")})
        writer.add_component("2nd-stage", {"out.y": ("degC", "real")})
        writer.append("plant", PLANT["time"], PLANT["micro"], {k: v for k, v in PLANT.items() if k not in
                                                               ("time", "micro")})
        writer.append("2nd-stage", STAGE["time"], None, {"out.y": STAGE["out.y"]})
        writer.write_events(EVENTS.itertuples(index=False))
        writer.write_mode_switches(SWITCHES.itertuples(index=False))
    return path


def command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    """``cosimrun export ...`` in-process: exit status, stdout lines, stderr lines."""
    with pytest.raises(SystemExit) as end:
        commands.main(["export", *argv])
    out, err = capsys.readouterr()
    return end.value.code, out.splitlines(), err.splitlines()


def assert_column(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal values (floats bit for bit, NaN included) of the same kind (float, int, bool, text)."""
    got = np.asarray(got)
    assert got.dtype.kind == ("O" if expected.dtype == object else expected.dtype.kind) or (
        expected.dtype == object and got.dtype.kind in "OU"), (got.dtype, expected.dtype)
    if expected.dtype.kind == "f":
        assert np.array_equal(got.view(np.int64), expected.astype(np.float64).view(np.int64))
    else:
        assert got.tolist() == expected.tolist()


# ---------------------------------------------------------------------------- csv
def test_csv_is_a_file_per_component_that_pandas_and_read_csv_read_back(kinds: Path, tmp_path: Path) -> None:
    files = export(kinds, "csv", tmp_path)
    assert [f.name for f in files] == ["plant.csv", "2nd-stage.csv", "events.csv", "mode_switches.csv"]
    plant = pd.read_csv(tmp_path / "plant.csv")
    assert list(plant.columns) == ["time", "micro", "x [m]", "n", "on", "label", "hit"]
    for column, key in zip(plant.columns, PLANT, strict=True):
        assert_column(plant[column].to_numpy(dtype=object if key == "label" else None), PLANT[key])
    stage = pd.read_csv(tmp_path / "2nd-stage.csv")
    assert list(stage.columns) == ["time", "micro", "out.y [degC]"]
    assert_column(stage["out.y [degC]"].to_numpy(), STAGE["out.y"])
    signals = read_csv(tmp_path / "plant.csv")
    assert {n: (s.kind, s.unit) for n, s in signals.items()} == {
        "x": ("REAL", "m"), "n": ("REAL", None), "on": ("BOOL", None), "label": ("STRING", None),
        "hit": ("BOOL", None)}
    assert signals["x"].micro.tolist() == [0, 0, 1, 0]
    assert_column(signals["x"].values, PLANT["x"])
    assert signals["label"].values.tolist() == PLANT["label"].tolist()
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "events.csv"), EVENTS, check_dtype=False)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "mode_switches.csv"), SWITCHES, check_dtype=False)


def test_compare_reads_an_exported_component_as_the_run(kinds: Path, tmp_path: Path) -> None:
    export(kinds, "csv", tmp_path)
    result = compare(kinds, tmp_path / "plant.csv", ports=["plant.*"])
    assert result.ok, result.lines()
    assert [(s.name, s.max_deviation) for s in result.signals] == [
        ("plant.x", 0.0), ("plant.n", 0.0), ("plant.on", 0.0), ("plant.label", 0.0), ("plant.hit", 0.0)]


# ---------------------------------------------------------------------------- parquet
def test_parquet_is_one_file_with_typed_columns_units_and_the_tables(kinds: Path, tmp_path: Path) -> None:
    (path,) = export(kinds, "parquet", tmp_path)
    assert path == tmp_path / "results.parquet"
    plant = pd.read_parquet(path, filters=[("component", "==", "plant"), ("record", "==", "sample")])
    for key, expected in PLANT.items():
        assert_column(plant[key if key in ("time", "micro") else f"plant.{key}"].to_numpy(), expected)
    stage = pd.read_parquet(path, filters=[("component", "==", "2nd-stage"), ("record", "==", "sample")],
                            columns=["time", "2nd-stage.out.y"])
    assert_column(stage["time"].to_numpy(), STAGE["time"])
    assert_column(stage["2nd-stage.out.y"].to_numpy(), STAGE["out.y"])
    everything = pd.read_parquet(path)
    assert everything["record"].tolist() == ["sample"] * 7 + ["event"] * 2 + ["mode_switch"] * 2
    events = everything[everything["record"] == "event"][list(EVENTS.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(events, EVENTS, check_dtype=False)
    switches = everything[everything["record"] == "mode_switch"][list(SWITCHES.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(switches, SWITCHES, check_dtype=False)
    assert everything.loc[everything["component"] == "2nd-stage", "plant.x"].isna().all()
    schema = pq.read_schema(path)
    assert schema.field("plant.x").metadata == {b"units": b"m", b"port_type": b"real"}
    assert schema.field("plant.hit").metadata == {b"port_type": b"event"}
    info = json.loads(schema.metadata[b"cosimrun"])
    assert info["experiment"] == "kinds" and info["status"] == "complete"
    assert info["units"] == {"plant.x": "m", "plant.n": None, "plant.on": None, "plant.label": None,
                             "plant.hit": None, "2nd-stage.out.y": "degC"}


# ---------------------------------------------------------------------------- mat
def test_mat_has_a_struct_per_component_with_matlab_names(kinds: Path, tmp_path: Path) -> None:
    (path,) = export(kinds, "mat", tmp_path)
    assert path == tmp_path / "results.mat"
    mat = scipy.io.loadmat(path, simplify_cells=True)
    assert {k for k in mat if not k.startswith("__")} == {"plant", "x2nd_stage", "events", "mode_switches",
                                                          "cosimrun"}
    plant = mat["plant"]
    assert list(plant) == list(PLANT)
    for key in ("time", "micro", "x", "n"):
        assert_column(plant[key], PLANT[key])
    assert plant["on"].astype(bool).tolist() == PLANT["on"].tolist()  # MATLAB logical, read as uint8
    assert plant["label"].tolist() == PLANT["label"].tolist()
    assert_column(mat["x2nd_stage"]["out_y"], STAGE["out.y"])
    for name, table in (("events", EVENTS), ("mode_switches", SWITCHES)):
        pd.testing.assert_frame_equal(pd.DataFrame(mat[name]), table, check_dtype=False)
    assert mat["cosimrun"]["names"]["x2nd_stage"] == {"out_y": "2nd-stage.out.y"}
    assert mat["cosimrun"]["units"]["plant"]["x"] == "m"
    assert mat["cosimrun"]["experiment"] == "kinds"


def test_matlab_names_are_identifiers_and_unique() -> None:
    assert [matlab_name(n) for n in ("q", "2nd-stage", "out.y", "_x", "a" * 70)] == [
        "q", "x2nd_stage", "out_y", "x_x", "a" * 63]
    assert unique_names(["a", "b", "a", "events", "a"], taken=["events"]) == ["a", "b", "a_2", "events_2", "a_3"]
    assert unique_names(["a" * 63, "a" * 63], limit=63) == ["a" * 63, "a" * 61 + "_2"]


# ---------------------------------------------------------------------------- a run, from the command line
@pytest.mark.parametrize("format", ["csv", "parquet", "mat"])
def test_a_run_with_events_round_trips_exactly(pendulum_run: Path, tmp_path: Path, format: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    results = load_results(pendulum_run)
    code, out, err = command(capsys, str(pendulum_run), "--format", format, "-o", str(tmp_path))
    assert (code, err) == (0, [])
    names = [f"{c}.csv" for c in results.components] + ["events.csv", "mode_switches.csv"]
    expected = names if format == "csv" else [f"results.{format}"]
    assert out == [f"export: {len(expected)} {'files' if format == 'csv' else 'file'} in {tmp_path}: "
                   f"{', '.join(expected)}"]
    for comp in results.components:
        frame = results.to_dataframe(comp)
        assert (frame["micro"] > 0).any() or comp != "pendulum"  # samples after events
        if format == "csv":
            got = pd.read_csv(tmp_path / f"{comp}.csv")
            got.columns = [c.split(" [")[0] for c in got.columns]
        elif format == "parquet":
            got = pd.read_parquet(tmp_path / "results.parquet",
                                  filters=[("component", "==", comp), ("record", "==", "sample")])
            got.columns = [c.removeprefix(f"{comp}.") for c in got.columns]
        else:
            got = pd.DataFrame(scipy.io.loadmat(tmp_path / "results.mat", simplify_cells=True)[comp])
        assert_column(got["time"].to_numpy(), frame.index.to_numpy())
        for port in frame.columns:
            expected_values = frame[port].to_numpy()
            assert_column(got[port].to_numpy().astype(expected_values.dtype) if format == "mat" else
                          got[port].to_numpy(), expected_values)


def test_the_default_directory_is_export_beside_the_results(kinds: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(kinds, run / "results.h5")
    code, out, _ = command(capsys, str(run), "--format", "parquet")
    assert code == 0
    assert out == [f"export: 1 file in {run / 'export'}: results.parquet"]
    assert (run / "export" / "results.parquet").is_file()


# ---------------------------------------------------------------------------- bad input
def test_a_bad_format_is_one_line(kinds: Path, cli: Cli, tmp_path: Path) -> None:
    proc = cli("export", str(kinds), "--format", "xlsx", cwd=tmp_path)  # the real program
    assert (proc.returncode, proc.stdout) == (2, "")
    (line,) = proc.stderr.splitlines()
    assert line.startswith("cosimrun: error: export: argument --format: invalid choice: 'xlsx' (choose from ")
    assert line.replace("'", "").endswith("csv, parquet, mat) (see cosimrun export --help)")  # quoting: Python's
    with pytest.raises(ValueError, match=r"unknown format 'xlsx'; one of csv, parquet, mat"):
        export(kinds, "xlsx")


def test_a_csv_or_a_missing_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.csv").write_text("time,x\n0,1\n")
    code, _, err = command(capsys, str(tmp_path / "a.csv"))
    assert (code, err) == (2, [f"cosimrun: error: export: {tmp_path / 'a.csv'}: export takes a results file "
                               "or a run directory, not a CSV file"])
    code, _, err = command(capsys, str(tmp_path / "nowhere"))
    assert (code, err) == (2, [f"cosimrun: error: export: no results file or run directory {tmp_path / 'nowhere'}"])
