"""The coupling-error estimate of an ensemble's members: per member, what its own run's estimate gives.

The estimate is that of a run (:mod:`cosimrun.masters.coupling_error`) over arrays of members: every link into a
real input whose producer's port is recorded, each of the kind its master gives it, estimated from every
communication point (whatever ``record_every`` keeps of the histories). Under the fixed-step masters the members
share their communication points (:class:`~cosimrun.masters.coupling_error.MemberCouplingEstimate`); under the
hybrid master each member has its own (its event instants, the ends of its dwell windows), so its steps are
estimated as it accepts them (:class:`OwnClockEstimate`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.errors import ConfigError
from cosimrun.masters.coupling_error import MemberCouplingErrors, MemberCouplingEstimate, step_estimates

if TYPE_CHECKING:
    from cosimrun.masters.extrapolation import Extrapolation
    from cosimrun.system.connection import Link

_HELD = np.array(["held"])
_STEP = np.array([1])
_TIMES = np.array([0.0, 1.0])
"""A step's two points for :func:`step_estimates` of held links, whose estimate does not depend on the times."""


def member_estimate(scalar: Any, plan: list[Any], lagging: list[Link], extrapolation: Extrapolation, order: int,
                    members: int, recorded: Collection[str]) -> MemberCouplingEstimate | None:
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
    return MemberCouplingEstimate(real, scalar.coupling_kinds(real), order, members, recorded)


def own_clock_estimate(scalar: Any, members: int, recorded: Collection[str]) -> OwnClockEstimate | None:
    """The estimate of *members* members that run on their own clocks as the scalar run *scalar* (the hybrid
    master's run, which the ensemble stands in for) runs each (``None`` without links into real inputs)."""
    real = scalar.schedule.real_links
    if not real:
        return None
    return OwnClockEstimate(real, scalar.coupling_kinds(real), members, recorded)


class OwnClockEstimate:
    """The coupling-error estimate of M members that each accept their own communication points (the hybrid
    master's ensembles).

    A run's estimate (:class:`~cosimrun.masters.coupling_error.CouplingErrorEstimate`) reads, per communication
    point, its sample before events there (the end of the step) and its last one after them (the start of the
    next), and the range of every sample. Here each member hands over its points as it accepts them
    (:meth:`point`, with :meth:`sample` for the samples of its micro steps between), and each step is estimated
    and folded into that member's running figures at once: memory does not grow with the run. Every link is
    ``held`` (the hybrid master gives a value held over the step: :func:`step_estimates` of its change over the
    step, which does not depend on the step's times); *recorded* names the ports recorded (``component.port``):
    as in a run, a link whose producer's port is not recorded is not estimated. The RMS sums the steps one by one
    where a run sums them in pieces: it may differ in the last bits.
    """

    def __init__(self, links: list[Link], kinds: Sequence[str], members: int, recorded: Collection[str]) -> None:
        unheld = sorted({kind for kind in kinds if kind != "held"})
        if unheld:
            raise ConfigError("master", f"ensembles estimate the coupling error of members on their own clocks for "
                                        f"links held over a step only, not {', '.join(unheld)}")
        self.links = [lk for lk in links if f"{lk.connection.src_component}.{lk.connection.src_port}" in recorded]
        self.members = members
        shape = (len(self.links), members)
        self._scale = np.array([lk.conversion.scale for lk in self.links], dtype=float).reshape(-1, 1)
        self._offset = np.array([lk.conversion.offset for lk in self.links], dtype=float).reshape(-1, 1)
        self._start = np.zeros(shape)
        """Each member's inputs at the start of its step (after the events of its last point)."""
        self._max, self._at, self._sumsq = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self._lo, self._hi = np.full(shape, np.inf), np.full(shape, -np.inf)
        self._count = np.zeros(members, dtype=np.int64)

    def convert(self, values: Sequence[np.ndarray]) -> np.ndarray:
        """The producers' values *values* (one array of members per link, in :attr:`links` order) in the inputs'
        units, ``(links, members)``, as a run converts them."""
        return np.asarray(values, dtype=float).reshape(len(self.links), -1) * self._scale + self._offset

    def begin(self, ids: np.ndarray, values: np.ndarray) -> None:
        """The first point of members *ids*: their inputs *values* ``(links, len(ids))`` (no step ends there)."""
        self._start[:, ids] = values
        self.sample(ids, values)

    def sample(self, ids: np.ndarray, values: np.ndarray) -> None:
        """A sample of members *ids* that counts only towards the inputs' ranges (a micro step's)."""
        self._lo[:, ids] = np.minimum(self._lo[:, ids], values)
        self._hi[:, ids] = np.maximum(self._hi[:, ids], values)

    def point(self, ids: np.ndarray, t: np.ndarray, end: np.ndarray, start: np.ndarray | None = None) -> None:
        """Members *ids* accepted their points at *t*: the inputs *end* before events there end their steps, those
        after them, *start* (*end* without events), start their next ones."""
        if not len(ids):
            return
        start = end if start is None else start
        self.sample(ids, end)
        if start is not end:
            self.sample(ids, start)
        width = len(ids)
        rows = np.stack([self._start[:, ids].ravel(), end.ravel()])
        e = step_estimates(_TIMES, rows, rows, _STEP, _HELD, 0, 0)[0].reshape(-1, width)
        self._sumsq[:, ids] += e * e
        largest = self._max[:, ids]
        larger = e > largest
        self._max[:, ids] = np.where(larger, e, largest)
        self._at[:, ids] = np.where(larger, t, self._at[:, ids])
        self._count[ids] += 1
        self._start[:, ids] = start

    def result(self) -> MemberCouplingErrors:
        """Each member's estimates over the points it accepted so far (no connection before any step)."""
        links = self.links if self._count.any() else []
        rows = len(links)
        rms = np.sqrt(self._sumsq / np.maximum(self._count, 1))
        return MemberCouplingErrors([str(lk.connection) for lk in links], [lk.dst.spec.unit_name for lk in links],
                                    self._max[:rows].copy(), rms[:rows], self._at[:rows].copy(),
                                    (self._hi - self._lo)[:rows])
