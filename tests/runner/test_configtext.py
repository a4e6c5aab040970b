"""Config text: the libyaml dump must read and look exactly like ``OmegaConf.to_yaml``."""

from __future__ import annotations

import math

import pytest
import yaml
from omegaconf import OmegaConf

from cosimrun.runner.configtext import dump, resolved, resolved_container

TRICKY = {
    "ints": [1, -2, 0],
    "floats": [1.5, -0.0, 1e-300, 1e300, math.inf, -math.inf],
    "bools": [True, False],
    "none": None,
    "strings": {
        "looks_int": "1",
        "looks_float": "1e3",
        "looks_bool": "true",
        "yes": "yes",
        "off": "Off",
        "null_word": "null",
        "empty": "",
        "spaces": "  padded  ",
        "colon": "a: b",
        "hash": "x # not a comment",
        "quote": "it's \"quoted\"",
        "multi": "line one\nline two\n",
        "unicode": "Δt = 1 µs, ω → 0",
        "long": "word " * 40,
        "star": "*anchor",
        "interp": "${run.tf}",
        "path": "/tmp/some dir/results.h5",
    },
    "nested": [{"a": [1, {"b": "c"}]}, [], {}],
    "run": {"tf": 2.5},
}


@pytest.mark.parametrize("resolve", [False, True])
def test_dump_is_omegaconfs_text(resolve: bool) -> None:
    cfg = OmegaConf.create(TRICKY)
    expected = OmegaConf.to_yaml(cfg, resolve=resolve)
    if resolve:
        plain, text = resolved(cfg)
        assert plain == OmegaConf.to_container(cfg, resolve=True)
        assert plain["strings"]["interp"] == 2.5
    else:
        text = dump(cfg)
    assert text == expected
    back = yaml.safe_load(text)
    assert back["strings"] == OmegaConf.to_container(cfg, resolve=resolve)["strings"]
    assert back["floats"][4] == math.inf


def test_dump_of_plain_data_and_lists() -> None:
    assert dump(["a=1", "b='x y'"]) == OmegaConf.to_yaml(OmegaConf.create(["a=1", "b='x y'"]))
    assert dump({"k": "1"}) == "k: '1'\n"


def test_resolved_refuses_a_list_config() -> None:
    with pytest.raises(TypeError, match="mapping"):
        resolved(OmegaConf.create([1, 2]))


def test_dump_without_the_fast_dumper_is_omegaconfs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from cosimrun.runner import configtext

    monkeypatch.setattr(configtext, "_dumper", lambda: None)  # no libyaml, or OmegaConf's representer changed
    cfg = OmegaConf.create(TRICKY)
    assert dump(cfg) == OmegaConf.to_yaml(cfg)
    assert resolved(cfg)[1] == OmegaConf.to_yaml(cfg, resolve=True)


REFERENCES = {
    "job": {"name": "cosimrun", "num": 3, "dir": "/out/${job.name}"},
    "x": 1.5,
    "missing": "???",
    "log": {
        "file": "${job.dir}/${job.name}_${job.num}.log",
        "plain": "no interpolation",
        "whole": "${job.name}",
        "number": "${x}",
        "list": ["${job.name}", "a${job.num}", {"deep": "${x}-${job.name}"}],
        "resolver": "${oc.env:HOME,none}",
        "relative": "${.plain}",
        "escaped": "\\${job.name} ${job.name}",
        "node": "${job}",
        "nested": "${job.${whole_key}}",
    },
    "whole_key": "name",
}


def test_resolved_container_is_omegaconfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain node references are substituted without the grammar parser; resolvers, relative, escaped, nested and
    whole-container references go to OmegaConf: the result is always OmegaConf's resolved container."""
    cfg = OmegaConf.create(REFERENCES)
    assert resolved_container(cfg.log) == OmegaConf.to_container(cfg.log, resolve=True)
    plain = OmegaConf.create({"job": {"name": "cosimrun", "num": 3}, "log": {
        "file": "/out/${job.name}_${job.num}.log", "plain": "no interpolation",
        "list": ["${job.name}", "a${job.num}"]}})
    expected = OmegaConf.to_container(plain.log, resolve=True)
    assert expected["file"] == "/out/cosimrun_3.log"

    def parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr("omegaconf.base.parse", parse)
    assert resolved_container(plain.log) == expected


def test_resolved_container_raises_as_omegaconf() -> None:
    cfg = OmegaConf.create({**REFERENCES, "log": {"file": "${missing}/x.log"}})
    with pytest.raises(Exception) as ours:
        resolved_container(cfg.log)
    with pytest.raises(Exception) as theirs:
        OmegaConf.to_container(cfg.log, resolve=True)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
