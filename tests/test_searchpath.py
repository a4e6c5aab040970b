"""Plugin config packages (``cosimrun.configs`` entry points): a broken one is named in one warning, then skipped."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from hydra_plugins.cosimrun_searchpath import searchpath


def entry_point(name: str, value: str, dist: str = "cosimrun-fake") -> SimpleNamespace:
    return SimpleNamespace(name=name, value=value, group=searchpath.CONFIG_GROUP, dist=SimpleNamespace(name=dist))


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> list[SimpleNamespace]:
    eps: list[SimpleNamespace] = []
    monkeypatch.setattr(searchpath, "entry_points", lambda group: list(eps) if group == searchpath.CONFIG_GROUP else [])
    monkeypatch.setattr(searchpath, "_warned", set())
    return eps


def test_a_typo_in_an_entry_point_warns_once_and_the_others_are_kept(installed: list[SimpleNamespace]) -> None:
    installed += [
        entry_point("good", "cosimrun.conf"),
        entry_point("typo", "cosimrun.cnof", dist="cosimrun-typo"),
        entry_point("module", "cosimrun.errors"),
    ]
    with pytest.warns(UserWarning) as caught:
        assert searchpath.config_packages() == [("good", "cosimrun.conf")]
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        "ignoring cosimrun.configs entry point 'module = cosimrun.errors' of cosimrun-fake: "
        "'cosimrun.errors' is a module, not a package",
        "ignoring cosimrun.configs entry point 'typo = cosimrun.cnof' of cosimrun-typo: "
        "ModuleNotFoundError: No module named 'cosimrun.cnof'",
    ]
    assert all("\n" not in m for m in messages)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert searchpath.config_packages() == [("good", "cosimrun.conf")]  # no second warning


@pytest.mark.parametrize("value", ["no_such_top_level_pkg.conf", "cosimrun.conf:attr", ""])
def test_names_that_cannot_be_imported(installed: list[SimpleNamespace], value: str) -> None:
    installed.append(entry_point("bad", value))
    with pytest.warns(UserWarning, match=r"ignoring cosimrun\.configs entry point 'bad = .*' of cosimrun-fake: \w+"):
        assert searchpath.config_packages() == []
