"""IJCSA master: interface-Jacobian-based co-simulation (Sicklinger et al. 2014).

Algebraic loops at a communication point are solved by Newton's method on the
loop's tear inputs with a finite-difference interface Jacobian. With
``iterate_steps`` the whole macro step becomes implicit: the real inputs at the
step's end, ``x``, are the unknowns; every component steps from the
snapshot at ``t`` with each input held at the mean ``(u(t) + x) / 2`` (the
mean of the linear interpolant over the step), the residual is the outputs'
mismatch with ``x`` at ``t + dt``, and Newton updates ``x`` with rollback
between trials until the residual is below ``step_tolerance`` (else, under
``on_nonconvergence: warn``, the step goes on from the trial with the smallest
residual, counted in ``stats.unconverged_loop_solves``). A component that ends
a trial early (:class:`~cosimrun.errors.StepEndedEarly`) makes the instant it reached the step's end,
and the iteration starts again over the shorter step. Under ``step_control: error`` each implicit step
is a trial: its error is each input's deviation from the line it was iterated on (the ``line``
estimate of :mod:`.step_control`, of local order 2), and a step over the tolerance is rolled back
and iterated again, shorter.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from cosimrun.errors import ConfigError, StepEndedEarly
from cosimrun.masters.explicit import ExplicitRun
from cosimrun.masters.gauss_seidel import GaussSeidel
from cosimrun.masters.loops import give_up
from cosimrun.masters.plan import Checkpoint
from cosimrun.masters.stepsize import Clock

if TYPE_CHECKING:
    from cosimrun.system.connection import Link
    from cosimrun.system.system import System


@dataclass(frozen=True)
class IJCSA(GaussSeidel):
    """Newton on interface variables, for algebraic loops and strongly coupled steps."""

    loop_solver: str = "newton"
    iterate_steps: bool = False
    """Iterate each macro step implicitly (needs rollback in every component)."""
    step_tolerance: float = 1e-9
    """Interface residual tolerance of step iteration: ``max|r| <= tol * (1 + max|x|)``."""
    max_step_iterations: int = 20

    name: ClassVar[str] = "ijcsa"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check("step_tolerance", self.step_tolerance > 0, "must be positive")
        self._check("max_step_iterations", int(self.max_step_iterations) >= 1, "must be >= 1")
        if self.iterate_steps and self.sweeps > 1:
            raise ConfigError("sweeps", "must be 1 with iterate_steps=true: the implicit step iterates every input "
                                        "already (use sweeps=1 or iterate_steps=false)")

    def start(self, system: System) -> IJCSARun:
        return IJCSARun(self, system)


class IJCSARun(ExplicitRun):
    """A run of :class:`IJCSA`: Gauss-Seidel steps, or with ``iterate_steps`` implicit ones."""

    master: IJCSA

    def begin(self, t0: float) -> None:
        super().begin(t0)
        if not self.master.iterate_steps:
            return
        stuck = [c.name for c in self.order if not c.supports_rollback]
        if stuck:
            raise ConfigError("iterate_steps", (
                f"master ijcsa with iterate_steps needs rollback in every component; "
                f"{', '.join(stuck)} cannot roll back (use iterate_steps=false)"))
        self._iface = self.schedule.real_links
        self._late_evaluators = [self.schedule.evaluator(c) for c in self.schedule.late]
        self.schedule.hold_mode_switches(True)
        self._start_up = False  # every step is iterated

    def finish(self) -> None:
        super().finish()
        if self.master.iterate_steps:
            self.schedule.hold_mode_switches(False)

    def coupling_kinds(self, links: list[Link]) -> list[str]:
        """Under ``iterate_steps`` every input is the line from its value at the step start to the converged one at
        its end (held at its mean): ``line``."""
        if self.master.iterate_steps:
            return ["line"] * len(links)
        return super().coupling_kinds(links)

    def advance(self, clock: Clock, a: int, b: int) -> int:
        if not self.master.iterate_steps or self.control is not None:
            return super().advance(clock, a, b)
        t = clock.time(a)
        b, t1, ended = self._implicit_step(t, b, self.schedule.checkpoint(self.order))
        self._end_step(t1, t1 - t, ended)
        if self.events is None:
            self.schedule.switch_modes(t1)
        return b

    def _controlled_step(self, t: float, t1: float, b: int) -> tuple[int, float, str | None, Checkpoint | None]:
        """Under ``iterate_steps`` a trial of error control is an implicit step (its estimate: the ``line`` kind's,
        the inputs' deviation from the line they were iterated on)."""
        if not self.master.iterate_steps:
            return super()._controlled_step(t, t1, b)
        saved = self.schedule.checkpoint(self.order)
        b, t1, ended = self._implicit_step(t, b, saved)
        self.schedule.settle(t1)
        return b, t1, ended, saved

    def _trial(self, t: float, t1: float, b: int, saved: Checkpoint | None) -> tuple[int, float, str | None]:
        """Under ``iterate_steps`` a step of ``step_control: richardson`` (whole or half) is an implicit step."""
        if not self.master.iterate_steps:
            return super()._trial(t, t1, b, saved)
        assert saved is not None
        b, t1, ended = self._implicit_step(t, b, saved)
        self.schedule.settle(t1)
        return b, t1, ended

    def _trial_checkpoint(self) -> Checkpoint | None:
        return self.schedule.checkpoint(self.order) if self.master.iterate_steps else super()._trial_checkpoint()

    def _implicit_step(self, t: float, b: int, saved: Checkpoint) -> tuple[int, float, str | None]:
        """Iterate the step from *t* (at *saved*) to tick *b*; a component that ends a trial early makes the instant
        it reached the step's end. The tick and instant reached, and the component that ended it (or ``None``)."""
        clock = self.clock
        u_now = np.array([lk.dst.value for lk in self._iface])
        ended = None
        while True:
            t1 = clock.time(b)
            try:
                self._iterate(saved, u_now, t, t1)
                return b, t1, ended
            except StepEndedEarly as exc:
                comp = self.order[self.cutter.ender(self.order, exc)]
                b = self.cutter.check(comp, exc, t1, [], {})
                ended = comp.name

    def _iterate(self, saved: Checkpoint, u_now: np.ndarray, t: float, t1: float) -> None:
        """Newton on the interface values at *t1*, every trial stepping all components from *saved* (at *t*)."""
        master, schedule, stats = self.master, self.schedule, self.stats

        def residual(x: np.ndarray) -> np.ndarray:
            schedule.roll_back(saved, t)
            for lk, mean in zip(self._iface, 0.5 * (u_now + x), strict=True):
                lk.dst.value = float(mean)
            schedule.push_all(t)
            for comp in self.order:
                comp.do_step(t, t1 - t)
            for lk, value in zip(self._iface, x, strict=True):
                lk.dst.value = float(value)
            for evaluate in self._late_evaluators:
                evaluate(t1)
            stats.trial_steps += 1
            y = np.array([lk.conversion.scale * lk.src.value + lk.conversion.offset for lk in self._iface])
            return y - x

        x = u_now.copy()
        best = (np.inf, x)
        for k in range(master.max_step_iterations):
            r = residual(x)
            stats.step_iterations += 1
            scale = 1.0 + float(np.max(np.abs(x))) if x.size else 1.0
            size = float(np.max(np.abs(r))) if x.size else 0.0
            if not x.size or size <= master.step_tolerance * scale:
                break
            if size < best[0]:
                best = (size, x)
            if k == master.max_step_iterations - 1:
                give_up(f"implicit step t={t:.9g} -> {t1:.9g} did not converge in {master.max_step_iterations} "
                        f"iterations: residual {size:.3g} on {', '.join(lk.connection.dst for lk in self._iface)}",
                        master.on_nonconvergence, stats, None if best[1] is x else partial(residual, best[1]))
                break
            jac = np.empty((x.size, x.size))
            for j in range(x.size):
                xp = x.copy()
                step = master.fd_step * (1.0 + abs(x[j]))
                xp[j] += step
                jac[:, j] = (residual(xp) - r) / step
            x = x - np.linalg.solve(jac, r)
            stats.newton_iterations += 1
