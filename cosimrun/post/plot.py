"""Figures of a run or a sweep: ``cosimrun plot RESULTS|SWEEP_DIR [PORTS ...] [-o FILE]``.

A run (its results file or run directory, or a job of a sweep as
``<sweep dir>/<job>``, whether it ran alone or as a member of an ensemble) is drawn with one panel per unit (or
per component, ``--by component``), time on x, events as vertical dotted lines
and each multi component's modes as shaded spans labelled with the mode. A
sweep directory is drawn as each selected signal overlaid across the runs,
coloured by a swept parameter (``--color-by``; a colour bar for numbers, a
legend for names), or with ``--x PARAM --y COLUMN`` as an index column against a
parameter (a scatter, or a box plot when the parameter is not a number); failed
runs are marked. An index column may be named by its last dotted parts when they
name one column (``--x e`` for ``components.ball.params.e``). PORTS are
``fnmatch`` patterns (``ball.*``, ``*.h``, ``h``).
``--reference REF`` overlays a reference on a run, to see where ``cosimrun compare``
found them apart: REF is what ``compare`` takes as B (a CSV such as the Modelica
Association's ``*_out.csv``, or another run), read and matched to the run's
signals as ``compare`` does (a column ``h`` matches ``ball.h``) and drawn dashed
in the colour of its signal, converted to its unit. A reference with no signal
matching the plotted ones is an error.
Without ``-o`` the figure opens in a window when one can, else it is written
to ``plot.png`` beside the results (in ``<sweep dir>/<job>/`` for a member).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.errors import ConfigError, DataFileError, UnknownNameError
from cosimrun.post.signals import Signal, Source, open_source, select

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = (".png", ".svg", ".pdf")
PANEL_HEIGHT = 2.4
"""Inches per panel."""
WIDTH = 9.0
FAILED_STYLE = {"linestyle": "--", "alpha": 0.6}
REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.2}
"""A reference (``--reference``) in the colour of the signal it matches."""


# ---------------------------------------------------------------------------- a run
def plot_run(results: str | os.PathLike[str] | Source, ports: Sequence[str] | None = None, *,
             by: str = "unit", reference: str | os.PathLike[str] | None = None) -> Figure:
    """A figure of one run: one panel per unit (``by="unit"``) or per component (``by="component"``).

    *ports* are patterns selecting signals (default: every numeric one; event
    ports appear as the events' vertical lines instead). *reference* (a CSV or
    results file) is overlaid dashed on the signals it matches (see the module).
    """
    from matplotlib.figure import Figure

    if by not in ("unit", "component"):
        raise ConfigError(None, f"--by must be 'unit' or 'component', got {by!r}")
    source = results if isinstance(results, Source) else open_source(results)
    names = select(source.names, ports, f"in {source.path}")
    signals = [s for s in source.signals(names) if s.is_numeric and (ports or s.kind.upper() != "EVENT")]
    if not signals:
        raise DataFileError(f"{source.path}: nothing numeric to plot among {', '.join(names) or 'no signals'}",
                            path=str(source.path))
    groups: dict[str, list[Signal]] = {}
    for sig in signals:
        key = (sig.unit or "1") if by == "unit" else (sig.component or source.label)
        groups.setdefault(key, []).append(sig)
    overlay = _reference(reference, signals) if reference is not None else {}
    fig = Figure(figsize=(WIDTH, 0.8 + PANEL_HEIGHT * len(groups)), layout="constrained")
    axes = fig.subplots(len(groups), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (key, members) in zip(axes, groups.items(), strict=True):
        for sig in members:
            label = sig.name if by == "unit" else f"{sig.port} [{sig.unit}]" if sig.unit else sig.port
            [line] = ax.plot(sig.time, sig.values.astype(np.float64), label=label, drawstyle=_drawstyle(sig))
            if sig.name in overlay:
                time, values = overlay[sig.name]
                ax.plot(time, values, color=line.get_color(), drawstyle=_drawstyle(sig), label=f"{label} (reference)",
                        **REFERENCE_STYLE)
        ax.set_ylabel(f"[{key}]" if by == "unit" else key)
        ax.legend(loc="best", fontsize="small")
        ax.grid(True, alpha=0.3)
        _mark_events(ax, source.events)
        _shade_modes(ax, source.mode_switches, _time_range(signals))
    axes[-1].set_xlabel("time [s]")
    fig.suptitle(_run_title(source))
    return fig


def _reference(path: str | os.PathLike[str], signals: list[Signal]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{run signal name: (time, values in its unit)}`` of the reference at *path* that match *signals*
    (read and matched as ``cosimrun compare`` does); a :class:`~cosimrun.errors.DataFileError` when none does."""
    from cosimrun.post.compare import _as_numbers, match_names

    ref = open_source(path)
    by_name = {s.name: s for s in signals}
    pairs = [(a, b) for _, a, b in match_names(list(by_name), ref.names) if a is not None and b is not None]
    if not pairs:
        raise DataFileError(f"--reference {ref.path}: none of its signals ({', '.join(ref.names) or 'none'}) "
                            f"matches a plotted one ({', '.join(by_name)}); name its columns as the run's signals or "
                            "their ports", path=str(ref.path))
    overlay = {}
    for a, b in pairs:
        ref_sig = ref.signals([b])[0]
        if not ref_sig.is_numeric:
            continue
        try:
            _, values, _ = _as_numbers(by_name[a], ref_sig, a)
        except ValueError as exc:
            raise DataFileError(f"--reference {ref.path}: {exc} (A: the run, B: the reference)",
                                path=str(ref.path)) from None
        overlay[a] = (ref_sig.time.astype(np.float64), values)
    return overlay


def _drawstyle(sig: Signal) -> str:
    """Steps for integers and booleans (held between samples), lines for reals."""
    return "steps-post" if sig.kind.upper() in ("INT", "INTEGER", "BOOL", "BOOLEAN", "EVENT") else "default"


def _time_range(signals: list[Signal]) -> tuple[float, float]:
    starts = [float(s.time[0]) for s in signals if len(s.time)]
    ends = [float(s.time[-1]) for s in signals if len(s.time)]
    return (min(starts), max(ends)) if starts else (0.0, 1.0)


def _mark_events(ax: Axes, events: pd.DataFrame) -> None:
    """A vertical dotted line at each instant with events (labelled once)."""
    instants = sorted(set(events["time"].tolist())) if len(events) else []
    for i, t in enumerate(instants):
        ax.axvline(t, color="0.45", linestyle=":", linewidth=0.8, label=f"events ({len(events)})" if i == 0 else None)
    if instants:
        ax.legend(loc="best", fontsize="small")


def _shade_modes(ax: Axes, switches: pd.DataFrame, span: tuple[float, float]) -> None:
    """Each component's modes as shaded spans between its switches, labelled with the mode."""
    if not len(switches):
        return
    import matplotlib.colors as mcolors

    palette = list(mcolors.TABLEAU_COLORS.values())
    modes: dict[str, int] = {}
    for comp, rows in switches.groupby("component", sort=False):
        times = [span[0], *rows["time"].tolist(), span[1]]
        labels = [str(rows["from_mode"].iloc[0]), *map(str, rows["to_mode"])]
        for (t0, t1), mode in zip(zip(times[:-1], times[1:], strict=True), labels, strict=True):
            color = palette[modes.setdefault(f"{comp}:{mode}", len(modes)) % len(palette)]
            ax.axvspan(t0, t1, color=color, alpha=0.08, linewidth=0)
            if t1 - t0 < 0.04 * (span[1] - span[0]):
                continue  # too narrow for its label
            ax.text((t0 + t1) / 2, 0.98, f"{comp}: {mode}" if switches["component"].nunique() > 1 else mode,
                    transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize="x-small", clip_on=True)


def _run_title(source: Source) -> str:
    if source.results is None:
        return source.label
    res = source.results
    master = res.attrs.get("master", "")
    return f"{res.experiment or source.label} ({res.status}{', ' + master if master else ''})"


# ---------------------------------------------------------------------------- a sweep
def is_sweep(path: str | os.PathLike[str]) -> bool:
    """Whether *path* is a sweep directory (it holds the sweep's ``index.h5``)."""
    from cosimrun.storage.sweep_index import INDEX_FILE

    return Path(path).is_dir() and (Path(path) / INDEX_FILE).is_file()


def swept(df: pd.DataFrame) -> list[str]:
    """The parameters of a sweep index that take more than one value."""
    return [p for p in df.attrs.get("params", []) if p in df and df[p].nunique(dropna=False) > 1]


def plot_sweep(sweep_dir: str | os.PathLike[str], ports: Sequence[str] | None = None, *,
               color_by: str | None = None) -> Figure:
    """Each selected signal overlaid across a sweep's runs (one panel per signal), coloured by *color_by*.

    *color_by* defaults to the first swept parameter; failed runs are drawn
    dashed with ``(failed)`` in the legend (what they computed before failing).
    """
    from matplotlib.figure import Figure

    from cosimrun.runner.load import load_sweep

    df = load_sweep(sweep_dir)
    color_by = _parameter(df, color_by, "--color-by")
    runs = [(run, row) for run, row in df.iterrows() if row["path"]]
    if not runs:
        raise DataFileError(f"{sweep_dir}: no run of this sweep left a results file", path=str(sweep_dir))
    first = open_run(sweep_dir, runs[0][1])
    names = select(first.names, ports, f"in the runs of {sweep_dir}")
    names = [n for n, s in zip(names, first.signals(names), strict=True) if s.is_numeric and
             (ports or s.kind.upper() != "EVENT")]
    fig = Figure(figsize=(WIDTH, 0.8 + PANEL_HEIGHT * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    colour = _colouring(df[df["path"] != ""], color_by)
    for run, row in runs:
        source = open_run(sweep_dir, row)
        failed = row["status"] != "complete"
        style = FAILED_STYLE if failed else {}
        value = row[color_by] if color_by else run
        for ax, sig in zip(axes, source.signals(names), strict=True):
            label = f"{value}{' (failed)' if failed else ''}" if colour.legend else ("failed" if failed else None)
            ax.plot(sig.time, sig.values.astype(np.float64), color=colour(value), label=label, **style)
    for ax, name, unit in zip(axes, names, (first.units[n] for n in names), strict=True):
        ax.set_ylabel(f"{name} [{unit}]" if unit else name)
        ax.grid(True, alpha=0.3)
    _legend(fig, axes[0], colour, color_by or "run")
    axes[-1].set_xlabel("time [s]")
    missing = len(df) - len(runs)
    fig.suptitle(f"sweep {Path(sweep_dir).name}: {len(runs)} runs"
                 + (f" ({missing} more left no results)" if missing else ""))
    return fig


def open_run(sweep_dir: str | os.PathLike[str], row: pd.Series) -> Source:
    """The results of a sweep's run from its index row (``load_sweep``): its file, or its member of an ensemble's."""
    member = int(row["member"]) if "member" in row.index and row["member"] >= 0 else None
    return open_source(Path(sweep_dir) / row["path"], member=member)


def plot_index(sweep_dir: str | os.PathLike[str], x: str, y: str) -> Figure:
    """An index column *y* against parameter (or column) *x*: a scatter for numbers, a box plot otherwise.

    Failed runs (no value of *y*) are marked with a red ``x`` on the axis.
    """
    from matplotlib.figure import Figure

    from cosimrun.runner.load import load_sweep

    df = load_sweep(sweep_dir)
    x = _column(df, x, "index column", df.columns, f"for --x (in {sweep_dir}/index.h5)")
    y = _column(df, y, "index column", df.columns, f"for --y (in {sweep_dir}/index.h5)")
    values = df[y].astype(np.float64)
    failed = df["status"] != "complete"
    fig = Figure(figsize=(WIDTH * 0.75, 4.5), layout="constrained")
    ax = fig.subplots()
    if _numeric(df[x]):
        ok = ~failed
        ax.scatter(df[x][ok], values[ok], label="complete")
        if failed.any():
            ax.scatter(df[x][failed], np.full(int(failed.sum()), np.nanmin(values) if ok.any() else 0.0),
                       marker="x", color="tab:red", label="failed")
    else:
        categories = list(dict.fromkeys(df[x].astype(str)))
        groups = [values[(df[x].astype(str) == c) & ~failed].dropna().to_numpy() for c in categories]
        ax.boxplot(groups, tick_labels=categories)
        for i, c in enumerate(categories, 1):
            n_failed = int(((df[x].astype(str) == c) & failed).sum())
            if n_failed:
                ax.scatter([i], [np.nanmin(values) if values.notna().any() else 0.0], marker="x", color="tab:red",
                           label=f"failed ({n_failed})")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.suptitle(f"sweep {Path(sweep_dir).name}: {y} against {x}")
    return fig


def _numeric(column: pd.Series) -> bool:
    return column.dtype.kind in "biuf"


def _parameter(df: pd.DataFrame, name: str | None, flag: str) -> str | None:
    """*name* checked against the index columns, or the first swept parameter."""
    if name is None:
        params = swept(df)
        return params[0] if params else None
    return _column(df, name, "parameter", swept(df) or df.attrs.get("params", []), f"for {flag}")


def _column(df: pd.DataFrame, name: str, kind: str, known: Sequence[str], where: str) -> str:
    """The index column *name*, or the one column whose name ends in ``.name`` (``e`` for
    ``components.ball.params.e``, ``ball.h`` for ``final.ball.h``); else an ``UnknownNameError``."""
    if name in df.columns:
        return name
    matches = [c for c in df.columns if str(c).endswith(f".{name}")]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ConfigError(None, f"{kind} '{name}' {where} matches {', '.join(matches)}; give one in full")
    raise UnknownNameError(kind, name, known, where)


class _Colouring:
    """Colour of a run from its parameter value: a colour map for numbers, a cycle for names."""

    def __init__(self, values: pd.Series | None) -> None:
        import matplotlib as mpl

        self.legend = True
        self.norm = None
        self.cmap = mpl.colormaps["viridis"]
        self.cycle = list(mpl.colors.TABLEAU_COLORS.values())
        self.index: dict[Any, int] = {}
        if values is not None and _numeric(values) and values.nunique() > 1:
            self.norm = mpl.colors.Normalize(float(values.min()), float(values.max()))
            self.legend = values.nunique() <= 8

    def __call__(self, value: Any) -> Any:
        if self.norm is not None:
            return self.cmap(self.norm(float(value)))
        return self.cycle[self.index.setdefault(value, len(self.index)) % len(self.cycle)]


def _colouring(df: pd.DataFrame, color_by: str | None) -> _Colouring:
    return _Colouring(df[color_by] if color_by else None)


def _legend(fig: Figure, ax: Axes, colour: _Colouring, title: str) -> None:
    """A colour bar named after the parameter for a numeric range, else a legend titled with it."""
    if colour.norm is not None and not colour.legend:
        import matplotlib as mpl

        fig.colorbar(mpl.cm.ScalarMappable(norm=colour.norm, cmap=colour.cmap), ax=fig.axes, label=title)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), title=title, fontsize="small")


# ---------------------------------------------------------------------------- output
def display_available() -> bool:
    """Whether a window can be opened (an interactive backend with a display)."""
    import matplotlib

    backend = matplotlib.get_backend().lower()
    if backend in ("agg", "pdf", "svg", "ps", "cairo", "template") or "inline" in backend:
        return False
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or os.name == "nt"


def save(fig: Figure, out: str | os.PathLike[str]) -> Path:
    """Write *fig* to *out*, its format from the extension (PNG, SVG or PDF)."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(None, f"-o {out}: the file must end in {', '.join(FORMATS)} (the format is taken from it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", metavar="RESULTS|SWEEP_DIR",
                        help="a results file, a run directory, a job of a sweep (<sweep dir>/<job>) or a sweep "
                        "directory")
    parser.add_argument("ports", nargs="*", metavar="PORTS",
                        help="signals to plot: patterns such as ball.h, 'ball.*', '*.v' or h (default: all)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the figure to FILE (.png, .svg or .pdf)")
    parser.add_argument("--by", choices=("unit", "component"), default="unit",
                        help="a run: one panel per unit (default) or per component")
    parser.add_argument("--reference", metavar="REF",
                        help="a run: overlay REF (a CSV or results file, as compare takes) dashed on the signals "
                        "it matches")
    parser.add_argument("--color-by", metavar="PARAM",
                        help="a sweep: the parameter that colours the runs (default: the first swept one)")
    parser.add_argument("--x", metavar="PARAM",
                        help="a sweep: plot index column --y against this parameter, e.g. master or "
                        "components.ball.params.e (or e, when one column ends so)")
    parser.add_argument("--y", metavar="COLUMN",
                        help="a sweep: the index column to plot, e.g. final.ball.h (or ball.h)")


def figure(args: argparse.Namespace) -> Figure:
    """The figure the command line asks for."""
    return _figure(args)[0]


def _figure(args: argparse.Namespace) -> tuple[Figure, Source | None]:
    """The figure the command line asks for, and the run it draws (``None``: a sweep)."""
    if is_sweep(args.results):
        if (args.x is None) != (args.y is None):
            raise ConfigError(None, "--x and --y go together (an index column against a parameter)")
        if args.reference is not None:
            raise ConfigError(None, f"--reference is for a run; {args.results} is a sweep directory")
        if args.x is not None:
            return plot_index(args.results, args.x, args.y), None
        return plot_sweep(args.results, args.ports or None, color_by=args.color_by), None
    if args.x is not None or args.y is not None or args.color_by is not None:
        raise ConfigError(None, f"--x, --y and --color-by are for sweep directories; {args.results} is a run")
    source = open_source(args.results)
    return plot_run(source, args.ports or None, by=args.by, reference=args.reference), source


def run(args: argparse.Namespace) -> int:
    if args.output is not None and Path(args.output).suffix.lower() not in FORMATS:
        raise ConfigError(None, f"-o {args.output}: the file must end in {', '.join(FORMATS)} (the format is "
                                "taken from it)")
    fig, source = _figure(args)
    if args.output is None and display_available():
        import matplotlib.pyplot as plt

        window = plt.figure().canvas  # a window of the interactive backend, given this figure to show
        window.figure = fig
        fig.set_canvas(window)
        plt.show()
        return 0
    out = Path(args.output) if args.output else (source.directory if source else Path(args.results)) / "plot.png"
    print(f"plot: {save(fig, out)}")
    return 0
