"""Ensembles whose members run one after the other, read back from their file: each member's tables are those its
own run writes, row for row (:mod:`cosimrun.ensemble.serial`, :class:`cosimrun.storage.ensemble.EnsembleMember`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from helpers import StoppingClock
from test_serial import _scalar, _serial

from cosimrun.ensemble import COMPLETE, FAILED
from cosimrun.ensemble.serial import run_serially
from cosimrun.masters import Jacobi
from cosimrun.storage.ensemble import EnsembleMember, write_ensemble
from cosimrun.system import System

LOOP = {"name": "loop", "run": {"t0": 0.0, "tf": 0.3, "dt": 0.1}, "master": {"name": "gauss_seidel"},
        "components": {"src": {"type": "ramp", "params": {}}, "sum": {"type": "sum", "params": {"signs": "+-"}},
                       "g": {"type": "gain", "params": {"k": 0.5}}},
        "connections": ["src.y -> sum.u1", "g.y -> sum.u2", "sum.y -> g.u"]}
"""An algebraic loop (not vectorized) whose two loop connections have the same relative coupling error, bit for
bit, at ``g.k = 0.5``; at ``g.k = 0.1`` ``sum.y -> g.u``'s is the larger."""


@pytest.fixture(scope="module")
def loop_members(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """The ensemble file of :data:`LOOP` at ``g.k`` 0.1 and 0.5, and each member's own run."""
    gains = [0.1, 0.5]
    configs = []
    for k in gains:
        cfg = copy.deepcopy(LOOP)
        cfg["components"]["g"]["params"]["k"] = k
        configs.append(cfg)
    path = write_ensemble(tmp_path_factory.mktemp("loop") / "loop.h5", _serial(configs, {"g.k": gains}))
    return path, [_scalar(cfg)[0] for cfg in configs]


def test_each_member_lists_its_coupling_errors_in_its_own_runs_order(loop_members: tuple[Path, list[Any]]) -> None:
    path, runs = loop_members
    for m, run in enumerate(runs):
        table = EnsembleMember(path, m).coupling_error
        # ties keep the run's order (its connections'), not the first member's
        assert list(table["connection"]) == [e.connection for e in run.coupling_errors], m
        assert list(table["relative"]) == [e.relative for e in run.coupling_errors], m
        assert list(table["max"]) == [e.max for e in run.coupling_errors], m


def test_each_members_statistics_are_its_runs_numbers_and_texts_of_the_same_type(
        loop_members: tuple[Path, list[Any]]) -> None:
    path, runs = loop_members
    for m, run in enumerate(runs):
        stats = EnsembleMember(path, m).stats
        numbers = {name: value for name, value in run.stats.as_dict().items()
                   if isinstance(value, int | float) and not isinstance(value, bool)}
        texts = {name: value for name, value in run.stats.as_dict().items() if isinstance(value, str)}
        assert texts and {name: stats[name] for name in texts} == texts  # event_handling, step_control, ...
        assert {name: stats[name] for name in numbers} == pytest.approx(numbers, rel=0, abs=0, nan_ok=True)
        assert {name: type(stats[name]) for name in numbers} == {name: type(v) for name, v in numbers.items()}


def test_a_member_a_component_stopped_early_fails_naming_where_once() -> None:
    stops = [1e300, 0.2]

    def build(m: int) -> tuple[System, Any]:
        system = System("clock")
        system.add_component(StoppingClock("c", stops[m]))
        master = Jacobi()
        system.initialize(0.0, master)
        return system, master

    result = run_serially(build, 2, {"c.t_stop": stops}, t0=0.0, tf=0.5, dt=0.1, recorded={"c": ["t"]})
    assert list(result.status) == [COMPLETE, FAILED]  # its job runs it, complete up to the stop
    assert str(result.failures[1]) == ("member 1: Unrecordable: c asked to stop the run (reached its end), which an "
                                       "ensemble's file does not record at t=0.2")
