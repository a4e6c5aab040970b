"""Plain override lines made into Hydra's ``Override`` without its parser equal what its parser makes."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from cosimrun.runner.compose import parsed_overrides
from cosimrun.runner.overrides import parsed_plain

PLAIN = ["a.k=1", "a.k=-3", "a.k=+4", "a.k=0", "a.k=1.5", "a.k=.5", "a.k=2.", "a.k=-1e-3", "a.k=1E5", "a.k=true",
         "a.k=FALSE", "a.k=null", "a.k=Null", "a.k=inf", "a.k=NaN", "a.k=Infinity", "a.k=abc", "a.k=a-b",
         "x-y.z_2=v2", "+a.k=1", "++a.k=word", "+new=2.5"]
OTHER = ["a.k=007", "a.k=1_000", "a.k=-inf", "a.k=[1,2]", "a.k='quoted'", "a.k=${b}", "~a.k", "a.k=x y",
         "group/sub=opt", "a@pkg=v", "a.k=", "a.k=a:b", "a.k=1.2.3", "a.k=1,2", "a.k=range(1,3)", "+++a=1"]


@pytest.mark.parametrize("line", PLAIN)
def test_a_plain_line_is_the_override_hydras_parser_makes(line: str) -> None:
    (theirs,) = OverridesParser.create().parse_overrides([line])
    ours = parsed_plain(line)
    assert ours is not None
    mine, expected = dataclasses.asdict(ours), dataclasses.asdict(theirs)
    value, their_value = mine.pop("_value"), expected.pop("_value")
    assert mine == expected
    assert type(value) is type(their_value)
    assert value == their_value or (math.isnan(value) and math.isnan(their_value))
    assert (ours.key_or_group, ours.is_add(), ours.is_force_add(), ours.value_type) == (
        theirs.key_or_group, theirs.is_add(), theirs.is_force_add(), theirs.value_type)


@pytest.mark.parametrize("line", OTHER)
def test_any_other_line_is_left_to_hydras_parser(line: str) -> None:
    assert parsed_plain(line) is None


def test_the_composer_reads_plain_lines_without_the_parser_and_others_with_it() -> None:
    (plain, other) = parsed_overrides(["a.k=41", "a.k=[1,2]"])
    assert plain.input_line == "a.k=41" and plain.value() == 41
    assert other.value() == [1, 2]
