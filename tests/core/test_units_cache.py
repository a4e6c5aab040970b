"""The unit registry keeps pint's parsed definitions in cosimrun's cache directory, and converts as without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONVERSIONS = [("degC", "K"), ("degF", "degC"), ("kN*m", "N*m"), ("rpm", "rad/s"), ("bar", "Pa"), ("kWh", "J")]

CODE = f"""
import json
from cosimrun.core.units import compile_conversion, ureg
folder = ureg.cache_folder
conversions = [compile_conversion(a, b) for a, b in {CONVERSIONS!r}]
print(json.dumps({{"cache": folder and str(folder), "conversions": [[c.scale, c.offset] for c in conversions]}}))
"""


def _registry_in_new_process(cache: Path) -> dict:
    env = dict(os.environ, COSIMRUN_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _pint_conversions() -> list[list[float]]:
    """The same conversions from a registry of pint's own, made without a cache."""
    import pint

    reference = pint.UnitRegistry(autoconvert_offset_to_baseunit=True)
    out = []
    for src, dst in CONVERSIONS:
        offset = reference.Quantity(0.0, src).to(dst).magnitude
        out.append([reference.Quantity(1.0, src).to(dst).magnitude - offset, offset])
    return out


def _assert_as_pint_converts(conversions: list[list[float]]) -> None:
    for (scale, offset), (ref_scale, ref_offset) in zip(conversions, _pint_conversions(), strict=True):
        assert abs(scale - ref_scale) <= 1e-12 * abs(ref_scale)
        assert abs(offset - ref_offset) <= 1e-12 * max(1.0, abs(ref_offset))


@pytest.mark.slow
def test_the_parsed_definitions_are_cached_and_a_second_process_converts_the_same(tmp_path: Path) -> None:
    first = _registry_in_new_process(tmp_path)
    assert first["cache"] == str(tmp_path / "pint")
    written = sorted(p.name for p in (tmp_path / "pint").glob("*.pickle"))
    assert written, "no cache written"
    second = _registry_in_new_process(tmp_path)
    assert sorted(p.name for p in (tmp_path / "pint").glob("*.pickle")) == written  # read, not written again
    _assert_as_pint_converts(first["conversions"])
    _assert_as_pint_converts(second["conversions"])


@pytest.mark.slow
def test_a_damaged_cache_is_passed_over_and_written_again(tmp_path: Path) -> None:
    _registry_in_new_process(tmp_path)
    pickles = sorted((tmp_path / "pint").glob("*.pickle"))
    good = {p.name: p.read_bytes() for p in pickles}
    for p in pickles:
        p.write_bytes(p.read_bytes()[: len(good[p.name]) // 2])
    damaged = _registry_in_new_process(tmp_path)
    assert not list((tmp_path / "pint").glob("*.pickle")), "the damaged files were kept"
    again = _registry_in_new_process(tmp_path)
    assert sorted(p.name for p in (tmp_path / "pint").glob("*.pickle")) == sorted(good)
    _assert_as_pint_converts(damaged["conversions"])
    _assert_as_pint_converts(again["conversions"])

@pytest.mark.slow
def test_a_cache_folder_that_cannot_be_made_leaves_the_registry_without_one(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    got = _registry_in_new_process(blocker)
    assert got["cache"] is None
    _assert_as_pint_converts(got["conversions"])
