"""Solving algebraic loops at a communication point.

The loop's tear inputs (or, for Jacobi sweeps, all its inputs) are the
unknowns ``x``; one sweep evaluates the loop's components and yields ``G(x)``.
Fixed-point iteration (optionally with Aitken relaxation) repeats
``x <- x + w (G(x) - x)``; Newton (IJCSA, Sicklinger et al. 2014) solves
``G(x) - x = 0`` with a finite-difference interface Jacobian.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cosimrun.console import notice
from cosimrun.errors import InitializationError, LoopConvergenceError

_EPS = float(np.finfo(float).eps)

if TYPE_CHECKING:
    from cosimrun.masters.stats import MasterStats
    from cosimrun.system.connection import Connection, Link
    from cosimrun.system.graph import AlgebraicLoop


@dataclass(frozen=True)
class LoopSettings:
    """The master settings loop solving uses (see :class:`~cosimrun.masters.base.Master`)."""

    method: str
    """``jacobi``, ``gauss_seidel`` or ``newton`` (the ``loop_solver`` setting)."""
    tolerance: float
    max_iterations: int
    aitken: bool
    relaxation: float
    fd_step: float
    on_nonconvergence: str


class LoopSolver:
    """Solves one algebraic loop with the master's loop *settings*, counting solves and iterations in *stats*.

    *link_of* maps the system's connections to their links, *evaluators* re-evaluate each loop component's
    outputs at a time.
    """

    def __init__(self, loop: AlgebraicLoop, link_of: dict[Connection, Link],
                 evaluators: dict[str, Callable[[float], None]], settings: LoopSettings, stats: MasterStats) -> None:
        self.loop = loop
        self.settings = settings
        self.stats = stats
        self.tear_set = set(loop.tears)
        self.tears = [link_of[c] for c in loop.tears]
        self.links = [link_of[c] for c in loop.connections]
        inner = [lk for lk in self.links if lk.connection not in self.tear_set]
        self.sweep_plan = [
            (evaluators[n], [lk for lk in inner if lk.connection.src_component == n]) for n in loop.components
        ]
        self.evaluators = list(evaluators.values())
        self.method = settings.method
        self.failure: tuple[str, float, str] | None = None
        """``(input, residual, reason)`` of the last solve that did not converge."""

    # ------------------------------------------------------------------ sweeps
    def _gauss_seidel(self, x: np.ndarray, t: float) -> np.ndarray:
        for lk, value in zip(self.tears, x, strict=True):
            lk.dst.value = float(value)
        for evaluate, links in self.sweep_plan:
            evaluate(t)
            for lk in links:
                lk.transfer()
        return np.array([lk.conversion.scale * lk.src.value + lk.conversion.offset for lk in self.tears])

    def _jacobi(self, x: np.ndarray, t: float) -> np.ndarray:
        for lk, value in zip(self.links, x, strict=True):
            lk.dst.value = float(value)
        for evaluate in self.evaluators:
            evaluate(t)
        return np.array([lk.conversion.scale * lk.src.value + lk.conversion.offset for lk in self.links])

    # ------------------------------------------------------------------ solving
    def solve(self, t: float) -> None:
        """Solve the loop at time *t*, leaving ports consistent with the solution."""
        self.stats.loop_solves += 1
        if self.method == "newton":
            self._newton(t)
        elif self.method == "jacobi":
            self._fixed_point(t, self._jacobi, self.links)
        else:
            self._fixed_point(t, self._gauss_seidel, self.tears)

    def solve_initial(self, t: float, counted: bool = True) -> None:
        """Find the loop's consistent point at the initial time *t*, the inputs' current values the start guesses.

        Fixed-point sweeps first (the master's, Gauss-Seidel under a Newton master), then Newton from the start
        guesses where they do not converge; :class:`InitializationError` naming the loop's inputs and the
        residual when neither does (``on_nonconvergence`` does not apply: there is no earlier point to go on from).
        Not *counted*: the solve and its iterations stay out of the run's statistics.
        """
        strict = copy.copy(self)
        strict.settings = dataclasses.replace(self.settings, on_nonconvergence="raise")
        strict.method = "gauss_seidel" if self.method == "newton" else self.method
        if counted:
            self.stats.loop_solves += 1
        else:
            strict.stats = type(self.stats)()
        guesses = [lk.dst.value for lk in self.links]
        reasons = []
        for method in dict.fromkeys((strict.method, "newton")):
            strict.method = method
            for lk, value in zip(self.links, guesses, strict=True):
                lk.dst.value = value
            try:
                if method == "newton":
                    strict._newton(t)
                elif method == "jacobi":
                    strict._fixed_point(t, strict._jacobi, strict.links)
                else:
                    strict._fixed_point(t, strict._gauss_seidel, strict.tears)
                return
            except LoopConvergenceError:
                assert strict.failure is not None
                reasons.append(f"{'Newton' if method == 'newton' else 'fixed point'} {strict.failure[2]}")
        port, residual, _ = strict.failure
        tears = [str(lk.connection.dst) for lk in self.tears]
        inputs = tears + [str(lk.connection.dst) for lk in self.links if lk not in self.tears]
        raise InitializationError(
            f"no consistent initial point of algebraic loop {' -> '.join(self.loop.components)} (inputs "
            f"{', '.join(inputs)}) at t={t:.9g}: residual {residual:.3g} on input {port}; {', '.join(reasons)} "
            f"(tolerance {self.settings.tolerance:g}); the start guesses are the initial values of "
            f"{', '.join(tears)}", loop=inputs, port=port, residual=residual, time=t)

    def _converged(self, r: np.ndarray, x: np.ndarray) -> bool:
        return float(np.max(np.abs(r))) <= self.settings.tolerance * (1.0 + float(np.max(np.abs(x))))

    def _fixed_point(self, t: float, sweep, unknowns) -> None:
        m, stats = self.settings, self.stats
        x = np.array([lk.dst.value for lk in unknowns], dtype=float)
        omega = m.relaxation
        r_prev = None
        first = None
        best = (np.inf, x)

        def restore() -> None:
            sweep(best[1], t)

        for k in range(1, m.max_iterations + 1):
            g = sweep(x, t)
            r = g - x
            stats.loop_iterations += 1
            size = float(np.max(np.abs(r))) if r.size else 0.0
            first = size if first is None else first
            if size < best[0]:
                best = (size, x)
            if not np.isfinite(size) or (k > 3 and size > 1e6 * (first + m.tolerance)):
                return self._fail(t, r, k, "diverged", restore)
            if self._converged(r, g):
                for lk, value in zip(unknowns, g, strict=True):
                    lk.dst.value = float(value)
                return None
            if m.aitken and r_prev is not None:
                dr = r - r_prev
                denom = float(dr @ dr)
                if denom > 0.0:
                    omega = -omega * float(r_prev @ dr) / denom
            r_prev = r
            x = x + omega * r
        return self._fail(t, r, m.max_iterations, "did not converge", restore)

    def _newton(self, t: float) -> None:
        m, stats = self.settings, self.stats
        x = np.array([lk.dst.value for lk in self.tears], dtype=float)
        n = len(x)
        best = (np.inf, x)

        def restore() -> None:
            self._gauss_seidel(best[1], t)

        for k in range(m.max_iterations + 1):
            f = self._gauss_seidel(x, t) - x
            stats.loop_iterations += 1
            if not np.all(np.isfinite(f)):
                return self._fail(t, f, k, "diverged", restore)
            size = float(np.max(np.abs(f)))
            if size < best[0]:
                best = (size, x)
            if self._converged(f, x):
                for lk, value in zip(self.tears, x + f, strict=True):
                    lk.dst.value = float(value)
                return None
            if k == m.max_iterations:
                break
            jac = np.empty((n, n))
            noise = 0.0
            for j in range(n):
                xp = x.copy()
                h = m.fd_step * (1.0 + abs(x[j]))
                xp[j] += h
                gp = self._gauss_seidel(xp, t)
                jac[:, j] = (gp - xp - f) / h
                # rounding error of this difference quotient
                noise = max(noise, _EPS * (1.0 + float(np.max(np.abs(gp))) + float(np.max(np.abs(xp)))) / h)
            # A Jacobian indistinguishable from singular (loop gain 1) would send x off to a
            # huge value that the relative tolerance may even accept: fail clearly instead.
            singular = "has a singular interface Jacobian (loop gain 1: no unique solution)"
            if not np.all(np.isfinite(jac)) or np.linalg.svd(jac, compute_uv=False)[-1] <= 100.0 * n * noise:
                return self._fail(t, f, k, singular, restore)
            try:
                x = x - np.linalg.solve(jac, f)
            except np.linalg.LinAlgError:
                return self._fail(t, f, k, singular, restore)
            stats.newton_iterations += 1
        return self._fail(t, f, m.max_iterations, "did not converge", restore)

    def _fail(
        self, t: float, residual: np.ndarray, iterations: int, what: str, restore: Callable[[], None] | None = None
    ) -> None:
        """Raise, or (``on_nonconvergence="warn"``) go on from the iterate with the smallest residual,
        warning at the first such solve of the run and counting every one."""
        # Jacobi sweeps iterate on every loop input, the others on the tear inputs.
        unknowns = self.links if self.method == "jacobi" else self.tears
        size = np.nan_to_num(np.abs(residual), nan=np.inf)
        i = int(np.argmax(size))
        self.failure = (str(unknowns[i].connection.dst), float(abs(residual[i])), what)
        message = (
            f"algebraic loop {' -> '.join(self.loop.components)} {what} at t={t:.9g} "
            f"after {iterations} {self.method} iterations: residual {abs(residual[i]):.3g} "
            f"on input {unknowns[i].connection.dst} "
            f"(tolerance {self.settings.tolerance:g})"
        )
        give_up(message, self.settings.on_nonconvergence, self.stats, restore)


def give_up(message: str, on_nonconvergence: str, stats: MasterStats,
            restore: Callable[[], None] | None = None) -> None:
    """An iteration (a loop solve, an iterated macro step) did not converge, for the reason *message*: raise a
    :class:`LoopConvergenceError`, or under ``on_nonconvergence="warn"`` go on (*restore* puts the iterate with the
    smallest residual back), counting it in ``stats.unconverged_loop_solves`` and warning at the run's first."""
    if on_nonconvergence != "warn":
        raise LoopConvergenceError(message)
    if restore is not None:
        restore()
    stats.unconverged_loop_solves += 1
    if stats.unconverged_loop_solves == 1:
        notice(message + "; the run goes on from the best iterate (further such solves are only counted)",
               stacklevel=3)
