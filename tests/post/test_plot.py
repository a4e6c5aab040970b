"""``cosimrun plot``: figures of a run and of a sweep, checked as images and as SVG text.

The run, the sweep and ``cli`` (the command in a subprocess) come from ``conftest.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from conftest import Cli

from cosimrun.post.plot import _column, plot_index, plot_run, plot_sweep


def image(path: Path) -> np.ndarray:
    return matplotlib.image.imread(path)


def non_blank(img: np.ndarray) -> bool:
    rgb = img[..., :3]
    return float(rgb.std()) > 0.02 and float((rgb < 0.5).mean()) > 0.001


def test_a_run_is_one_panel_per_unit_with_events_and_mode_spans(pendulum_run: Path) -> None:
    fig = plot_run(pendulum_run)
    labels = sorted(ax.get_ylabel() for ax in fig.axes)
    assert labels == ["[N*m]", "[deg]", "[rad/s]", "[rad]"]  # ref.y is in degrees: its own panel
    for ax in fig.axes:
        assert ax.get_xlim()[1] >= 4.0
        texts = {t.get_text() for t in ax.texts}
        assert {"linear", "nonlinear"} <= texts  # the multi component's modes label the shaded spans
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(t.startswith("events (") for t in legend)
    assert fig.axes[-1].get_xlabel() == "time [s]"
    assert fig._suptitle.get_text() == "pendulum_switch (complete, hybrid)"


def test_by_component_and_selection_by_pattern(pendulum_run: Path) -> None:
    fig = plot_run(pendulum_run, ["pendulum.*"], by="component")
    assert [ax.get_ylabel() for ax in fig.axes] == ["pendulum"]
    legend = {t.get_text() for t in fig.axes[0].get_legend().get_texts()}
    assert {"q [rad]", "omega [rad/s]"} <= legend


def test_the_command_writes_png_svg_and_pdf_by_extension(cli: Cli, pendulum_run: Path, tmp_path: Path) -> None:
    for name in ("fig.png", "fig.svg", "fig.pdf"):
        proc = cli("plot", str(pendulum_run), "q", "omega", "-o", str(tmp_path / name), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"plot: {tmp_path / name}\n"
    img = image(tmp_path / "fig.png")
    assert img.shape[1] == 1080 and img.shape[0] > 500 and non_blank(img)  # 9 in at 120 dpi
    svg = (tmp_path / "fig.svg").read_text()
    assert "pendulum.q" in svg and "pendulum.omega" in svg
    assert (tmp_path / "fig.pdf").read_bytes().startswith(b"%PDF")


def test_without_output_and_display_the_figure_goes_beside_the_results(cli: Cli, pendulum_run: Path,
                                                                       tmp_path: Path) -> None:
    proc = cli("plot", str(pendulum_run / "results.h5"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"plot: {pendulum_run / 'plot.png'}\n"
    assert non_blank(image(pendulum_run / "plot.png"))


def reference_csv(pendulum_run: Path, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """A reference of the pendulum's angle in degrees, 1 degree above the run, every 0.5 s (a column ``q``)."""
    from cosimrun.storage import load_results

    t, q = load_results(pendulum_run).trajectory("pendulum", "q")
    times = np.arange(0.0, 4.01, 0.5)
    degrees = np.degrees(np.interp(times, t, q)) + 1.0
    rows = "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(times, degrees, strict=True))
    path.write_text(f"time,q [deg]\n{rows}")
    return times, degrees


def test_a_reference_is_overlaid_dashed_in_the_colour_and_unit_of_its_signal(pendulum_run: Path,
                                                                             tmp_path: Path) -> None:
    times, degrees = reference_csv(pendulum_run, tmp_path / "ref.csv")
    fig = plot_run(pendulum_run, ["pendulum.q", "pendulum.omega"], reference=tmp_path / "ref.csv")
    [ax] = [ax for ax in fig.axes if ax.get_ylabel() == "[rad]"]
    run, ref = [line for line in ax.get_lines() if line.get_label().startswith("pendulum.q")]
    assert (run.get_label(), ref.get_label()) == ("pendulum.q", "pendulum.q (reference)")
    assert run.get_linestyle() == "-" and ref.get_linestyle() == "--" and ref.get_color() == run.get_color()
    np.testing.assert_allclose(ref.get_xdata(), times)
    np.testing.assert_allclose(ref.get_ydata(), np.radians(degrees), rtol=1e-12)  # in the run's unit
    assert "pendulum.q (reference)" in [t.get_text() for t in ax.get_legend().get_texts()]
    [omega_ax] = [ax for ax in fig.axes if ax.get_ylabel() == "[rad/s]"]
    assert [line.get_label() for line in omega_ax.get_lines() if "omega" in line.get_label()] == \
        ["pendulum.omega"]  # the reference has no angular velocity


def test_the_command_overlays_a_reference(cli: Cli, pendulum_run: Path, tmp_path: Path) -> None:
    reference_csv(pendulum_run, tmp_path / "ref.csv")
    out = tmp_path / "fig.svg"
    proc = cli("plot", str(pendulum_run), "q", "--reference", str(tmp_path / "ref.csv"), "-o", str(out),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = out.read_text()
    assert "pendulum.q (reference)" in svg and "stroke-dasharray" in svg


def test_a_sweep_overlay_is_coloured_by_the_swept_parameter(cli: Cli, sweep_dir: Path, tmp_path: Path) -> None:
    fig = plot_sweep(sweep_dir, ["h"])
    (ax,) = [a for a in fig.axes if a.get_ylabel()]
    assert ax.get_ylabel() == "ball.h [m]"
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "components.ball.params.e"
    assert [t.get_text() for t in legend.get_texts()] == ["0.5", "0.7", "0.9"]
    colours = {tuple(line.get_color()) for line in ax.get_lines()}
    assert len(colours) == 3
    assert "1 more left no results" in fig._suptitle.get_text()
    proc = cli("plot", str(sweep_dir), "ball.h", "-o", str(tmp_path / "sweep.svg"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    svg = (tmp_path / "sweep.svg").read_text()
    assert "components.ball.params.e" in svg and re.search(r"0\.7", svg)


def test_an_index_column_against_a_parameter_marks_failed_runs(sweep_dir: Path) -> None:
    fig = plot_index(sweep_dir, "components.ball.params.e", "final.ball.h")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "components.ball.params.e" and ax.get_ylabel() == "final.ball.h"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["complete", "failed"]
    complete, failed = ax.collections
    assert len(complete.get_offsets()) == 3 and len(failed.get_offsets()) == 1
    assert failed.get_offsets()[0][0] == -1.0


def test_index_columns_may_be_named_by_their_last_parts(cli: Cli, sweep_dir: Path, tmp_path: Path) -> None:
    fig = plot_index(sweep_dir, "e", "ball.h")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "components.ball.params.e" and ax.get_ylabel() == "final.ball.h"
    assert sorted(x for x, _ in ax.collections[0].get_offsets()) == pytest.approx([0.5, 0.7, 0.9])
    legend = plot_sweep(sweep_dir, ["h"], color_by="e").axes[0].get_legend()
    assert legend.get_title().get_text() == "components.ball.params.e"
    proc = cli("plot", str(sweep_dir), "--x", "e", "--y", "ball.h", "-o", str(tmp_path / "e.png"), cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert non_blank(image(tmp_path / "e.png"))


def test_a_short_name_that_ends_several_columns_is_refused() -> None:
    df = pd.DataFrame({"final.a.h": [1.0], "final.b.h": [2.0]})
    with pytest.raises(ValueError, match=r"^index column 'h' for --y matches final\.a\.h, final\.b\.h; give one"):
        _column(df, "h", "index column", df.columns, "for --y")


def test_categorical_x_is_a_box_plot(sweep_dir: Path) -> None:
    fig = plot_index(sweep_dir, "status", "final.ball.v")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["complete", "failed"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plot", "missing_dir"], "cosimrun: error: plot: no results file or run directory missing_dir\n"),
        (["plot", "RUN", "nope"], "cosimrun: error: plot: unknown signal 'nope' in "),
        (["plot", "RUN", "-o", "fig.jpg"], "cosimrun: error: plot: -o fig.jpg: the file must end in .png, .svg, .pdf"),
        (["plot", "RUN", "--by", "port"], "cosimrun: error: plot: argument --by: invalid choice: 'port'"),
        (["plot", "RUN", "--x", "e"], "cosimrun: error: plot: --x, --y and --color-by are for sweep directories"),
        (["plot", "SWEEP", "--x", "components.ball.params.e", "--y", "final.ball.q"],
         "cosimrun: error: plot: unknown index column 'final.ball.q' for --y"),
        (["plot", "RUN", "--reference", "nowhere.csv"], "cosimrun: error: plot: no CSV file nowhere.csv\n"),
        (["plot", "RUN", "--reference", "UNMATCHED"],
         "cosimrun: error: plot: --reference UNMATCHED: none of its signals (height, speed) matches a plotted one "
         "(ref.y, ctrl.u, pendulum.q, pendulum.omega)"),
        (["plot", "SWEEP", "--reference", "UNMATCHED"], "cosimrun: error: plot: --reference is for a run"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(cli: Cli, args: list[str], message: str, pendulum_run: Path,
                                               sweep_dir: Path, tmp_path: Path) -> None:
    unmatched = tmp_path / "unmatched.csv"
    unmatched.write_text("time,height [m],speed [m/s]\n0,1,0\n1,0.5,-1\n")
    args = [str(pendulum_run) if a == "RUN" else str(sweep_dir) if a == "SWEEP" else a for a in args]
    args = [str(unmatched) if a == "UNMATCHED" else a for a in args]
    message = message.replace("UNMATCHED", str(unmatched))
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == ""
    assert not list(tmp_path.glob("*.png")) and not list(tmp_path.glob("*.jpg"))


def test_help_describes_the_command(cli: Cli, tmp_path: Path) -> None:
    proc = cli("plot", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: cosimrun plot") and "--color-by" in proc.stdout
