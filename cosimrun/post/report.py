"""One self-contained HTML page of a run or a sweep: ``cosimrun report RESULTS|SWEEP_DIR [-o report.html]``.

A run's page holds its summary (status, experiment, master, times, wall time,
error), the master's statistics, the coupling-error estimates per connection
when the run recorded any (and the global-error estimates of a run under
``master.global_error: estimate``), the figure of ``cosimrun plot``, the events and mode
switches as tables and the resolved config. A sweep's page holds the index as
a table sortable by clicking a column, the overlay and index figures of
``cosimrun plot`` for its summary signals, and links to each job's own page
(written beside the job's results, or in ``<sweep dir>/<job>/`` for a member of an
ensemble). Figures are inline (SVG, or PNG for long
histories), styles and the sorting script too: the page needs no network.
The default output is ``report.html`` in the run or sweep directory.
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cosimrun.errors import ConfigError
from cosimrun.post.plot import is_sweep, open_run, plot_index, plot_run, plot_sweep, swept
from cosimrun.post.signals import Source, open_source

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

REPORT_FILE = "report.html"
SVG_SAMPLE_LIMIT = 20_000
"""Above this many plotted samples a figure is embedded as PNG (an SVG would grow with every sample)."""
INDEX_HIDDEN = ("traceback", "overrides")
"""Index columns left out of the sweep page's table (too long for a table cell)."""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } table.sortable th { cursor: pointer; }
.status { display: inline-block; padding: 0.1em 0.6em; border-radius: 0.3em; color: white; }
.complete { background: #2e7d32; } .failed { background: #c62828; } .interrupted, .running { background: #ef6c00; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1em 0; } figure img, figure svg { max-width: 100%; height: auto; }
.error { color: #c62828; white-space: pre-wrap; }
</style></head><body>
<h1>{{ title }} <span class="status {{ status }}">{{ status }}</span></h1>
{% for section in sections %}
<h2>{{ section.heading }}</h2>
{% if section.text %}<p>{{ section.text }}</p>{% endif %}
{% if section.html %}{{ section.html | safe }}{% endif %}
{% endfor %}
<script>
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows), asc = th.dataset.order !== "asc";
      rows.sort(function (a, b) {
        var x = a.cells[col].innerText, y = b.cells[col].innerText, nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
      th.dataset.order = asc ? "asc" : "desc";
    });
  });
});
</script>
</body></html>
"""


def write_report(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *,
                 job_reports: bool = True) -> Path:
    """Write the HTML page of a run (results file or run directory) or a sweep directory; return its path.

    For a sweep, *job_reports* also writes each job's page beside its results,
    linked from the index table.
    """
    path = Path(path)
    if is_sweep(path):
        target = Path(out) if out is not None else path / REPORT_FILE
        return _write(_sweep_page(path, target, job_reports), target)
    source = open_source(path)
    return _write(_run_page(source), Path(out) if out is not None else source.directory / REPORT_FILE)


def _write(page: str, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target


def _render(title: str, status: str, sections: list[dict[str, str]]) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True)
    return env.from_string(_PAGE).render(title=title, status=status, sections=sections)


def _table(df: pd.DataFrame, *, sortable: bool = False, escape: bool = True) -> str:
    classes = ["sortable"] if sortable else []
    return df.to_html(index=False, classes=classes, border=0, escape=escape, na_rep="", float_format="{:.6g}".format)


def _key_values(pairs: dict[str, Any]) -> str:
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_text(v))}</td></tr>" for k, v in pairs.items())
    return f"<table>{rows}</table>"


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _embed(fig: Figure, samples: int) -> str:
    """*fig* as inline SVG, or as a PNG data URI above ``SVG_SAMPLE_LIMIT`` samples."""
    buf = io.BytesIO()
    if samples <= SVG_SAMPLE_LIMIT:
        fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
        svg = buf.getvalue().decode("utf-8")
        return f"<figure>{svg[svg.index('<svg'):]}</figure>"
    fig.savefig(buf, format="png", dpi=110)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<figure><img alt="figure" src="data:image/png;base64,{data}"></figure>'


# ---------------------------------------------------------------------------- a run
def _run_page(source: Source) -> str:
    res = source.results
    assert res is not None
    summary = {
        "experiment": res.experiment, "status": res.status, "master": res.attrs.get("master", ""),
        "t0": res.attrs.get("t0", ""), "tf": res.attrs.get("tf", ""), "dt": res.attrs.get("dt", ""),
        "started": res.attrs.get("started", ""), "finished": res.attrs.get("finished", ""),
        "wall time [s]": res.attrs.get("wall_time_s", ""), "overrides": res.attrs.get("overrides", ""),
        "cosimrun": res.attrs.get("cosimrun_version", ""), "file": str(source.path),
    }
    if "member" in res.attrs:
        summary["member"] = res.attrs["member"]
    sections = [{"heading": "Summary", "html": _key_values(summary)}]
    if res.error:
        sections.append({"heading": "Error", "html": f'<p class="error">{html.escape(res.error)}</p>'})
    if res.stats:
        sections.append({"heading": "Statistics", "html": _key_values(res.stats)})
    if len(res.coupling_error):
        sections.append({"heading": "Coupling-error estimates", "html": _table(res.coupling_error)})
    if len(res.global_error):
        sections.append({"heading": "Global-error estimates", "html": _table(res.global_error)})
    try:
        fig = plot_run(source)
    except ValueError as exc:
        sections.append({"heading": "Figure", "text": str(exc)})
    else:
        samples = sum(len(line.get_xdata()) for ax in fig.axes for line in ax.get_lines())
        sections.append({"heading": "Figure", "html": _embed(fig, samples)})
    sections.append({"heading": f"Events ({len(res.events)})",
                     "html": _table(res.events) if len(res.events) else "<p>none</p>"})
    sections.append({"heading": f"Mode switches ({len(res.mode_switches)})",
                     "html": _table(res.mode_switches) if len(res.mode_switches) else "<p>none</p>"})
    ports = "".join(f"<tr><td>{html.escape(n)}</td><td>{html.escape(u or '')}</td></tr>"
                    for n, u in source.units.items())
    sections.append({"heading": "Ports", "html": f"<table><tr><th>port</th><th>unit</th></tr>{ports}</table>"})
    config = res.attrs.get("config_yaml", "")
    sections.append({"heading": "Config", "html": f"<pre>{html.escape(config)}</pre>" if config else "<p>none</p>"})
    return _render(f"{res.experiment or source.label}: run {source.label}", res.status, sections)


# ---------------------------------------------------------------------------- a sweep
def _sweep_page(sweep_dir: Path, target: Path, job_reports: bool) -> str:
    from cosimrun.runner.layout import job_subdir
    from cosimrun.runner.load import load_sweep

    df = load_sweep(sweep_dir)
    counts = df["status"].value_counts().to_dict()
    table = df.drop(columns=[c for c in INDEX_HIDDEN if c in df.columns]).reset_index()
    links = []
    for run, row in df.iterrows():
        if not row["path"]:
            links.append("")
            continue
        if job_reports:
            source = open_run(sweep_dir, row)
            job_page = _write(_run_page(source), source.directory / REPORT_FILE)
        else:  # a page written before, where the job's own page goes (a member's: the job's address)
            member = "member" in row.index and row["member"] >= 0
            folder = sweep_dir / job_subdir(sweep_dir, run) if member else (sweep_dir / row["path"]).parent
            job_page = folder / REPORT_FILE
        if job_page.exists():
            rel = os.path.relpath(job_page, target.parent)
            links.append(f'<a href="{html.escape(rel)}">report</a>')
        else:
            links.append("")
    table = table.astype(object).where(table.notna(), "")
    for column in table.columns:
        table[column] = [html.escape(_text(v)) for v in table[column]]
    table.columns = [html.escape(str(c)) for c in table.columns]  # written as they are (escape=False): names too
    table.insert(1, "report", links)
    sections = [
        {"heading": "Summary", "html": _key_values({
            "jobs": len(df), **{f"{k}": v for k, v in counts.items()},
            "swept parameters": ", ".join(swept(df)) or "none", "directory": str(sweep_dir)})},
        {"heading": "Index (click a column to sort)", "html": _table(table, sortable=True, escape=False)},
    ]
    sections.extend(_sweep_figures(sweep_dir, df))
    failed = df[df["status"] != "complete"]
    if len(failed):
        rows = failed.reset_index()[["run", "status", "error"]]
        sections.append({"heading": f"Failed jobs ({len(failed)})", "html": _table(rows)})
    status = "complete" if counts.get("complete", 0) == len(df) else "failed"
    return _render(f"sweep {sweep_dir.name}", status, sections)


def _sweep_figures(sweep_dir: Path, df: pd.DataFrame) -> list[dict[str, str]]:
    """The overlay of the summary signals across runs, and each summary against each swept parameter."""
    summaries = list(df.attrs.get("summaries", []))
    signals = [s.removeprefix("final.") for s in summaries]
    sections = []
    try:
        fig = plot_sweep(sweep_dir, signals or None)
    except ValueError as exc:
        sections.append({"heading": "Signals across runs", "text": str(exc)})
    else:
        samples = sum(len(line.get_xdata()) for ax in fig.axes for line in ax.get_lines())
        sections.append({"heading": "Signals across runs", "html": _embed(fig, samples)})
    for param in swept(df):
        for column in summaries:
            sections.append({"heading": f"{column} against {param}",
                             "html": _embed(plot_index(sweep_dir, param, column), 0)})
    return sections


# ---------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULTS|SWEEP_DIR",
                        help="a results file, a run directory, a job of a sweep (<sweep dir>/<job>) or a sweep "
                        "directory")
    parser.add_argument("-o", "--output", metavar="FILE", help=f"the page to write (default: {REPORT_FILE} "
                        "in the run or sweep directory)")
    parser.add_argument("--no-job-reports", action="store_true",
                        help="a sweep: do not write each job's page beside its results (no links then)")


def run(args: argparse.Namespace) -> int:
    if args.output is not None and not args.output.endswith((".html", ".htm")):
        raise ConfigError(None, f"-o {args.output}: the report is an HTML page; name it .html")
    print(f"report: {write_report(args.results, args.output, job_reports=not args.no_job_reports)}")
    return 0
