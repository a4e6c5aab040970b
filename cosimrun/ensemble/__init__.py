"""Ensembles: M members of one system, differing in parameters, run at once as arrays.

:func:`run_ensemble` takes a built :class:`~cosimrun.system.System` (from a config through
:func:`cosimrun.config.build.build_experiment`, or by hand), a master and per-member parameter arrays, and
returns an :class:`EnsembleResult` with each member's status, final values and (thinned) histories; every member
equals the scalar run of its parameters. Only components that declare
:attr:`~cosimrun.core.component.CoSimComponent.vectorizable` can take part; the contract is
``docs/how-to/ensembles.md``. :func:`run_members` takes the members as one parameter dict each.
:func:`cosimrun.ensemble.serial.run_serially` runs the members of any system one after the other, each its own
scalar run, into the same result (what a sweep does for systems that are not vectorizable).
"""

from cosimrun.ensemble.run import (
    COMPLETE,
    FAILED,
    EnsembleResult,
    EnsembleStats,
    MemberFailure,
    check_master,
    run_ensemble,
    run_members,
)

__all__ = ["COMPLETE", "FAILED", "EnsembleResult", "EnsembleStats", "MemberFailure", "check_master",
           "run_ensemble", "run_members"]
