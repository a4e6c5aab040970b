"""A resume decided from the sweep index: fingerprints of finished jobs' files, config keys, outcomes from rows.

The jobs of most tests here run in process (:func:`cosimrun.runner.worker.run_hydra_job`, as a worker runs them)
and are entered into a ledger with the fingerprint the launcher records (:func:`resume.fingerprint` of the file
and :func:`resume.config_key` of the job); the decision is then taken by :func:`resume.take_over`, with the
expensive checks (composing a job's config, verifying a file, reading a file's outcome) counted. One test runs
the sweep and its resume end to end on dask.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from support.hydra_sweep import sweep_context

from cosimrun.runner import compose, inputs, resume, sweep, worker
from cosimrun.runner.index import write_index
from cosimrun.runner.ledger import SweepLedger
from cosimrun.runner.load import load_sweep
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage.sweep_index import INDEX_FILE, PARTS_DIR

TINY = """# @package _global_
name: tiny
run: {{t0: 0.0, tf: 0.02, dt: 0.01}}
components:
  src: {{type: sine, params: {{amplitude: {amplitude}, frequency: 1.0}}}}
  k: {{type: gain, params: {{k: 2.0}}}}
connections: [src.y -> k.u]
storage: {{compression: null}}
"""
"""``k.y = k * amplitude * sin(2 pi t)``: each job's final value is known."""
GAINS = (1.5, 2.0, 3.0)


def _final_y(k: float, amplitude: float = 1.0) -> float:
    return k * amplitude * math.sin(2 * math.pi * 0.02)


def _experiment(tmp_path: Path, amplitude: float = 1.0) -> Path:
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True, exist_ok=True)
    (conf / "experiment" / "tiny.yaml").write_text(TINY.format(amplitude=amplitude), encoding="utf-8")
    return conf


def _jobs() -> list[list[str]]:
    return [["+experiment=tiny", f"components.k.params.k={k}"] for k in GAINS]


def _specs(tmp_path: Path, jobs: list[list[str]] | None = None) -> list[compose.JobSpec]:
    """The sweep's jobs composed by the driver as the launcher composes them (made on the worker)."""
    conf = tmp_path / "conf"
    ctx, master = sweep_context(["+experiment=tiny", "components.k.params.k=1", f"hydra.searchpath=[file://{conf}]",
                                 f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    composer = compose.JobComposer(ctx, master)
    return [composer.compose(overrides, num, on_worker=True) for num, overrides in enumerate(jobs or _jobs())]


def _run(specs: list[compose.JobSpec], close: bool = True) -> list[JobOutcome]:
    """Run *specs* in this process and enter their outcomes, fingerprinted as the launcher does, in the index."""
    state = worker.worker_state(_callbacks(specs[0]))
    token = uuid.uuid4().hex
    ledger = SweepLedger(specs[0].job_dir.parent, min_interval=0.0)
    outcomes = []
    for spec in specs:
        outcome = worker.run_hydra_job(spec.payload(), sweep.sweep_job, state, token)
        assert outcome.status == "complete", outcome.error
        outcome.fingerprint = resume.fingerprint(outcome.path, resume.config_key(spec.payload()), outcome.inputs)
        ledger.enter(outcome)
        outcomes.append(outcome)
    ledger.flush()
    if close:
        ledger.close()
    return outcomes


def _callbacks(spec: compose.JobSpec) -> Any:
    from hydra._internal.callbacks import Callbacks

    return Callbacks(spec.payload().to_config())


class Calls:
    """How often a resume composed a job's config, verified a file and read an outcome from a file."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts = {"compose": 0, "verify": 0, "read": 0}
        for name, attr in (("compose", "expected_config_yaml"), ("verify", "verify_results"),
                           ("read", "outcome_from_file")):
            monkeypatch.setattr(resume, attr, self._counted(name, getattr(resume, attr)))

    def _counted(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] += 1
            return fn(*args, **kwargs)

        return counted


def _decide(tmp_path: Path, specs: list[compose.JobSpec]) -> list[tuple[resume.Reuse, JobOutcome | None]]:
    previous = resume.PreviousIndex(tmp_path / "sweep" / INDEX_FILE)
    return [resume.take_over(spec, previous) for spec in specs]


@pytest.fixture
def finished(tmp_path: Path) -> tuple[list[compose.JobSpec], list[JobOutcome]]:
    """A sweep of the three gains, run and its index written whole."""
    _experiment(tmp_path)
    specs = _specs(tmp_path)
    return specs, _run(specs)


def test_a_resume_takes_fingerprinted_jobs_over_from_the_index_without_reading_their_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finished: tuple[list[compose.JobSpec], list[JobOutcome]]
) -> None:
    specs, outcomes = finished
    recorded = json.loads(outcomes[0].fingerprint)
    st = os.stat(specs[0].results_path)
    assert (recorded["size"], recorded["mtime_ns"], recorded["ino"]) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert len(recorded["config"]) == 32
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path))  # a new launch composes the jobs again
    assert calls.counts == {"compose": 0, "verify": 0, "read": 0}
    for (reuse, outcome), ran, k in zip(decided, outcomes, GAINS, strict=True):
        assert reuse == resume.Reuse(True) and outcome is not None
        assert outcome.reused and outcome.attempts == 0 and outcome.status == "complete" and outcome.note == ""
        assert outcome.summaries == ran.summaries and outcome.wall_time_s == ran.wall_time_s
        assert outcome.path == ran.path and outcome.fingerprint == ran.fingerprint
        assert outcome.summaries["k.y"] == pytest.approx(_final_y(k), rel=1e-12)
    # what the file holds is what the row said: the full check takes the same outcome
    full = resume.outcome_from_file(0, specs[0].overrides, specs[0].results_path)
    assert full.summaries == decided[0][1].summaries and full.coupling_error_max == decided[0][1].coupling_error_max


def test_rows_of_a_sweep_whose_driver_stopped_before_closing_its_index_are_taken_over_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _experiment(tmp_path)
    specs = _specs(tmp_path)
    _run(specs, close=False)  # the rows are in the index's row store only
    assert (tmp_path / "sweep" / PARTS_DIR).is_dir()
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path))
    assert [reuse.ok for reuse, _ in decided] == [True] * 3
    assert calls.counts == {"compose": 0, "verify": 0, "read": 0}


def test_a_file_changed_since_its_job_completed_is_verified_in_full_and_a_damaged_one_runs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finished: tuple[list[compose.JobSpec], list[JobOutcome]]
) -> None:
    specs, _ = finished
    touched, damaged = specs[1].results_path, specs[2].results_path
    os.utime(touched, ns=(0, os.stat(touched).st_mtime_ns + 1))  # touched: the same data
    with h5py.File(damaged, "r") as f:  # one sample of k.y inverted, in place (same size)
        ds = f["components/k/y"]
        offset = ds.id.get_chunk_info(0).byte_offset if ds.chunks else ds.id.get_offset()
        assert ds.compression is None
    size = os.stat(damaged).st_size
    with open(damaged, "r+b") as raw:
        raw.seek(offset)
        data = raw.read(8)
        raw.seek(offset)
        raw.write(bytes(b ^ 0xFF for b in data))
    assert os.stat(damaged).st_size == size
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path))
    assert [reuse.ok for reuse, _ in decided] == [True, True, False]
    assert decided[2][0].note == ("rerun: results file damaged (/components/k/y: CRC-32 mismatch (the data "
                                  "changed after it was written))")
    assert calls.counts == {"compose": 2, "verify": 2, "read": 1}  # jobs 1 and 2 checked in full; 1 read
    assert decided[1][1] is not None and decided[1][1].summaries["k.y"] == pytest.approx(_final_y(GAINS[1]))
    assert decided[1][1].fingerprint == ""  # the launcher fingerprints it anew


def test_a_changed_experiment_or_changed_overrides_run_again_with_the_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finished: tuple[list[compose.JobSpec], list[JobOutcome]]
) -> None:
    jobs = _jobs()
    jobs[2] = [*jobs[2], "run.tf=0.01"]  # another job under the same number
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path, jobs))
    assert [reuse for reuse, _ in decided] == [resume.Reuse(True)] * 2 + [
        resume.Reuse(False, "rerun: configuration changed")]
    assert calls.counts == {"compose": 1, "verify": 0, "read": 0}

    _experiment(tmp_path, amplitude=2.0)  # the experiment's file changed: every job's config did
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path))
    assert [reuse for reuse, _ in decided] == [resume.Reuse(False, "rerun: configuration changed")] * 3
    assert calls.counts == {"compose": 3, "verify": 0, "read": 0}

    _experiment(tmp_path, amplitude=1.0)  # back as it was: the same key, taken over again
    assert [reuse.ok for reuse, _ in _decide(tmp_path, _specs(tmp_path))] == [True] * 3


def test_a_key_that_cannot_decide_leaves_the_config_to_the_full_check(tmp_path: Path) -> None:
    _experiment(tmp_path)
    now, gain = _specs(tmp_path, [["+experiment=tiny", "components.k.params.k=${oc.env:COSIMRUN_GAIN,2}"],
                                  ["+experiment=tiny", "components.k.params.k=2"]])
    assert resume.config_key(now.payload()) == ""  # resolved anew by each launch
    assert resume.config_key(gain.payload()) != ""
    full = compose.compose_job(*sweep_context(["+experiment=tiny", f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
                                               f"hydra.sweep.dir={tmp_path / 'sweep'}"]), ["+experiment=tiny"], 0)
    assert full.payload().values is None and resume.config_key(full.payload()) == ""


def test_an_old_sweep_without_fingerprints_is_checked_in_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finished: tuple[list[compose.JobSpec], list[JobOutcome]]
) -> None:
    index = tmp_path / "sweep" / INDEX_FILE
    with h5py.File(index, "a") as f:  # the index of a version without the column
        del f["fingerprint"]
        f.attrs["columns"] = np.array([c for c in f.attrs["columns"] if c != "fingerprint"],
                                      dtype=h5py.string_dtype())
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path))
    assert [reuse.ok for reuse, _ in decided] == [True] * 3
    assert calls.counts == {"compose": 3, "verify": 3, "read": 3}
    assert [outcome.summaries["k.y"] for _, outcome in decided] == pytest.approx([_final_y(k) for k in GAINS])


def test_a_summary_the_table_cannot_give_exactly_is_read_from_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finished: tuple[list[compose.JobSpec], list[JobOutcome]]
) -> None:
    specs, outcomes = finished
    outcomes[1].summaries["k.flag"] = True  # a port of job 1 alone: the others' rows hold NaN for it
    outcomes[2].summaries["k.y"] = math.nan
    write_index(tmp_path / "sweep" / INDEX_FILE, outcomes)
    calls = Calls(monkeypatch)
    decided = _decide(tmp_path, _specs(tmp_path))
    assert [reuse.ok for reuse, _ in decided] == [True] * 3
    assert calls.counts == {"compose": 0, "verify": 0, "read": 3}  # a 0/1/NaN column may be booleans: all read
    assert [outcome.summaries["k.y"] for _, outcome in decided] == pytest.approx([_final_y(k) for k in GAINS])


@pytest.mark.slow
def test_a_dask_sweep_fingerprints_its_jobs_and_a_resume_reruns_what_changed(tmp_path: Path, cosimrun) -> None:
    conf = _experiment(tmp_path)
    sweep_dir = tmp_path / "sweep"
    args = ["-m", f"--config-dir={conf}", "+experiment=tiny", "components.k.params.k=1.5,2,3",
            "hydra.launcher.ensemble_size=0", "hydra/launcher=dask", "hydra.launcher.n_workers=2",
            "hydra.launcher.progress=false", f"hydra.sweep.dir={sweep_dir}"]
    proc = cosimrun(*args)
    assert proc.returncode == 0, proc.stderr
    df = load_sweep(sweep_dir)
    for path, text in zip(df["path"], df["fingerprint"], strict=True):
        st = os.stat(sweep_dir / path)
        recorded = json.loads(text)
        assert (recorded["size"], recorded["mtime_ns"], recorded["ctime_ns"]) == (
            st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    (sweep_dir / df["path"].iloc[0]).unlink()  # as an interrupted sweep leaves it

    proc = cosimrun(*args, "hydra.launcher.resume=true")
    assert proc.returncode == 0, proc.stderr
    assert "sweep: 3 jobs, 3 complete (2 reused), 0 failed" in proc.stdout
    again = load_sweep(sweep_dir)
    assert list(again["reused"]) == [False, True, True] and list(again["note"]) == ["", "", ""]
    assert list(again["fingerprint"].iloc[1:]) == list(df["fingerprint"].iloc[1:])
    assert list(again["wall_time_s"].iloc[1:]) == list(df["wall_time_s"].iloc[1:])  # the rows taken over
    assert list(again["final.k.y"]) == pytest.approx([_final_y(k) for k in (1.5, 2, 3)], rel=1e-12)

    _experiment(tmp_path, amplitude=2.0)
    proc = cosimrun(*args, "hydra.launcher.resume=true")
    assert proc.returncode == 0, proc.stderr
    changed = load_sweep(sweep_dir)
    assert list(changed["reused"]) == [False] * 3
    assert list(changed["note"]) == ["rerun: configuration changed"] * 3
    assert list(changed["final.k.y"]) == pytest.approx([_final_y(k, 2.0) for k in (1.5, 2, 3)], rel=1e-12)


def test_rows_of_the_table_give_the_summaries_written_or_none_when_their_types_may_have_changed(
        tmp_path: Path) -> None:
    def row_summaries(summaries: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        outcomes = [JobOutcome(num, "complete", [f"a={num}"], path=str(tmp_path / f"{num}.h5"), summaries=s,
                               fingerprint="{}") for num, s in enumerate(summaries)]
        write_index(tmp_path / INDEX_FILE, outcomes)
        previous = resume.PreviousIndex(tmp_path / INDEX_FILE)
        return [row["summaries"] for row in map(previous.row, range(len(summaries))) if row is not None]

    written = [{"a.s": "up", "b.x": 1.5, "c.n": 3, "d.on": True}, {"a.s": "down", "b.x": 2.0, "c.n": -1, "d.on": False}]
    read = row_summaries(written)
    assert read == written and [type(v) for v in read[0].values()] == [str, float, int, bool]
    assert row_summaries([{"a.s": "up"}, {"a.s": 2.5}]) == [None, None]  # a number written as text
    assert row_summaries([{"c.n": 3}, {}]) == [None, None]  # an integer beside a job without the port
    assert row_summaries([{"b.x": 1.5}, {"b.x": math.nan}]) == [{"b.x": 1.5}, None]


TABLE = """# @package _global_
name: tabled
run: {t0: 0.0, tf: 1.0, dt: 0.5}
components:
  tab: {type: table, params: {path: signal.csv}}
  k: {type: gain, params: {k: 2.0}}
connections: [tab.y -> k.u]
"""


def test_a_job_whose_input_file_changed_runs_again_and_one_whose_file_holds_the_same_bytes_is_taken_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The config names the table's file, not what it holds: the run records the file by content, and a resume
    compares it, from the fingerprint (nothing read) and from the results file (an index without fingerprints)."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "tabled.yaml").write_text(TABLE, encoding="utf-8")
    table = conf / "experiment" / "signal.csv"
    table.write_text("time,y\n0,1\n1,3\n", encoding="utf-8")
    ctx, master = sweep_context(["+experiment=tabled", "components.k.params.k=1", f"hydra.searchpath=[file://{conf}]",
                                 f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    jobs = [["+experiment=tabled", f"components.k.params.k={k}"] for k in GAINS]

    def specs() -> list[compose.JobSpec]:
        composer = compose.JobComposer(ctx, master)
        return [composer.compose(overrides, num, on_worker=True) for num, overrides in enumerate(jobs)]

    outcomes = _run(specs())
    assert [json.loads(o.inputs) for o in outcomes] == [{str(table): inputs.digest(table)}] * 3
    with h5py.File(outcomes[0].path, "r") as f:
        assert f.attrs["inputs"] == outcomes[0].inputs
    assert [reuse.ok for reuse, _ in _decide(tmp_path, specs())] == [True] * 3

    table.write_text("time,y\n0,1\n1,4\n", encoding="utf-8")  # same size, other bytes
    changed = resume.Reuse(False, f"rerun: input file changed ({table})")
    calls = Calls(monkeypatch)
    assert [reuse for reuse, _ in _decide(tmp_path, specs())] == [changed] * 3
    assert calls.counts == {"compose": 0, "verify": 0, "read": 0}  # decided from the fingerprints
    assert [resume.check_reuse(spec) for spec in specs()] == [changed] * 3  # and from the files

    table.write_text("time,y\n0,1\n1,3\n", encoding="utf-8")  # the bytes the jobs read, written anew
    assert [reuse.ok for reuse, _ in _decide(tmp_path, specs())] == [True] * 3
    assert [resume.check_reuse(spec).ok for spec in specs()] == [True] * 3
    table.unlink()
    assert [resume.check_reuse(spec) for spec in specs()] == [changed] * 3
