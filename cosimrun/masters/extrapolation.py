"""Input extrapolation over a macro step: the polynomial through an input's latest samples.

A component that interpolates inputs (``CoSimComponent.interpolates_inputs``)
gets the polynomial itself, as its value and derivatives at the step start
(:func:`taylor_extrapolation`), and evaluates it inside its integrator; the
coupling then has the polynomial's order. Any other component holds its inputs
over a step, so it gets the polynomial's *mean* over ``[t, t + h]``
(:func:`mean_extrapolation`), which for a component that integrates its input
equals feeding the polynomial, to one order less.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosimrun.system.connection import Link


def _newton(times: list[float], values: list[Any]) -> tuple[Any, Any, Any]:
    """``(vc, d1, d2)`` of the Newton form around the newest sample: ``vc + d1 (s - tc) + d2 (s - tc)(s - tb)``."""
    n = len(values)
    if n == 1:
        return values[-1], 0.0, 0.0
    if n == 2:
        (t0, t1), (v0, v1) = times, values
        return v1, (v1 - v0) / (t1 - t0), 0.0
    (ta, tb, tc), (va, vb, vc) = times[-3:], values[-3:]
    d_cb = (vc - vb) / (tc - tb)
    d_ba = (vb - va) / (tb - ta)
    return vc, d_cb, (d_cb - d_ba) / (tc - ta)


def mean_extrapolation(times: list[float], values: list[float], t: float, h: float) -> float:
    """Mean over ``[t, t+h]`` of the polynomial through ``(times, values)``.

    ``times``/``values`` hold the latest samples, newest last, with ``times[-1] == t``;
    1, 2 or 3 samples give order 0, 1 or 2.
    """
    vc, d1, d2 = _newton(times, values)
    tc = times[-1]
    tb = times[-2] if len(times) > 1 else tc
    # mean of (s - tc) over [t, t+h] is (t - tc) + h/2; of (s - tc)(s - tb) is below
    mean1 = (t - tc) + 0.5 * h
    mean2 = (t - tc) * (t - tb) + 0.5 * h * ((t - tc) + (t - tb)) + h * h / 3.0
    return vc + d1 * mean1 + d2 * mean2


def taylor_extrapolation(times: list[float], values: list[float]) -> tuple[float, tuple[float, ...]]:
    """Value and derivatives at the newest sample of the polynomial through ``(times, values)``.

    ``(value, ())`` from one sample, ``(value, (slope,))`` from two,
    ``(value, (first, second))`` from three: the input over the coming step is
    ``value + first (s - t) + second (s - t)**2 / 2``.
    """
    vc, d1, d2 = _newton(times, values)
    n = len(values)
    if n == 1:
        return vc, ()
    if n == 2:
        return vc, (d1,)
    return vc, (d1 + d2 * (times[-1] - times[-2]), 2.0 * d2)


def polynomial_at(times: list[float], values: list[Any], t: float) -> Any:
    """The polynomial through ``(times, values)`` (1, 2 or 3 samples, newest last) evaluated at *t*; *values* may be
    arrays (one polynomial per element)."""
    vc, d1, d2 = _newton(times, values)
    tc = times[-1]
    tb = times[-2] if len(times) > 1 else tc
    return vc + d1 * (t - tc) + d2 * (t - tc) * (t - tb)


class Extrapolation:
    """The lagging real inputs of a run and their latest samples: each is given the polynomial of degree *order*
    through them over a step, as value and derivatives to a component that interpolates inputs (*taylor*), as
    its mean over the step to any other."""

    def __init__(self, links: list[Link], taylor: list[bool], order: int, t0: float) -> None:
        self.links = links
        self.taylor = taylor
        self.order = order
        self.times = [t0]
        self.values = [[lk.dst.value] for lk in links]

    def extrapolate(self, t: float, h: float) -> None:
        """Give each lagging input its extrapolation over the step from *t* of length *h*."""
        times = self.times
        for lk, values, taylor in zip(self.links, self.values, self.taylor, strict=True):
            if taylor:
                lk.dst.value, lk.dst.derivatives = taylor_extrapolation(times, values)
            else:
                lk.dst.value = mean_extrapolation(times, values, t, h)

    def sample(self, t: float) -> None:
        """Take the inputs' values at the accepted instant *t* as their newest samples."""
        keep = self.order + 1
        self.times.append(t)
        del self.times[:-keep]
        for lk, values in zip(self.links, self.values, strict=True):
            values.append(lk.dst.value)
            del values[:-keep]

    def save_state(self) -> dict[str, Any]:
        """The latest samples, as plain values."""
        return {"times": list(self.times), "values": [list(v) for v in self.values]}

    def restore_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`save_state`'s *state*."""
        self.times = list(state["times"])
        self.values = [list(v) for v in state["values"]]
