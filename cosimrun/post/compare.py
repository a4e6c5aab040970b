"""Compare two runs, or a run and a reference CSV, signal by signal, event-aware: ``cosimrun compare A B``.

A and B are results files, run directories or CSV files (a time column, one
column per signal, ``name [unit]`` headers, repeated times for the samples
before and after an event, as in the Modelica Association's ``*_out.csv``
reference results).

Matching: signals of the same name are compared; a name that is the port part
of exactly one signal of the other side matches it (a CSV column ``h`` matches
``ball.h``). B's values are converted to A's unit when both have one
(incompatible units are an error, exit 2). A signal found in one side only is
listed (``only in A`` / ``only in B``) and fails the comparison: a reference
that lacks a signal is not silently passed. ``--ports`` restricts the
comparison to the signals it names (``fnmatch`` patterns; one without a dot
also matches port names), e.g. to those a reference CSV holds.

Values: at every sample time of A and of B the other side is interpolated
(linearly; held for integers, booleans, events and text) and a sample matches
when ``|A - B| <= atol + rtol * nominal``, nominal being the signal's largest
magnitude in A and B (text must be equal). Around event instants, times with
several samples (told apart by ``micro``) in A or B, or in a results file's
events table, the comparison is a tube: a sample within time_tolerance of an
instant, at time t, matches when the other side takes a matching value
anywhere in [t - time_tolerance, t + time_tolerance], before or after the
event (both the values before and after an instant count), so an event up to
time_tolerance earlier or later passes. Both sides must cover the same time
span (to time_tolerance).

Defaults: rtol 1e-3 (OpenModelica's result comparison uses 1e-3, csv-compare a
tube of 2e-3 of the time span and value range, FMPy's validate_signal a band
of 10 % of the value range), atol 1e-6 in the signal's unit (for signals that
stay near zero), time tolerance 1e-6 s (the hybrid master locates events to
1e-10 s; Jacobi, Gauss-Seidel and IJCSA handle them at the next communication
point, up to the macro step dt late: give dt to compare such runs with each
other; against a hybrid run also an atol of one step's change, as such a run's
state passes the event surface by up to that, e.g. a ball |v| dt below the floor).

Exit status: 0 when every signal is within tolerance, 1 when one is not (the
last line names the signal and the time where the earliest deviation starts),
2 when the comparison cannot be made (a missing file, an unknown --ports
pattern, incompatible units).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.errors import ConfigError, DataFileError
from cosimrun.post.signals import Signal, Source, open_source, select

DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-6
DEFAULT_TIME_TOLERANCE = 1e-6
"""Seconds."""
_HELD = frozenset({"INT", "BOOL", "EVENT", "STRING"})
"""Kinds that hold their value between samples (never interpolated linearly)."""


@dataclass(frozen=True)
class SignalComparison:
    """How one signal compares: its largest deviation, where, and whether it is within tolerance."""

    name: str
    """``component.port`` (the more complete of A's and B's names)."""
    name_a: str | None
    name_b: str | None
    unit: str | None
    """A's unit (B's when A has none): the unit of the deviation and the tolerance."""
    max_deviation: float | None
    """Largest ``|A - B|`` (tube distance near events; text: 1 where it differs); ``None`` when not compared."""
    at: float | None
    """Time of ``max_deviation``."""
    tolerance: float | None
    """``atol + rtol * nominal``."""
    ok: bool
    first_failure: float | None
    """Earliest time at which the deviation exceeds the tolerance."""
    note: str = ""
    """Why the signal fails besides its values: ``only in A``, differing time spans."""


@dataclass(frozen=True)
class Comparison:
    """The comparison of A with B: one :class:`SignalComparison` per signal, in A's order."""

    a: str
    b: str
    rtol: float
    atol: float
    time_tolerance: float
    signals: list[SignalComparison]
    event_instants: int
    """How many event instants were compared with the tube."""

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.signals)

    @property
    def first_failure(self) -> SignalComparison | None:
        """The failing signal whose deviation starts earliest (else the first failing one)."""
        failing = [s for s in self.signals if not s.ok]
        timed = [s for s in failing if s.first_failure is not None]
        if timed:
            return min(timed, key=lambda s: s.first_failure)
        return failing[0] if failing else None

    def lines(self) -> list[str]:
        """The report: one line per signal, then the verdict naming the first failure."""
        labels = [s.name + (f" [{s.unit}]" if s.unit else "") for s in self.signals]
        width = max(map(len, labels), default=0)
        out = [f"{label:<{width}}  {_describe(s)}" for label, s in zip(labels, self.signals, strict=True)]
        first = self.first_failure
        n = len(self.signals)
        if first is None:
            out.append(f"ok: {n} {'signal' if n == 1 else 'signals'} within tolerance")
        else:
            failing = sum(not s.ok for s in self.signals)
            when = first.first_failure
            what = f": {first.note}" if when is None else f" first differs at t={_t(when)} s"
            hint = "; --ports compares the signals both have" if first.name_a is None or first.name_b is None else ""
            out.append(f"FAIL: {first.name}{what} ({failing} of {n} signals fail{hint})")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (non-finite numbers as ``None``)."""
        first = self.first_failure
        return {
            "a": self.a,
            "b": self.b,
            "rtol": self.rtol,
            "atol": self.atol,
            "time_tolerance": self.time_tolerance,
            "ok": self.ok,
            "first_failure": None if first is None else {"signal": first.name, "time": first.first_failure,
                                                         "note": first.note},
            "event_instants": self.event_instants,
            "signals": [{k: _finite(v) for k, v in asdict(s).items()} for s in self.signals],
        }


def _t(value: float) -> str:
    return f"{value:.9g}"


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _describe(s: SignalComparison) -> str:
    if s.max_deviation is None:
        return f"{s.note}  {'ok' if s.ok else 'FAIL'}"
    verdict = "ok" if s.ok else "FAIL" + (f" from t={_t(s.first_failure)} s" if s.first_failure is not None else "")
    note = f"; {s.note}" if s.note else ""
    return (f"max deviation {s.max_deviation:.4g} at t={_t(s.at)} s "
            f"(tolerance {s.tolerance:.4g}{note})  {verdict}")


# ---------------------------------------------------------------------------- matching
def match_names(a_names: Sequence[str], b_names: Sequence[str]) -> list[tuple[str, str | None, str | None]]:
    """``(name, name in A, name in B)`` of every signal: pairs in A's order, then those only in B.

    Equal names match; a name that is the port part of exactly one unmatched
    name of the other side (``h`` and ``ball.h``) matches it.
    """
    b_set = set(b_names)
    paired: dict[str, str] = {a: a for a in a_names if a in b_set}
    rest_a = [a for a in a_names if a not in paired]
    rest_b = [b for b in b_names if b not in paired]
    by_port_b = _by_port(rest_b)
    for a in rest_a:
        hits = by_port_b.get(a, [])
        if len(hits) == 1:
            paired[a] = hits[0]
    taken_b = set(paired.values())
    by_port_a = _by_port([a for a in rest_a if a not in paired])
    for b in rest_b:
        hits = by_port_a.get(b, [])
        if b not in taken_b and len(hits) == 1:
            paired[hits[0]] = b
    taken_b = set(paired.values())
    entries: list[tuple[str, str | None, str | None]] = []
    for a in a_names:
        b = paired.get(a)
        entries.append((a if b is None or len(a) >= len(b) else b, a, b))
    entries += [(b, None, b) for b in b_names if b not in taken_b]
    return entries


def _by_port(names: Sequence[str]) -> dict[str, list[str]]:
    """The names with a component part, by their port part (``ball.h`` under ``h``)."""
    out: dict[str, list[str]] = {}
    for name in names:
        if "." in name:
            out.setdefault(name.partition(".")[2], []).append(name)
    return out


# ---------------------------------------------------------------------------- numerics
@dataclass(frozen=True)
class _Alignment:
    """Where the samples of one side fall on the other side's time axis, computed once per pair of axes.

    The samples within the common time span (``keep``) are either away from
    events (``plain``), compared with the other side interpolated between its
    samples ``j`` and ``k`` with weight ``w`` (held: ``j``; at a repeated time
    ``j`` is the last sample there), or near an event (the others), compared
    with the other side's tube over ``[t - time_tolerance, t + time_tolerance]``:
    ``tube`` for values interpolated linearly, made per signal for held ones.
    """

    times: np.ndarray
    keep: np.ndarray
    plain: np.ndarray
    j: np.ndarray
    k: np.ndarray
    w: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    tube: _Tube

    @classmethod
    def of(cls, t: np.ndarray, other: np.ndarray, start: float, end: float,
           zones: tuple[np.ndarray, np.ndarray], time_tolerance: float) -> _Alignment:
        keep = (t >= start) & (t <= end)
        times = t[keep]
        plain = ~_inside(times, *zones)
        at = times[plain]
        j = np.clip(np.searchsorted(other, at, side="right") - 1, 0, len(other) - 1)
        k = np.minimum(j + 1, len(other) - 1)
        near = times[~plain]
        lo, hi = near - time_tolerance, near + time_tolerance
        return cls(times, keep, plain, j, k, _weights(other, j, k, at), lo, hi, _Tube.of(other, None, lo, hi))

    def deviations(self, v: np.ndarray, other_t: np.ndarray, other_v: np.ndarray, hold: bool) -> np.ndarray:
        """Deviation of each kept sample of *v* from the other side: interpolated, or its tube near events."""
        v = v[self.keep]
        out = np.empty(len(v))
        mine = v[self.plain]
        other = other_v[self.j] if hold else other_v[self.j] + self.w * (other_v[self.k] - other_v[self.j])
        out[self.plain] = np.where(np.isnan(mine) & np.isnan(other), 0.0, np.abs(mine - other))
        if len(self.lo):
            tube = _Tube.of(other_t, other_v, self.lo, self.hi) if hold else self.tube
            out[~self.plain] = tube.distance(other_v, v[~self.plain])
        return np.where(np.isnan(out), np.inf, out)


@dataclass(frozen=True)
class _Tube:
    """The values a signal takes within given windows, as the pieces of the signal each window meets.

    The signal is split into pieces at repeated times (events), and for held
    values (*values* given to :meth:`of`) also at every change of value. A
    piece's values within a window form an interval: for held values its one
    value, for linear ones those at the window's ends clipped to the piece
    (``ends``: interpolation indices and weights) and the samples between
    (``inner``: index ranges). Window ``i`` has the pieces
    ``offset[i] : offset[i] + count[i]``.
    """

    count: np.ndarray
    offset: np.ndarray
    first: np.ndarray
    """First sample of each piece."""
    ends: tuple[np.ndarray, ...] | None
    inner: tuple[np.ndarray, np.ndarray] | None

    @classmethod
    def of(cls, t: np.ndarray, values: np.ndarray | None, lo: np.ndarray, hi: np.ndarray) -> _Tube:
        n = len(t)
        cut = np.concatenate(([True], t[1:] == t[:-1]))
        if values is not None:
            cut[1:] |= values[1:] != values[:-1]
        starts = np.flatnonzero(cut)
        stops = np.append(starts[1:], n)
        t_start = t[starts]
        t_end = t[np.minimum(stops, n - 1)] if values is not None else t[stops - 1]
        r0 = np.minimum(np.searchsorted(t_end, lo, side="left"), len(starts) - 1)
        count = np.maximum(np.searchsorted(t_start, hi, side="right") - r0, 1)
        offset = np.cumsum(count) - count
        owner = np.repeat(np.arange(len(lo)), count)
        r = np.minimum(r0[owner] + np.arange(count.sum()) - offset[owner], len(starts) - 1)
        s, e = starts[r], stops[r]
        if values is not None:
            return cls(count, offset, s, None, None)
        c_lo, c_hi = np.maximum(lo[owner], t_start[r]), np.minimum(hi[owner], t_end[r])
        p0 = np.clip(np.searchsorted(t, c_lo, side="left"), s, e)
        p1 = np.clip(np.searchsorted(t, c_hi, side="right"), s, e)
        return cls(count, offset, s, (*_in_piece(t, s, e, c_lo), *_in_piece(t, s, e, c_hi)), (p0, p1))

    def distance(self, v: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Distance of each of *values* to the interval of *v* (this tube's signal) nearest to it in its window."""
        if self.ends is None or self.inner is None:
            low = high = v[self.first]
        else:
            j0, k0, w0, j1, k1, w1 = self.ends
            at_lo, at_hi = v[j0] + w0 * (v[k0] - v[j0]), v[j1] + w1 * (v[k1] - v[j1])
            inner_min, inner_max = _extrema(v, *self.inner)
            low = np.minimum(np.minimum(at_lo, at_hi), inner_min)
            high = np.maximum(np.maximum(at_lo, at_hi), inner_max)
        distance = np.full(len(values), np.inf)
        for j in range(int(self.count.max(initial=0))):
            piece = self.offset + np.minimum(j, self.count - 1)
            distance = np.minimum(distance, np.maximum(np.maximum(low[piece] - values, values - high[piece]), 0.0))
        return distance


def _weights(t: np.ndarray, j: np.ndarray, k: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Linear interpolation weights of the times *at* between the samples *j* and *k* of *t*."""
    span = t[k] - t[j]
    return np.divide(at - t[j], span, out=np.zeros(len(at)), where=span > 0)


def _in_piece(t: np.ndarray, s: np.ndarray, e: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, ...]:
    """Indices ``j, k`` and weight ``w`` interpolating at *at* within the pieces ``[s, e)`` of the samples."""
    j = np.clip(np.searchsorted(t, at, side="right") - 1, s, e - 1)
    k = np.minimum(j + 1, e - 1)
    return j, k, _weights(t, j, k, at)


def event_zones(instants: np.ndarray, time_tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint intervals ``[lo, hi]`` covering each instant +- *time_tolerance* (overlapping ones merged)."""
    t = np.unique(instants)
    if not len(t):
        return t, t
    lo, hi = t - time_tolerance, t + time_tolerance
    starts = np.flatnonzero(np.concatenate(([True], lo[1:] > hi[:-1])))
    return lo[starts], np.maximum.reduceat(hi, starts)


def _inside(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each time lies in one of the sorted disjoint intervals ``[lo, hi]``."""
    if not len(lo):
        return np.zeros(len(t), dtype=bool)
    k = np.minimum(np.searchsorted(hi, t, side="left"), len(hi) - 1)
    return (lo[k] <= t) & (t <= hi[k])


def _extrema(v: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum and maximum of each ``v[p0:p1]`` (+inf and -inf when empty)."""
    if not len(p0):
        return np.zeros(0), np.zeros(0)
    bounds = np.empty(2 * len(p0), dtype=np.intp)
    bounds[0::2], bounds[1::2] = p0, p1
    padded = np.append(v, 0.0)
    empty = p1 <= p0
    low = np.where(empty, np.inf, np.minimum.reduceat(padded, bounds)[0::2])
    high = np.where(empty, -np.inf, np.maximum.reduceat(padded, bounds)[0::2])
    return low, high


# ---------------------------------------------------------------------------- one signal
def _as_numbers(a: Signal, b: Signal, name: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """A's and B's values as float64 (B in A's unit; text as codes of a shared vocabulary), and whether text."""
    text_a, text_b = (s.kind.upper() == "STRING" or s.values.dtype == object for s in (a, b))
    if text_a != text_b:
        raise ConfigError(None, f"{name}: text in {'A' if text_a else 'B'}, numbers in {'B' if text_a else 'A'}; "
                                "they cannot be compared")
    if text_a:
        _, codes = np.unique(np.concatenate((a.values, b.values)).astype(str), return_inverse=True)
        codes = codes.astype(np.float64)
        return codes[: len(a.values)], codes[len(a.values):], True
    va, vb = a.values.astype(np.float64), b.values.astype(np.float64)
    if a.unit is not None and b.unit is not None and a.unit != b.unit:
        from cosimrun.core.units import compile_conversion

        try:
            conv = compile_conversion(b.unit, a.unit)
        except ValueError as exc:
            raise ConfigError(None, f"{name}: A is in {a.unit}, B in {b.unit}: {exc}") from None
        vb = conv.scale * vb + conv.offset
    return va, vb, False


def _compare_signal(name: str, a: Signal, b: Signal, zones: tuple[np.ndarray, np.ndarray],
                    aligned: dict[tuple[int, int], tuple[_Alignment, _Alignment]],
                    rtol: float, atol: float, time_tolerance: float) -> SignalComparison:
    """One signal compared; *aligned* caches the alignments of the time axes (shared by a component's ports)."""
    va, vb, text = _as_numbers(a, b, name)
    unit = a.unit if a.unit is not None else b.unit
    ta, tb = a.time, b.time
    if not len(ta) or not len(tb):
        empty = " and ".join(side for side, t in (("A", ta), ("B", tb)) if not len(t))
        return SignalComparison(name, a.name, b.name, unit, None, None, None, not len(ta) and not len(tb), None,
                                f"no samples in {empty}")
    start, end = max(ta[0], tb[0]), min(ta[-1], tb[-1])
    note, late = "", None
    if abs(ta[0] - tb[0]) > time_tolerance or abs(ta[-1] - tb[-1]) > time_tolerance:
        note = f"A covers {_t(ta[0])} to {_t(ta[-1])} s, B {_t(tb[0])} to {_t(tb[-1])} s"
        late = start if abs(ta[0] - tb[0]) > time_tolerance else end
    if start > end:
        return SignalComparison(name, a.name, b.name, unit, None, None, None, False, None, note)
    key = (id(ta), id(tb))
    if key not in aligned:
        aligned[key] = (_Alignment.of(ta, tb, start, end, zones, time_tolerance),
                        _Alignment.of(tb, ta, start, end, zones, time_tolerance))
    on_b, on_a = aligned[key]
    hold = text or a.kind.upper() in _HELD or b.kind.upper() in _HELD
    dev = np.concatenate((on_b.deviations(va, tb, vb, hold), on_a.deviations(vb, ta, va, hold)))
    times = np.concatenate((on_b.times, on_a.times))
    if text:
        dev = np.minimum(dev, 1.0)
        tolerance = 0.0
    else:
        tolerance = atol + rtol * max(_largest(va), _largest(vb))
    worst = int(np.argmax(dev))
    failing = ~(dev <= tolerance)
    first = float(times[failing].min()) if failing.any() else None
    if late is not None:
        first = late if first is None else min(first, late)
    return SignalComparison(name, a.name, b.name, unit, float(dev[worst]), float(times[worst]), tolerance,
                            first is None, first, note)


def _largest(v: np.ndarray) -> float:
    """The largest finite magnitude in *v* (0 when none)."""
    big = float(np.nanmax(np.abs(v), initial=0.0))
    return big if math.isfinite(big) else float(np.abs(v[np.isfinite(v)]).max(initial=0.0))


# ---------------------------------------------------------------------------- the comparison
def _instants(signals: Sequence[Signal], sources: Sequence[Source]) -> np.ndarray:
    """Event instants: times with several samples in any signal, and the times in the events tables."""
    seen: dict[int, np.ndarray] = {}
    for sig in signals:
        t = sig.time
        if id(t) not in seen:
            seen[id(t)] = t[1:][t[1:] == t[:-1]]
    tables = [np.asarray(src.events["time"], dtype=np.float64) for src in sources]
    return np.unique(np.concatenate([*seen.values(), *tables, np.zeros(0)]))


def compare(a: str | os.PathLike[str], b: str | os.PathLike[str], *, rtol: float = DEFAULT_RTOL,
            atol: float = DEFAULT_ATOL, ports: Sequence[str] | None = None,
            time_tolerance: float = DEFAULT_TIME_TOLERANCE) -> Comparison:
    """Compare the signals of *a* with those of *b* (results files, run directories or CSVs).

    *ports* are ``fnmatch`` patterns restricting the signals compared. Raises
    ``FileNotFoundError``, a :class:`~cosimrun.errors.ConfigError` (a
    ``ValueError``: a tolerance, incompatible units, text against numbers,
    nothing to compare) or an :class:`~cosimrun.errors.UnknownNameError` (a
    pattern that matches no signal of either side).
    """
    for option, value in (("rtol", rtol), ("atol", atol), ("time_tolerance", time_tolerance)):
        if not _valid_tolerance(value):
            raise ConfigError(option, f"must be a finite number >= 0, got {value}")
    source_a, source_b = open_source(a), open_source(b)
    entries = match_names(source_a.names, source_b.names)
    if not entries:
        raise DataFileError(f"no signals to compare in {source_a.path} and {source_b.path}", path=str(source_a.path))
    chosen = set(select([name for name, _, _ in entries], ports, "in A or B"))
    entries = [entry for entry in entries if entry[0] in chosen]
    both = [(name, na, nb) for name, na, nb in entries if na is not None and nb is not None]
    sig_a = dict(zip([na for _, na, _ in both], source_a.signals(na for _, na, _ in both), strict=True))
    sig_b = dict(zip([nb for _, _, nb in both], source_b.signals(nb for _, _, nb in both), strict=True))
    instants = _instants([*sig_a.values(), *sig_b.values()], (source_a, source_b))
    zones = event_zones(instants, time_tolerance)
    aligned: dict[tuple[int, int], tuple[_Alignment, _Alignment]] = {}
    results = []
    for name, na, nb in entries:
        if na is None or nb is None:
            side = "A" if nb is None else "B"
            results.append(SignalComparison(name, na, nb, source_a.units.get(na) if na else source_b.units.get(nb),
                                            None, None, None, False, None, f"only in {side}"))
        else:
            results.append(_compare_signal(name, sig_a[na], sig_b[nb], zones, aligned, rtol, atol,
                                           time_tolerance))
    return Comparison(str(source_a.path), str(source_b.path), rtol, atol, time_tolerance, results, len(instants))


# ---------------------------------------------------------------------------- command line
def _valid_tolerance(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def _tolerance(text: str) -> float:
    """A tolerance option's value (argparse ``type``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not _valid_tolerance(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = __doc__.split("\n", 2)[2].replace("``", "")
    parser.add_argument("a", metavar="A", help="a results file, a run directory or a CSV file")
    parser.add_argument("b", metavar="B", help="the same, to compare A with (e.g. a reference CSV)")
    parser.add_argument("--rtol", type=_tolerance, default=DEFAULT_RTOL, metavar="R",
                        help=f"relative tolerance, of the signal's largest magnitude (default: {DEFAULT_RTOL:g})")
    parser.add_argument("--atol", type=_tolerance, default=DEFAULT_ATOL, metavar="A",
                        help=f"absolute tolerance, in the signal's unit (default: {DEFAULT_ATOL:g})")
    parser.add_argument("--time-tolerance", type=_tolerance, default=DEFAULT_TIME_TOLERANCE, metavar="T",
                        help=f"seconds an event may move in time (default: {DEFAULT_TIME_TOLERANCE:g})")
    parser.add_argument("--ports", nargs="+", metavar="PATTERN",
                        help="compare only these signals: patterns such as ball.h, 'ball.*' or h (default: all)")
    parser.add_argument("--json", metavar="FILE", help="also write the report to FILE as JSON")


def run(args: argparse.Namespace) -> int:
    result = compare(args.a, args.b, rtol=args.rtol, atol=args.atol, ports=args.ports,
                     time_tolerance=args.time_tolerance)
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    print("\n".join(result.lines()))
    return 0 if result.ok else 1
