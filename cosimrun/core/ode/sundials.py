"""SUNDIALS solvers (scikit-sundae) that keep running across macro steps: what ``cvode`` and IDA share.

scikit-sundae is imported on first use, like scipy by the adaptive solvers, so
that commands which never integrate with it do not pay for it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import sys
from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from cosimrun.core.events import crossed
from cosimrun.core.ode.base import SIGN_TOLERANCE, Bracket, Integrator, Tracker
from cosimrun.core.ode.scipy_adaptive import HINT_SAFETY
from cosimrun.errors import SimulationError

ROOT_RETURN = 2
"""Status of a SUNDIALS step that stopped at a root of an event function."""

MAX_NUM_STEPS = 100_000
"""Internal steps the solver may take within one macro step before it gives up."""

TIME_RTOL = 1e-12
"""Relative tolerance under which a step starts where the last one ended (``t + dt`` rounds)."""


class SundialsIntegrator(Integrator):
    """A SUNDIALS solver kept from one macro step to the next; restarted only where the problem jumps.

    The solver object is built at the first step after :meth:`start` or
    :meth:`configure` (the only allocations besides the solver's own). A step
    continues the solver's history when it starts where the last one ended,
    from the state it left and with the same inputs; otherwise (an event
    update, ``set_state``, a rollback, a state overridden by a pre/post-integrate
    hook, inputs that changed: they are held over a macro step, so a change is a
    discontinuity that a multistep method must not step across) the solver is
    re-initialized from the component's state. Every step stops exactly at its
    end (``tstop``). State events are found by the solver's root finding and
    reported through :meth:`track`, bracketed around the root (:meth:`root_bracket`).
    """

    solver_name: ClassVar[str]
    """``"CVODE"`` or ``"IDA"``, for messages."""
    events_see_yp: ClassVar[bool] = False
    """Whether the solver passes ``y'`` to the event function (IDA does, CVODE does not)."""

    def configure(self, parameters: Mapping[str, Any]) -> None:
        super().configure(parameters)
        self.solver: Any = None
        self.t_last = math.nan  # a new solver starts from the component's state

    def start(self, n_states: int) -> None:
        super().start(n_states)
        self.solver = None
        self.t_last = math.nan
        self.y_last = np.empty(n_states)
        self.u_last = np.empty(0)
        self.u = np.empty(0)
        """The inputs of the current step, read by the callbacks."""
        self.events = list(self.component.state_events.values())
        self.eventsfn: Callable[..., None] | None = None
        self.failure: BaseException | None = None

    def forget(self) -> None:
        super().forget()
        self.t_last = math.nan

    # ------------------------------------------------------------------ the solver
    def options(self) -> dict[str, Any]:
        """The options every scikit-sundae solver takes, from the integrator parameters."""
        atol = self.atol.tolist() if isinstance(self.atol, np.ndarray) else self.atol
        options: dict[str, Any] = {"rtol": self.rtol, "atol": atol, "max_num_steps": MAX_NUM_STEPS,
                                   "max_step": 0.0 if math.isinf(self.max_substep) else self.max_substep}
        self.eventsfn = self.events_function() if self.events else None
        if self.eventsfn is not None:
            options.update(eventsfn=self.eventsfn, num_events=len(self.events))
        return options

    @abstractmethod
    def build(self) -> Any:
        """A new solver object for the component (called once per :meth:`start` or :meth:`configure`)."""

    @abstractmethod
    def restart(self, t: float, x: np.ndarray) -> None:
        """Initialize the solver at *t* from *x* (which it may correct in place)."""

    @abstractmethod
    def rate(self, t: float, y: np.ndarray, result: Any) -> np.ndarray:
        """``dy/dt`` at *t* of the step *result* (to bracket a root)."""

    def finish_step(self, result: Any) -> None:
        """Hook: the step *result* has been copied into the state."""

    def guard(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """*func* as a solver callback: an exception it raises is remembered, so it reaches the caller unchanged.

        scikit-sundae >= 1.1 reads the callback's signature with ``inspect.signature``,
        which follows ``__wrapped__`` to *func*'s.
        """

        @functools.wraps(func)
        def guarded(*args: Any) -> Any:
            try:
                return func(*args)
            except BaseException as exc:
                self.failure = exc
                raise

        return guarded

    def events_function(self) -> Callable[..., None]:
        """The solver's event function: the component's state-event indicators at ``(t, y)`` with the inputs held."""
        functions = [ev.function for ev in self.events]

        def values(t: float, y: np.ndarray, out: np.ndarray) -> None:
            u = self.inputs(t)
            for i, func in enumerate(functions):
                out[i] = func(t, y, u)

        if self.events_see_yp:
            def eventsfn(t: float, y: np.ndarray, yp: np.ndarray, out: np.ndarray) -> None:
                values(t, y, out)
        else:
            def eventsfn(t: float, y: np.ndarray, out: np.ndarray) -> None:  # type: ignore[misc]
                values(t, y, out)

        guarded = self.guard(eventsfn)
        # scikit-sundae reads these attributes; it stops only at roots (terminal False), and only there.
        guarded.terminal = [False] * len(functions)  # type: ignore[attr-defined]
        guarded.direction = [ev.direction for ev in self.events]  # type: ignore[attr-defined]
        return guarded

    def call(self, what: str, t: float, func: Callable[..., Any], *args: Any) -> Any:
        """``func(*args)`` on the solver; its failure becomes one :class:`SimulationError` line naming the component.

        *what* says what failed (``"IDA failed in [0.0, 0.1]"``), *t* is the time
        the call starts from. SUNDIALS prints its own error report on stdout: it
        is kept out of the output and put into the message; anything else printed
        (by the model's callbacks) is passed on. An exception raised by a model
        callback reaches the caller unchanged.
        """
        printed = io.StringIO()
        self.failure = None
        try:
            with contextlib.redirect_stdout(printed):
                result = func(*args)
        except BaseException as exc:
            if exc is self.failure:
                raise
            if self.failure is not None:  # the model's own error, which scikit-sundae 1.1 wraps in a SystemError
                raise self.failure from None
            raise SimulationError(self.failure_message(what, str(exc), printed.getvalue()),
                                  component=self.component.name, time=t) from None
        if not result.success:
            t_fail = float(result.t)
            raise SimulationError(self.failure_message(what, f"at t={t_fail!r}: {result.message}", printed.getvalue()),
                                  component=self.component.name, time=t_fail)
        if printed.getvalue():
            sys.stdout.write(printed.getvalue())
        return result

    def failure_message(self, what: str, reason: str, printed: str) -> str:
        """``component 'c': <what>: <reason> (<SUNDIALS' report>)`` on one line."""
        report = " ".join(printed.split())
        detail = f" ({report})" if report and report not in reason else ""
        return f"component {self.component.name!r}: {what}: {reason}{detail}"

    # ------------------------------------------------------------------ stepping
    def inputs(self, t: float) -> np.ndarray:
        """The inputs at *t*: held over the step, or the master's polynomial (``component.input_at``)."""
        u_at = self.component.input_at
        return self.u if u_at is None else u_at(t)

    def continues(self, t: float, x: np.ndarray, u: np.ndarray) -> bool:
        """Whether a step from *t* may continue the solver's history (see the class docstring); inputs that
        vary over the step (a polynomial from the master) start anew at every step."""
        return (self.component.input_at is None and abs(t - self.t_last) <= TIME_RTOL * max(1.0, abs(t))
                and np.array_equal(x, self.y_last) and np.array_equal(u, self.u_last))

    def begin(self, t: float, x: np.ndarray, u: np.ndarray) -> None:
        """(Re)start the solver at *t* from *x* (corrected in place where the method makes it consistent)."""
        self.u = u
        if self.solver is None:
            self.solver = self.build()
        self.restart(t, x)
        self.t_last = t
        np.copyto(self.y_last, x)
        self.u_last = u.copy()

    def integrate(self, t: float, dt: float, x: np.ndarray, u: np.ndarray) -> None:
        t_end = t + dt
        self.u = u
        if not self.continues(t, x, u):
            self.begin(t, x, u)
        trackers = self.start_trackers(t, x, u)
        step = self.solver.step
        what = f"{self.solver_name} failed in [{t!r}, {t_end!r}]"  # a failure names the time itself
        while True:
            result = self.call(what, t, step, t_end, "normal", t_end)
            ts, y = float(result.t), result.y
            root = result.status == ROOT_RETURN
            if trackers:
                self.track_all(trackers, ts, y, u, result if root else None, t_end)
            if root:
                self.clear_events()
            if not root or ts >= t_end:
                break
        np.copyto(x, y)
        self.finish_step(result)
        self.t_last = t_end
        np.copyto(self.y_last, x)

    def track_all(self, trackers: list[Tracker], ts: float, y: np.ndarray, u: np.ndarray, root: Any,
                  t_end: float) -> None:
        """Track every pending event at ``(ts, y)``; at a *root* result the bracket is narrowed around it."""
        refine = None
        if root is not None:
            ydot: list[np.ndarray] = []

            def refine(tr: Tracker, tb: float, gb: float) -> Bracket:
                if not ydot:
                    ydot.append(self.rate(tb, y, root))
                return self.root_bracket(tr, tb, gb, y, ydot[0], u, t_end)

        for tr in trackers:
            if not tr.done:
                self.track(tr, ts, float(tr.event.function(ts, y, u)), refine)

    def root_bracket(self, tr: Tracker, tb: float, gb: float, y: np.ndarray, ydot: np.ndarray, u: np.ndarray,
                     t_end: float) -> Bracket:
        """Narrow ``[tr.t, tb]`` around the root *tb* that the solver located.

        The half-width is ``HINT_SAFETY`` times the crossing-time uncertainty
        ``|dg| / |dg/dt|`` (``dg``: the indicator's change under a state
        perturbation of one error tolerance), as for the scipy solvers; the
        state near the root is ``y + (s - tb) * ydot``. Falls back to
        ``[tr.t, tb]`` where the ends would not bracket the crossing.
        """
        func = tr.event.function

        def g(s: float) -> float:
            return float(func(s, y + (s - tb) * ydot, u))

        with np.errstate(all="ignore"):
            scale = np.broadcast_to(self.atol + self.rtol * np.abs(y), y.shape)
            dg = sum(abs(float(func(tb, y + dy, u)) - gb) for dy in np.diag(scale))
            delta = 1e-3 * (tb - tr.t)
            gdot = (g(tb + delta) - g(tb - delta)) / (2.0 * delta) if delta > 0 else 0.0
            width = HINT_SAFETY * dg / abs(gdot) if gdot else math.inf
        if not math.isfinite(width):
            return tr.t, tb, tr.g, gb
        # at least a few ulp of t, and wide enough for the ends to leave the zero band of SIGN_TOLERANCE
        width = max(width, 8 * np.finfo(float).eps * max(1.0, abs(tb)), 2.0 * SIGN_TOLERANCE / abs(gdot))
        lo, hi = max(tr.t, tb - width), min(t_end, tb + width)
        g_lo = tr.g if lo == tr.t else g(lo)
        g_hi = gb if hi == tb else g(hi)
        if not crossed(g_lo, g_hi, tr.event.direction, SIGN_TOLERANCE):
            return tr.t, tb, tr.g, gb
        return lo, hi, g_lo, g_hi

    def clear_events(self) -> None:
        """Empty scikit-sundae's record of the roots found (the trackers report them), which it would
        otherwise keep for the whole run and convert to arrays on every step."""
        fn = self.eventsfn
        for name in ("_i", "_t", "_y", "_yp"):
            record = getattr(fn, name, None)
            if isinstance(record, list):
                record.clear()
