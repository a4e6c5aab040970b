"""Input extrapolation over a macro step.

A component holds its inputs constant over a step, so the master passes the
*mean* of the extrapolating polynomial over ``[t, t + h]``: for a component that
integrates its input this equals feeding the polynomial itself.
"""

from __future__ import annotations


def mean_extrapolation(times: list[float], values: list[float], t: float, h: float) -> float:
    """Mean over ``[t, t+h]`` of the polynomial through ``(times, values)``.

    ``times``/``values`` hold the latest samples, newest last, with ``times[-1] == t``;
    1, 2 or 3 samples give order 0, 1 or 2.
    """
    n = len(values)
    if n == 1:
        return values[-1]
    if n == 2:
        (t0, t1), (v0, v1) = times, values
        slope = (v1 - v0) / (t1 - t0)
        return v1 + slope * (t + 0.5 * h - t1)
    (ta, tb, tc), (va, vb, vc) = times[-3:], values[-3:]
    # Newton form around tc: p(s) = vc + d1*(s - tc) + d2*(s - tc)*(s - tb)
    d_cb = (vc - vb) / (tc - tb)
    d_ba = (vb - va) / (tb - ta)
    d2 = (d_cb - d_ba) / (tc - ta)
    d1 = d_cb
    # mean of (s - tc) over [t, t+h] with t == tc is h/2; of (s - tc)(s - tb) is h^2/3 + (tc - tb) h/2
    mean1 = (t - tc) + 0.5 * h
    mean2 = (t - tc) * (t - tb) + 0.5 * h * ((t - tc) + (t - tb)) + h * h / 3.0
    return vc + d1 * mean1 + d2 * mean2
