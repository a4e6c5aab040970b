"""The time left of a sweep: the finished jobs' mean duration over the workers, not rich's recent rate."""

from __future__ import annotations

import heapq
import itertools

import pytest

from cosimrun.runner.outcome import JobOutcome
from hydra_plugins.cosimrun_dask_launcher._progress import Progress, estimate_remaining, format_seconds


def test_estimate_of_equal_jobs_is_exact() -> None:
    assert estimate_remaining([], [1.0], 3, 2) is None  # nothing finished: unknown
    assert estimate_remaining([10.0], [5.0, 5.0], 2, 2) == 15.0  # 5 s more, then one round of 10 s
    assert estimate_remaining([10.0], [5.0, 1.0], 1, 2) == 15.0  # the worker free first takes the waiting job
    assert estimate_remaining([10.0], [9.0], 0, 4) == 1.0  # the last job: idle workers do not help
    assert estimate_remaining([10.0], [30.0], 0, 1) == 0.0  # running longer than the mean: due now
    assert estimate_remaining([4.0, 6.0], [], 5, 2) == 15.0  # three rounds of the mean, 5 s


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def outcome(num: int, duration: float, reused: bool = False) -> JobOutcome:
    return JobOutcome(num=num, status="complete", job_time_s=duration, reused=reused)


def simulate(durations: list[float], workers: int, known: int | None, skip: int = 0) -> list[tuple[float, float]]:
    """Run a sweep of jobs with *durations* on *workers* (dask's order: first free worker takes the next job).

    Returns ``(estimate, true time left)`` just after each finish, and half-way to the next finish.
    """
    clock = FakeClock()
    bar = Progress(len(durations), enabled=False, workers=known, clock=clock)
    bar.start()
    finishes: list[tuple[float, int]] = []
    queue = iter(enumerate(durations))
    for num, d in itertools.islice(queue, workers):
        heapq.heappush(finishes, (d, num))
    ends = []
    order = []
    while finishes:
        end, num = heapq.heappop(finishes)
        ends.append(end)
        order.append((end, num))
        nxt = next(queue, None)
        if nxt is not None:
            heapq.heappush(finishes, (end + nxt[1], nxt[0]))
    last = max(ends)
    pairs = []
    for k, (end, num) in enumerate(order):
        clock.now = end
        bar.finished(outcome(num, durations[num]))
        if k >= skip and end < last:
            pairs.append((bar.remaining(), last - end))
            clock.now = (end + order[k + 1][0]) / 2
            pairs.append((bar.remaining(), last - clock.now))
    return pairs


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_equal_jobs_after_the_first_ones_finished_together(workers: int) -> None:
    # rich says 0:00:01 here: two jobs finishing within 0.02 s look like 50 jobs a second
    durations = [5.0 + 0.01 * (i % 3) for i in range(12)]
    for estimate, truth in simulate(durations, workers, known=None, skip=workers - 1):
        assert estimate == pytest.approx(truth, abs=0.2)  # 12 jobs of 5 s, known to within 0.01 s each


@pytest.mark.parametrize(("workers", "known"), [(2, 2), (3, 3), (3, None), (4, None)])
def test_within_the_spread_of_job_times(workers: int, known: int | None) -> None:
    cycle = [4.0, 6.0, 5.0, 4.5, 5.5]
    durations = cycle * 5
    spread = max(durations) - min(durations)
    skip = len(cycle)  # from when the finished jobs' mean is the jobs' mean, and the workers are inferred
    for estimate, truth in simulate(durations, workers, known, skip=skip):
        assert abs(estimate - truth) <= spread, (estimate, truth)


def test_reused_jobs_take_no_time() -> None:
    clock = FakeClock()
    bar = Progress(6, enabled=False, workers=2, clock=clock)
    bar.finished(outcome(0, float("nan"), reused=True))
    bar.finished(outcome(1, float("nan"), reused=True))
    bar.start()
    assert bar.remaining() is None
    clock.now = 10.0
    bar.finished(outcome(2, 10.0))
    assert bar.remaining() == pytest.approx(10.0)  # one running (started at 0 s, 10 s done: due), one waiting
    clock.now = 20.0
    for num in (3, 4, 5):
        bar.finished(outcome(num, 10.0))
    assert bar.remaining() == 0.0


def test_format() -> None:
    assert format_seconds(None) == "-:--:--"
    assert format_seconds(25.2) == "0:00:25"
    assert format_seconds(3725.0) == "1:02:05"
