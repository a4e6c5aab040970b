"""Standalone stepping helpers for component tests (no System, no master)."""

from __future__ import annotations

from typing import Any

import numpy as np

from cosimrun.core.component import CoSimComponent


def simulate(
    comp: CoSimComponent, t_end: float, dt: float, inputs: dict[str, Any] | None = None, t0: float = 0.0
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Initialize *comp* at *t0*, hold *inputs*, step with *dt* to *t_end*; return times and outputs."""
    comp.initialize(t0)
    if inputs:
        comp.set_inputs(inputs)
        comp.evaluate_outputs({}, t0)
    n = round((t_end - t0) / dt)
    times = [t0]
    rows = [dict(comp.get_outputs())]
    for k in range(n):
        t = t0 + k * dt
        comp.do_step(t, dt)
        times.append(t + dt)
        rows.append(dict(comp.get_outputs()))
    return np.array(times), {name: np.array([r[name] for r in rows]) for name in rows[0]}


def step_with_events(comp: CoSimComponent, t: float, dt: float, tol: float = 1e-12) -> list[dict[str, Any]]:
    """Step *comp* from *t* to *t + dt*, handling state events on the way.

    On a crossing the step is rolled back and the crossing is located by
    bisection to *tol*; the component is stepped to the crossing's right end,
    ``handle_event`` is called there and the step continues. Returns one record
    per event: time, names, state before and after handling.
    """
    events: list[dict[str, Any]] = []
    t_end = t + dt
    while t < t_end:
        snap = comp.snapshot_state()
        g0 = comp.evaluate_event_indicators()
        comp.do_step(t, t_end - t)
        if not comp.detect_event_crossings(g0, comp.evaluate_event_indicators()):
            comp.get_internal_event_hints()
            return events
        lo, hi = t, t_end
        while hi - lo > tol:
            mid = 0.5 * (lo + hi)
            comp.restore_state(snap, t)
            comp.do_step(t, mid - t)
            if comp.detect_event_crossings(g0, comp.evaluate_event_indicators()):
                hi = mid
            else:
                lo = mid
        comp.restore_state(snap, t)
        comp.do_step(t, hi - t)
        names = comp.detect_event_crossings(g0, comp.evaluate_event_indicators())
        before = {k: v["value"] for k, v in comp.get_state().items()}
        comp.handle_event(names, hi)
        after = {k: v["value"] for k, v in comp.get_state().items()}
        comp.get_internal_event_hints()
        events.append({"t": hi, "names": names, "before": before, "after": after})
        t = hi
    return events
