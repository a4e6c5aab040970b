"""``EnsembleMember``: one member of an ensemble's file read as a run's results are (what the post commands need)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cosimrun.config.build import build_experiment
from cosimrun.ensemble import EnsembleResult, run_members
from cosimrun.post.report import write_report
from cosimrun.runner.index import write_index
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage.ensemble import EnsembleMember, write_ensemble
from cosimrun.storage.results import TABLE_COLUMNS, load_results

TWO_MASS = {
    "name": "two_mass",
    "master": {"name": "jacobi"},
    "components": {
        "mass1": {"type": "mass_spring_damper", "params": {"stiffness": 10.0, "x0": 1.0}},
        "mass2": {"type": "mass_spring_damper_force", "params": {"coupling_stiffness": 100.0}},
    },
    "connections": ["mass1.x -> mass2.x_in", "mass1.v -> mass2.v_in", "mass2.force -> mass1.force"],
}


@pytest.fixture(scope="module")
def result() -> EnsembleResult:
    """Three members of the two-mass system, the second going non-finite (stiffness 1e300)."""
    exp = build_experiment(TWO_MASS)
    rows = [{"mass1.stiffness": 8.0}, {"mass1.stiffness": 1e300}, {"mass1.stiffness": 12.0}]
    result = run_members(exp.system, exp.master, rows, t0=0.0, tf=0.05, dt=0.001)
    assert list(result.status) == ["complete", "failed", "complete"]
    return result


@pytest.fixture(scope="module")
def ensemble_file(result: EnsembleResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ensemble's file outside a sweep."""
    return write_ensemble(tmp_path_factory.mktemp("ens") / "two_mass.h5", result, attrs={"experiment": "two_mass"})


def test_a_member_reads_as_a_run_with_attributes_stats_frames_and_empty_tables(ensemble_file: Path) -> None:
    member = load_results(ensemble_file, member=2)
    assert isinstance(member, EnsembleMember)
    assert (member.status, member.error, member.experiment) == ("complete", "", "two_mass")
    assert member.attrs["status"] == "complete" and member.attrs["member"] == 2 and member.attrs["master"] == "jacobi"
    assert (member.attrs["t0"], member.attrs["tf"], member.attrs["dt"]) == (0.0, 0.05, 0.001)
    assert member.stats["macro_steps"] == 50 and member.stats["members"] == 3 and member.config == {}
    frame = member.to_dataframe("mass1")
    x = member.history("mass1")["x"]
    assert list(frame.columns) == ["micro", "x", "v"] and frame["micro"].dtype == np.int32
    assert np.array_equal(frame.index.to_numpy(), x.time) and np.array_equal(frame["x"].to_numpy(), x.values)
    assert np.allclose(x.time, np.linspace(0.0, 0.05, 51), rtol=0, atol=1e-15) and x.values[0] == 1.0
    whole = member.to_dataframe()
    assert list(whole.columns) == ["micro", "mass1.x", "mass1.v", "mass2.x", "mass2.v", "mass2.force"]
    assert np.array_equal(whole["mass2.force"].to_numpy(), member.trajectory("mass2", "force")[1])
    for table, columns in TABLE_COLUMNS.items():  # a coupling-error estimate per connection, no other rows
        rows = getattr(member, table)
        assert list(rows.columns) == list(columns) and len(rows) == (3 if table == "coupling_error" else 0)
    assert member.steps["accepted"].dtype == bool and member.events["component"].dtype == object
    # outside a sweep the commands write beside the file, one folder per member
    assert member.directory == ensemble_file.with_name("two_mass.member2") and member.job is None


def test_a_failed_member_says_its_cause_and_when(ensemble_file: Path) -> None:
    member = load_results(ensemble_file, member=1)
    assert member.status == member.attrs["status"] == "failed"
    assert member.attrs["error"] == member.error and "non-finite" in member.error.lower()
    t = member.attrs["failure_time"]
    assert 0.0 <= t < 0.05
    series = member.history("mass1")["x"]
    assert np.isnan(series.values[series.time > t]).all()  # nothing after the failure


def test_a_member_out_of_range_and_an_unknown_component(ensemble_file: Path) -> None:
    with pytest.raises(IndexError, match="member 3 out of range"):
        load_results(ensemble_file, member=3)
    with pytest.raises(KeyError, match="mass3"):
        load_results(ensemble_file, member=0).to_dataframe("mass3")


def test_a_members_frame_equals_the_same_parameters_in_an_ensemble_of_one(ensemble_file: Path) -> None:
    exp = build_experiment({**TWO_MASS, "components": {**TWO_MASS["components"], "mass1": {
        "type": "mass_spring_damper", "params": {"stiffness": 12.0, "x0": 1.0}}}})
    alone = run_members(exp.system, exp.master, [{}], t0=0.0, tf=0.05, dt=0.001)
    mine = load_results(ensemble_file, member=2).to_dataframe("mass2")
    pd.testing.assert_series_equal(mine["force"].reset_index(drop=True),
                                   pd.Series(alone.history["mass2.force"][:, 0], name="force"), check_exact=True)


def test_a_member_of_a_sweep_past_job_999_is_at_its_jobs_address_and_its_shard(result: EnsembleResult,
                                                                               tmp_path: Path) -> None:
    """Jobs from 1000 on have their folders in shards (``1k/1234``): a member is read at both addresses and writes
    where the job's folder would be."""
    (tmp_path / "ensembles").mkdir()
    file = write_ensemble(tmp_path / "ensembles" / "1233-1235.ab.h5", result, jobs=[1233, 1234, 1235])
    write_index(tmp_path / "index.h5", [JobOutcome(1233 + m, str(result.status[m]), [f"k={m}"], path=str(file),
                                                   member=m) for m in range(3)])
    for address in (tmp_path / "1234", tmp_path / "1k" / "1234"):
        member = load_results(address)
        assert isinstance(member, EnsembleMember) and (member.member, member.job) == (1, 1234)
        assert member.status == "failed" and member.directory == tmp_path / "1k" / "1234"
    with pytest.raises(FileNotFoundError, match="no results file"):
        load_results(tmp_path / "2k" / "1234")  # not the job's shard: no job of the sweep
    # the sweep's page links the member's page written before, in its shard
    assert write_report(tmp_path / "1234") == tmp_path / "1k" / "1234" / "report.html"
    page = write_report(tmp_path, tmp_path / "sweep.html", job_reports=False).read_text()
    assert page.count('href="1k/1234/report.html"') == 1 and 'href="1k/1233/report.html"' not in page
