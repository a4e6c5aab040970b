"""``cosimrun report`` of hostile names: every text of a run's or a sweep's page is escaped, headers included.

Names reach the page from the sweep index (column names built from override keys and recorded ports, the
experiment) and from a results file (components, ports, units, errors, the config). Whether such a name is
accepted at all is the config's to decide; the page must be safe for any index or file it is given.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np

from cosimrun.post.report import write_report
from cosimrun.runner.index import write_index
from cosimrun.runner.outcome import JobOutcome
from cosimrun.storage import HDF5Writer

HOSTILE = "<img src=x onerror=alert(4)>"


def _tags(page: str) -> set[str]:
    """The names of the HTML elements on *page* (inline SVG's included)."""
    return {m.lower() for m in re.findall(r"<([A-Za-z][A-Za-z0-9]*)", page)}


def test_a_sweep_page_escapes_column_names_built_from_hostile_names(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    outcomes = [
        JobOutcome(num, "complete" if num else "failed", [f"+components.{HOSTILE}.params.k={num}", f"run.tf={num + 1}"],
                   error="" if num else f"RuntimeError: {HOSTILE}", summaries={f"{HOSTILE}.y": float(num)})
        for num in range(2)
    ]
    write_index(sweep / "index.h5", outcomes, {"experiment": HOSTILE})
    page = write_report(sweep, job_reports=False).read_text(encoding="utf-8")
    assert HOSTILE not in page and "<img" not in page.lower() and "img" not in _tags(page)
    headers = re.findall(r"<th>(.*?)</th>", page)
    assert f"final.{html.escape(HOSTILE)}.y" in headers
    assert any(h.startswith("components.&lt;img") for h in headers), headers
    assert f"RuntimeError: {html.escape(HOSTILE)}" in page  # the failed job's error, escaped


def test_a_run_page_escapes_hostile_texts_of_a_results_file(tmp_path: Path) -> None:
    path = tmp_path / "results.h5"
    writer = HDF5Writer(path, experiment=HOSTILE, attrs={"config_yaml": f"name: {HOSTILE}\n", "overrides": HOSTILE})
    writer.add_component("ball", {"h": (HOSTILE, "real")})
    writer.append("ball", np.array([0.0, 0.5, 1.0]), None, {"h": np.array([1.0, 0.75, 0.0])})
    writer.close("failed", error=f"RuntimeError: {HOSTILE}")
    page = write_report(path, tmp_path / "report.html").read_text(encoding="utf-8")
    assert HOSTILE not in page and "img" not in _tags(page)
    assert f"RuntimeError: {html.escape(HOSTILE)}" in page and f"name: {html.escape(HOSTILE)}" in page
    assert f"<td>ball.h</td><td>{html.escape(HOSTILE)}</td>" in page  # the port's unit
