"""``cosimrun compare``: identical runs, a perturbed copy, an analytic reference CSV with events, units, errors.

The runs are the bouncing ball under the hybrid master (impacts located to
1e-10 s); the reference is its analytic h(t), v(t) with each impact written as
two rows, before and after. The command runs in-process through
:func:`cosimrun.post.commands.main` (exit status, stdout and stderr as the
``cosimrun`` program gives them); one test runs the real program.
"""

from __future__ import annotations

import bisect
import json
import math
import shutil
from pathlib import Path

import h5py
import helpers
import numpy as np
import pytest
from conftest import Cli

from cosimrun.post import commands
from cosimrun.post.compare import compare, match_names
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results, verify_results

H0, E, G, DT, TF = 1.0, 0.8, 9.81, 0.01, 3.0
BALL = {
    "name": "ball",
    "run": {"t0": 0.0, "tf": TF, "dt": DT},
    "components": {"ball": {"type": "bouncing_ball", "params": {"h0": H0, "v0": 0.0, "e": E, "g": G}}},
    "master": {"name": "hybrid"},
}


def ball_run(out: Path) -> Path:
    outcome = run_experiment(BALL, out, experiment=prepare(BALL))
    assert outcome.ok, outcome.error
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two run directories of the same experiment."""
    root = tmp_path_factory.mktemp("ball")
    return ball_run(root / "a"), ball_run(root / "b")


def command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    """``cosimrun compare ...`` in-process: exit status, stdout lines, stderr lines."""
    with pytest.raises(SystemExit) as end:
        commands.main(["compare", *argv])
    out, err = capsys.readouterr()
    return end.value.code, out.splitlines(), err.splitlines()


def write_reference(path: Path, *, delay: float = 0.0, units: tuple[str, str] = ("m", "m/s"),
                    scale: tuple[float, float] = (1.0, 1.0)) -> list[float]:
    """The ball's analytic h(t), v(t) as a CSV on the run's grid, impacts *delay* s late; returns the impacts.

    Every impact is two rows at one time (before, after), as in the Modelica
    Association's reference results; *scale* multiplies the values written
    under the headers' *units*.
    """
    impacts = [t + delay for t in helpers.bounce_times(10, H0, E, G) if t + delay < TF]
    v1 = math.sqrt(2 * G * H0)

    def state(t: float) -> tuple[float, float]:
        k = bisect.bisect_right(impacts, t)
        if k == 0:
            s = t - delay
            return H0 - G * s * s / 2, -G * s
        s, speed = t - impacts[k - 1], E**k * v1
        return speed * s - G * s * s / 2, speed - G * s

    rows = [(float(t), *state(float(t))) for t in np.arange(round(TF / DT) + 1) * DT]
    for k, t in enumerate(impacts):
        rows += [(t, 0.0, -(E**k) * v1), (t, 0.0, E ** (k + 1) * v1)]
    rows.sort(key=lambda row: row[0])  # stable: the row before an impact stays first
    lines = [f"time,h [{units[0]}],v [{units[1]}]"]
    lines += [f"{t!r},{h * scale[0]!r},{v * scale[1]!r}" for t, h, v in rows]
    path.write_text("\n".join(lines) + "\n")
    return impacts


def last_time(line: str) -> float:
    """The time of a verdict line ``FAIL: NAME first differs at t=T s (...)``."""
    return float(line.split(" at t=")[1].split(" s")[0])


# ---------------------------------------------------------------------------- runs
def test_identical_runs_pass_with_every_line_ok(runs: tuple[Path, Path], cli: Cli, tmp_path: Path) -> None:
    a, b = runs
    proc = cli("compare", str(a), str(b / "results.h5"), cwd=tmp_path)  # the real program
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["ball.h", "ball.v", "ball.bounce"]
    assert all(line.endswith("  ok") and "max deviation 0 " in line for line in lines[:-1])
    assert lines[-1] == "ok: 3 signals within tolerance"
    assert proc.stderr == ""


def test_a_perturbed_copy_fails_naming_the_signal_and_the_first_time(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    copy = tmp_path / "perturbed.h5"
    shutil.copy(b / "results.h5", copy)
    with h5py.File(copy, "r+") as f:
        time = f["components/ball/time"][:]
        v = f["components/ball/v"]
        late = time > 1.5
        v[late] = v[late] + 0.1  # the tolerance of v is 1e-6 + 1e-3 * 4.43
    assert any("CRC-32 mismatch" in problem for problem in verify_results(copy))  # changed after it was written
    report = tmp_path / "report.json"
    code, out, err = command(capsys, str(a), str(copy), "--json", str(report))
    first = float(time[late][0])
    assert (code, err) == (1, [])
    assert out[0].startswith("ball.h [m]") and out[0].endswith("  ok")
    assert out[1].startswith("ball.v [m/s]  max deviation 0.1 at t=") and out[1].endswith(f"FAIL from t={first:.9g} s")
    assert out[2].endswith("  ok")
    assert out[-1] == f"FAIL: ball.v first differs at t={first:.9g} s (1 of 3 signals fail)"
    data = json.loads(report.read_text())
    assert data["ok"] is False
    assert data["first_failure"] == {"signal": "ball.v", "time": first, "note": ""}
    assert (data["rtol"], data["atol"], data["time_tolerance"]) == (1e-3, 1e-6, 1e-6)
    signals = {s["name"]: s for s in data["signals"]}
    assert list(signals) == ["ball.h", "ball.v", "ball.bounce"]
    assert signals["ball.v"]["ok"] is False and signals["ball.v"]["first_failure"] == first
    assert signals["ball.v"]["max_deviation"] == pytest.approx(0.1) and signals["ball.v"]["at"] >= first
    assert signals["ball.v"]["tolerance"] == pytest.approx(1e-6 + 1e-3 * math.sqrt(2 * G * H0), rel=1e-3)
    assert signals["ball.h"] | {"max_deviation": None, "at": None, "tolerance": None} == {
        "name": "ball.h", "name_a": "ball.h", "name_b": "ball.h", "unit": "m", "max_deviation": None, "at": None,
        "tolerance": None, "ok": True, "first_failure": None, "note": ""}
    assert signals["ball.h"]["max_deviation"] == 0.0


# ---------------------------------------------------------------------------- a reference CSV with events
def test_an_analytic_reference_with_doubled_impact_rows_passes(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_reference(tmp_path / "ref.csv")
    code, out, err = command(capsys, str(runs[0]), str(tmp_path / "ref.csv"), "--ports", "h", "v")
    assert (code, err) == (0, [])
    assert [line.split()[:2] for line in out[:-1]] == [["ball.h", "[m]"], ["ball.v", "[m/s]"]]
    assert all(line.endswith("  ok") for line in out[:-1])
    assert out[-1] == "ok: 2 signals within tolerance"


def test_signals_only_in_one_side_are_listed_and_fail(runs: tuple[Path, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    write_reference(tmp_path / "ref.csv")
    code, out, _ = command(capsys, str(runs[0]), str(tmp_path / "ref.csv"))
    assert code == 1
    assert out[2] == "ball.bounce   only in A  FAIL"
    assert out[-1] == "FAIL: ball.bounce: only in A (1 of 3 signals fail; --ports compares the signals both have)"


def test_impacts_later_than_the_time_tolerance_fail_and_within_it_pass(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ref = tmp_path / "late.csv"
    write_reference(ref, delay=1e-4)
    first_impact = float(load_results(runs[0]).events["time"].iloc[0])
    code, out, _ = command(capsys, str(runs[0]), str(ref), "--ports", "h", "v")  # time tolerance 1e-6 s
    assert code == 1
    assert out[0].endswith("  ok")  # h is continuous: 1e-4 s late is within its value tolerance
    assert "FAIL from t=" in out[1]
    assert out[-1].startswith("FAIL: ball.v first differs at t=") and out[-1].endswith("(1 of 2 signals fail)")
    assert last_time(out[-1]) == pytest.approx(first_impact, abs=1e-9)
    code, out, _ = command(capsys, str(runs[0]), str(ref), "--ports", "h", "v", "--time-tolerance", "1e-3")
    assert code == 0, out
    write_reference(ref, delay=5e-3)
    code, out, _ = command(capsys, str(runs[0]), str(ref), "--ports", "h", "v", "--time-tolerance", "1e-3")
    assert code == 1
    assert all("FAIL from t=" in line for line in out[:-1])


# ---------------------------------------------------------------------------- units
def test_units_are_converted_to_those_of_a(runs: tuple[Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    write_reference(tmp_path / "ref.csv", units=("cm", "km/h"), scale=(100.0, 3.6))
    code, out, _ = command(capsys, str(runs[0]), str(tmp_path / "ref.csv"), "--ports", "h", "v")
    assert code == 0, out
    assert out[0].startswith("ball.h [m]") and out[1].startswith("ball.v [m/s]")
    write_reference(tmp_path / "ref.csv", units=("mm", "m/s"))  # says mm, holds metres
    code, out, _ = command(capsys, str(runs[0]), str(tmp_path / "ref.csv"), "--ports", "h", "v")
    assert code == 1
    assert out[-1].startswith("FAIL: ball.h first differs at t=0 s")


def test_incompatible_units_are_one_line(runs: tuple[Path, Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    write_reference(tmp_path / "ref.csv", units=("s", "m/s"))
    code, out, err = command(capsys, str(runs[0]), str(tmp_path / "ref.csv"), "--ports", "h", "v")
    assert (code, out) == (2, [])
    assert err == ["cosimrun: error: compare: ball.h: A is in m, B in s: cannot convert s to m: "
                   "[time] vs [length]"]


# ---------------------------------------------------------------------------- bad input
def test_an_unknown_ports_pattern_is_one_line(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = command(capsys, str(runs[0]), str(runs[1]), "--ports", "ball.hh")
    assert (code, out, len(err)) == (2, [], 1)
    assert err[0].startswith("cosimrun: error: compare: unknown signal 'ball.hh' in A or B")
    assert "ball.h" in err[0]


@pytest.mark.parametrize("missing", ["nowhere", "nowhere.csv"])
def test_a_missing_file_is_one_line(runs: tuple[Path, Path], tmp_path: Path, missing: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = command(capsys, str(runs[0]), str(tmp_path / missing))
    assert (code, out, len(err)) == (2, [], 1)
    assert err[0].startswith("cosimrun: error: compare: no ") and missing in err[0]


def test_a_negative_tolerance_is_one_line(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = command(capsys, str(runs[0]), str(runs[1]), "--rtol", "-1")
    assert (code, len(err)) == (2, 1)
    assert err[0].startswith("cosimrun: error: compare: argument --rtol: '-1' is not a finite number >= 0")


# ---------------------------------------------------------------------------- the function
def write_csv(path: Path, header: str, rows: list[tuple[object, ...]]) -> Path:
    path.write_text("\n".join([header, *(",".join(map(str, row)) for row in rows)]) + "\n")
    return path


def test_a_step_moved_within_the_time_tolerance_passes_and_text_must_be_equal(tmp_path: Path) -> None:
    grid = [0.0, 0.5, 1.0, 1.5, 2.0]
    a = write_csv(tmp_path / "a.csv", "time,y [V],mode", [(t, 0.0, "off") for t in grid[:2]] + [
        (1.0, 0.0, "off"), (1.0, 5.0, "on")] + [(t, 5.0, "on") for t in grid[3:]])
    b = write_csv(tmp_path / "b.csv", "time,y [mV],mode", [(t, 0.0, "off") for t in grid[:3]] + [
        (1.02, 0.0, "off"), (1.02, 5000.0, "on")] + [(t, 5000.0, "on") for t in grid[3:]])
    result = compare(a, b, time_tolerance=0.05)
    assert result.ok and result.event_instants == 2
    assert [(s.name, s.unit, s.max_deviation) for s in result.signals] == [("y", "V", 0.0), ("mode", None, 0.0)]
    result = compare(a, b, time_tolerance=0.01)
    assert [s.first_failure for s in result.signals] == [1.0, 1.0]
    assert result.signals[1].max_deviation == 1.0 and result.signals[1].tolerance == 0.0
    assert result.first_failure is result.signals[0]


def test_time_spans_must_agree(tmp_path: Path) -> None:
    a = write_csv(tmp_path / "a.csv", "time,y", [(0.0, 1.0), (1.0, 1.0), (2.0, 1.0)])
    b = write_csv(tmp_path / "b.csv", "time,y", [(0.0, 1.0), (1.0, 1.0)])
    (y,) = compare(a, b).signals
    assert not y.ok and y.first_failure == 1.0 and y.max_deviation == 0.0
    assert y.note == "A covers 0 to 2 s, B 0 to 1 s"


def test_names_match_exactly_or_by_their_port_part_when_unambiguous() -> None:
    assert match_names(["ball.h", "ball.v", "x.y"], ["h", "ball.v", "z"]) == [
        ("ball.h", "ball.h", "h"), ("ball.v", "ball.v", "ball.v"), ("x.y", "x.y", None), ("z", None, "z")]
    assert match_names(["a.h", "b.h"], ["h"]) == [("a.h", "a.h", None), ("b.h", "b.h", None), ("h", None, "h")]
    assert match_names(["h"], ["fmu.body.r"]) == [("h", "h", None), ("fmu.body.r", None, "fmu.body.r")]
    assert match_names(["body.r"], ["fmu.body.r"]) == [("fmu.body.r", "body.r", "fmu.body.r")]


def test_a_run_with_events_at_communication_points_matches_the_located_run_given_dt_and_one_steps_fall(
        runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Jacobi bounces the ball up to dt late and up to |v| dt below the floor: dt alone is not enough for h."""
    cfg = {**BALL, "master": {"name": "jacobi"}}
    with pytest.warns(UserWarning, match="events are handled at communication points"):
        outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    hybrid = runs[0]
    late = compare(hybrid, outcome.path, ports=["h"], time_tolerance=DT)
    assert not late.ok and late.first_failure is not None and late.first_failure.name == "ball.h"
    v_max = math.sqrt(2 * G * H0)
    assert 0.01 < late.signals[0].max_deviation <= v_max * DT  # the pre-event sample below the floor
    assert compare(hybrid, outcome.path, ports=["h"], time_tolerance=DT, atol=v_max * DT).ok
