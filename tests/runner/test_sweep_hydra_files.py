"""The ``.hydra`` files of a dask sweep: written once at the sweep's root, each job keeping its overrides only; a
sweep directory of the older layout (every job with its own ``.hydra`` files) still loads and resumes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from cosimrun.runner.load import load_sweep
from cosimrun.storage.results import load_results

ARGS = ["-m", "+experiment=bouncing_ball", "run.tf=0.5", "components.ball.params.e=0.5,0.7,0.9",
        "run.dt=0.01,0.02", "hydra/launcher=dask", "hydra.launcher.n_workers=1",
        "hydra.launcher.ensemble_size=0"]  # each job in its folder, not as members of an ensemble


def _yaml(path: Path) -> object:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_hydra_files_are_written_once_at_the_root_and_each_job_keeps_its_overrides(tmp_path: Path,
                                                                                        cosimrun) -> None:
    sweep = tmp_path / "sweep"
    proc = cosimrun(*ARGS, f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr
    df = load_sweep(sweep)
    assert list(df["status"]) == ["complete"] * 6
    root = sweep / ".hydra"
    assert sorted(p.name for p in root.iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert _yaml(root / "overrides.yaml") == ["+experiment=bouncing_ball", "run.tf=0.5",
                                              "components.ball.params.e=0.5,0.7,0.9", "run.dt=0.01,0.02"]
    hydra = _yaml(root / "hydra.yaml")["hydra"]  # type: ignore[index]
    assert hydra["sweep"]["dir"] == str(sweep) and hydra["launcher"]["n_workers"] == 1
    assert _yaml(root / "config.yaml")["name"] == "bouncing_ball"  # type: ignore[index]
    for num, row in df.iterrows():
        job = sweep / str(num)
        assert sorted(p.name for p in (job / ".hydra").iterdir()) == ["overrides.yaml"]
        overrides = _yaml(job / ".hydra" / "overrides.yaml")
        assert " ".join(overrides) == row["overrides"]  # type: ignore[arg-type]
        res = load_results(sweep / row["path"])
        assert res.status == "complete"
        assert f"e: {row['components.ball.params.e']}" in res.attrs["config_yaml"]
        assert res.attrs["overrides"] == " ".join(overrides)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_sweep_directory_with_hydra_files_per_job_still_loads_and_resumes(tmp_path: Path, cosimrun) -> None:
    """A sweep made before: each job's folder has config.yaml, hydra.yaml and overrides.yaml, the root none."""
    sweep = tmp_path / "sweep"
    proc = cosimrun(*ARGS, f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 0, proc.stderr
    before = load_sweep(sweep)
    shutil.rmtree(sweep / ".hydra")
    for num in before.index:  # the older layout's files
        files = sweep / str(num) / ".hydra"
        for name in ("config.yaml", "hydra.yaml"):
            (files / name).write_text(f"# job {num}'s {name}\n", encoding="utf-8")
    (sweep / "4" / "results.h5").unlink()
    mtimes = {num: (sweep / path).stat().st_mtime_ns for num, path in before["path"].items() if num != 4}

    proc = cosimrun(*ARGS, f"hydra.sweep.dir={sweep}", "hydra.launcher.resume=true")
    assert proc.returncode == 0, proc.stderr
    assert "6 jobs, 6 complete (5 reused), 0 failed" in proc.stdout
    after = load_sweep(sweep)
    assert list(after["reused"]) == [True] * 4 + [False, True]
    for column in ("status", "components.ball.params.e", "run.dt", "path", "final.ball.h", "final.ball.v"):
        assert list(after[column]) == list(before[column])
    assert {num: (sweep / after.loc[num, "path"]).stat().st_mtime_ns for num in mtimes} == mtimes
    assert load_results(sweep / after.loc[4, "path"]).status == "complete"
    assert (sweep / "0" / ".hydra" / "config.yaml").read_text() == "# job 0's config.yaml\n"  # left as it was
    assert sorted(p.name for p in (sweep / "4" / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml",
                                                                          "overrides.yaml"]
    assert (sweep / ".hydra" / "overrides.yaml").is_file()
