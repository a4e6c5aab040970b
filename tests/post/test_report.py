"""``cosimrun report``: one self-contained HTML page of a run or a sweep, checked by parsing it and in Chromium.

The run, the sweep and ``cli`` come from ``conftest.py``.
"""

from __future__ import annotations

import html
import json
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli

from cosimrun.post.report import write_report
from cosimrun.storage import load_results


class Page(HTMLParser):
    """Tables (rows of cell texts), headings, links, sources and inline figures of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.headings: list[str] = []
        self.links: list[str] = []
        self.sources: list[str] = []
        self.svgs = 0
        self.table_classes: list[str] = []
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.tables.append([])
            self.table_classes.append(a.get("class") or "")
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("h1", "h2"):
            self._heading = []
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        elif tag in ("img", "script", "link") and (a.get("src") or a.get("href")):
            self.sources.append(a.get("src") or a.get("href") or "")
        elif tag == "svg":
            self.svgs += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag in ("h1", "h2") and self._heading is not None:
            self.headings.append(" ".join("".join(self._heading).split()))
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.append(data)


def external(page: Page) -> list[str]:
    """Links and sources that would need the network (anything but fragments, relative paths and data URIs)."""
    urls = page.links + page.sources
    return [u for u in urls if u.split(":", 1)[0] in ("http", "https", "ftp") or u.startswith("//")]


def test_a_run_page_lists_summary_statistics_figure_events_switches_ports_and_config(pendulum_run: Path) -> None:
    out = write_report(pendulum_run)
    assert out == pendulum_run / "report.html"
    page = Page(out.read_text())
    res = load_results(pendulum_run)
    assert page.headings[0] == f"pendulum_switch: run {pendulum_run.name} complete"
    assert page.headings[1:] == ["Summary", "Statistics", "Coupling-error estimates", "Figure",
                                 f"Events ({len(res.events)})", f"Mode switches ({len(res.mode_switches)})", "Ports",
                                 "Config"]
    summary, stats, coupling, events, switches, ports = page.tables
    assert ["status", "complete"] in summary and ["master", "hybrid"] in summary
    assert ["events", str(res.stats["events"])] in stats
    assert coupling[0] == ["connection", "unit", "max", "rms", "time_of_max", "range", "relative"]
    assert [row[0] for row in coupling[1:]] == list(res.coupling_error["connection"]) and len(coupling) == 4
    assert [float(row[2]) for row in coupling[1:]] == pytest.approx(list(res.coupling_error["max"]), rel=1e-5)
    assert events[0] == ["time", "micro", "component", "event"]
    assert len(events) == len(res.events) + 1 and {row[3] for row in events[1:]} >= {"end_stop"}
    assert switches[0] == ["time", "component", "from_mode", "to_mode"] and len(switches) == len(res.mode_switches) + 1
    assert [row[0] for row in ports[1:]] == [f"{c}.{p}" for c in res.components for p in res.ports(c)]
    assert page.svgs == 1
    assert external(page) == []
    assert "pendulum.q" in out.read_text()


def test_a_failed_run_page_shows_the_error(tmp_path: Path) -> None:
    from cosimrun.runner.run import prepare, run_experiment

    cfg = {"name": "zeno", "run": {"t0": 0.0, "tf": 5.0, "dt": 0.01}, "master": {"name": "hybrid"},
           "components": {"ball": {"type": "bouncing_ball", "params": {"v_rest": 0.0}}}}
    outcome = run_experiment(cfg, tmp_path, experiment=prepare(cfg))
    assert not outcome.ok
    page = Page(write_report(outcome.path, tmp_path / "page.html").read_text())
    assert page.headings[0].endswith("failed") and page.headings[2] == "Error"
    assert "ZenoError: component 'ball'" in html.unescape((tmp_path / "page.html").read_text())


def test_a_sweep_page_has_the_sortable_index_figures_and_links_to_each_job(cli: Cli, sweep_dir: Path,
                                                                           tmp_path: Path) -> None:
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy)
    proc = cli("report", str(copy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"report: {copy / 'report.html'}\n"
    page = Page((copy / "report.html").read_text())
    assert page.headings[:3] == ["sweep sweep failed", "Summary", "Index (click a column to sort)"]
    assert "Signals across runs" in page.headings
    assert "final.ball.h against components.ball.params.e" in page.headings
    assert "Failed jobs (1)" in page.headings
    index = page.tables[1]
    assert "sortable" in page.table_classes[1].split()
    assert index[0][:3] == ["run", "report", "status"] and "components.ball.params.e" in index[0]
    assert [row[2] for row in index[1:]] == ["complete", "complete", "complete", "failed"]
    job_links = [link for link in page.links if link.endswith("report.html")]
    assert job_links == ["0/report.html", "1/report.html", "2/report.html"]
    for link in job_links:
        job = Page((copy / link).read_text())
        assert job.headings[1] == "Summary" and external(job) == []
    assert page.svgs >= 3 and external(page) == []


def test_no_job_reports_leaves_the_job_directories_alone(cli: Cli, sweep_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy, ignore=shutil.ignore_patterns("report.html"))
    proc = cli("report", str(copy), "--no-job-reports", "-o", str(tmp_path / "sweep.html"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not list(copy.glob("*/report.html"))
    assert not [link for link in Page((tmp_path / "sweep.html").read_text()).links if link.endswith(".html")]


def test_bad_arguments_are_one_line_and_exit_2(cli: Cli, pendulum_run: Path, tmp_path: Path) -> None:
    proc = cli("report", str(pendulum_run), "-o", "page.pdf", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "cosimrun: error: report: -o page.pdf: the report is an HTML page; name it .html\n"
    proc = cli("report", "nowhere", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "cosimrun: error: report: no results file or run directory nowhere\n"


BROWSER_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic", "--disable-extensions", "--window-size=1280,1024")
"""Chromium without a screen, as root, making no connection of its own (updates, sync, safe browsing)."""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Chromium driven by selenium through chromedriver (Debian's ``chromium`` and ``chromium-driver``, which
    ``.ci/run`` installs), its profile in *tmp_path*, the page's network traffic logged."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
    found = {name: shutil.which(name) for name in ("chromium", "chromedriver")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        pytest.skip(f"no {' or '.join(missing)} on PATH (Debian: apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = found["chromium"]
    for flag in (*BROWSER_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    service = webdriver.ChromeService(executable_path=found["chromedriver"], log_output=str(tmp_path / "driver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def requested(driver: Any) -> list[str]:
    """The URLs the pages loaded so far asked for (the browser's network log since the last call)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


LOCAL_SCHEMES = ("file", "data", "about", "blob", "chrome")
"""What a request may name without the network: the pages themselves, inline data, and the browser's own pages
(its new tab, open before the report)."""

FIGURES_LOADED = """
return Array.from(document.querySelectorAll("figure")).map(function (f) {
  var el = f.querySelector("svg, img"), box = el.getBoundingClientRect();
  var ok = el.tagName.toLowerCase() === "img" ? el.complete && el.naturalWidth > 0 : el.querySelector("path") !== null;
  return [el.tagName.toLowerCase(), ok, Math.round(box.width), Math.round(box.height)];
});
"""
"""Each figure's element (``svg`` or ``img``), whether it loaded (an image decoded; a drawing with paths) and its
size on the page in pixels."""


@pytest.mark.slow
def test_the_sweep_page_sorts_shows_its_figures_and_asks_for_nothing_in_a_browser(
    browser: Any, cli: Cli, sweep_dir: Path, tmp_path: Path
) -> None:
    """In Chromium: clicking a column of the index sorts the rows by it (reversed on a second click), every figure
    of the sweep page and of a job's page is drawn with a size, and the pages request nothing but themselves and
    inline data (no network)."""
    from selenium.webdriver.common.by import By

    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy)
    proc = cli("report", str(copy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = copy / "report.html"
    browser.get(page.as_uri())
    assert browser.title == "sweep sweep"
    (table,) = browser.find_elements(By.CSS_SELECTOR, "table.sortable")
    header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    column = header.index("components.ball.params.e")

    def rows() -> list[list[str]]:
        return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr")]

    before = rows()
    assert [row[column] for row in before] == ["0.5", "0.7", "0.9", "-1"]
    by_e = sorted(before, key=lambda row: float(row[column]))
    heading = table.find_elements(By.CSS_SELECTOR, "thead th")[column]
    heading.click()
    assert rows() == by_e
    heading.click()
    assert rows() == by_e[::-1]
    status = table.find_elements(By.CSS_SELECTOR, "thead th")[header.index("status")]
    status.click()
    assert [row[header.index("status")] for row in rows()] == ["complete"] * 3 + ["failed"]
    figures = browser.execute_script(FIGURES_LOADED)
    assert len(figures) >= 3 and all(ok and width > 100 and height > 100 for _, ok, width, height in figures), figures
    browser.get((copy / "0" / "report.html").as_uri())
    (figure,) = browser.execute_script(FIGURES_LOADED)
    assert figure[1] and figure[2] > 100 and figure[3] > 100, figure
    urls = requested(browser)
    assert page.as_uri() in urls and (copy / "0" / "report.html").as_uri() in urls
    assert [url for url in urls if url.partition(":")[0] not in LOCAL_SCHEMES] == []
