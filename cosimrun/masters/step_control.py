"""Error-controlled communication steps (the explicit masters' ``step_control: error``).

After every step each coupled real input is compared with what its producer
actually did over the step, the standard estimator of extrapolation-based
co-simulation (see :mod:`~cosimrun.masters.coupling_error` for the kinds):

``held``
    a value held over the step: ``|y1 - y0|`` (local order 1);
``taylor`` / ``mean``
    the polynomial of degree ``p`` through the latest accepted samples,
    extrapolated to the step end, against the producer's value there:
    ``|P(t1) - y1|`` (local order ``p + 1``; fewer samples at the start of a
    run lower ``p``);
``line``
    a fresh output interpolated linearly over the step (Gauss-Seidel):
    ``h**2 / 8 |y''|`` with ``y''`` from the step's end and the last two
    accepted samples (local order 2; 0 on the first step).

The step's error norm is the largest ratio of an estimate to its tolerance
``atol + rtol * s``, where ``s`` is the largest magnitude the input has had
so far in the run (a coupled signal that swings through zero keeps the
tolerance of its amplitude). A step with norm <= 1 is accepted; a larger one
is rolled back and taken again, shorter, when every component can roll back
(``step_rejection = "rollback"``); otherwise it stands and the estimate only
shapes the next step (``step_rejection = "none"``, stated in ``/stats``).
The next step comes from a PI controller on the norm (Gustafsson's, with the
exponents ``0.7/k`` and ``0.4/k`` of Hairer and Wanner, ``k`` the lowest local
order among the inputs), a safety factor of 0.9, growth by at most 5 and
shrinking by at most 5 per step, within ``[min_step, max_step]``. A step that
is already ``min_step`` (as many clock ticks as ``min_step`` rounds to) is taken
once and accepted whatever its norm (a discontinuity inside it cannot be
resolved further, or the tolerance is too tight for the coupling's order
there): the first such step warns, every one is counted in
``steps_at_min_step`` and ``steps_over_tolerance``.

The first step of a run stands unestimated (its norm is logged as NaN): with
one sample there is nothing to extrapolate from, every input is held over it,
and a signal that starts at zero has no magnitude yet to be relative to. The
masters therefore make it short, ``rtol * run.dt`` (within ``[min_step,
max_step]``), so that its error, ``h |y'|`` for a held input, is ``rtol`` times
what a step of ``run.dt`` would make; the controller then grows the step by
up to 5 per step (about ``log5(1/rtol)`` steps to reach ``run.dt``). From the
second step on the estimates have the extrapolation's order as soon as enough
samples exist. After an event the inputs' history is discontinuous: the
controller starts again from there (:meth:`ErrorControl.restart`), with a first
step as at the start of the run.

An estimate of zero bounds nothing: a system without coupled real inputs, a
constant input, or one the extrapolation reproduces exactly (a parabola under
``extrapolation: 2``) shows no error however long the step. Estimates at the
level of rounding (``ROUNDOFF`` times the input's magnitude) count as zero, and
a step with a zero norm grows by up to 5 but not beyond ``blind_step``
(``run.dt``, or ``max_step`` if shorter): without evidence the steps are those of
fixed stepping. The masters say so at the start of a run without coupled real
inputs and count such steps (``steps_without_estimate``).

``step_control: richardson`` estimates by step doubling instead, as the master
of Schierz, Arnold and Clauss (2012) does: each trial step of ``h`` is taken
whole, rolled back and taken again as two steps of ``h / 2``; the coupled
outputs at its end differ by about ``(2**p - 1)`` times the local error of the
half steps, for a coupling of global order ``p`` (``k + 1`` with extrapolation
``k``; held inputs 1, a fresh line 2), so the estimate is that difference over
``2**p - 1``, to the same tolerances. It needs no history (the first step is
estimated too), sees every error of the step, not only the inputs' (the
components' states respond to them), and costs three passes per trial. The
half steps stand (they are the more accurate, and the estimate is of them); the
controller is the one above with ``k = p + 1``, the power of the step the local
error scales with. Every component must be able to roll back.

What bounds a step besides the estimate (see the masters): components'
``max_step`` and time events; ``run.dt`` while components have event
indicators (an indicator that changes sign twice within one step is seen no
less often than under fixed steps), and a step in which one crosses zero is
taken again until it is at most the first step's length; a fixed-step
integrator's internal step stays what it is at ``run.dt``
(:meth:`~cosimrun.core.component.CoSimComponent.bound_internal_steps`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from cosimrun.core.steplog import StepLog
from cosimrun.masters.coupling_error import line_error
from cosimrun.masters.extrapolation import polynomial_at

if TYPE_CHECKING:
    from cosimrun.system.connection import Link

STEP_CONTROLS = ("fixed", "error", "richardson")
"""Values of the masters' ``step_control`` setting."""
SAFETY = 0.9
GROWTH = 5.0
"""Largest factor between two consecutive steps, up or down."""
ROUNDOFF = 1e3 * float(np.finfo(float).eps)
"""Estimates below this times the input's magnitude are rounding, not an error: they count as zero."""
def local_order(kind: str, order: int) -> int:
    """The power of the step its estimate scales with, for an input given as *kind* under extrapolation *order*."""
    if kind in ("taylor", "mean"):
        return order + 1
    return 2 if kind == "line" else 1


class ErrorControl:
    """Estimates each step's coupling error and proposes the next step (see the module).

    *links* are the connections into real inputs and *kinds* how each reaches
    its consumer over a step; *order* is the extrapolation order of lagging
    inputs. Call :meth:`start` at the first point, :meth:`estimate` after each
    step (once the outputs are exchanged), :meth:`accept` when it stands.
    """

    def __init__(self, links: list[Link], kinds: list[str], order: int, *, rtol: float, atol: float,
                 min_step: float, max_step: float, blind_step: float, richardson: bool = False) -> None:
        self.links = links
        self.order = order
        self.richardson = richardson
        """Whether steps are estimated by step doubling (:meth:`estimate_doubled`) instead of per input."""
        self.rtol, self.atol = rtol, atol
        self.min_step, self.max_step = min_step, max_step
        self.blind_step = blind_step
        """The longest step a zero error norm (no evidence) lets the step grow to."""
        self._kind = np.array(kinds)
        self._held = self._kind == "held"
        self._poly = (self._kind == "taylor") | (self._kind == "mean")
        self._line = self._kind == "line"
        self._previous = 1.0
        self._set_order(0)
        self._sources = [(lk.src, lk.conversion.scale, lk.conversion.offset) for lk in links]
        self._times: list[float] = []
        self._values: list[np.ndarray] = []
        self._magnitude = np.zeros(len(links))
        self._pending = np.zeros(len(links))
        self._ratios = np.zeros(len(links))
        self.log = StepLog()
        self.rejected = 0
        self.over_tolerance = 0

    def _set_order(self, order: int) -> None:
        """Control for extrapolation of degree *order* (fewer samples than ``order + 1`` lower it)."""
        self.p = min((local_order(str(kind), order) for kind in self._kind), default=1)
        """The order of the coupling's global error in the step (its inputs' local error's)."""
        self.k = self.p + 1 if self.richardson else self.p
        """The power of the step the estimate scales with (step doubling estimates the states' local error)."""
        self._alpha, self._beta = 0.7 / self.k, 0.4 / self.k

    def values(self) -> np.ndarray:
        """The inputs' values as their producers give them now (unit conversion applied)."""
        return np.array([scale * src.value + offset for src, scale, offset in self._sources], dtype=np.float64)

    def start(self, t0: float) -> None:
        """Take the first accepted point."""
        self._times, self._values = [], []
        y = self.values()
        self._magnitude = np.abs(y)
        self._push(t0, y)

    def restart(self, t: float) -> None:
        """Start again from the accepted point *t* (after an event): the samples before it are forgotten, the
        magnitudes the inputs have had are kept, and the next step is estimated as the first one was."""
        y = self.values()
        np.maximum(self._magnitude, np.abs(self._pending), out=self._magnitude)
        np.maximum(self._magnitude, np.abs(y), out=self._magnitude)
        self._times, self._values = [], []
        self._previous = 1.0
        self._push(t, y)

    @property
    def starting(self) -> bool:
        """Whether the coming step is the run's first: no earlier sample to estimate it from."""
        return len(self._times) == 1

    def estimate(self, t1: float) -> float:
        """The error norm of the step ending at *t1* (from the last accepted point), with the outputs at *t1*;
        NaN for the first step of the run (see :attr:`starting`)."""
        y1 = self.values()
        self._pending = y1
        if self.starting:
            return math.nan
        if not len(y1):
            return 0.0
        times, values = self._times, self._values
        t0, y0 = times[-1], values[-1]
        h = t1 - t0
        est = np.zeros(len(y1))
        if self._held.any():
            est = np.where(self._held, np.abs(y1 - y0), est)
        if self._poly.any():
            est = np.where(self._poly, np.abs(self._extrapolated(t1) - y1), est)
        if self._line.any() and len(times) >= 2:
            h_prev = t0 - times[-2]
            est = np.where(self._line, line_error(h, h_prev, (y0 - values[-2]) / h_prev, y0, y1), est)
        return self._norm(est, y1)

    def estimate_doubled(self, coarse: np.ndarray) -> float:
        """The error norm of two half steps (the outputs now) against one step over both (*coarse*, the outputs
        that step ended with): Richardson's ``|coarse - fine| / (2**p - 1)``, the local error of the two half
        steps for a coupling of global order :attr:`p`."""
        y1 = self.values()
        self._pending = y1
        if not len(y1):
            return 0.0
        return self._norm(np.abs(coarse - y1) / (2.0 ** self.p - 1.0), y1)

    def _norm(self, est: np.ndarray, y1: np.ndarray) -> float:
        """The largest ratio of the estimates *est* to their tolerances, the inputs being *y1* at the step's end;
        estimates at the level of rounding count as zero."""
        magnitude = np.maximum(self._magnitude, np.abs(y1))
        est[est <= ROUNDOFF * magnitude] = 0.0
        ratios = self._ratios = est / (self.atol + self.rtol * magnitude)
        norm = np.max(ratios, axis=0)  # one norm per member for (inputs, members) estimates
        return _plain(np.where(np.isfinite(norm), norm, np.inf))

    def worst(self) -> int:
        """The index (in :attr:`links`) of the input with the largest error ratio in the last :meth:`estimate`."""
        return int(np.argmax(np.nan_to_num(self._ratios, nan=np.inf)))

    def near_zero(self, i: int) -> bool:
        """Whether input *i* (in :attr:`links`) has been so close to 0 that ``atol`` dominates its tolerance."""
        return self.rtol * float(max(self._magnitude[i], abs(self._pending[i]))) < self.atol

    def _extrapolated(self, t1: float) -> np.ndarray:
        """The polynomial through the last ``order + 1`` accepted points, at *t1*."""
        n = min(self.order + 1, len(self._times))
        return polynomial_at(self._times[-n:], self._values[-n:], t1)

    def accept(self, t1: float) -> None:
        """The step ending at *t1* stands: its end values (after events there) become the newest point."""
        y = self.values()
        np.maximum(self._magnitude, np.abs(self._pending), out=self._magnitude)
        np.maximum(self._magnitude, np.abs(y), out=self._magnitude)
        self._push(t1, y)

    def _push(self, t: float, y: np.ndarray) -> None:
        self._times.append(t)
        self._values.append(y)
        keep = max(self.order + 1, 3)
        del self._times[:-keep], self._values[:-keep]
        self._set_order(min(self.order, len(self._times) - 1))

    def save_state(self) -> dict[str, Any]:
        """The controller's memory (accepted points, magnitudes, last norm), its limits and its log, as plain
        values."""
        log = self.log.columns()
        return {
            "previous": self._previous, "times": list(self._times), "values": [v.copy() for v in self._values],
            "magnitude": self._magnitude.copy(), "pending": self._pending.copy(), "ratios": self._ratios.copy(),
            "limits": [self.min_step, self.max_step, self.blind_step], "counts": [self.rejected, self.over_tolerance],
            "log": {"time": log["time"], "step": log["step"], "error": log["error"],
                    "accepted": np.asarray(log["accepted"], dtype=bool)},
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`save_state`'s *state*."""
        self._previous = state["previous"]
        self._times = list(state["times"])
        self._values = [np.asarray(v, dtype=np.float64) for v in state["values"]]
        self._magnitude, self._pending, self._ratios = state["magnitude"], state["pending"], state["ratios"]
        self.min_step, self.max_step, self.blind_step = state["limits"]
        self.rejected, self.over_tolerance = state["counts"]
        self._set_order(min(self.order, len(self._times) - 1))
        log = state["log"]
        self.log = StepLog()
        for t, h, norm, accepted in zip(log["time"].tolist(), log["step"].tolist(), log["error"].tolist(),
                                        log["accepted"].tolist(), strict=True):
            self.log.append(t, h, norm, accepted)

    def next_step(self, h: Any, norm: Any, accepted: bool) -> Any:
        """The step to try after a step of *h* with error *norm* (PI control; no growth right after a rejection;
        a zero norm grows the step up to :attr:`blind_step` only). *h* and *norm* may be arrays over members
        whose controllers (:attr:`_previous`, the orders) are arrays too; the arithmetic is numpy's for one
        controller and for many alike, so that each member steps as its own run."""
        with np.errstate(all="ignore"):
            if accepted:
                blind = np.minimum(GROWTH, np.maximum(1.0, self.blind_step / h))
                pi = SAFETY * np.power(norm, -self._alpha) * np.power(self._previous, self._beta)
                factor = np.minimum(GROWTH, np.maximum(1.0 / GROWTH, np.where(norm <= 0.0, blind, pi)))
                estimated = ~np.isnan(norm)
                factor = np.where(estimated, factor, 1.0)
                self._previous = _plain(np.where(estimated, np.maximum(norm, 1e-4), self._previous))
            else:
                shrunk = np.maximum(1.0 / GROWTH, np.minimum(1.0, SAFETY * np.power(norm, -1.0 / self.k)))
                factor = np.where(np.isfinite(norm), shrunk, 1.0 / GROWTH)
            return _plain(np.minimum(self.max_step, np.maximum(self.min_step, h * factor)))


def _plain(value: np.ndarray) -> Any:
    """*value* as a float when it is one number (a 0-d array), else the array."""
    return value if value.ndim else float(value)
