"""The coupling-error estimate of an ensemble's members: per member, what its own run's estimate gives.

The estimate is that of a run (:mod:`cosimrun.masters.coupling_error`) over arrays of members
(:class:`~cosimrun.masters.coupling_error.MemberCouplingEstimate`): every link into a real input whose producer's
port is recorded, each of the kind its master gives it, estimated from every communication point (whatever
``record_every`` keeps of the histories).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from cosimrun.masters.coupling_error import MemberCouplingEstimate

if TYPE_CHECKING:
    from cosimrun.masters.extrapolation import Extrapolation
    from cosimrun.system.connection import Link


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
