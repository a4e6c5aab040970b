"""Port, component and system histories: buffers, units, events and CSV round trips."""

import sys

import numpy as np
import pytest

from cosimrun.core.events import DenseTime
from cosimrun.core.history import ComponentHistory, PortHistory, SystemHistory
from cosimrun.core.ports import PortType
from cosimrun.core.units import IncompatibleUnitsError


# ---------------------------------------------------------------- PortHistory
def test_reference_example():
    h = PortHistory(port_name="temperature", unit="celsius")
    h.append(0.0, 25.0)
    h.append(1.0, 26.5)
    np.testing.assert_array_equal(h.time, [0.0, 1.0])
    np.testing.assert_array_equal(h.values, [25.0, 26.5])
    assert len(h) == 2


def test_many_appends_are_exact_and_grow_the_buffers_geometrically():
    """Amortized O(1) appends: the buffers are reallocated a logarithmic number of times (their allocated size,
    ``sys.getsizeof``, changes at most ~200 times in 1e5 appends; a buffer growing by a fixed amount would change
    at every append or every few)."""
    n = 100_000
    h = PortHistory("x", "m")
    sizes = set()
    for i in range(n):
        h.append(i * 1e-3, 0.5 * i)
        sizes.add((sys.getsizeof(h._t), sys.getsizeof(h._v)))
    t, v = h.time, h.values
    assert len(sizes) < 500
    assert len(h) == n and t.shape == (n,) and v.shape == (n,)
    assert t.dtype == np.float64 and v.dtype == np.float64
    np.testing.assert_array_equal(t, np.arange(n) * 1e-3)
    np.testing.assert_array_equal(v, 0.5 * np.arange(n))


def test_arrays_are_copies():
    h = PortHistory("x")
    h.append(0.0, 1.0)
    v = h.values
    v[0] = 99.0
    assert h.values[0] == 1.0


@pytest.mark.parametrize(
    ("kind", "samples", "dtype"),
    [
        (PortType.INT, [1, -2, 3], np.int64),
        (PortType.BOOL, [True, False, True], np.bool_),
        (PortType.EVENT, [False, True, False], np.bool_),
        (PortType.STRING, ["a", "", "c,d"], object),
    ],
)
def test_typed_buffers(kind, samples, dtype):
    h = PortHistory("p", None, kind)
    for i, s in enumerate(samples):
        h.append(float(i), s)
    assert h.values.dtype == dtype
    assert list(h.values) == samples


def test_micro_indices():
    h = PortHistory("x")
    h.append(0.0, 1.0)
    h.append(1.0, 2.0)
    h.append(1.0, 3.0, micro=1)
    h.append(1.0, 4.0, micro=2)
    h.append(2.0, 5.0)
    np.testing.assert_array_equal(h.micro, [0, 0, 1, 2, 0])
    np.testing.assert_array_equal(h.time, [0.0, 1.0, 1.0, 1.0, 2.0])


def test_truncate_and_clear():
    h = PortHistory("x")
    for i in range(5):
        h.append(float(i), float(i * i), micro=1 if i == 3 else 0)
    h.truncate(3)
    np.testing.assert_array_equal(h.time, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(h.values, [0.0, 1.0, 4.0])
    np.testing.assert_array_equal(h.micro, [0, 0, 0])
    h.append(3.0, 7.0)  # the dropped micro=1 at index 3 must not resurface
    np.testing.assert_array_equal(h.micro, [0, 0, 0, 0])
    h.clear()
    assert len(h) == 0 and h.time.size == 0 and h.micro.size == 0


def test_get_values_with_units():
    h = PortHistory("T", "degC")
    h.append(0.0, 0.0)
    h.append(1.0, 100.0)
    np.testing.assert_allclose(h.get_values("K"), [273.15, 373.15], rtol=0, atol=1e-12)
    np.testing.assert_allclose(h.get_values("degF"), [32.0, 212.0], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(h.get_values(), [0.0, 100.0])
    np.testing.assert_array_equal(h.values, [0.0, 100.0])  # stored values unchanged
    with pytest.raises(IncompatibleUnitsError):
        h.get_values("m")


def test_to_dict_and_to_tuple_with_units():
    h = PortHistory("q", "rad")
    h.append(0.0, np.pi)
    d = h.to_dict("deg")
    assert d["unit"] == "deg"
    np.testing.assert_allclose(d["values"], [180.0], rtol=1e-14)
    np.testing.assert_array_equal(d["time"], [0.0])
    t, v, u = h.to_tuple()
    assert u == "rad" and v[0] == np.pi and t[0] == 0.0


# ---------------------------------------------------------------- ComponentHistory
def make_component():
    ch = ComponentHistory("motor")
    ch.add_port("speed", "rad/s")
    ch.add_port("torque", "N*m")
    for i in range(3):
        ch.append("speed", float(i), 10.0 * i)
        ch.append("torque", float(i), 1000.0 * i)
    return ch


def test_component_to_arrays_with_units():
    ch = make_component()
    t, values = ch.to_arrays(units={"torque": "kN*m"})
    np.testing.assert_array_equal(t, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(values["torque"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(values["speed"], [0.0, 10.0, 20.0])
    t, values = ch.to_arrays(["speed"])
    assert list(values) == ["speed"]


def test_component_to_dict_with_units():
    d = make_component().to_dict(units={"speed": "rpm"})
    assert d["speed"]["unit"] == "rpm"
    np.testing.assert_allclose(d["speed"]["values"], np.array([0.0, 10.0, 20.0]) * 60 / (2 * np.pi))
    assert d["torque"]["unit"] == "N*m"


def test_component_to_arrays_rejects_different_time_axes():
    ch = make_component()
    ch.append("speed", 3.0, 30.0)
    with pytest.raises(ValueError, match="'torque'.*own time axis"):
        ch.to_arrays()
    ch2 = ComponentHistory("c")
    ch2.add_port("a")
    ch2.add_port("b")
    ch2.append("a", 0.0, 1.0)
    ch2.append("b", 0.5, 1.0)  # same length, different instants
    with pytest.raises(ValueError, match="own time axis"):
        ch2.to_arrays()


def test_component_unknown_port_suggests():
    with pytest.raises(KeyError, match="did you mean 'speed'"):
        make_component().get_port_history("sped")


def test_component_add_port_is_idempotent_and_clear():
    ch = make_component()
    ch.add_port("speed", "deg/s")  # exists: kept as is
    assert ch.get_port_history("speed").unit == "rad/s"
    assert len(ch.get_port_history("speed")) == 3
    assert len(ch) == 3
    ch.clear(["speed"])
    assert len(ch.get_port_history("speed")) == 0
    assert len(ch.get_port_history("torque")) == 3
    ch.clear()
    assert len(ch) == 0


# ---------------------------------------------------------------- SystemHistory
def make_system():
    sh = SystemHistory("plant")
    sh.add_component("motor", make_component())
    sensor = ComponentHistory("sensor")
    sensor.add_port("T", "degC")
    sensor.add_port("ok", None, PortType.BOOL)
    sensor.add_port("count", None, PortType.INT)
    sensor.add_port("label", None, PortType.STRING)
    for t, micro, T, ok, n, s in [
        (0.0, 0, 20.0, True, 0, "idle"),
        (0.5, 0, 21.5, True, 1, "run, fast"),
        (0.5, 1, 21.5, False, 2, "3"),  # event instant recorded twice
        (1.5, 0, -3.25, False, 3, "True"),
    ]:
        sensor.append("T", t, T, micro)
        sensor.append("ok", t, ok, micro)
        sensor.append("count", t, n, micro)
        sensor.append("label", t, s, micro)
    sh.add_component("sensor", sensor)
    return sh


def test_system_to_dict_nested_and_flat():
    sh = make_system()
    nested = sh.to_dict(units={"sensor": {"T": "K"}})
    assert set(nested) == {"motor", "sensor"}
    assert set(nested["motor"]) == {"speed", "torque"}
    np.testing.assert_allclose(nested["sensor"]["T"]["values"][0], 293.15, atol=1e-12)
    assert nested["sensor"]["T"]["unit"] == "K"
    flat = sh.to_dict(component_names=["motor"], port_names={"motor": ["torque"]}, format="flat")
    assert list(flat) == ["motor.torque"]
    np.testing.assert_array_equal(flat["motor.torque"]["values"], [0.0, 1000.0, 2000.0])
    with pytest.raises(ValueError, match="format"):
        sh.to_dict(format="wide")
    with pytest.raises(KeyError, match="did you mean 'motor'"):
        sh.to_dict(component_names=["motr"])


def test_system_to_arrays_and_trajectory():
    sh = make_system()
    arrays = sh.to_arrays(units={"motor": {"torque": "kN*m"}})
    t, values = arrays["motor"]
    np.testing.assert_array_equal(t, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(values["torque"], [0.0, 1.0, 2.0])
    t, v = sh.get_port_trajectory("sensor", "T", as_unit="degF")
    np.testing.assert_array_equal(t, [0.0, 0.5, 0.5, 1.5])
    np.testing.assert_allclose(v, [68.0, 70.7, 70.7, 26.15], atol=1e-12)


def test_record_event_and_superdense_log():
    sh = SystemHistory("s")
    sh.record_event("b", "late", 2.0)
    sh.record_event("a", "hit", DenseTime(1.0, 1))
    sh.record_event("c", "first", DenseTime(1.0, 0))
    sh.record_event("a", "hit", 0.5)
    assert sh.get_event_history("a", "hit") == [DenseTime(1.0, 1), DenseTime(0.5, 0)]
    assert sh.get_event_history("a", "nothing") == []
    log = sh.event_log()
    assert [(e.t, e.micro, c, n) for e, c, n in log] == [
        (0.5, 0, "a", "hit"),
        (1.0, 0, "c", "first"),
        (1.0, 1, "a", "hit"),
        (2.0, 0, "b", "late"),
    ]
    assert set(sh.get_all_event_histories()) == {("a", "hit"), ("b", "late"), ("c", "first")}
    sh.get_all_event_histories()[("a", "hit")].clear()  # copies
    assert len(sh.get_event_history("a", "hit")) == 2


def test_system_clear_all_clears_events():
    sh = make_system()
    sh.record_event("motor", "start", 0.0)
    sh.clear(component_names=["motor"])
    assert len(sh.get_component_history("motor")) == 0
    assert len(sh.get_component_history("sensor")) == 4
    assert sh.event_log()  # partial clear keeps events
    sh.clear()
    assert sh.event_log() == []
    assert len(sh.get_component_history("sensor")) == 0


# ---------------------------------------------------------------- CSV
def assert_same_series(loaded, expected):
    assert set(loaded) == set(expected)
    for comp, ports in expected.items():
        assert set(loaded[comp]) == set(ports), comp
        for port, d in ports.items():
            got = loaded[comp][port]
            np.testing.assert_array_equal(got["time"], d["time"], err_msg=f"{comp}.{port}")
            assert got["values"].dtype == d["values"].dtype, f"{comp}.{port}"
            assert list(got["values"]) == list(d["values"]), f"{comp}.{port}"
            assert got["unit"] == d["unit"], f"{comp}.{port}"


@pytest.mark.parametrize("long_format", [False, True])
def test_csv_round_trip(tmp_path, long_format):
    sh = make_system()
    path = tmp_path / "out.csv"
    sh.save_csv(path, long_format=long_format)
    assert_same_series(SystemHistory.load_csv(path), sh.to_dict())


@pytest.mark.parametrize("long_format", [False, True])
def test_csv_round_trip_with_units(tmp_path, long_format):
    sh = make_system()
    path = tmp_path / "out.csv"
    units = {"sensor": {"T": "K"}}
    sh.save_csv(path, units=units, long_format=long_format)
    loaded = SystemHistory.load_csv(path)
    assert loaded["sensor"]["T"]["unit"] == "K"
    np.testing.assert_allclose(loaded["sensor"]["T"]["values"], [293.15, 294.65, 294.65, 269.9], atol=1e-12)
    assert loaded["motor"]["torque"]["unit"] == "N*m"


def test_csv_wide_header_and_empty_cells(tmp_path):
    sh = make_system()
    path = tmp_path / "wide.csv"
    sh.save_csv(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    assert header[0] == "time"
    assert "motor.speed [rad/s]" in header
    assert "sensor.T [degC]" in header
    assert "sensor.ok" in header  # no unit, no brackets
    # instants: 0, 0.5, 0.5 (event), 1, 1.5, 2 -> one row each
    assert len(lines) == 1 + 6
    times = [float(line.split(",")[0]) for line in lines[1:]]
    assert times == [0.0, 0.5, 0.5, 1.0, 1.5, 2.0]
    row_at_1 = dict(zip(header, lines[4].split(","), strict=True))
    assert row_at_1["motor.torque [N*m]"] == "1000.0"
    assert row_at_1["sensor.T [degC]"] == "" and row_at_1["sensor.label"] == ""
    row_event = dict(zip(header, lines[3].split(","), strict=True))
    assert row_event["motor.speed [rad/s]"] == ""  # motor has no sample at 0.5
    assert row_event["sensor.ok"] == "False" and row_event["sensor.count"] == "2"
    loaded = SystemHistory.load_csv(path)
    np.testing.assert_array_equal(loaded["motor"]["speed"]["time"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(loaded["sensor"]["count"]["time"], [0.0, 0.5, 0.5, 1.5])


def test_csv_long_format_has_micro(tmp_path):
    sh = make_system()
    path = tmp_path / "long.csv"
    sh.save_csv(path, component_names=["sensor"], port_names={"sensor": ["T"]}, long_format=True)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "time,micro,component,port,value,unit"
    assert lines[1:] == [
        "0.0,0,sensor,T,20.0,degC",
        "0.5,0,sensor,T,21.5,degC",
        "0.5,1,sensor,T,21.5,degC",
        "1.5,0,sensor,T,-3.25,degC",
    ]


def test_csv_exact_floats(tmp_path):
    sh = SystemHistory("s")
    ch = ComponentHistory("c")
    ch.add_port("x")
    values = [0.1, 1 / 3, np.pi * 1e-300, -2.5e17, float("inf")]
    for i, v in enumerate(values):
        ch.append("x", i * 0.1, v)
    sh.add_component("c", ch)
    path = tmp_path / "f.csv"
    sh.save_csv(path)
    loaded = SystemHistory.load_csv(path)["c"]["x"]
    np.testing.assert_array_equal(loaded["values"], values)
    np.testing.assert_array_equal(loaded["time"], [i * 0.1 for i in range(5)])


def test_load_csv_empty_file(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    assert SystemHistory.load_csv(path) == {}


def test_extend_appends_a_block_with_its_micro_steps() -> None:
    h = PortHistory("y", "m")
    h.append(0.0, -1.0)
    h.extend(np.array([0.1, 0.1, 0.2]), np.array([1.0, 2.0, 3.0]), np.array([0, 1, 0], dtype=np.int32))
    assert len(h) == 4
    np.testing.assert_array_equal(h.values, [-1.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(h.micro, [0, 0, 1, 0])
    t, v, m = h.slice(1, 3)
    np.testing.assert_array_equal(v, [1.0, 2.0])
    np.testing.assert_array_equal(m, [0, 1])
    h.truncate(2)
    np.testing.assert_array_equal(h.micro, [0, 0])
