"""Coupling-error estimates: how far each coupled real input was, over each step, from its producer's output.

The standard estimator of extrapolation-based co-simulation: at the end of a
step, what the consumer was given is compared with what the producer actually
did. How the input was given decides the comparison (the *kind* of the link):

``held``
    a value held over the step (no extrapolation, or a fresh output's end value
    under Gauss-Seidel): the input's change over the step, ``|y1 - y0|``;
``taylor``
    the extrapolating polynomial of degree ``p`` evaluated inside the consumer:
    its value at the step end against the producer's, ``|P(t1) - y1|``;
``mean``
    that polynomial's mean over the step, held: the larger distance of the mean
    from the producer's values at the step's start and end;
``line``
    a fresh output interpolated linearly over the step (Gauss-Seidel with
    ``extrapolation >= 1``): the interpolation error ``h**2 / 8 |y''|``, with
    ``y''`` from the last three samples (0 on the first step).

The estimate is computed from what the run records: the recorder hands each
block of recorded real samples to :meth:`CouplingErrorEstimate.take`, which
applies each link's unit conversion and reads, per communication point, the
value before events there (micro 0: the end of the step) and after them (the
start of the next), so a step costs nothing beyond the recording itself. The
result per connection is the largest and the RMS estimate over the run, where
the largest was, and the range of the input, which :attr:`CouplingError.relative`
divides by; a connection whose producer's port is not recorded
(``storage.record``) is not estimated.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.errors import ConfigError, did_you_mean, suggest

if TYPE_CHECKING:
    from cosimrun.system.connection import Link

KINDS = ("held", "taylor", "mean", "line")
CHUNK = 512
"""Steps estimated and summed at a time."""
CONTEXT = 3
"""Samples of the previous chunk a chunk needs (the history of a degree-2 extrapolation)."""


@dataclass(frozen=True)
class CouplingError:
    """The estimated local coupling error of one connection over a run (in the input's unit)."""

    connection: str
    unit: str | None
    max: float
    rms: float
    time_of_max: float
    """End of the step with the largest estimate."""
    range: float
    """Largest minus smallest value of the input over the run."""

    @property
    def relative(self) -> float:
        """``max`` relative to the input's range (``max`` itself for an input that never changed)."""
        return float(relative_error(self.max, self.range))


def relative_error(largest: Any, span: Any) -> Any:
    """*largest* relative to the range *span* (*largest* itself where the range is 0); floats or arrays."""
    if np.ndim(largest) == 0 and np.ndim(span) == 0:
        return largest / span if span > 0.0 else largest
    positive = np.asarray(span) > 0.0
    return np.where(positive, np.divide(largest, np.where(positive, span, 1.0)), largest)


def largest_relative(errors: Iterable[CouplingError]) -> float:
    """The largest :attr:`CouplingError.relative` of *errors* (NaN without any): a run's figure in a sweep's index,
    as :func:`cosimrun.storage.summary.largest_coupling_error` reads it from the run's file."""
    values = [float(e.relative) for e in errors]
    return float(np.max(values)) if values else math.nan

_TRUE = np.ones(1, dtype=bool)


class CouplingErrorEstimate:
    """Estimates the coupling errors of a run from the samples its recorder takes (see the module).

    :meth:`take` receives each block of recorded real samples (the recorder
    calls it as it hands the block over), so a step costs nothing beyond the
    recording itself; a link whose producer's port is not recorded is not
    estimated. :meth:`result` gives the estimates after the last block.
    """

    def __init__(self, links: list[Link], kinds: list[str] | None = None, order: int = 0) -> None:
        self.links = links
        self.order = order
        self._kinds = np.array([])
        if kinds is not None:
            self.set_coupling(kinds, order)
        self._sources = [(lk.connection.src_component, lk.connection.src_port) for lk in links]
        self._scale = np.array([lk.conversion.scale for lk in links])
        self._offset = np.array([lk.conversion.offset for lk in links])
        self._columns: np.ndarray | None = None
        n = len(links)
        self._t = np.zeros(0)
        self._end = np.zeros((0, n))
        self._start = np.zeros((0, n))
        """Per communication point: its time, the inputs' values before events there, and after them."""
        self._done = 0
        self._base = 0
        """Index over the run of the first buffered communication point."""
        self._pending_t = np.zeros(0)
        self._pending = np.zeros((0, n))
        """Samples of the last instant of the last block, which the next block may continue (events)."""
        self._max = np.zeros(n)
        self._at = np.zeros(n)
        self._sumsq = np.zeros(n)
        self._count = 0
        self._lo = np.full(n, np.inf)
        self._hi = np.full(n, -np.inf)

    def set_coupling(self, kinds: list[str], order: int) -> None:
        """How each link reaches its consumer over a step and the extrapolation order (known once the run
        began, before any step ends)."""
        self.order = order
        for kind in kinds:
            if kind not in KINDS:
                close = did_you_mean(kind, KINDS)
                raise ConfigError("kinds", f"unknown coupling kind {kind!r}{suggest(kind, KINDS)} (valid: "
                                           f"{', '.join(KINDS)})", suggestion=close[0] if close else None)
        self._kinds = np.array(kinds)

    def take(self, times: np.ndarray, block: np.ndarray, names: list[tuple[str, str]]) -> None:
        """A block of recorded real samples: *times* (rows in superdense order), *block* (one column per port
        named in *names* as ``(component, port)``)."""
        if self._columns is None:
            index = {name: i for i, name in enumerate(names)}
            self._columns = np.array([index.get(src, -1) for src in self._sources], dtype=int)
        if not len(times):
            return
        cols = self._columns
        values = block[:, np.maximum(cols, 0)] * self._scale + self._offset
        t = np.concatenate([self._pending_t, times])
        v = np.concatenate([self._pending, values])
        last = t[-1]
        keep = t == last
        self._pending_t, self._pending = t[keep], v[keep]
        self._add(t[~keep], v[~keep])

    def result(self) -> list[CouplingError]:
        """The estimates of every link whose producer's port was recorded, over the samples so far."""
        self._add(self._pending_t, self._pending)
        self._pending_t = self._pending_t[:0]
        self._pending = self._pending[:0]
        self._process()
        recorded = self._columns >= 0 if self._columns is not None else np.zeros(len(self.links), dtype=bool)
        rms = np.sqrt(self._sumsq / self._count) if self._count else np.zeros(len(self.links))
        return [
            CouplingError(str(lk.connection), lk.dst.spec.unit_name, float(self._max[i]), float(rms[i]),
                          float(self._at[i]), float(self._hi[i] - self._lo[i]))
            for i, lk in enumerate(self.links) if recorded[i] and self._count
        ]

    _SAVED = ("_t", "_end", "_start", "_done", "_base", "_pending_t", "_pending", "_max", "_at", "_sumsq", "_count",
              "_lo", "_hi")

    def save_state(self) -> dict[str, Any]:
        """The partial sums and the buffered points, as plain values (a checkpoint's, after the recorder handed
        over every sample)."""
        state = {name: getattr(self, name) for name in self._SAVED}
        state["columns"] = self._columns
        return state

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`save_state`'s *state*."""
        for name in self._SAVED:
            setattr(self, name, state[name])
        self._columns = state["columns"]

    # ------------------------------------------------------------------ chunks
    def _add(self, t: np.ndarray, v: np.ndarray) -> None:
        """Samples of whole instants: the first of each instant ends a step, the last starts the next."""
        if not len(t):
            return
        new = t[1:] != t[:-1]
        first = np.concatenate((_TRUE, new))
        last = np.concatenate((new, _TRUE))
        self._t = np.concatenate([self._t, t[first]])
        self._end = np.concatenate([self._end, v[first]])
        self._start = np.concatenate([self._start, v[last]])
        self._lo = np.minimum(self._lo, v.min(axis=0))
        self._hi = np.maximum(self._hi, v.max(axis=0))
        while len(self._t) - max(self._done, 1) >= CHUNK:
            self._process(max(self._done, 1) + CHUNK)

    def _process(self, rows: int | None = None) -> None:
        """Estimate the steps ending at the rows not processed yet, up to *rows* (all by default).

        The steps are summed in pieces of :data:`CHUNK` whatever blocks they came in, so the estimates do not
        depend on when the recorder handed samples over (by count, or by time with ``flush_seconds``).
        """
        rows = len(self._t) if rows is None else rows
        new = np.arange(max(self._done, 1), rows)
        if len(new):
            e = step_estimates(self._t, self._start, self._end, new, self._kinds, self.order, self._base)
            self._count += len(new)
            self._max, self._at = self._max.copy(), self._at.copy()  # a saved state keeps its own
            fold(e, self._t[new], self._max, self._at, self._sumsq)
        self._done = rows
        drop = max(0, rows - CONTEXT)
        if drop:
            self._t, self._end, self._start = self._t[drop:], self._end[drop:], self._start[drop:]
            self._done -= drop
            self._base += drop


def step_estimates(t: np.ndarray, start: np.ndarray, end: np.ndarray, k: np.ndarray, kinds: np.ndarray, order: int,
                   base: int) -> np.ndarray:
    """The estimates of the steps ending at rows *k* (each > 0) of the communication points *t*, one column per
    input: *start* and *end* hold per point the inputs' values after and before events there, *kinds* each
    column's kind (or one kind for all: an array of one; ``held`` where none is given), *order* the
    extrapolation's degree and *base* the index over the run of row 0 (how many points precede it; or per step, an
    array like *k*, for rows of several runs: an ensemble's members on their own clocks). Each figure
    depends on its own column only, so estimating a subset of the columns gives the same numbers; a term that is
    0 for every row (a degree above *order*) is not computed."""
    h = (t[k] - t[k - 1])[:, None]
    y0, y1 = _rows(start, k - 1), _rows(end, k)
    known = base + k  # samples at or before each step's start
    taylor, mean, line = kinds == "taylor", kinds == "mean", kinds == "line"
    out = np.abs(y1 - y0) if not kinds.size or not (taylor | mean | line).all() else None
    if taylor.any() or mean.any():
        p = np.minimum(order, known - 1)[:, None]
        slope = _slope(t, start, k - 1, k - 2) if order >= 1 else 0.0
        d2 = (slope - _slope(t, start, k - 2, k - 3)) / _span(t, k - 1, k - 3) if order >= 2 else 0.0
        tb = t[np.maximum(k - 2, 0)][:, None]
        if taylor.any():
            end_value = y0 + _where(p >= 1, slope * h, 0.0) + (
                _where(p >= 2, d2 * h * (t[k][:, None] - tb), 0.0) if order >= 2 else 0.0)
            out = _merge(out, taylor, np.abs(end_value - y1))
        if mean.any():
            tc = t[k - 1][:, None]
            value = y0 + _where(p >= 1, slope * h / 2, 0.0) + (
                _where(p >= 2, d2 * (0.5 * h * (tc - tb) + h * h / 3.0), 0.0) if order >= 2 else 0.0)
            out = _merge(out, mean, np.maximum(np.abs(value - y0), np.abs(value - y1)))
    if line.any():
        h_prev = (t[k - 1] - t[np.maximum(k - 2, 0)])[:, None]
        error = line_error(h, np.where(h_prev > 0, h_prev, h), _slope(t, start, k - 1, k - 2), y0, y1)
        out = _merge(out, line, _where((known >= 2)[:, None], error, 0.0))
    assert out is not None
    return _where(np.isfinite(out), out, math.inf)


def _merge(out: np.ndarray | None, mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """*values* in the columns of *mask*, *out* in the others (*out* ``None``: no column has a value yet)."""
    return _where(mask, values, 0.0 if out is None else out)


def _where(mask: np.ndarray, values: Any, other: Any) -> Any:
    """``np.where(mask, values, other)``, *values* itself when *mask* holds everywhere."""
    return values if mask.all() else np.where(mask, values, other)


def fold(e: np.ndarray, times: np.ndarray, largest: np.ndarray, at: np.ndarray, sumsq: np.ndarray) -> None:
    """Fold the estimates *e* (rows: steps ending at *times*, one column per input) into the running figures, in
    place: the sum of squares *sumsq*, the largest estimates *largest* and their times *at* (the earliest of
    equal ones)."""
    sumsq += np.einsum("ij,ij->j", e, e)
    worst = e.max(axis=0)
    larger = np.flatnonzero(worst > largest)
    if len(larger):
        largest[larger] = worst[larger]
        at[larger] = times[np.argmax(e[:, larger] == worst[larger], axis=0)]


def line_error(h: Any, h_prev: Any, slope_before: Any, y0: Any, y1: Any) -> Any:
    """The error ``h**2 / 8 |y''|`` of the line from *y0* to *y1* over a step *h*, with ``y''`` from the slope
    *slope_before* over the previous step *h_prev* (scalars or arrays)."""
    curvature = 2.0 * ((y1 - y0) / h - slope_before) / (h + h_prev)
    return h * h / 8.0 * np.abs(curvature)


def _span(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``t[a] - t[b]`` as a column, 1 where *b* is before the first row (the term is not used there)."""
    span = t[a] - t[np.maximum(b, 0)]
    return np.where((b >= 0) & (span != 0), span, 1.0)[:, None]


def _slope(t: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Divided difference ``(y[a] - y[b]) / (t[a] - t[b])`` per row, 0 where *b* is before the first row."""
    return _where((b >= 0)[:, None], (_rows(y, a) - _rows(y, np.maximum(b, 0))) / _span(t, a, b), 0.0)


def _rows(y: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``y[rows]``: a view when *rows* are consecutive (the steps estimated at once are), a copy otherwise."""
    if len(rows) and rows[0] >= 0 and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
        return y[rows[0]:rows[-1] + 1]
    return y[rows]


# ---------------------------------------------------------------------------- members: an ensemble's estimates
MEMBER_BUFFER = 1 << 20
"""Values an ensemble's estimate buffers at most (points x links x members, 8 MiB): the last points are moved to
the front when it is full."""
MEMBER_BATCH = 1 << 18
"""Values of the points an ensemble's estimate folds at once (at least one point): fewer make the calls per
point cost, more make its temporary arrays too large for the processor's caches (measured on the two-mass
system, 10^3 and 8192 members: 2^18 costs the least)."""


@dataclass(frozen=True)
class MemberCouplingErrors:
    """The estimates of an ensemble: per connection (rows, in link order) and member (columns) what
    :class:`CouplingError` holds for one run; NaN for a member without estimates (a failed one)."""

    connections: list[str]
    units: list[str | None]
    max: np.ndarray
    rms: np.ndarray
    time_of_max: np.ndarray
    range: np.ndarray

    @property
    def relative(self) -> np.ndarray:
        """:attr:`CouplingError.relative` per connection and member."""
        return relative_error(self.max, self.range)

    @property
    def members(self) -> int:
        return self.max.shape[1]

    def largest_relative(self) -> np.ndarray:
        """:func:`largest_relative` of each member (NaN for a member without estimates, and for all without
        connections)."""
        if not self.connections:
            return np.full(self.members, math.nan)
        return np.max(self.relative, axis=0)

    def member(self, m: int) -> list[CouplingError]:
        """Member *m*'s estimates, in link order (as :meth:`CouplingErrorEstimate.result` gives a run's), none for
        a member without estimates."""
        if not self.connections or np.isnan(self.max[:, m]).any():
            return []
        return [CouplingError(c, u, float(self.max[i, m]), float(self.rms[i, m]), float(self.time_of_max[i, m]),
                              float(self.range[i, m])) for i, (c, u) in enumerate(zip(self.connections, self.units,
                                                                                      strict=True))]

    def only(self, keep: np.ndarray) -> MemberCouplingErrors:
        """These estimates with NaN for the members not in the boolean mask *keep*."""
        def masked(a: np.ndarray) -> np.ndarray:
            return np.where(keep, a, math.nan)
        return MemberCouplingErrors(self.connections, self.units, masked(self.max), masked(self.rms),
                                    masked(self.time_of_max), masked(self.range))

    @staticmethod
    def of_runs(runs: Sequence[Sequence[CouplingError] | None]) -> MemberCouplingErrors | None:
        """The estimates of one run per member (``None``: a member that did not run, NaN), per connection in the
        order of the first run that has any: what :meth:`member` gives back; ``None`` when no run has any."""
        first = next((errors for errors in runs if errors), None)
        if first is None:
            return None
        connections = [e.connection for e in first]
        figures = {name: np.full((len(connections), len(runs)), math.nan)
                   for name in ("max", "rms", "time_of_max", "range")}
        for m, errors in enumerate(runs):
            mine = {e.connection: e for e in errors or ()}
            for i, connection in enumerate(connections):
                if connection in mine:
                    for name, values in figures.items():
                        values[i, m] = getattr(mine[connection], name)
        return MemberCouplingErrors(connections, [e.unit for e in first], figures["max"], figures["rms"],
                                    figures["time_of_max"], figures["range"])

    @staticmethod
    def join(parts: list[MemberCouplingErrors]) -> MemberCouplingErrors:
        """The estimates of consecutive chunks of members as one (members in order)."""
        first = parts[0]

        def joined(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts], axis=1)
        return MemberCouplingErrors(first.connections, first.units, joined("max"), joined("rms"),
                                    joined("time_of_max"), joined("range"))


@dataclass
class _Group:
    """The links of one kind in a members' estimate: their rows among the links, their values (converted to the
    inputs' units) per buffered point and their running figures (flat, link-major: ``link * members + member``)."""

    kind: np.ndarray
    links: np.ndarray
    values: np.ndarray
    max: np.ndarray
    at: np.ndarray
    sumsq: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


class MemberCouplingEstimate:
    """:class:`CouplingErrorEstimate` of M members at once, from one sample per communication point.

    An ensemble runs fixed steps: each communication point has one sample, the values of the producers' ports
    for every member (``(M,)`` arrays), which ends the step to it and starts the next (:meth:`_ends` gives what
    ends the steps otherwise: the values before events). :meth:`take` buffers a point; every few points the
    buffered steps are estimated by :func:`step_estimates` and folded (:func:`fold`) into running figures per
    link and member (a batch of :data:`MEMBER_BATCH` values at a time, small enough for the processor's caches),
    keeping only the points the next step's estimate needs, so memory does not grow with the run. The numbers
    are those of each member's own run (the estimate of a run sums its steps in other pieces: its RMS may differ
    in the last bits). *recorded* names the ports recorded (``component.port``): as in a run, a link whose
    producer's port is not recorded is not estimated.
    """

    def __init__(self, links: list[Link], kinds: list[str], order: int, members: int,
                 recorded: Collection[str]) -> None:
        keys = [f"{lk.connection.src_component}.{lk.connection.src_port}" for lk in links]
        kept = [i for i, key in enumerate(keys) if key in recorded]
        self.links = [links[i] for i in kept]
        self.order = order
        self.members = members
        self.sources = list(dict.fromkeys(keys[i] for i in kept))
        """The ports :meth:`take` reads, ``component.port``."""
        width = max(1, len(kept) * members)
        rows = max(CONTEXT + 1, MEMBER_BUFFER // width)
        self._batch = max(1, min(rows - CONTEXT, MEMBER_BATCH // width))
        """Points folded at once."""
        self._groups = []
        for kind in KINDS:
            mine = [j for j, i in enumerate(kept) if kinds[i] == kind]
            if mine:
                size = len(mine) * members
                self._groups.append(_Group(
                    np.array([kind]), np.array(mine), np.empty((rows, size)),
                    np.zeros(size), np.zeros(size), np.zeros(size), np.full(size, np.inf), np.full(size, -np.inf)))
        self._convert = [(keys[kept[j]], self.links[j].conversion.scale, self.links[j].conversion.offset,
                          g.values[:, i * members:(i + 1) * members])
                         for g in self._groups for i, j in enumerate(g.links.tolist())]
        """Per link: its source, its conversion and its columns of its group's values."""
        self._t = np.empty(rows)
        self._n = 0
        """Points buffered."""
        self._done = 0
        """Buffered points whose step is estimated (those kept for the next steps' estimates)."""
        self._base = 0
        """Index over the run of the first buffered point."""
        self._count = 0

    def take(self, t: float, samples: Mapping[str, np.ndarray]) -> None:
        """The point at *t*: *samples* maps ``component.port`` to every member's value (at least :attr:`sources`)."""
        n = self._n
        self._t[n] = t
        for key, scale, offset, values in self._convert:
            np.add(np.multiply(samples[key], scale, out=values[n]), offset, out=values[n])  # as a run converts
        self._n = n = n + 1
        if n - self._done >= self._batch or n == len(self._t):
            self._fold()

    def _fold(self) -> None:
        """Estimate the buffered steps not estimated yet; with the buffer full, move its last :data:`CONTEXT`
        points (what the next steps' estimates need) to its front."""
        n, done = self._n, self._done
        if n == done:
            return
        t = self._t[:n]
        new = np.arange(max(done, 1), n)
        for g in self._groups:
            for row in g.values[done:n]:
                np.minimum(g.lo, row, out=g.lo)
                np.maximum(g.hi, row, out=g.hi)
            if len(new):
                v = g.values[:n]
                fold(step_estimates(t, v, self._ends(g, done, n), new, g.kind, self.order, self._base), t[new], g.max,
                     g.at, g.sumsq)
        self._count += len(new)
        self._done = n
        if n == len(self._t):
            keep = min(CONTEXT, n)
            for g in self._groups:
                g.values[:keep] = g.values[n - keep:n].copy()
            self._t[:keep] = t[n - keep:].copy()
            self._base += n - keep
            self._n = self._done = keep

    def _ends(self, g: _Group, done: int, n: int) -> np.ndarray:
        """The values of group *g* that end the steps to the buffered points before *n* (those from *done* not
        estimated yet): their samples, the values of a point without events."""
        return g.values[:n]

    def result(self) -> MemberCouplingErrors:
        """The estimates over the points taken so far (no connection before any step)."""
        self._fold()
        shape = (len(self.links), self.members)
        figures = {name: np.zeros(shape) for name in ("max", "rms", "time_of_max", "range")}
        for g in self._groups:
            rows = g.links
            width = len(rows)
            figures["max"][rows] = g.max.reshape(width, -1)
            figures["rms"][rows] = np.sqrt(g.sumsq / max(self._count, 1)).reshape(width, -1)
            figures["time_of_max"][rows] = g.at.reshape(width, -1)
            figures["range"][rows] = (g.hi - g.lo).reshape(width, -1)
        links = self.links if self._count else []
        if not self._count:
            figures = {name: value[:0] for name, value in figures.items()}
        return MemberCouplingErrors([str(lk.connection) for lk in links], [lk.dst.spec.unit_name for lk in links],
                                    **figures)


# ---------------------------------------------------------------------------- the summary
def ranked(errors: list[CouplingError]) -> list[CouplingError]:
    """The connections with a non-zero estimate, the one that matters most first.

    The ranking is by the RMS estimate over the run relative to the input's range (how far the
    input typically was from its producer, on the scale of what the input does): an error
    sustained over the run outranks one step. A single step's estimate can be large without
    mattering much: the first steps of an extrapolating master run at a lower degree, and a jump
    of the producer at a communication point is counted in full (the input's change over the
    step) although a consumer given the value from before the jump was exact. Ties go by the
    largest estimate relative to the range. An input that never changed (range 0) has no scale:
    any estimate on it ranks first, in absolute terms. Connections whose estimate is 0 are left out.
    """

    def key(e: CouplingError) -> tuple[float, float]:
        if e.range > 0.0:
            return (e.rms / e.range, e.max / e.range)
        return (math.inf, e.max)

    return sorted((e for e in errors if e.max > 0.0), key=key, reverse=True)


def summary_line(errors: list[CouplingError]) -> str:
    """The end-of-run summary's line on coupling errors (without a newline; ``""`` without estimates).

    ``estimated coupling error: 4.2e-04 rad RMS on a.y -> b.u, 0.028 of its range (largest 6.1e-04
    at t=0.61 s)`` for the first connection of :func:`ranked`, said in absolute terms for an input
    that never changed, with a note when its largest estimate is a jump over the input's whole
    range, and ``estimated coupling error: 0 on every coupled input`` when no estimate exceeds 0.
    """
    if not errors:
        return ""
    order = ranked(errors)
    if not order:
        return "estimated coupling error: 0 on every coupled input"
    e = order[0]
    unit = f" {e.unit}" if e.unit else ""
    largest = f"largest {e.max:.2g}{unit} at t={e.time_of_max:.6g} s"
    if e.range <= 0.0:
        return (f"estimated coupling error: {e.rms:.2g}{unit} RMS on {e.connection}, an input that never changed "
                f"({largest})")
    if math.isclose(e.max, e.range, rel_tol=1e-9):
        largest += (": a jump over the input's whole range, which the estimate counts in full whichever side of it "
                    "the input was given")
    return (f"estimated coupling error: {e.rms:.2g}{unit} RMS on {e.connection}, {e.rms / e.range:.2g} of its range "
            f"({largest})")
