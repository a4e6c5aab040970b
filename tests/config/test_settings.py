"""One settings family per section: the schema is the built settings, each default is written once."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from cosimrun.config import build
from cosimrun.config.build import MASTERS, build_experiment, build_master
from cosimrun.config.schema import CosimConfig, RunSettings, StorageSettings
from cosimrun.errors import ConfigError
from cosimrun.system import Recorder

MASTER_FILES = sorted((Path(build.__file__).parents[2] / "conf" / "master").glob("*.yaml"))
GAIN = {"components": {"g": {"type": "gain"}}}


def settings_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if f.init}


def test_every_master_has_its_documented_defaults_file() -> None:
    assert sorted(p.stem for p in MASTER_FILES) == sorted(MASTERS)


@pytest.mark.parametrize("path", MASTER_FILES, ids=lambda p: p.stem)
def test_a_master_file_holds_exactly_the_masters_settings_and_defaults(path: Path) -> None:
    """conf/master/NAME.yaml, read as Hydra reads it, lists every setting of the class with its default and type."""
    given = OmegaConf.to_container(OmegaConf.load(path))
    cls = MASTERS[path.stem]
    assert given.pop("name") == cls.name == path.stem
    fields = settings_fields(cls)
    assert sorted(given) == sorted(fields), f"{path.name}: keys differ from {cls.__name__}'s settings"
    hints = build.setting_types(cls)
    for key, value in given.items():
        default = fields[key].default
        assert value == default and type(value) is type(default), f"{path.name}: {key}: {value!r} != {default!r}"
        assert isinstance(default, hints[key]), f"{cls.__name__}.{key}: {default!r} is not {hints[key]}"
    assert build_master({"name": cls.name, **given}) == cls()


def test_the_built_settings_are_the_schemas_frozen_dataclasses_with_its_defaults() -> None:
    exp = build_experiment(GAIN)
    hints = typing.get_type_hints(CosimConfig)
    assert type(exp.run) is hints["run"] is RunSettings
    assert type(exp.storage) is hints["storage"] is StorageSettings
    assert exp.run == RunSettings() == RunSettings(t0=0.0, tf=10.0, dt=0.01)
    assert exp.storage == StorageSettings()
    assert (exp.storage.file, exp.storage.record, exp.storage.compression, exp.storage.compression_level,
            exp.storage.allow_nonfinite) == ("results.h5", ["*"], "gzip", 4, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        exp.run.dt = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        exp.storage.flush_interval = 1  # type: ignore[misc]


def test_the_recorder_and_the_storage_settings_share_the_flush_interval() -> None:
    """The engine's default (a Recorder made without one) is the config's (storage.flush_interval)."""
    engine = inspect.signature(Recorder).parameters["flush_interval"].default
    assert engine == StorageSettings().flush_interval == build_experiment(GAIN).storage.flush_interval == 2000


def test_the_schema_reads_the_engines_default_without_loading_the_engine() -> None:
    """The command registers the schema before Hydra composes (a sweep's driver too): no pint, scipy or engine."""
    engine = ("pint", "scipy", "cosimrun.core.component", "cosimrun.system")
    code = f"import sys, cosimrun.config.schema; print(sorted(m for m in {engine!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_given_settings_are_built_and_the_rest_keep_their_defaults() -> None:
    exp = build_experiment({**GAIN, "run": {"tf": 2, "dt": 0.5}, "storage": {"flush_interval": 7.0, "record": "g"}})
    assert exp.run == RunSettings(t0=0.0, tf=2.0, dt=0.5) and isinstance(exp.run.tf, float)
    assert exp.storage == StorageSettings(record=["g"], flush_interval=7)
    assert isinstance(exp.storage.flush_interval, int)


def test_an_absent_master_is_the_default_masters_defaults() -> None:
    assert build_experiment(GAIN).master == MASTERS[build.DEFAULT_MASTER]() == build_master({})


TYPE_CASES = [
    (name, key, kind)
    for name, cls in MASTERS.items()
    for key, kind in build.setting_types(cls).items()
    if kind in build.TYPE_NAMES
]


@pytest.mark.parametrize(("name", "key", "kind"), TYPE_CASES, ids=[f"{n}.{k}" for n, k, _ in TYPE_CASES])
def test_a_master_setting_of_the_wrong_type_names_the_type_and_the_classes_default(name, key, kind) -> None:
    with pytest.raises(ConfigError) as info:
        build_master({"name": name, key: [1]})
    default = settings_fields(MASTERS[name])[key].default
    expected = build.TYPE_NAMES[kind]
    assert str(info.value) == f"master.{key}: [1] is not {expected}; expected {expected}, e.g. {default!r}"


def test_the_mapping_advice_shows_the_settings_defaults() -> None:
    for section, shown in (("run", "{t0: 0.0, tf: 10.0, dt: 0.01}"), ("storage", "{file: results.h5, record: ['*']}"),
                           ("master", "{name: gauss_seidel, ...}")):
        with pytest.raises(ConfigError) as info:
            build_experiment({**GAIN, section: 3})
        assert str(info.value) == f"{section}: 3 is not a mapping; write it as {shown}"


def test_the_primary_config_selects_the_builders_default_master() -> None:
    primary = OmegaConf.to_container(OmegaConf.load(MASTER_FILES[0].parents[1] / "config.yaml"))
    selected = [entry["master"] for entry in primary["defaults"] if isinstance(entry, dict) and "master" in entry]
    assert selected == [build.DEFAULT_MASTER]
