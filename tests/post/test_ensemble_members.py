"""The result commands on a job of a sweep that ran as a member of an ensemble, addressed as ``<sweep>/<job>``.

One sweep of ``coupled_oscillators`` over four stiffnesses runs twice: as one ensemble (the default layout: no folder
per job, ``ensembles/<first>-<last>.<id>.h5``) and one job per member (``ensemble_size=0``, its twin). The ensemble
run equals the scalar runs bit for bit, so every read, figure, page, comparison and export of a job must equal its
twin's. Job 2 (stiffness 1e12) goes non-finite: it fails in its ensemble and again on its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import forkserver

from cosimrun.post.plot import plot_run, plot_sweep
from cosimrun.runner.index import write_index
from cosimrun.runner.load import load_run, load_sweep
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage.ensemble import EnsembleMember
from cosimrun.storage.results import Results, load_results

pytestmark = pytest.mark.slow

SWEEP = ["-m", "+experiment=coupled_oscillators", "run.tf=0.2", "components.mass1.params.stiffness=10,11,1e12,13",
         "hydra/launcher=dask", "hydra.launcher.n_workers=1", "hydra.launcher.progress=false"]
COMPLETE = [0, 1, 3]
FAILED = 2


class Sweeps:
    """The two sweeps and the command to run in their root."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.ens, self.jobs = root / "ens", root / "jobs"

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return forkserver.run(forkserver.Form.python_c(), list(args), {**self.env, "MPLBACKEND": "Agg"},
                              cwd=self.root, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def sweeps(sweep_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Sweeps:
    """Both layouts of the sweep, built once for the module (the ``cosimrun`` fixture's forked command; that
    fixture is per test)."""
    s = Sweeps(tmp_path_factory.mktemp("members"), sweep_env)
    for out, size in ((s.ens, "1000"), (s.jobs, "0")):
        proc = s(*SWEEP, f"hydra.launcher.ensemble_size={size}", f"hydra.sweep.dir={out}")
        assert proc.returncode == 1, proc.stderr  # job 2 fails
    ens = load_sweep(s.ens)
    assert list(ens["member"]) == [0, 1, -1, 3] and not (s.ens / "0").exists()  # the layout this module is about
    assert list(ens["status"]) == ["complete", "complete", "failed", "complete"]
    return s


def _ensemble_file(s: Sweeps) -> Path:
    return s.ens / load_sweep(s.ens)["path"].iloc[0]


def test_a_job_reads_the_same_at_its_address_in_both_layouts(sweeps: Sweeps) -> None:
    for run in COMPLETE:
        member, alone = load_results(sweeps.ens / str(run)), load_results(sweeps.jobs / str(run))
        assert isinstance(member, EnsembleMember) and isinstance(alone, Results)
        assert (member.member, member.job, member.status, member.error) == (run, run, "complete", "")
        assert member.components == alone.components == ["mass1", "mass2"]
        for comp in alone.components:
            assert member.ports(comp) == alone.ports(comp)
            pd.testing.assert_frame_equal(member.to_dataframe(comp), alone.to_dataframe(comp), check_exact=True)
        pd.testing.assert_frame_equal(member.to_dataframe(), alone.to_dataframe(), check_exact=True)
        for table in ("events", "mode_switches", "steps"):
            pd.testing.assert_frame_equal(getattr(member, table), getattr(alone, table), check_index_type=False)
        assert member.attrs["overrides"] == alone.attrs["overrides"]
        assert (member.attrs["master"], member.attrs["tf"], member.attrs["dt"]) == (
            alone.attrs["master"], alone.attrs["tf"], alone.attrs["dt"])
        assert member.stats["macro_steps"] == alone.stats["macro_steps"] == 200
        assert member.directory == sweeps.ens / str(run)
        # the same member from the file and its number, and through load_run
        by_file = load_results(_ensemble_file(sweeps), member=run)
        assert np.array_equal(by_file.trajectory("mass1", "x")[1], alone.trajectory("mass1", "x")[1])
        assert np.array_equal(load_run(sweeps.ens, run).trajectory("mass2", "force")[1],
                              alone.trajectory("mass2", "force")[1])


def test_plot_of_a_member_draws_its_signals_beside_its_address(sweeps: Sweeps) -> None:
    proc = sweeps("plot", "ens/1")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "plot: ens/1/plot.png\n", "")
    assert (sweeps.ens / "1" / "plot.png").read_bytes().startswith(b"\x89PNG")
    alone = load_results(sweeps.jobs / "1")
    drawn = {line.get_label(): line.get_ydata() for ax in plot_run(sweeps.ens / "1").axes for line in ax.get_lines()}
    assert sorted(drawn) == ["mass1.v", "mass1.x", "mass2.force", "mass2.v", "mass2.x"]
    for name, values in drawn.items():
        comp, _, port = name.partition(".")
        assert np.array_equal(values, alone.trajectory(comp, port)[1]), name
    # the plot written there does not hide the member: the address still reads it
    assert isinstance(load_results(sweeps.ens / "1"), EnsembleMember)


def test_report_of_a_member_holds_its_summary_and_signals(sweeps: Sweeps) -> None:
    proc = sweeps("report", "ens/3")
    assert (proc.returncode, proc.stdout) == (0, "report: ens/3/report.html\n"), proc.stderr
    page = (sweeps.ens / "3" / "report.html").read_text()
    twin = Path(sweeps("report", "jobs/3").stdout.split(": ", 1)[1].strip())
    twin_page = (sweeps.root / twin).read_text()
    assert '<span class="status complete">complete</span>' in page
    assert "<th>member</th><td>3</td>" in page and "components.mass1.params.stiffness=13" in page

    def ports(html: str) -> str:
        return html[html.index("<h2>Ports</h2>"):html.index("<h2>Config</h2>")]

    assert ports(page) == ports(twin_page)  # every signal, with its unit
    for name in ("mass1.x", "mass1.v", "mass2.x", "mass2.v", "mass2.force"):
        assert f"<td>{name}</td>" in page


def test_compare_a_member_with_its_twin_and_a_reference_csv(sweeps: Sweeps) -> None:
    proc = sweeps("compare", "ens/0", "jobs/0", "--rtol", "0", "--atol", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "ok: 5 signals within tolerance"
    assert all("max deviation 0 at" in line for line in lines[:-1]) and len(lines) == 6
    ref = load_results(sweeps.jobs / "0").to_dataframe("mass1")
    ref.drop(columns="micro").rename(columns={"x": "mass1.x [m]", "v": "mass1.v [m/s]"}).to_csv(
        sweeps.root / "ref0.csv")
    proc = sweeps("compare", "ens/0", "ref0.csv", "--ports", "mass1.*")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "ok: 2 signals within tolerance", proc.stdout
    # and a different member is told apart
    proc = sweeps("compare", "ens/1", "jobs/0")
    assert proc.returncode == 1 and proc.stdout.splitlines()[-1].startswith("FAIL: ")


def test_export_of_a_member_equals_its_twins_byte_for_byte(sweeps: Sweeps) -> None:
    proc = sweeps("export", "ens/3")
    assert (proc.returncode, proc.stdout) == (
        0, "export: 4 files in ens/3/export: mass1.csv, mass2.csv, events.csv, mode_switches.csv\n"), proc.stderr
    assert sweeps("export", "jobs/3").returncode == 0
    mine, theirs = sweeps.ens / "3" / "export", sweeps.jobs / "3" / "export"
    assert sorted(p.name for p in mine.iterdir()) == sorted(p.name for p in theirs.iterdir())
    for file in theirs.iterdir():
        assert (mine / file.name).read_bytes() == file.read_bytes(), file.name
    assert (mine / "mass1.csv").read_text().startswith("time,micro,x [m],v [m/s]\n0.0,0,1.0,0.0\n")
    pytest.importorskip("pyarrow")
    for out in ("ens/3", "jobs/3"):
        assert sweeps("export", out, "--format", "parquet", "-o", f"{out}/pq").returncode == 0
    pd.testing.assert_frame_equal(pd.read_parquet(sweeps.ens / "3" / "pq" / "results.parquet"),
                                  pd.read_parquet(sweeps.jobs / "3" / "pq" / "results.parquet"), check_exact=True)


def test_a_job_not_in_the_index_is_one_line_and_exit_2(sweeps: Sweeps) -> None:
    for command in ("plot", "report", "export"):
        proc = sweeps(command, "ens/7")
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (f"cosimrun: error: {command}: job 7 is not in the sweep index ens/index.h5 "
                               "(jobs 0 to 3)\n")
    with pytest.raises(FileNotFoundError, match=r"job 7 is not in the sweep index .*index\.h5 \(jobs 0 to 3\)"):
        load_results(sweeps.ens / "7")
    # an ensemble's file holds many jobs: the commands ask for one
    file = _ensemble_file(sweeps).relative_to(sweeps.root)
    proc = sweeps("export", str(file))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"cosimrun: error: export: {file} is an ensemble's file: give the member to read (member=N, "
                           "the sweep index's 'member' column), or read a job at its address <sweep dir>/<job>\n")


def test_a_failed_member_says_it_failed(sweeps: Sweeps) -> None:
    row = load_sweep(sweeps.ens).loc[FAILED]
    assert row["status"] == "failed" and row["path"] == f"{FAILED}/results.h5"  # run again on its own, failed again
    alone = load_results(sweeps.ens / str(FAILED))
    assert isinstance(alone, Results) and alone.status == "failed" and "NonFiniteValueError" in alone.error
    in_ensemble = load_results(_ensemble_file(sweeps), member=FAILED)
    assert in_ensemble.status == "failed" and in_ensemble.attrs["status"] == "failed"
    assert "non-finite" in in_ensemble.error.lower() and 0 <= in_ensemble.attrs["failure_time"] <= 0.2
    proc = sweeps("report", f"ens/{FAILED}")
    assert proc.returncode == 0, proc.stderr
    page = (sweeps.ens / str(FAILED) / "report.html").read_text()
    assert '<span class="status failed">failed</span>' in page and "NonFiniteValueError" in page


def test_a_job_without_results_says_its_status(sweeps: Sweeps, tmp_path: Path) -> None:
    write_index(tmp_path / "index.h5", [JobOutcome(0, "interrupted", ["a=1"], error="the driver was stopped")])
    with pytest.raises(FileNotFoundError) as caught:
        load_results(tmp_path / "0")
    assert str(caught.value) == (f"job 0 of the sweep {tmp_path} has no results: it is interrupted "
                                 "(the driver was stopped)")
    # a member whose ensemble file is gone
    gone = tmp_path / "gone"
    gone.mkdir()
    (gone / "index.h5").write_bytes((sweeps.ens / "index.h5").read_bytes())
    with pytest.raises(FileNotFoundError, match=r"^job 1 of the sweep .*gone \(complete\): its results file "
                                                r".*ensembles/0-3\.\w+\.h5 is missing$"):
        load_results(gone / "1")


def test_plot_sweep_reads_the_members_of_an_ensemble(sweeps: Sweeps) -> None:
    def lines(sweep: Path) -> list[np.ndarray]:
        return [line.get_ydata() for ax in plot_sweep(sweep, ["mass1.x"]).axes for line in ax.get_lines()]

    mine, theirs = lines(sweeps.ens), lines(sweeps.jobs)
    assert len(mine) == len(theirs) == 4
    for a, b in zip(mine, theirs, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    proc = sweeps("plot", "ens", "mass2.force")
    assert (proc.returncode, proc.stdout) == (0, "plot: ens/plot.png\n"), proc.stderr
    # the sweep's page links each job's own page, written at the job's address
    proc = sweeps("report", "ens")
    assert proc.returncode == 0, proc.stderr
    page = (sweeps.ens / "report.html").read_text()
    for run in range(4):
        assert f'<a href="{run}/report.html">report</a>' in page
        assert (sweeps.ens / str(run) / "report.html").is_file()
    # without writing them again, the pages written are linked where they are
    proc = sweeps("report", "ens", "--no-job-reports", "-o", "ens/again.html")
    assert proc.returncode == 0, proc.stderr
    again = (sweeps.ens / "again.html").read_text()
    assert all(f'<a href="{run}/report.html">report</a>' in again for run in range(4))
