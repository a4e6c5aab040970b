"""scipy's explicit Runge-Kutta pairs (``integrator: rk45``, ``rk23``, ``dop853``) over all members, a step size each.

The scalar integrator (:class:`~cosimrun.core.ode.scipy_adaptive.ScipyAdaptive`) runs a
``scipy.integrate.RK45`` (``RK23``, ``DOP853``) over each macro step. :class:`VectorAdaptive` repeats that
solver's arithmetic for every member's column of ``(n_states, M)`` states at once: the same first step
(``select_initial_step``, or the step size the member carried from its last macro step), the same stages and
error norm (the tableaux are read from scipy's classes), the same accept/reject decision and factor, the same
step clipped to the macro step's end. Each member keeps its own step size, time and count of steps; a member
whose macro step is done waits (its columns masked) while the others take more steps.

The per-member sums that scipy takes with ``np.dot`` (BLAS) are taken here stage by stage, in stage order, so a
member may differ from its scalar run in the last bits of a step (and what a later step makes of that).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from cosimrun.core.ode.scipy_adaptive import ADAPTIVE_METHODS
from cosimrun.ensemble.rk4 import Derivatives, InputAt, check_derivatives

MaskedTrack = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]
"""Called after each round of steps with the members' times, states and inputs and which of them took a step there
(state-event tracking, as the scalar integrator's trackers see each of its steps)."""

EXPLICIT = ("rk45", "rk23", "dop853")
"""The adaptive ``integrator`` values an ensemble integrates (scipy's explicit Runge-Kutta pairs)."""


class VectorAdaptive:
    """An explicit scipy Runge-Kutta pair over ``(n, M)`` states, each member with its own step size.

    ``memory`` holds each member's step size carried to its next macro step (NaN: none, the first step is
    selected as scipy selects it), as the scalar integrator's ``memory``; ``accepted`` and ``rejected`` count
    each member's steps. A member whose step size falls below scipy's smallest step fails
    (:meth:`failures`), as its scalar run does.
    """

    def __init__(self, name: str, method: str, state_names: tuple[str, ...], rtol: float, atol: Any,
                 max_substep: float | None, members: int) -> None:
        from scipy import integrate

        solver = getattr(integrate, ADAPTIVE_METHODS[method])
        self.name, self.method, self.state_names = name, method, state_names
        self.A, self.B, self.C = solver.A, solver.B, solver.C
        self.stages: int = solver.n_stages
        self.dop853 = method == "dop853"
        self.E = (solver.E5, solver.E3) if self.dop853 else (solver.E,)
        self.order: int = solver.error_estimator_order
        self.exponent = -1 / (self.order + 1)
        self.too_small: str = solver.TOO_SMALL_STEP
        self.safety, self.min_factor, self.max_factor = _factors()
        self.rtol = max(rtol, 100 * np.finfo(float).eps)  # scipy's validate_tol raises a smaller rtol to this
        atol = np.asarray(atol, dtype=float)
        self.atol = atol.reshape(-1, 1) if atol.ndim else atol
        self.max_step = math.inf if max_substep is None else max_substep
        self.memory = np.full(members, np.nan)
        self.accepted = np.zeros(members, dtype=np.int64)
        self.rejected = np.zeros(members, dtype=np.int64)
        self.failed = np.zeros(members, dtype=bool)
        """The members whose last macro step failed (their state left at its start)."""
        self.failed_at = np.zeros(members)
        self.failed_state = np.zeros(members, dtype=np.int64)
        """Per failed member, its time and the state whose error estimate was the largest (non-finite first)."""

    def failures(self) -> list[tuple[int, str, str]]:
        """``(member, state, cause)`` of each member whose last macro step failed, the cause as scipy gives it."""
        return [(m, self.state_names[self.failed_state[m]],
                 f"integrator {self.method!r} failed at t={float(self.failed_at[m])!r}: {self.too_small}")
                for m in np.flatnonzero(self.failed).tolist()]

    def integrate(self, f: Derivatives, t: float, dt: float, x: np.ndarray, u: np.ndarray,
                  u_at: InputAt | None, track: MaskedTrack | None = None) -> None:
        """Advance *x* in place from *t* to ``t + dt``, each member by its own accepted steps; *u* held, or the
        inputs *u_at* gives at each stage time (an array of the members' times); *track* sees the steps."""
        t_end = t + dt
        span = t_end - t
        self.failed[:] = False
        if span <= 0.0:
            return

        def inputs(s: Any) -> np.ndarray:
            return u if u_at is None else u_at(s)

        def fun(s: Any, y: np.ndarray) -> np.ndarray:
            return f(s, y, inputs(s))

        with np.errstate(all="ignore"):
            self._run(fun, t, t_end, span, x, None if track is None else lambda s, y, took: track(s, y, inputs(s),
                                                                                                   took))

    def _run(self, fun: Callable[[Any, np.ndarray], np.ndarray], t: float, t_end: float, span: float,
             x: np.ndarray, track: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None) -> None:
        """The solver's steps of every member over ``[t, t_end]`` (``OdeSolver.step`` until each finishes)."""
        members = x.shape[1]
        y = x.copy()
        f0 = check_derivatives(self.name, self.state_names, fun(t, y), y.shape, t)
        memory = self.memory
        carried = memory > 0.0
        h_attr = np.minimum(memory, span)
        if not carried.all():
            h_attr = np.where(carried, h_attr, self._initial_step(fun, t, y, f0, span))
        tm = np.full(members, t)
        running = np.ones(members, dtype=bool)
        starting = running.copy()  # members beginning a step (_step_impl): its size from the solver's h_abs, clipped
        retried = np.zeros(members, dtype=bool)
        h_before = np.empty(members)
        h_abs = np.empty(members)
        min_step = np.empty(members)
        K = np.empty((self.stages + 1, *y.shape))
        K[0] = f0
        q = np.zeros_like(y)
        failed = self.failed
        while running.any():
            if starting.any():
                h_before = np.where(starting, h_attr, h_before)
                min_step = np.where(starting, 10 * np.abs(np.nextafter(tm, np.inf) - tm), min_step)
                clipped = np.where(h_attr > self.max_step, self.max_step, np.where(h_attr < min_step, min_step, h_attr))
                h_abs = np.where(starting, clipped, h_abs)
                retried &= ~starting
            small = running & (h_abs < min_step)
            if small.any():
                failed |= small
                running &= ~small
                self.failed_at[small] = tm[small]
                self.failed_state[small] = np.argmax(np.where(np.isfinite(q), np.abs(q), np.inf)[:, small], axis=0)
                if not running.any():
                    break
            t_new = np.where(running, tm + h_abs, tm)
            t_new = np.where(t_new > t_end, t_end, t_new)
            h = t_new - tm
            h_abs = np.abs(h)
            y_new, f_new = self._stages(fun, tm, y, h, K)
            scale = self.atol + np.maximum(np.abs(y), np.abs(y_new)) * self.rtol
            error, q = self._error_norm(K, h, scale)
            accept = running & (error < 1)
            reject = running & ~accept
            grow = self.safety * error ** self.exponent
            factor = np.where(error == 0, self.max_factor, np.where(grow < self.max_factor, grow, self.max_factor))
            factor = np.where(retried & (factor >= 1), 1.0, factor)
            shrink = np.where(grow > self.min_factor, grow, self.min_factor)
            h_abs = h_abs * np.where(accept, factor, shrink)
            retried |= reject
            self.rejected += reject
            if accept.any():
                self.accepted += accept
                tm = np.where(accept, t_new, tm)
                np.copyto(y, y_new, where=accept)
                np.copyto(K[0], f_new, where=accept)
                h_attr = np.where(accept, h_abs, h_attr)
                running &= ~(accept & (tm >= t_end))
                if track is not None:
                    track(tm, y, accept)
            starting = accept & running
        hb = np.where(h_before > 0, h_before, -np.inf)
        ha = np.where(h_attr > 0, h_attr, -np.inf)
        largest = np.where(ha > hb, ha, hb)
        self.memory = np.where(failed, memory, np.where(largest > 0, largest, np.nan))
        np.copyto(x, y, where=~failed)

    def _stages(self, fun: Callable[[Any, np.ndarray], np.ndarray], t: np.ndarray, y: np.ndarray, h: np.ndarray,
                K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``scipy.integrate._ivp.rk.rk_step`` per member: the stages into *K* (``K[0]`` is the derivative at the
        start), the new state and its derivative (``K[-1]``)."""
        A, C = self.A, self.C
        for s in range(1, self.stages):
            dy = _combine(K, A[s], s) * h
            K[s] = fun(t + C[s] * h, y + dy)
        y_new = y + h * _combine(K, self.B, self.stages)
        f_new = fun(t + h, y_new)
        K[-1] = f_new
        return y_new, f_new

    def _error_norm(self, K: np.ndarray, h: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each member's error norm as the solver's ``_estimate_error_norm``, and the scaled error per state."""
        n = K.shape[1]
        if not self.dop853:
            q = _combine(K, self.E[0], self.stages + 1) * h / scale
            return _norm(q) / n ** 0.5, q
        err5 = _combine(K, self.E[0], self.stages + 1) / scale
        err3 = _combine(K, self.E[1], self.stages + 1) / scale
        n5, n3 = _norm(err5) ** 2, _norm(err3) ** 2
        denom = n5 + 0.01 * n3
        error = np.abs(h) * n5 / np.sqrt(denom * n)
        return np.where((n5 == 0) & (n3 == 0), 0.0, error), err5

    def _initial_step(self, fun: Callable[[Any, np.ndarray], np.ndarray], t: float, y: np.ndarray, f0: np.ndarray,
                      span: float) -> np.ndarray:
        """``scipy.integrate._ivp.common.select_initial_step`` per member (direction forward)."""
        n = y.shape[0]
        scale = self.atol + np.abs(y) * self.rtol
        d0, d1 = _norm(y / scale) / n ** 0.5, _norm(f0 / scale) / n ** 0.5
        h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
        h0 = np.where(span < h0, span, h0)
        f1 = fun(t + h0, y + h0 * f0)
        d2 = _norm((f1 - f0) / scale) / n ** 0.5 / h0
        flat = (d1 <= 1e-15) & (d2 <= 1e-15)
        h1 = np.where(flat, np.maximum(1e-6, h0 * 1e-3), (0.01 / np.where(d2 > d1, d2, d1)) ** (1 / (self.order + 1)))
        return np.minimum(np.minimum(np.minimum(100 * h0, h1), span), self.max_step)


def _combine(K: np.ndarray, coefficients: np.ndarray, count: int) -> np.ndarray:
    """``np.dot(K[:count].T, coefficients[:count])`` for every member: the stages weighted, summed in order."""
    out = K[0] * coefficients[0]
    for j in range(1, count):
        out += K[j] * coefficients[j]
    return out


def _norm(z: np.ndarray) -> np.ndarray:
    """Each column's Euclidean norm (``np.linalg.norm`` of one member's vector)."""
    return np.sqrt((z * z).sum(axis=0))


def _factors() -> tuple[float, float, float]:
    """scipy's step-size factors: ``SAFETY``, ``MIN_FACTOR``, ``MAX_FACTOR`` of its Runge-Kutta module."""
    from scipy.integrate._ivp import rk

    return rk.SAFETY, rk.MIN_FACTOR, rk.MAX_FACTOR
