"""The FMI subsystem (``cosimrun.fmi``) under the FMU components: one ``FMUInstance`` per FMU, the end of a step in
the base component, the FMU code's errors from the error family with keys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu

from cosimrun.components.fmu import FMUComponent
from cosimrun.config.build import build_experiment
from cosimrun.core.component import CoSimComponent
from cosimrun.errors import ConfigError, FMUError
from cosimrun.fmi.description import read_fmu
from cosimrun.fmi.instance import FMUInstance
from cosimrun.fmi.step import FMUCStep, Stepper


@pytest.fixture(scope="module")
def feedthrough_fmu(fmu_dir: Path) -> Path:
    return builders.feedthrough(fmu_dir)


def test_the_fmi_subsystem_imports_no_component_config_or_master() -> None:
    """``cosimrun.fmi`` is below the components: importing all of it loads no component, config or master module."""
    code = ("import sys, cosimrun.fmi.instance, cosimrun.fmi.step, cosimrun.fmi.exchange; "
            "print(sorted(m for m in sys.modules if m.startswith(('cosimrun.components', 'cosimrun.config', "
            "'cosimrun.masters', 'cosimrun.runner'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_each_component_delegates_to_its_own_fmu_instance(feedthrough_fmu: Path) -> None:
    """Two components of one FMU file hold one FMUInstance each (own instance handle, own stepper); a step of the
    component is the stepper's, ended by the base component's end of a step, which records it."""
    a, b = fmu("a", feedthrough_fmu, k=3.0), fmu("b", feedthrough_fmu)
    try:
        assert isinstance(a.fmu, FMUInstance) and isinstance(b.fmu, FMUInstance) and a.fmu is not b.fmu
        assert a.fmu.model is b.fmu.model is read_fmu(feedthrough_fmu)  # the model description is read once
        assert a.fmu.handle is None  # no instance before initialize
        a.initialize(0.0)
        b.initialize(0.0)
        assert a.fmu.handle is not None and b.fmu.handle is not None
        assert a.fmu.handle.c.value != b.fmu.handle.c.value
        assert isinstance(a.fmu.runtime, Stepper) and a.fmu.runtime is not b.fmu.runtime
        c_step = a.c_step()
        assert isinstance(c_step, FMUCStep) and c_step.comp is a and c_step.stepper is a.fmu.runtime
        assert FMUComponent._stepped is CoSimComponent._stepped  # the end of a step is the base component's
        a.set_inputs({"u": 0.5})
        b.set_inputs({"u": 0.5})
        a.do_step(0.0, 0.1)
        b.do_step(0.0, 0.1)
        assert (a.t, a.outputs["y"].value, b.outputs["y"].value) == (0.1, 1.5, 1.0)  # y = k*u, k = 3 and 2
        times, values = a.get_history_arrays(["y"])
        assert list(times) == [0.0, 0.1] and list(values["y"]) == [0.0, 1.5]
        a.reset()
        assert a.fmu.handle is None and a.c_step() is None
        with pytest.raises(FMUError, match=r"FMU component 'a' \(feedthrough.fmu\): the FMU is not instantiated"):
            a.do_step(0.0, 0.1)
    finally:
        a.free()
        b.free()


def test_a_setting_the_fmu_code_refuses_is_a_config_error_at_its_key(feedthrough_fmu: Path) -> None:
    """Own settings and FMU parameters are refused with a ConfigError keyed by the parameter (the config builder
    places it under the component), naming the component and the value."""
    comp = FMUComponent("f")
    with pytest.raises(ConfigError) as info:
        comp.set_parameters(path=str(feedthrough_fmu), tolerance=-1)
    assert info.value.key == "tolerance"
    assert info.value.message == ("FMU component 'f' (feedthrough.fmu): parameter 'tolerance' must be a number > 0 "
                                  "(or null), got -1")
    with pytest.raises(ConfigError) as info:
        comp.set_parameters(u_max=-2.0)
    assert info.value.key == "u_max"
    assert info.value.message == ("FMU component 'f' (feedthrough.fmu): parameter 'u_max' must be >= 0 (the FMU's "
                                  "min), got -2.0")
    with pytest.raises(ConfigError) as info:
        build_experiment({"components": {"f": {"type": "fmu",
                                               "params": {"path": str(feedthrough_fmu), "k": "fast"}}}})
    assert str(info.value) == ("components.f.params.k: FMU component 'f' (feedthrough.fmu): parameter 'k' "
                               "[no unit]: 'fast' is not defined in the unit registry")


def test_an_unusable_fmu_file_and_a_foreign_snapshot_are_config_errors(feedthrough_fmu: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.fmu"
    with pytest.raises(ConfigError, match=r"^FMU file not found: "):
        read_fmu(missing)
    a, b = fmu("a", feedthrough_fmu), fmu("b", feedthrough_fmu)
    try:
        a.initialize(0.0)
        b.initialize(0.0)
        with pytest.raises(ConfigError, match="the snapshot belongs to another FMU instance"):
            b.restore_state(a.snapshot_state(), 0.0)
    finally:
        a.free()
        b.free()
