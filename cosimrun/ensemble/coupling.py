"""The coupling-error estimate of an ensemble's members: per member, what its own run's estimate gives.

The estimate is that of a run (:mod:`cosimrun.masters.coupling_error`) over arrays of members: every link into a
real input whose producer's port is recorded, each of the kind its master gives it, estimated from every
communication point (whatever ``record_every`` keeps of the histories). Under the fixed-step masters the members
share their communication points (:class:`SharedGridEstimate`, with each member's values before and after its
events there); under the hybrid master each member has its own (its event instants, the ends of its dwell
windows), and under ``step_control: error`` its accepted steps, so its steps are estimated as it accepts them
(:class:`OwnClockEstimate` of held links, :class:`ExtrapolatedOwnClockEstimate` of every kind).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.errors import ConfigError
from cosimrun.masters.coupling_error import MemberCouplingErrors, MemberCouplingEstimate, step_estimates

if TYPE_CHECKING:
    from cosimrun.masters.coupling_error import _Group
    from cosimrun.masters.extrapolation import Extrapolation
    from cosimrun.system.connection import Link

_HELD = np.array(["held"])
_STEP = np.array([1])
_TIMES = np.array([0.0, 1.0])
"""A step's two points for :func:`step_estimates` of held links, whose estimate does not depend on the times."""
_FIGURES = ("max", "at", "sumsq", "count", "lo", "hi")
"""The running figures of :class:`OwnClockEstimate` per link and member: the largest estimate and where it was, the
sum of squares, the steps (exact as floats), the smallest and the largest value of the input; after them the
history of the last points (their times, then the inputs at their starts: after the events there, newest last)."""
_MAX, _AT, _SUMSQ, _COUNT, _LO, _HI = range(len(_FIGURES))
_HISTORY = len(_FIGURES)
SPARSE = 8
"""A point of fewer than one in this many of the members still stepped is folded on their columns alone (gathered
and written back); more, on every column, masked."""


def member_estimate(scalar: Any, plan: list[Any], lagging: list[Link], extrapolation: Extrapolation, order: int,
                    members: int, recorded: Collection[str]) -> SharedGridEstimate | None:
    """The estimate of *members* members stepped by *plan* with *lagging* links extrapolated by *extrapolation* of
    degree *order* (``None`` without links into real inputs).

    How each link reaches its consumer is what the scalar run *scalar* (the system's ``master_run``, which the
    ensemble stands in for) says of it once told this plan, these lagging links and this extrapolation, so a
    member's kinds are those of its own run.
    """
    real = scalar.schedule.real_links
    if not real:
        return None
    scalar.plan, scalar.lagging, scalar.extrapolation = plan, lagging, extrapolation
    return SharedGridEstimate(real, scalar.coupling_kinds(real), order, members, recorded)


class _Converting:
    """What converts the producers' values of the estimated links :attr:`links` to the inputs' units."""

    links: list[Link]

    def _conversions(self) -> None:
        """Take the conversions of :attr:`links`."""
        self._scale = np.array([lk.conversion.scale for lk in self.links], dtype=float).reshape(-1, 1)
        self._offset = np.array([lk.conversion.offset for lk in self.links], dtype=float).reshape(-1, 1)

    def convert(self, values: Sequence[np.ndarray]) -> np.ndarray:
        """The producers' values *values* (one array of members per link, in :attr:`links` order) in the inputs'
        units, ``(links, members)``, as a run converts them."""
        return np.asarray(values, dtype=float).reshape(len(self.links), -1) * self._scale + self._offset


class SharedGridEstimate(_Converting, MemberCouplingEstimate):
    """:class:`~cosimrun.masters.coupling_error.MemberCouplingEstimate` of members that handle events at the
    shared communication points (the fixed-step masters' ensembles), as a run's recorder hands its samples there
    to its estimate: the values before the events (:meth:`end`) end the step, the sample after them
    (:meth:`take`) starts the next, and every micro step's (:meth:`sample`) counts towards the inputs' ranges.
    A point without events has one sample, which does both."""

    def __init__(self, links: list[Link], kinds: list[str], order: int, members: int,
                 recorded: Collection[str]) -> None:
        super().__init__(links, kinds, order, members, recorded)
        self._split = np.zeros(len(self._t), dtype=bool)
        """The buffered points whose values before events (:meth:`end`) end their steps."""
        self._before: dict[int, np.ndarray] = {}
        """Per group (by ``id``) its values before events, per buffered point (once a point had events)."""
        self._places = [(g, i) for g in self._groups for i in range(len(g.links))]
        """Per link in the order of the conversions (:attr:`_convert`), its group and its place among its links."""
        self._conversions()

    def end(self, samples: Mapping[str, np.ndarray]) -> None:
        """The values before the events at the point :meth:`take` takes next (*samples* as there, every member's:
        a member without events there has the same values before and after)."""
        n, members = self._n, self.members
        for (key, scale, offset, _), (g, i) in zip(self._convert, self._places, strict=True):
            before = self._before.setdefault(id(g), np.empty_like(g.values))[n, i * members:(i + 1) * members]
            np.add(np.multiply(samples[key], scale, out=before), offset, out=before)
        self._split[n] = True

    def sample(self, ids: np.ndarray, values: np.ndarray) -> None:
        """A sample of members *ids* that counts only towards the inputs' ranges: a micro step's, *values*
        ``(links, len(ids))`` (:meth:`convert`'s)."""
        for g, i in self._places:
            columns = i * self.members + ids
            g.lo[columns] = np.minimum(g.lo[columns], values[g.links[i]])
            g.hi[columns] = np.maximum(g.hi[columns], values[g.links[i]])

    def _fold(self) -> None:
        """Estimate the buffered steps, then forget which points had events (their rows are taken anew)."""
        n = self._n
        super()._fold()
        self._split[:n] = False

    def _ends(self, g: _Group, done: int, n: int) -> np.ndarray:
        """The samples of group *g*, with the values before events at the points that had events (which count
        towards the ranges once, here)."""
        split = done + np.flatnonzero(self._split[done:n])
        if not len(split):
            return g.values[:n]
        before = self._before[id(g)][split]
        np.minimum(g.lo, before.min(axis=0), out=g.lo)
        np.maximum(g.hi, before.max(axis=0), out=g.hi)
        ends = g.values[:n].copy()
        ends[split] = before
        return ends


def own_clock_estimate(scalar: Any, members: int, recorded: Collection[str]) -> OwnClockEstimate | None:
    """The estimate of *members* members that run on their own clocks as the scalar run *scalar* (the hybrid
    master's run, which the ensemble stands in for) runs each (``None`` without links into real inputs)."""
    real = scalar.schedule.real_links
    if not real:
        return None
    return OwnClockEstimate(real, scalar.coupling_kinds(real), members, recorded)


class OwnClockEstimate(_Converting):
    """The coupling-error estimate of M members that each accept their own communication points (the hybrid
    master's ensembles).

    A run's estimate (:class:`~cosimrun.masters.coupling_error.CouplingErrorEstimate`) reads, per communication
    point, its sample before events there (the end of the step) and its last one after them (the start of the
    next), and the range of every sample. Here each member hands over its points as it accepts them
    (:meth:`point`, with :meth:`sample` for the samples of its micro steps between), and each step is estimated
    and folded into that member's running figures at once: memory does not grow with the run. Every link is
    ``held`` (the hybrid master gives a value held over the step: :func:`step_estimates` of its change over the
    step, which does not depend on the step's times; :class:`ExtrapolatedOwnClockEstimate` estimates every kind);
    *recorded* names the ports recorded (``component.port``): as in a run, a link whose producer's port is not
    recorded is not estimated. The RMS sums the steps one by one where a run sums them in pieces: it may differ
    in the last bits.

    The figures are kept for the members the run still steps (all at first, fewer after :meth:`compact`), one
    column each: a point of many of them is folded by masked operations on every column, one of a few (less than
    one in :data:`SPARSE`) on their columns alone.
    """

    depth = 1
    """The points whose inputs at their starts a step's estimate reads (the last one, for a held link)."""
    timed = False
    """Whether a step's estimate reads the times of those points."""

    def __init__(self, links: list[Link], kinds: Sequence[str], members: int, recorded: Collection[str]) -> None:
        self._accept(kinds)
        kept = [i for i, lk in enumerate(links)
                if f"{lk.connection.src_component}.{lk.connection.src_port}" in recorded]
        self.links = [links[i] for i in kept]
        self.kinds = np.array([kinds[i] for i in kept], dtype=str)
        self._conversions()
        self._times = _HISTORY
        """The row of the oldest point's time among the figures."""
        self._starts = _HISTORY + self.depth * self.timed
        """The row of the oldest point's inputs at its start among the figures (the newest is the last row)."""
        self._all = np.zeros((self._starts + self.depth, len(self.links), members))
        """Per figure (:data:`_FIGURES`, then the history), link and member its running value."""
        self._all[_LO], self._all[_HI] = np.inf, -np.inf
        self._live = self._all
        """The figures of the members still stepped (:attr:`_all` itself until :meth:`compact`)."""
        self._ids = np.arange(members)
        """The members still stepped, in order."""

    def _accept(self, kinds: Sequence[str]) -> None:
        """Refuse the links that are not held over a step."""
        unheld = sorted({kind for kind in kinds if kind != "held"})
        if unheld:
            raise ConfigError("master", f"ensembles estimate the coupling error of members on their own clocks for "
                                        f"links held over a step only, not {', '.join(unheld)}")

    def compact(self, keep: np.ndarray) -> None:
        """Go on with the members still stepped at the places *keep* (indices, in order) alone."""
        self._store()
        self._live = self._live[:, :, keep]
        self._ids = self._ids[keep]

    def _store(self) -> None:
        if self._live is not self._all:
            self._all[:, :, self._ids] = self._live

    def begin(self, values: np.ndarray, t0: float = 0.0) -> None:
        """The first point of every member, at *t0*: their inputs *values* ``(links, members)`` (no step ends
        there)."""
        f = self._live
        f[-1] = values
        if self.timed:
            f[self._starts - 1] = t0
        np.minimum(f[_LO], values, out=f[_LO])
        np.maximum(f[_HI], values, out=f[_HI])

    def sample(self, ids: np.ndarray, values: np.ndarray) -> None:
        """A sample of members *ids* (numbers in the ensemble, in order) that counts only towards the inputs'
        ranges: a micro step's, *values* ``(links, len(ids))``."""
        at = np.searchsorted(self._ids, ids)
        span = self._live[_LO:_HI + 1][:, :, at]
        np.minimum(span[0], values, out=span[0])
        np.maximum(span[1], values, out=span[1])
        self._live[_LO:_HI + 1][:, :, at] = span

    def point(self, mask: np.ndarray, t: np.ndarray, end: np.ndarray, start: np.ndarray | None = None) -> None:
        """The members *mask* (of those still stepped) accepted their points at *t*: the inputs *end* (``(links,
        members still stepped)``) before events there end their steps, those after them, *start* (*end* without
        events), start their next ones. The other members' columns are ignored."""
        start = end if start is None else start
        if np.count_nonzero(mask) * SPARSE < mask.size:
            at = np.flatnonzero(mask)
            part = self._live[:, :, at]
            self._fold(part, t[at], end[:, at], start[:, at], None)
            self._live[:, :, at] = part
        else:
            self._fold(self._live, t, end, start, mask)

    def result(self) -> MemberCouplingErrors:
        """Each member's estimates over the points it accepted so far (no connection before any step)."""
        self._store()
        f = self._all
        links = self.links if f[_COUNT].any() else []
        rows = len(links)
        rms = np.sqrt(f[_SUMSQ] / np.maximum(f[_COUNT], 1.0))
        return MemberCouplingErrors([str(lk.connection) for lk in links], [lk.dst.spec.unit_name for lk in links],
                                    f[_MAX, :rows].copy(), rms[:rows], f[_AT, :rows].copy(), (f[_HI] - f[_LO])[:rows])

    def _estimates(self, f: np.ndarray, t: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The estimates ``(links, members)`` of the steps ending at *t* with the inputs *end*, from the history in
        the figures *f*: each held link's change over its step."""
        rows = np.stack([f[-1].ravel(), end.ravel()])
        return step_estimates(_TIMES, rows, rows, _STEP, _HELD, 0, 0)[0].reshape(end.shape)

    def _fold(self, f: np.ndarray, t: np.ndarray, end: np.ndarray, start: np.ndarray, mask: np.ndarray | None) -> None:
        """Fold the steps of the members *mask* (every column without one) ending at *t* with the inputs *end*, and
        starting the next ones with *start*, into their figures *f* (``(figure, link, member)``, in place)."""
        e = self._estimates(f, t, end)
        squares = e * e
        larger = e > f[_MAX]
        lo = np.minimum(f[_LO], np.minimum(end, start))
        hi = np.maximum(f[_HI], np.maximum(end, start))
        history = f[_HISTORY:]
        shifted = np.concatenate([history[1:self.depth], np.broadcast_to(t, end.shape)[None],
                                  history[self.depth + 1:], start[None]]) if self.timed else \
            np.concatenate([history[1:], start[None]])
        if mask is not None:
            squares = np.where(mask, squares, 0.0)
            larger &= mask
            lo, hi, shifted = np.where(mask, lo, f[_LO]), np.where(mask, hi, f[_HI]), np.where(mask, shifted, history)
        f[_SUMSQ] += squares
        f[_MAX] = np.where(larger, e, f[_MAX])
        f[_AT] = np.where(larger, t, f[_AT])
        f[_COUNT] += 1.0 if mask is None else mask
        f[_LO], f[_HI], f[_HISTORY:] = lo, hi, shifted


class ExtrapolatedOwnClockEstimate(OwnClockEstimate):
    """:class:`OwnClockEstimate` of links of every kind (held, taylor, mean, line) under extrapolation of degree
    *order* (``step_control: error`` under the jacobi and gauss_seidel masters): each member's step is estimated
    by :func:`step_estimates` from that member's last :attr:`depth` accepted points and the end of its step, as
    its run's estimate reads the points before each step."""

    depth = 3
    timed = True

    def __init__(self, links: list[Link], kinds: Sequence[str], order: int, members: int,
                 recorded: Collection[str]) -> None:
        super().__init__(links, kinds, members, recorded)
        self.order = order

    def _accept(self, kinds: Sequence[str]) -> None:
        """Every kind is estimated."""

    def _estimates(self, f: np.ndarray, t: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The estimates ``(links, members)`` of the steps ending at *t* with the inputs *end*: every member's points
        laid out as rows of their own (its last :attr:`depth` points, then its step's end), each member's step
        estimated at its last row, with what precedes it in its run (its steps so far) as its base."""
        depth, links, members = self.depth, *end.shape
        width = depth + 1
        times = np.empty((members, width))
        times[:, :depth] = f[self._times:self._starts, 0].T
        times[:, depth] = t
        values = np.empty((members, width, links))
        values[:, :depth] = f[self._starts:].transpose(2, 0, 1)
        values[:, depth] = end.T
        rows = values.reshape(members * width, links)
        k = np.arange(members) * width + depth
        known = f[_COUNT, 0] + 1.0
        return step_estimates(times.ravel(), rows, rows, k, self.kinds, self.order, known - k).T
