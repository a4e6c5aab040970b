"""The index of a running sweep grows by rows in a columnar HDF5 store: appended, never rewritten, readable from
another process while rows are appended and after its writer was killed in the middle of an append."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pandas as pd

from cosimrun.runner.index import ROW_SCHEMA, write_index
from cosimrun.runner.ledger import SweepLedger
from cosimrun.runner.load import load_sweep
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage.sweep_index import INDEX_FILE, PARTS_DIR, append_index_rows, index_generation, rows_file


def _done(num: int, **kw: object) -> JobOutcome:
    fields = dict(status="complete", overrides=["+experiment=x", f"a.k={num * 0.5}", f"b.n={num}"],
                  wall_time_s=0.25 * num, job_time_s=0.5, summaries={"y.v": 0.1 * num, "y.ok": num % 3 == 0,
                                                                    "y.mode": f"m{num}"}, worker="w", attempts=1)
    fields.update(kw)
    return JobOutcome(num=num, **fields)  # type: ignore[arg-type]


def test_rows_are_appended_to_typed_columns_and_a_later_row_of_a_job_replaces_its_earlier_one(tmp_path: Path) -> None:
    ledger = SweepLedger(tmp_path, min_interval=0.0)
    for num in range(30):
        ledger.add_pending(num, _done(num).overrides)
    ledger.flush()
    generation = index_generation(tmp_path / INDEX_FILE)
    store = rows_file(tmp_path / INDEX_FILE, generation)
    appended = 30
    for num in range(30):
        ledger.enter(_done(num, error="ValueError: é ✓", status="failed", summaries={}) if num == 4 else _done(num))
        ledger.flush()
        appended += 1
        with h5py.File(store, "r", swmr=True, locking=False) as f:  # one row more each time: nothing rewritten
            assert int(f["count"][0]) == f["num"].shape[0] == f["status.end"].shape[0] == appended
            assert f["wall_time_s"].dtype == np.float64 and f["attempts"].dtype == np.int64
            assert f["reused"].dtype == np.int8 and f["status.bytes"].dtype == np.uint8
    assert sorted(p.name for p in (tmp_path / PARTS_DIR).iterdir()) == [store.name]
    live = load_sweep(tmp_path)
    assert list(live["status"]) == ["complete"] * 4 + ["failed"] + ["complete"] * 25
    assert live.loc[4, "error"] == "ValueError: é ✓" and live.loc[7, "final.y.mode"] == "m7"
    assert live.loc[7, "overrides"] == "+experiment=x a.k=3.5 b.n=7"
    ledger.close()
    assert not (tmp_path / PARTS_DIR).exists()
    pd.testing.assert_frame_equal(live, load_sweep(tmp_path))


def test_the_store_refuses_a_schema_without_an_int_num(tmp_path: Path) -> None:
    for schema in ({"num": "text"}, {"status": "text"}, {"num": "int", "x": "complex"}):
        try:
            append_index_rows(tmp_path / INDEX_FILE, "g", 0, schema, [{"num": 1}])
        except ValueError as exc:
            assert "an int field 'num'" in str(exc)
        else:
            raise AssertionError(f"{schema} was accepted")


WRITER = textwrap.dedent("""
    import sys, time
    from cosimrun.runner.ledger import SweepLedger
    from cosimrun.runner.outcome import JobOutcome
    sweep, n, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    ledger = SweepLedger(sweep, min_interval=0.0)
    for num in range(n):
        ledger.add_pending(num, [f"a.k={num}"])
    ledger.flush()
    print("started", flush=True)
    for num in range(n):
        ledger.enter(JobOutcome(num, "complete", [f"a.k={num}"], summaries={"y.v": num * 2.0}, traceback="t" * 3000))
        ledger.flush()
        time.sleep(pause)
    ledger.close()
    print("closed", flush=True)
""")


def _writer(sweep: Path, n: int, pause: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(sweep), str(n), str(pause)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "started\n"
    return proc


def _check_rows(df: pd.DataFrame, n: int) -> int:
    """Every row whole: pending, or complete with its value; the number complete."""
    assert list(df.index) == list(range(n))
    done = df["status"] == "complete"
    assert set(df["status"]) <= {"pending", "complete"}
    if not done.any():
        return 0
    assert (df.loc[done, "final.y.v"] == 2.0 * df.index[done]).all()
    assert (df.loc[done, "traceback"].str.len() == 3000).all()
    return int(done.sum())


def test_a_reader_in_another_process_sees_a_whole_index_at_any_moment_while_rows_are_appended(tmp_path: Path) -> None:
    n = 150
    proc = _writer(tmp_path, n, 0.002)
    seen = []
    try:
        while proc.poll() is None:
            seen.append(_check_rows(load_sweep(tmp_path), n))
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert len(seen) >= 3 and seen == sorted(seen)  # rows only ever arrive
    assert _check_rows(load_sweep(tmp_path), n) == n


def test_an_index_whose_driver_was_killed_while_appending_reads_the_rows_written_whole(tmp_path: Path) -> None:
    n = 2000
    proc = _writer(tmp_path, n, 0.0)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    df = load_sweep(tmp_path)
    complete = _check_rows(df, n)
    assert 0 < complete < n
    assert list(df["status"][:complete]) == ["complete"] * complete  # the jobs entered, in order
    resumed = SweepLedger(tmp_path, min_interval=0.0)  # a resume starts a generation of its own
    for num in range(n):
        resumed.enter(JobOutcome(num, "complete", [f"a.k={num}"], summaries={"y.v": num * 2.0},
                                 traceback="t" * 3000, reused=num < complete))
    resumed.flush()
    assert _check_rows(load_sweep(tmp_path), n) == n
    resumed.close()
    assert int(load_sweep(tmp_path)["reused"].sum()) == complete


def test_the_json_lines_parts_of_an_earlier_version_still_read(tmp_path: Path) -> None:
    """A sweep killed under an earlier version left its rows as JSON lines in index.parts/."""
    outcomes = [JobOutcome(num, "pending", [f"a.k={num}"], attempts=0) for num in range(3)]
    write_index(tmp_path / INDEX_FILE, outcomes, generation="old")
    (tmp_path / PARTS_DIR).mkdir()
    rows = [{"num": 1, "status": "complete", "overrides": ["a.k=1"], "summaries": {"y.v": 2.5}, "attempts": 1}]
    (tmp_path / PARTS_DIR / "old-000000000-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    df = load_sweep(tmp_path)
    assert list(df["status"]) == ["complete"] and df.loc[1, "final.y.v"] == 2.5


def test_a_generation_without_rows_yet_reads_as_the_file_was_written(tmp_path: Path) -> None:
    outcomes = [JobOutcome(num, "pending", [f"a.k={num}"], attempts=0) for num in range(3)]
    write_index(tmp_path / INDEX_FILE, outcomes, generation="fresh")  # killed before its first append
    df = load_sweep(tmp_path)
    assert list(df["status"]) == ["pending"] * 3 and list(df["a.k"]) == [0, 1, 2]
    assert set(ROW_SCHEMA) >= {"num", "status", "summaries", "overrides"}


def test_the_whole_first_write_of_a_large_index_does_not_put_off_the_appends_after_it(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """On the ledger's clock (a fake one): the first write takes 15 s for the whole file of 10^4 pending jobs and
    0.2 s to append their rows; the next append comes ten times the append's time after it (2 s), not ten times the
    whole write's, and appends of 10 ms each come min_interval apart from then on."""
    from types import SimpleNamespace

    from cosimrun.runner import ledger as ledger_module

    now = [100.0]
    appends: list[tuple[float, int]] = []

    def whole(*args: object, **kwargs: object) -> None:
        now[0] += 15.0

    def append(path: object, generation: str, seq: int, outcomes: object) -> None:
        rows = list(outcomes)  # type: ignore[call-overload]
        appends.append((now[0], len(rows)))
        now[0] += 0.2 if seq == 0 else 0.01

    monkeypatch.setattr(ledger_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(ledger_module, "write_index", whole)
    monkeypatch.setattr(ledger_module, "write_index_rows", append)
    ledger = SweepLedger(tmp_path, min_interval=0.5)
    for num in range(10_000):
        ledger.add_pending(num, [f"a.k={num}"])
    num = 0
    while now[0] < 122.0:  # a job finishes every 10 ms
        ledger.enter(JobOutcome(num, "complete", [f"a.k={num}"], job_time_s=0.01))
        num += 1
        now[0] += 0.01
    assert appends[0] == (115.0, 10_000)
    assert 2.0 <= appends[1][0] - 115.2 <= 2.0 + 0.011  # 2 s after the first append ended, not 150 s
    gaps = [b[0] - a[0] - 0.01 for a, b in zip(appends[1:], appends[2:], strict=False)]
    assert len(gaps) >= 5 and all(0.5 <= gap <= 0.52 for gap in gaps)


SIMPLE_OVERRIDES = ["a.k=1", "a.k=-7", "+a.k=+3", "++a.k=0", "a.k=1.5", "a.k=-2.", "a.k=.5", "a.k=1e3", "a.k=1.5E-3",
                    "a.k=-4e+2", "master=jacobi", "+experiment=pendulum_switch", "a.b_c-d.e=x-y_z", "a.k=True",
                    "a.k=FALSE", "a.k=null", "a.k=Null", "a.k=inf", "a.k=NaN", "a.k=Infinity", "a_1.k2=v2"]
OTHER_OVERRIDES = ["a.k=007", "a.k=1_000", "a.k=-inf", "a.k=[1,2]", "a.k='quoted'", "a.k=${b}", "~a.k",
                   "a.k=x y", "group/sub=opt", "a@pkg=v", "a.k=", "a.k=a:b", "a.k=1.2.3"]


def test_plain_overrides_are_typed_without_hydras_parser_exactly_as_it_types_them() -> None:
    """The index's parameter columns come from the overrides; plain numbers and words take a fast path, which
    gives Hydra's types and values, and anything else goes to Hydra's parser."""
    import math

    from cosimrun.runner.index import _parser, _simple_items

    for item in SIMPLE_OVERRIDES:
        fast = _simple_items([item])
        assert fast is not None, item
        (ov,) = _parser().parse_overrides([item])
        (key, value), = fast.items()
        assert key == ov.key_or_group, item
        expected = ov.value()
        assert type(value) is type(expected), (item, value, expected)
        assert value == expected or (math.isnan(value) and math.isnan(expected)), (item, value, expected)
    for item in OTHER_OVERRIDES:
        assert _simple_items([item]) is None, item
    assert _simple_items(["a.k=1", "a.k=[1,2]"]) is None  # one that is not plain: all go to Hydra's parser
