"""Plugin config packages (``cosimrun.configs`` entry points): a broken one is named in one warning, then skipped."""

from __future__ import annotations

import sys
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


def test_a_config_package_without_experiment_files_is_kept_with_one_notice(
    installed: list[SimpleNamespace], tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a plugin built without package-data: its conf package is installed, its experiment/*.yaml are not
    for pkg, files in (("plugin_bare", []), ("plugin_whole", ["heating.yaml"])):
        folder = tmp_path / pkg / "conf" / "experiment"
        folder.mkdir(parents=True)
        for name in ("__init__.py", "conf/__init__.py"):
            (tmp_path / pkg / name).write_text("")
        for name in files:
            (folder / name).write_text("# @package _global_\nname: heating\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed += [entry_point("bare", "plugin_bare.conf", dist="plugin-bare"),
                  entry_point("whole", "plugin_whole.conf", dist="plugin-whole"),
                  entry_point("own", "cosimrun.conf")]
    with pytest.warns(UserWarning) as caught:
        assert searchpath.config_packages() == [("bare", "plugin_bare.conf"), ("own", "cosimrun.conf"),
                                                ("whole", "plugin_whole.conf")]
    assert [str(w.message) for w in caught] == [
        "cosimrun.configs entry point 'bare = plugin_bare.conf' of plugin-bare holds no experiment files "
        "(plugin_bare/conf/experiment/*.yaml); list them as package data of the plugin, e.g. "
        '[tool.setuptools.package-data] "plugin_bare.conf" = ["experiment/*.yaml"]'
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        searchpath.config_packages()  # once per process


def test_the_command_shows_the_notice_as_one_line(installed: list[SimpleNamespace], tmp_path, monkeypatch,
                                                  capsys) -> None:
    (tmp_path / "plugin_empty" / "conf").mkdir(parents=True)
    for name in ("__init__.py", "conf/__init__.py"):
        (tmp_path / "plugin_empty" / name).write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    installed.append(entry_point("empty", "plugin_empty.conf", dist="plugin-empty"))
    monkeypatch.setattr(sys, "argv", ["cosimrun", "--help"])
    from cosimrun.cli import main

    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0
    out, err = capsys.readouterr()
    assert "experiments: bouncing_ball" in out
    assert err.splitlines() == [
        "cosimrun: warning: cosimrun.configs entry point 'empty = plugin_empty.conf' of plugin-empty holds no "
        "experiment files (plugin_empty/conf/experiment/*.yaml); list them as package data of the plugin, e.g. "
        '[tool.setuptools.package-data] "plugin_empty.conf" = ["experiment/*.yaml"]'
    ]
