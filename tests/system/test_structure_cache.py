"""What a process keeps between the experiments it builds (the jobs of a warm worker): the coupling-graph analysis
per structure and the settings classes' fields. A kept entry never serves another structure, never carries a value
of one job into the next, and a job built on it gives exactly what a fresh process gives."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest

from cosimrun.config import build
from cosimrun.config.build import build_master, defaults, setting_types
from cosimrun.config.schema import StorageSettings
from cosimrun.errors import ConfigError
from cosimrun.masters import GaussSeidel
from cosimrun.runner.run import prepare
from cosimrun.system import Connection, graph

LOOP = {
    "name": "loop",
    "run": {"t0": 0.0, "tf": 0.3, "dt": 0.1},
    "components": {
        "src": {"type": "sine", "params": {"amplitude": 1.0, "frequency": 1.0}},
        "add": {"type": "sum", "params": {"signs": "+-"}},
        "k": {"type": "gain", "params": {"k": 0.5}},
        "out": {"type": "gain", "params": {"k": 3.0}},
    },
    "connections": ["src.y -> add.u1", "add.y -> k.u", "k.y -> add.u2", "add.y -> out.u"],
}
"""A sine into an algebraic loop (a sum and a gain feeding each other), read by a gain outside it."""


def _variant(change: str) -> dict[str, Any]:
    """:data:`LOOP` with one change: of structure (a connection, its scale, the master) or of a parameter."""
    cfg = copy.deepcopy(LOOP)
    if change == "open":  # the feedback left out: no loop
        del cfg["connections"][2]
    elif change == "scaled":  # the feedback through a scale
        cfg["connections"][2] = {"src": "k.y", "dst": "add.u2", "scale": 0.5}
    elif change == "jacobi":
        cfg["master"] = {"name": "jacobi"}
    elif change == "k_default":  # the gain outside the loop relies on its default k
        cfg["components"]["out"]["params"] = {}
    elif change == "k_set":
        cfg["components"]["out"]["params"] = {"k": 0.25}
    return cfg


def _run(cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    """Build and run *cfg* into memory: every recorded history, and the loop resolution the run used."""
    exp = prepare(cfg)
    result = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, master=exp.master)
    histories = result.history.get_all_histories()
    out = {f"{comp}.{port}": histories[comp].get_port_history(port).values
           for comp, ports in exp.recorded.items() for port in ports}
    out["time"] = histories["k"].get_port_history("y").time
    assert exp.system.analysis is not None
    out["loops"] = np.array([len(exp.system.analysis.loops)])
    return out


@pytest.fixture
def no_kept_analyses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Analyses kept by this test only."""
    monkeypatch.setattr(graph, "_analyses", OrderedDict())


def _fresh(cfg: dict[str, Any]) -> dict[str, np.ndarray]:
    """:func:`_run` with nothing kept from before, as in a new process."""
    kept = graph._analyses
    graph._analyses = OrderedDict()
    try:
        return _run(cfg)
    finally:
        graph._analyses = kept


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)  # bit for bit


def test_jobs_alternating_structures_and_parameters_equal_fresh_builds(no_kept_analyses: None) -> None:
    changes = ["none", "open", "none", "scaled", "jacobi", "k_set", "k_default", "none"]
    runs = [_run(_variant(change)) for change in changes]
    for change, got in zip(changes, runs, strict=True):
        _assert_same(got, _fresh(_variant(change)))
    assert [int(r["loops"][0]) for r in runs] == [1, 0, 1, 1, 1, 1, 1, 1]
    assert not np.array_equal(runs[0]["k.y"], runs[3]["k.y"])  # the scale is part of the structure
    assert not np.array_equal(runs[5]["out.y"], runs[6]["out.y"])  # the default k, not the previous job's 0.25


def test_a_failed_build_leaves_nothing_behind_for_the_next_job(no_kept_analyses: None) -> None:
    bad = _variant("none")
    bad["connections"][2] = "k.y -> add.u3"  # no such input
    with pytest.raises(ConfigError, match=r"connections\[2\]"):
        _run(bad)
    bad_master = _variant("none")
    bad_master["master"] = {"name": "gauss_seidel", "max_loop_iterations": "many"}
    with pytest.raises(ConfigError):
        _run(bad_master)
    _assert_same(_run(_variant("none")), _fresh(_variant("none")))


def _loop_structure() -> tuple[list[str], list[Connection], dict[str, dict[str, set[str]]]]:
    connections = [Connection.parse(t) for t in ("s.y -> a.u1", "a.y -> g.u", "g.y -> a.u2", "g.y -> p.u")]
    feedthrough = {"s": {}, "a": {"y": {"u1", "u2"}}, "g": {"y": {"u"}}, "p": {}}
    return ["s", "a", "g", "p"], connections, feedthrough


def test_a_kept_analysis_equals_a_fresh_one_and_belongs_to_its_caller(no_kept_analyses: None) -> None:
    names, connections, feedthrough = _loop_structure()
    fresh = graph._analyze(names, connections, feedthrough)
    first = graph.analyze(names, connections, feedthrough)
    assert first == fresh
    first.order.reverse()
    first.levels[0].append("x")
    first.loops[0].tears.clear()
    first.resolution.clear()
    second = graph.analyze(names, connections, feedthrough)
    assert second == fresh and len(graph._analyses) == 1
    assert second.loops[0] is next(item for item in second.resolution if not isinstance(item, str))


def test_structures_differing_in_a_connection_or_feedthrough_get_their_own_analysis(no_kept_analyses: None) -> None:
    names, connections, feedthrough = _loop_structure()
    without_feedthrough = {**feedthrough, "g": {"y": set()}}
    scaled = [*connections[:2], Connection("g", "y", "a", "u2", scale=2.0), connections[3]]
    reordered = [names[1], names[0], *names[2:]]
    structures = [(names, connections, feedthrough), (names, connections, without_feedthrough),
                  (names, connections[:2], feedthrough), (names, scaled, feedthrough),
                  (reordered, connections, feedthrough)]
    for _ in range(2):
        for structure in structures:
            assert graph.analyze(*structure) == graph._analyze(*structure)
    assert len(graph._analyses) == len(structures)
    assert graph.analyze(*structures[0]).loops and not graph.analyze(*structures[1]).loops
    assert graph.analyze(*structures[3]).loops[0].connections[1].scale == 2.0


def test_the_kept_analyses_are_bounded(no_kept_analyses: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph, "ANALYSES_KEPT", 2)
    for n in range(4):
        graph.analyze([f"c{n}"], [], {})
    assert [key[0] for key in graph._analyses] == [("c2",), ("c3",)]


def test_settings_defaults_and_types_are_each_callers_own() -> None:
    record = defaults(StorageSettings)["record"]
    record.append("leak.y")
    assert "leak.y" not in defaults(StorageSettings)["record"]  # a default factory's value, made again
    types = setting_types(GaussSeidel)
    types["max_loop_iterations"] = str
    assert setting_types(GaussSeidel)["max_loop_iterations"] is int


def test_jobs_configuring_one_master_share_it_and_others_get_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "_masters", {})
    first = build_master({"name": "jacobi", "rtol": 1e-3})
    assert build_master({"name": "jacobi", "rtol": 1e-3}) is first
    assert build_master({"name": "jacobi"}).rtol == 1e-4  # the default, not the previous job's
    assert build_master({"name": "gauss_seidel", "rtol": 1e-3}).name == "gauss_seidel"
    assert build_master({"name": "jacobi", "rtol": 1}).rtol == 1.0
    with pytest.raises(ConfigError, match="master.rtol"):  # true is no number, though it equals 1 and 1.0
        build_master({"name": "jacobi", "rtol": True})
    with pytest.raises(ConfigError, match="master.parallel"):  # a failed build is not kept
        build_master({"name": "jacobi", "parallel": "many"})
    with pytest.raises(ConfigError, match="master.parallel"):
        build_master({"name": "jacobi", "parallel": "many"})
    for _ in range(2):  # a value that cannot be a key is checked every time
        with pytest.raises(ConfigError, match="master.parallel"):
            build_master({"name": "jacobi", "parallel": [1]})
    assert len(build._masters) == 4  # jacobi with rtol 1e-3, 1 and the default; gauss_seidel
