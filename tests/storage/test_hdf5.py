"""HDF5 results: writer, history export, recorder as file sink, reader, xarray compatibility, crashes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr

from cosimrun.core.events import DenseTime
from cosimrun.core.history import ComponentHistory, SystemHistory
from cosimrun.core.ports import PortType
from cosimrun.core.switching import ModeSwitch
from cosimrun.masters.base import MasterStats
from cosimrun.storage import HDF5Writer, load_results, partial_path, write_history, write_run_result
from cosimrun.system import Recorder, RunResult

MODES = ["idle", "run", "ü-mode"]


def make_history(n: int = 50) -> SystemHistory:
    """Two components; ``plant`` has real/int/bool/string/event ports and a duplicated event instant."""
    plant = ComponentHistory("plant")
    plant.add_port("x", "m", PortType.REAL)
    plant.add_port("count", None, PortType.INT)
    plant.add_port("on", None, PortType.BOOL)
    plant.add_port("mode", None, PortType.STRING)
    plant.add_port("hit", None, PortType.EVENT)
    ctrl = ComponentHistory("ctrl")
    ctrl.add_port("u", "N*m", PortType.REAL)
    for i in range(n):
        t = 0.1 * i
        samples = [(t, 0)] + ([(t, 1)] if i % 10 == 5 else [])  # an event: same instant, micro 0 then 1
        for tt, micro in samples:
            plant.append("x", tt, 0.5 * i + micro, micro)
            plant.append("count", tt, i * 3 - micro, micro)
            plant.append("on", tt, (i + micro) % 2 == 0, micro)
            plant.append("mode", tt, MODES[(i + micro) % 3], micro)
            plant.append("hit", tt, bool(micro), micro)
        ctrl.append("u", t, -float(i))
    sh = SystemHistory("sys")
    sh.add_component("plant", plant)
    sh.add_component("ctrl", ctrl)
    sh.record_event("plant", "hit", DenseTime(0.5, 0))
    sh.record_event("plant", "hit", DenseTime(0.5, 1))
    sh.record_event("ctrl", "sat", 1.5)
    return sh


def make_result(history: SystemHistory) -> RunResult:
    stats = MasterStats(macro_steps=49, rollbacks=2, events=3, event_trial_steps=[4, 6])
    return RunResult(
        system="sys",
        history=history,
        events=history.event_log(),
        mode_switches=[ModeSwitch(0.5, "plant", "idle", "run"), ModeSwitch(1.5, "plant", "run", "ü-mode")],
        stats=stats,
        master="Hybrid",
        t0=0.0,
        tf=4.9,
        dt=0.1,
        wall_time_s=0.25,
    )


def assert_history_equal(path: Path, history: SystemHistory) -> None:
    res = load_results(path)
    assert res.components == list(history.get_all_histories())
    for comp, ch in history.get_all_histories().items():
        loaded = res.history(comp)
        assert list(loaded) == ch.port_names
        for port, ph in ch.get_all_histories().items():
            series = loaded[port]
            np.testing.assert_array_equal(series.time, ph.time)
            np.testing.assert_array_equal(series.micro, ph.micro)
            np.testing.assert_array_equal(series.values, ph.values)
            assert series.values.dtype.kind == ph.values.dtype.kind
            assert series.unit == ph.unit
            assert series.port_type == ph.port_type.value


# ------------------------------------------------------------------ round trips
def test_history_round_trip(tmp_path):
    history = make_history()
    path = tmp_path / "run.h5"
    with HDF5Writer(path, experiment="demo") as w:
        write_history(w, history)
    assert_history_equal(path, history)
    res = load_results(path)
    assert res.status == "complete" and res.experiment == "demo"
    t, v = res.history("plant")["x"]  # unpacks as (time, values)
    assert np.count_nonzero(t == 0.5) == 2  # the duplicated event instant is kept
    df = res.to_dataframe("plant")
    assert df.index.name == "time" and list(df.columns) == ["micro", "x", "count", "on", "mode", "hit"]
    assert list(df.loc[0.5, "micro"]) == [0, 1]
    assert df["on"].dtype == bool and df["mode"].iloc[0] == "idle"
    t_mm, x_mm = res.trajectory("plant", "x", as_unit="mm")
    np.testing.assert_allclose(x_mm, 1000 * v)


def test_the_whole_run_as_one_dataframe_on_the_union_of_instants(tmp_path):
    history = make_history(20)  # plant: every 0.1 s, micro 0 and 1 at 0.5 and 1.5; ctrl: every 0.1 s, micro 0
    slow = ComponentHistory("slow")
    slow.add_port("y", "K", PortType.REAL)
    for k in range(9):
        slow.append("y", 0.125 + 0.25 * k, 300.0 + k)  # on its own grid, no instant shared with the others
    history.add_component("slow", slow)
    path = tmp_path / "run.h5"
    with HDF5Writer(path) as w:
        write_history(w, history)
    res = load_results(path)
    whole = res.to_dataframe()
    ports = {comp: list(res.ports(comp)) for comp in res.components}
    assert list(whole.columns) == ["micro", *(f"{c}.{p}" for c in res.components for p in ports[c])]
    # rows: the superdense instants of any component, in order
    instants = sorted({(t, m) for c in res.components for t, m in
                       zip(res.to_dataframe(c).index, res.to_dataframe(c)["micro"], strict=True)})
    assert list(zip(whole.index, whole["micro"], strict=True)) == instants
    assert len(instants) == 20 + 2 + 9  # 0, 0.1, ..., 1.9; micro 1 at 0.5 and 1.5 (plant); 0.125, ..., 2.125
    at = {key: i for i, key in enumerate(instants)}
    for comp in res.components:
        own = res.to_dataframe(comp)
        rows = [at[(t, m)] for t, m in zip(own.index, own["micro"], strict=True)]
        others = np.setdiff1d(np.arange(len(instants)), rows)
        for port in ports[comp]:
            column = whole[f"{comp}.{port}"]
            assert list(column.iloc[rows]) == list(own[port])  # every value as the component recorded it
            assert column.iloc[others].isna().all()  # nothing interpolated or held where it has no sample
    assert whole.loc[0.5, "plant.x"].tolist() == [2.5, 3.5] and np.isnan(whole.loc[0.5, "ctrl.u"].iloc[1])
    assert whole.loc[0.875, "slow.y"] == 303.0 and np.isnan(whole.loc[0.875, "plant.x"])


def test_xarray_reads_component_groups_with_units(tmp_path):
    history = make_history()
    path = tmp_path / "run.h5"
    with HDF5Writer(path) as w:
        write_history(w, history)
    ph = history.get_component_history("plant")
    with xr.open_dataset(path, engine="h5netcdf", group="components/plant") as ds:
        assert ds["time"].attrs["units"] == "s" and ds["time"].dtype == np.float64
        assert ds.sizes["time"] == len(ph)
        np.testing.assert_array_equal(ds["time"].values, ph.get_port_history("x").time)
        assert ds["x"].attrs["units"] == "m" and ds["x"].attrs["port_type"] == "real"
        np.testing.assert_array_equal(ds["x"].values, ph.get_port_history("x").values)
        np.testing.assert_array_equal(ds["count"].values, ph.get_port_history("count").values)
        assert ds["on"].dtype == bool and ds["hit"].dtype == bool
        np.testing.assert_array_equal(ds["on"].values, ph.get_port_history("on").values)
        assert list(ds["mode"].values) == list(ph.get_port_history("mode").values)
        np.testing.assert_array_equal(ds["micro"].values, ph.get_port_history("x").micro)
        assert "units" not in ds["mode"].attrs
    with xr.open_dataset(path, engine="h5netcdf", group="components/ctrl") as ds:
        assert ds["u"].attrs["units"] == "N*m"
    xds = load_results(path).to_xarray("ctrl")
    np.testing.assert_array_equal(xds["u"].values, -np.arange(50.0))
    tree = xr.open_datatree(path, engine="h5netcdf")
    assert tree.attrs["format"] == "cosimrun-results"
    assert set(tree["components"].children) == {"plant", "ctrl"}


def test_netcdf_c_reads_the_file(tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    path = tmp_path / "run.h5"
    history = make_history(12)
    with HDF5Writer(path) as w:
        write_run_result(w, make_result(history))
    with netCDF4.Dataset(path) as ds:
        assert ds.status == "complete"
        g = ds["components/plant"]
        assert g.dimensions["time"].isunlimited() and g["x"].units == "m"
        np.testing.assert_array_equal(g["x"][:], history.get_component_history("plant").get_port_history("x").values)
        assert list(ds["events/component"][:]) == ["plant", "plant", "ctrl"]


def test_events_mode_switches_stats_and_attrs_round_trip(tmp_path):
    history = make_history()
    path = tmp_path / "run.h5"
    config = "name: demo\nrun: {t0: 0.0, tf: 4.9}\ncomponents:\n  plant: {type: ramp}\n"
    overrides = ["run.tf=4.9", "components.plant.params.k=2"]
    with HDF5Writer(path, experiment="demo", attrs={"config_yaml": config, "overrides": overrides}) as w:
        write_run_result(w, make_result(history))
    res = load_results(path)
    assert_history_equal(path, history)
    ev = res.events
    assert list(ev.columns) == ["time", "micro", "component", "event"]
    assert ev.values.tolist() == [[0.5, 0, "plant", "hit"], [0.5, 1, "plant", "hit"], [1.5, 0, "ctrl", "sat"]]
    ms = res.mode_switches
    assert ms.values.tolist() == [[0.5, "plant", "idle", "run"], [1.5, "plant", "run", "ü-mode"]]
    assert res.stats["macro_steps"] == 49 and res.stats["rollbacks"] == 2
    assert res.stats["trial_steps_per_event"] == 5.0 and res.stats["wall_time_s"] == 0.25
    assert res.config == {"name": "demo", "run": {"t0": 0.0, "tf": 4.9}, "components": {"plant": {"type": "ramp"}}}
    a = res.attrs
    assert a["overrides"] == overrides
    assert (a["t0"], a["tf"], a["dt"], a["master"], a["system"]) == (0.0, 4.9, 0.1, "Hybrid", "sys")
    assert a["format"] == "cosimrun-results" and a["format_version"] == 1
    assert a["error"] == "" and a["traceback"] == "" and a["wall_time_s"] >= 0
    assert a["started"] <= a["finished"] and a["cosimrun_version"]


def test_empty_file_has_layout_and_empty_tables(tmp_path):
    path = tmp_path / "empty.h5"
    HDF5Writer(path, attrs={"note": None, "flag": True, "nested": {"a": [1, 2]}}).close()
    res = load_results(path)
    assert res.components == [] and res.config == {} and res.stats == {}
    assert res.events.empty and list(res.events.columns) == ["time", "micro", "component", "event"]
    assert res.mode_switches.empty
    assert "note" not in res.attrs and res.attrs["flag"] == 1 and json.loads(res.attrs["nested"]) == {"a": [1, 2]}


# ------------------------------------------------------------------ chunking
def test_chunked_appends_equal_a_single_write(tmp_path):
    history = make_history(300)
    one, many = tmp_path / "one.h5", tmp_path / "many.h5"
    with HDF5Writer(one) as w:
        write_history(w, history)
    with HDF5Writer(many, chunk_size=16) as w:
        ch = history.get_component_history("plant")
        # replay the history into a fresh one in pieces, polling in between
        live = SystemHistory("live")
        live_plant = ComponentHistory("plant")
        for port, ph in ch.get_all_histories().items():
            live_plant.add_port(port, ph.unit, ph.port_type)
        live.add_component("plant", live_plant)
        live.add_component("ctrl", history.get_component_history("ctrl"))
        n = len(ch)
        arrays = {p: (h.time.tolist(), h.values.tolist(), h.micro.tolist()) for p, h in ch.get_all_histories().items()}
        writes = []
        for k in range(n):
            for port, (t, v, m) in arrays.items():
                live_plant.append(port, t[k], v[k], m[k])
            if k % 5 == 0:
                writes.append(write_history(w, live))
        write_history(w, live)
        assert sum(1 for x in writes if x) > 10  # the plant went out in many chunks
    for comp in ("plant", "ctrl"):
        a, b = load_results(one).history(comp), load_results(many).history(comp)
        for port in a:
            np.testing.assert_array_equal(a[port].time, b[port].time)
            np.testing.assert_array_equal(a[port].micro, b[port].micro)
            np.testing.assert_array_equal(a[port].values, b[port].values)
    with h5py.File(many, "r") as f:
        ds = f["components/plant/x"]
        assert ds.chunks == (16,) and ds.compression == "gzip" and ds.maxshape == (None,)


class _Source:
    """Stands in for a component for the recorder: one real output ``y`` in K."""

    def __init__(self) -> None:
        from cosimrun.core.ports import PortSpec, PortState

        self.outputs = {"y": PortState(PortSpec("y", PortType.REAL, "out", unit="K"))}


def test_recorder_writes_full_blocks_every_flush_interval(tmp_path):
    source = _Source()
    with HDF5Writer(tmp_path / "s.h5") as w:
        recorder = Recorder(w, flush_interval=10)
        recorder.attach({"c": source})
        for i in range(25):
            source.outputs["y"].value = float(i)
            recorder.sample(float(i))
        assert w.n_samples("c") == 20  # two full blocks; 5 samples still pending
        recorder.flush()
        assert w.n_samples("c") == 25
    t, y = load_results(tmp_path / "s.h5").history("c")["y"]
    np.testing.assert_array_equal(y, np.arange(25.0))


def test_history_export_continues_from_the_file_and_refuses_a_shrunk_history(tmp_path):
    ch = ComponentHistory("c")
    ch.add_port("y", "K")
    with HDF5Writer(tmp_path / "s.h5") as w:
        for i in range(20):
            ch.append("y", float(i), float(i))
        assert write_history(w, {"c": ch}) == 20
        for i in range(20, 25):
            ch.append("y", float(i), float(i))
        assert write_history(w, {"c": ch}) == 5  # continues from the file's offsets
        assert w.n_samples("c") == 25
        ch.get_port_history("y").truncate(3)
        with pytest.raises(RuntimeError, match="shrank"):
            write_history(w, {"c": ch})


def test_records_a_real_system_run_into_the_file_while_it_runs(tmp_path):
    from helpers import Affine, Ramp

    from cosimrun.masters import GaussSeidel
    from cosimrun.system.system import System

    system = System("chain")
    system.add_component(Ramp("ramp", slope=2.0, unit="m"))
    system.add_component(Affine("gain", a=3.0, unit="m"))
    system.connect("ramp.y", "gain.u")
    in_memory = system.run(0.0, 1.0, 0.01, master=GaussSeidel())
    memory_history = {n: in_memory.history.get_component_history(n) for n in ("ramp", "gain")}
    expected = {n: (h.get_port_history("y").time.copy(), h.get_port_history("y").values.copy())
                for n, h in memory_history.items()}
    path = tmp_path / "chain.h5"
    seen: list[int] = []
    with HDF5Writer(path, experiment="chain") as w:
        recorder = Recorder(w, flush_interval=16)
        recorder.attach(system.components)
        result = system.run(0.0, 1.0, 0.01, master=GaussSeidel(), recorder=recorder,
                            progress=lambda t: seen.append(w.n_samples("gain")))
        assert 0 < min(x for x in seen if x) < w.n_samples("gain") == 101  # the file grew during the run
        assert len(result.history.get_component_history("gain")) == 0  # nothing kept in memory
    loaded = load_results(path)
    for name, (t, y) in expected.items():
        np.testing.assert_array_equal(loaded.history(name)["y"].time, t)
        np.testing.assert_array_equal(loaded.history(name)["y"].values, y)


# ------------------------------------------------------------------ crash safety and live reading
def test_partial_name_until_close(tmp_path):
    path = tmp_path / "out" / "run.h5"
    w = HDF5Writer(path)
    assert partial_path(path) == tmp_path / "out" / "run.h5.partial"
    assert partial_path(path).exists() and not path.exists()
    w.add_component("c", {"y": ("s", "real")})
    w.append("c", [0.0], None, {"y": [1.0]})
    assert load_results(path).status == "running"  # falls back to the .partial file
    assert w.close() == path
    assert path.exists() and not partial_path(path).exists()
    assert load_results(path).status == "complete"
    w.close()  # closing twice is a no-op


def test_exception_inside_with_keeps_data_and_records_failure(tmp_path):
    path = tmp_path / "crash.h5"
    with pytest.raises(ZeroDivisionError), HDF5Writer(path) as w:
        w.add_component("c", {"y": ("m", "real"), "s": (None, "string")})
        w.append("c", [0.0, 0.1], [0, 0], {"y": [1.0, 2.0], "s": ["a", "b"]})
        1 / 0  # noqa: B018
    res = load_results(path)
    assert res.status == "failed"
    assert res.error == "ZeroDivisionError: division by zero"
    assert "Traceback" in res.attrs["traceback"] and "1 / 0" in res.attrs["traceback"]
    y = res.history("c")["y"]
    np.testing.assert_array_equal(y.values, [1.0, 2.0])
    assert list(res.history("c")["s"].values) == ["a", "b"]


def test_keyboard_interrupt_is_recorded_as_interrupted(tmp_path):
    path = tmp_path / "int.h5"
    with pytest.raises(KeyboardInterrupt), HDF5Writer(path):
        raise KeyboardInterrupt
    assert load_results(path).status == "interrupted"


_READER = """
import json, sys, h5py
with h5py.File(sys.argv[1], "r", locking=False) as f:
    print(json.dumps({"status": f.attrs["status"], "n": int(f["components/c/time"].shape[0]),
                      "y": f["components/c/y"][:].tolist()}))
"""


def test_file_is_readable_by_another_process_while_open(tmp_path):
    path = tmp_path / "live.h5"
    with HDF5Writer(path) as w:
        w.add_component("c", {"y": ("m", "real")})
        w.append("c", [0.0, 1.0], None, {"y": [5.0, 6.0]})  # append flushes
        out = subprocess.run(
            [sys.executable, "-c", _READER, str(partial_path(path))], capture_output=True, text=True, check=True
        )
        assert json.loads(out.stdout) == {"status": "running", "n": 2, "y": [5.0, 6.0]}
        res = load_results(path)  # in-process reader of the .partial file
        assert res.status == "running" and list(res.history("c")["y"].values) == [5.0, 6.0]
        assert res.to_xarray("c")["y"].values.tolist() == [5.0, 6.0]


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("bad", ["a/b", "", "..", "/"])
def test_names_with_slash_or_empty_are_rejected(tmp_path, bad):
    with HDF5Writer(tmp_path / "n.h5") as w:
        with pytest.raises(ValueError):
            w.add_component(bad, {"y": (None, "real")})
        with pytest.raises(ValueError):
            w.add_component("ok", {bad: (None, "real")})
        assert w.components == []


def test_invalid_ports_and_appends_are_rejected(tmp_path):
    with HDF5Writer(tmp_path / "v.h5") as w:
        with pytest.raises(ValueError, match="coordinate"):
            w.add_component("c", {"time": ("s", "real")})
        with pytest.raises(ValueError, match="unknown port type"):
            w.add_component("c", {"y": (None, "complex")})
        w.add_component("c", {"y": (None, PortType.REAL)})
        with pytest.raises(ValueError, match="already"):
            w.add_component("c", {"y": (None, "real")})
        with pytest.raises(ValueError, match="missing ports"):
            w.append("c", [0.0], None, {})
        with pytest.raises(ValueError, match="2 values for 1 times"):
            w.append("c", [0.0], None, {"y": [1.0, 2.0]})
        with pytest.raises(KeyError, match="not added"):
            w.append("nope", [0.0], None, {"y": [1.0]})
        with pytest.raises(ValueError, match="managed by the writer"):
            w.set_attrs(status="complete")
    with pytest.raises(ValueError, match="contains '/'"):
        HDF5Writer(tmp_path / "bad.h5", attrs={"a/b": 1})
    assert not partial_path(tmp_path / "bad.h5").exists()
    with pytest.raises(ValueError, match="not a cosimrun results file"):
        h5py.File(tmp_path / "other.h5", "w").close()
        load_results(tmp_path / "other.h5")


def test_recorder_keeps_memory_bounded_by_the_flush_interval(tmp_path) -> None:
    source = _Source()
    writer = HDF5Writer(tmp_path / "r.h5")
    recorder = Recorder(writer, flush_interval=100)
    recorder.attach({"c": source})
    for k in range(1000):
        source.outputs["y"].value = float(k)
        recorder.sample(0.01 * k)
        assert k + 1 - writer.n_samples("c") <= 100  # never more than one block held back
    recorder.flush()
    writer.close("complete")
    t, y = load_results(tmp_path / "r.h5").history("c")["y"]
    np.testing.assert_array_equal(y, np.arange(1000.0))


def test_writer_final_values_are_what_the_file_reads_back(tmp_path):
    from cosimrun.storage import final_values

    path = tmp_path / "r.h5"
    ports = {"x": ("m", "real"), "n": (None, "int"), "on": (None, "bool"), "mode": (None, "string"),
             "hit": (None, "event")}
    w = HDF5Writer(path, compression="gzip")
    w.add_component("a", ports)
    w.add_component("quiet", {"y": (None, "real")})  # nothing appended: no final value
    w.append("a", [0.0, 1.0], None, {"x": [1.0, 2.5], "n": [1, 7], "on": [0, 1], "mode": ["up", "dówn"],
                                       "hit": [0, 1]})
    w.append("a", [2.0], None, {"x": [np.float32(3.25)], "n": [9], "on": [False], "mode": ["left"], "hit": [1]})
    expected = {"a.x": 3.25, "a.n": 9, "a.on": False, "a.mode": "left"}
    assert w.final_values() == expected
    assert final_values(partial_path(path)) == expected  # while it is written
    w.close("failed", error="boom")
    assert final_values(path) == expected
    assert [type(v) for v in w.final_values().values()] == [float, int, bool, str]
