"""A sweep of 10^4 jobs on the local cluster: every job complete, its value right, its folder in a shard."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from cosimrun.runner.load import load_sweep

TINY = {
    "name": "tiny",
    "run": {"t0": 0.0, "tf": 0.01, "dt": 0.01},
    "components": {"src": {"type": "sine", "params": {"amplitude": 1.0, "frequency": 1.0}},
                   "k": {"type": "gain", "params": {"k": 2.0}}},
    "connections": ["src.y -> k.u"],
}
"""One step of a sine into a gain: ``k.y = k * src.y``, the same ``src.y`` in every job."""


@pytest.mark.slow
@pytest.mark.timeout(3600)  # some minutes on an idle 2-core machine: longer than the suite's 300 s
def test_a_sweep_of_ten_thousand_jobs_completes_with_every_value_and_sharded_folders(tmp_path: Path,
                                                                                     cosimrun) -> None:
    n = 10_000
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "tiny.yaml").write_text("# @package _global_\n" + yaml.safe_dump(TINY), encoding="utf-8")
    sweep = tmp_path / "sweep"
    proc = cosimrun("-m", f"--config-dir={tmp_path / 'conf'}", "+experiment=tiny",
                    f"components.k.params.k=range(1,{n + 1})", "hydra/launcher=dask", "hydra.launcher.n_workers=2",
                    "hydra.launcher.progress=false", f"hydra.sweep.dir={sweep}", timeout=7200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"sweep: {n} jobs, {n} complete, 0 failed" in proc.stdout
    df = load_sweep(sweep)
    assert list(df.index) == list(range(n)) and (df["status"] == "complete").all()
    k = df["components.k.params.k"].to_numpy()
    assert list(k) == list(range(1, n + 1))
    y, u = df["final.k.y"].to_numpy(), df["final.src.y"].to_numpy()
    assert np.all(u == u[0]) and u[0] != 0.0
    assert np.array_equal(y, k * u[0])  # one rounding each, as the gain computes it
    assert df.loc[1234, "path"] == "1k/1234/results.h5" and df.loc[999, "path"] == "999/results.h5"
    entries = max(len(dirs) + len(files) for _, dirs, files in os.walk(sweep))
    assert entries <= 1010  # no directory with more than about a thousand entries
