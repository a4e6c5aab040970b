"""Zero-crossing detection, superdense time, indicators and internal hints."""

import pytest

from cosimrun.core.events import DenseTime, Event, EventIndicator, InternalEventInfo, _sign, crossed


def test_sign_with_tolerance():
    assert _sign(1.0) == 1
    assert _sign(-1.0) == -1
    assert _sign(0.0) == 0
    assert _sign(1e-300) == 1  # no band by default: only zero is zero
    assert _sign(-1e-300) == -1
    assert _sign(0.05, tol=0.1) == 0
    assert _sign(-0.2, tol=0.1) == -1
    assert _sign(0.1, tol=0.1) == 0  # the boundary counts as zero


@pytest.mark.parametrize(
    ("before", "after", "direction", "expected"),
    [
        (1.0, -1.0, 0, True),
        (-1.0, 1.0, 0, True),
        (1.0, -1.0, -1, True),  # falling accepted by -1
        (-1.0, 1.0, -1, False),  # rising rejected by -1
        (-1.0, 1.0, 1, True),  # rising accepted by +1
        (1.0, -1.0, 1, False),  # falling rejected by +1
        (1.0, 2.0, 0, False),  # no change of sign
        (-1.0, -0.5, 0, False),
        (1.0, 0.0, 0, False),  # reaching the surface is not crossing it
        (1.0, 0.0, -1, False),
        (-1.0, 0.0, 1, False),
        (1e-300, -1e-300, -1, True),  # any strictly signed values: no band by default
        (0.0, -1.0, 0, False),  # starting on the surface never fires
        (0.0, 1.0, 1, False),
        (0.0, 0.0, 0, False),
    ],
)
def test_crossed_directions(before, after, direction, expected):
    assert crossed(before, after, direction) is expected


def test_crossed_honours_sign_tolerance():
    # with a tolerance, a start within it of zero counts as on the surface: no event
    assert crossed(1e-12, -1.0, 0)
    assert not crossed(0.05, -1.0, 0, tol=0.1)
    assert crossed(0.2, -1.0, 0, tol=0.1)
    # and an end within it has only reached the surface, not crossed it
    assert not crossed(1.0, 0.05, 0, tol=0.1)
    assert crossed(1.0, -0.2, 0, tol=0.1)
    assert not crossed(1.0, 0.2, 0, tol=0.1)


def test_dense_time_ordering():
    a, b, c = DenseTime(1.0), DenseTime(1.0, 1), DenseTime(2.0)
    assert a < b < c
    assert DenseTime(0.5, 7) < DenseTime(1.0, 0)
    assert sorted([c, b, DenseTime(1.0, 2), a]) == [a, b, DenseTime(1.0, 2), c]
    assert DenseTime(1.0, 1) == DenseTime(1.0, 1)
    assert hash(DenseTime(1.0, 1)) == hash(DenseTime(1.0, 1))
    assert max(a, b) is b


def test_dense_time_advance_micro_and_to_float():
    a = DenseTime(2.5)
    b = a.advance_micro()
    assert (b.t, b.micro) == (2.5, 1)
    assert (a.t, a.micro) == (2.5, 0)  # immutable: a new instance is returned
    assert b.advance_micro() == DenseTime(2.5, 2)
    assert b.to_float() == 2.5
    with pytest.raises(AttributeError):
        a.micro = 3


def test_event_defaults():
    e = Event("bounce", "ball")
    assert (e.name, e.source, e.time, e.direction) == ("bounce", "ball", None, None)
    timed = Event("bounce", "ball", DenseTime(1.0, 1), -1)
    assert timed.time == DenseTime(1.0, 1)


def test_event_indicator_direction_validation():
    for d in (-1, 0, 1):
        assert EventIndicator("e", lambda c: 0.0, d).direction == d
    assert EventIndicator("e", lambda c: 0.0).direction == 0
    for bad in (2, -2, 0.5, "up", None):
        with pytest.raises(ValueError, match="direction"):
            EventIndicator("e", lambda c: 0.0, bad)


def test_event_indicator_evaluate_returns_float():
    class Comp:
        h = 3

    ind = EventIndicator("ground", lambda c: c.h - 1, direction=-1)
    value = ind.evaluate(Comp())
    assert value == 2.0 and type(value) is float
    assert "ground" in repr(ind)


def test_internal_event_info_interval_width():
    info = InternalEventInfo("hit", 1.25, 1.5, 0.5, -0.3)
    assert info.interval_width == pytest.approx(0.25)
    assert (info.indicator_before, info.indicator_after) == (0.5, -0.3)
    bare = InternalEventInfo("hit", 2.0, 2.0)
    assert bare.interval_width == 0.0
    assert bare.indicator_before is None and bare.indicator_after is None
