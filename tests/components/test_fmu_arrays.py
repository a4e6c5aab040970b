"""Elements of FMI 3 array variables as parameters, start values, overrides and sweeps.

The FMU (``tests/fmus/state_space3.c``) is ``x' = A x + B u``, ``y = x`` with the
2x2 array parameter ``A`` and the arrays ``B``, ``x0`` and ``y``, integrated by
RK4 on substeps of 1 ms. Truth is the exact solution for a constant input,
``expm`` of the augmented matrix ``[[A, B u], [0, 0]]``: RK4's error over 1 s is
below 1e-12 here, so the runs must agree to 1e-10. An element is named
``A[1,2]`` (as its port or parameter), ``A.1.2`` (Hydra's overrides allow no
``[`` in a key) or by a mapping ``A: {1: {2: VALUE}}``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from scipy.linalg import expm

from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError
from cosimrun.runner.run import prepare, run_experiment
from cosimrun.storage import load_results

A0 = [[0.0, 1.0], [-2.0, -3.0]]
B0, X00 = [0.0, 1.0], [1.0, 0.0]
"""The FMU's defaults."""
TF, DT = 1.0, 0.01
TOL = 1e-10


def exact(a: Any, b: Any, x0: Any, u: float, t: np.ndarray) -> np.ndarray:
    """``x(t)`` of ``x' = A x + B u`` for a constant *u*, shape ``(len(t), 2)``."""
    m = np.zeros((3, 3))
    m[:2, :2], m[:2, 2] = a, np.asarray(b) * u
    return np.array([(expm(m * ti) @ np.r_[x0, 1.0])[:2] for ti in t])


@pytest.fixture(scope="session")
def ss3(fmu_dir: Path) -> Path:
    return builders.state_space3(fmu_dir)


def experiment(path: Path, params: Mapping[str, Any], u: float = 0.0) -> dict[str, Any]:
    """The FMU as component ``ss`` with *params*, its input from a constant *u*, for TF s at DT."""
    return {
        "name": "ss",
        "run": {"t0": 0.0, "tf": TF, "dt": DT},
        "components": {"ss": {"type": "fmu", "params": {"path": str(path), **params}},
                       "u": {"type": "constant", "params": {"value": u}}},
        "connections": ["u.y -> ss.u"],
    }


def run_y(cfg: dict[str, Any], out: Path) -> tuple[np.ndarray, np.ndarray]:
    """The recorded time and ``(y[1], y[2])`` of the run of *cfg* (read back from its results file)."""
    outcome = run_experiment(cfg, out, experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    history = load_results(out / "results.h5").history("ss")
    return history["y[1]"].time, np.column_stack([history["y[1]"].values, history["y[2]"].values])


def test_elements_are_set_by_name_by_indices_or_by_a_mapping(ss3: Path, tmp_path: Path) -> None:
    params = {"A[1,1]": -1.0, "A": {2: {2: -4.0}}, "A.1.2": 0.5, "B": {"2": 2.0}, "x0.2": "50 cm"}
    cfg = experiment(ss3, params, u=1.5)
    comp = build_experiment(cfg).system.components["ss"]
    assert [comp.parameters[f"A[{i},{j}]"] for i in (1, 2) for j in (1, 2)] == [-1.0, 0.5, -2.0, -4.0]
    assert (comp.parameters["B[2]"], comp.parameters["x0[2]"]) == (2.0, 0.5)
    t, y = run_y(cfg, tmp_path)
    np.testing.assert_allclose(y, exact([[-1.0, 0.5], [-2.0, -4.0]], [0.0, 2.0], [1.0, 0.5], 1.5, t),
                               rtol=0, atol=TOL)
    default = exact(A0, B0, X00, 1.5, t)
    assert np.abs(y - default).max() > 0.1  # the elements changed the run


def _compose(conf: Path, overrides: list[str]) -> dict[str, Any]:
    """The experiment config ``cosimrun --config-dir conf OVERRIDES`` composes (in process), as a plain dict."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.types import RunMode
    from omegaconf import OmegaConf, open_dict

    from cosimrun.config.schema import register_configs

    register_configs()
    search = create_config_search_path("pkg://cosimrun.conf")
    search.prepend("test", f"file://{conf}")
    cfg = ConfigLoaderImpl(config_search_path=search).load_configuration("config", overrides, run_mode=RunMode.RUN)
    with open_dict(cfg):
        del cfg["hydra"]  # its interpolations need a running Hydra
    return OmegaConf.to_container(cfg, resolve=True)


def _conf(directory: Path, path: Path, params: Mapping[str, Any]) -> Path:
    conf = directory / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "ss.yaml").write_text("# @package _global_\n" + yaml.safe_dump(experiment(path, params)))
    return conf


def test_an_override_of_an_element_wins_over_the_file_in_any_spelling(ss3: Path, tmp_path: Path) -> None:
    # the file names A[1,1] in a mapping with integer keys and A[2,2] by name; the overrides are strings
    conf = _conf(tmp_path, ss3, {"A": {1: {1: -1.0}}, "A[2,2]": -4.0})
    cfg = _compose(conf, ["+experiment=ss", "++components.ss.params.A.1.1=-2", "++components.ss.params.A.2.2=-5",
                          "+components.ss.params.x0.2=0.25"])
    comp = build_experiment(cfg).system.components["ss"]
    assert [comp.parameters[f"A[{i},{j}]"] for i in (1, 2) for j in (1, 2)] == [-2.0, 1.0, -2.0, -5.0]
    t, y = run_y(cfg, tmp_path / "run")
    np.testing.assert_allclose(y, exact([[-2.0, 1.0], [-2.0, -5.0]], B0, [1.0, 0.25], 0.0, t), rtol=0, atol=TOL)


@pytest.mark.parametrize(("params", "message"), [
    ({"A": {1: {3: 5.0}}},
     "components.ss.params.A.1.3: 5.0: no element [1,3]: A is a 2x2 array (valid: A.1.1 to A.2.2, 1-based, row-major)"),
    ({"A.0.1": 5.0},
     "components.ss.params.A.0.1: 5.0: no element [0,1]: A is a 2x2 array (valid: A.1.1 to A.2.2, 1-based, "
     "row-major)"),
    ({"A[3,1]": 5.0},
     "components.ss.params.A[3,1]: 5.0: no element [3,1]: A is a 2x2 array (valid: A[1,1] to A[2,2], 1-based, "
     "row-major)"),
    ({"A": {2: 5.0}},
     "components.ss.params.A.2: 5.0: an element of A has 2 indices: A is a 2x2 array (valid: A.1.1 to A.2.2, "
     "1-based, row-major)"),
    ({"B": {"first": 1.0}},
     "components.ss.params.B.first: 1.0: no element [first]: B is an array of 2 elements (valid: B.1 to B.2, "
     "1-based)"),
    ({"A": [[1.0, 0.0], [0.0, 1.0]]},
     "components.ss.params.A: [[1.0, 0.0], [0.0, 1.0]]: A is a 2x2 array (valid: A.1.1 to A.2.2, 1-based, "
     "row-major); set its elements one by one (a list would be indexed from 0 by overrides)"),
    ({"y": {1: 1.0}},
     "components.ss.params.y.1: 1.0: y[1] is not a parameter of FMU component 'ss' (state_space3.fmu) "
     "(its causality is output)"),
    ({"A": {1: {1: "fast"}}},
     "components.ss.params.A.1.1: 'fast' is invalid: FMU component 'ss' (state_space3.fmu): parameter 'A[1,1]' "
     "[no unit]: 'fast' is not defined in the unit registry"),
    ({"start": {"x0": {9: 1.0}}},
     "components.ss.params.start.x0.9: 1.0: no element [9]: x0 is an array of 2 elements (valid: x0.1 to x0.2, "
     "1-based)"),
])
def test_a_wrong_element_is_one_line_naming_key_value_and_what_is_valid(ss3: Path, params: dict[str, Any],
                                                                        message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_experiment(experiment(ss3, params))
    assert str(info.value) == message


@pytest.mark.parametrize(("override", "message"), [
    ("components.ss.params.A[1,2]=0.5", "components.ss.params.A[1,2]: Hydra's overrides allow no '[' in a key; name "
                                        "the array element by its indices: components.ss.params.A.1.2=0.5"),
    ("+components.ss.params.B[2]=1,2", "components.ss.params.B[2]: Hydra's overrides allow no '[' in a key; name the "
                                       "array element by its indices: +components.ss.params.B.2=1,2"),
])
def test_an_override_naming_an_element_with_brackets_says_how_to_name_it(override: str, message: str) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    from cosimrun.config.reporting import config_error

    with pytest.raises(OverrideParseException) as info:
        OverridesParser.create().parse_overrides([override])
    assert str(config_error(info.value, ["+experiment=ss", override])) == message


def test_start_values_of_array_input_elements_by_indices(fmu_dir: Path) -> None:
    ball = builders.component("b", builders.bouncing_ball3(fmu_dir), start={"gain": {2: 5.0}, "gain.3": -1.0})
    ball.initialize(0.0)
    outputs = ball.get_outputs()
    h = outputs["h"]
    assert [outputs[f"scaled[{i}]"] for i in (1, 2, 3)] == [1.0 * h, 5.0 * h, -1.0 * h]
    ball.free()


def test_initial_values_of_array_input_elements_by_indices(fmu_dir: Path) -> None:
    ball3 = builders.bouncing_ball3(fmu_dir)
    cfg = {"components": {"b": {"type": "fmu", "params": {"path": str(ball3)},
                                "initial": {"gain": {2: 4.0, "3": 5.0}, "gain[1]": 3.0}}}}
    system = build_experiment(cfg).system
    assert {k: v for k, v in system.initial_values.items() if k.startswith("b.gain")} == {
        "b.gain[1]": 3.0, "b.gain[2]": 4.0, "b.gain[3]": 5.0}
    system.free()
    cfg["components"]["b"]["initial"] = {"gain": {4: 1.0}}
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    assert str(info.value) == ("components.b.initial.gain.4: unknown input 'gain[4]' of component 'b'; did you mean "
                               "'gain[3]' or 'gain[2]' or 'gain[1]'? (known: gain[1], gain[2], gain[3])")


@pytest.mark.slow
def test_elements_on_the_command_line_in_a_run_a_sweep_and_an_error(ss3: Path, tmp_path: Path, cosimrun) -> None:
    command = cosimrun
    conf = _conf(tmp_path, ss3, {"A[2,2]": -4.0})

    def cosimrun(*args: str) -> subprocess.CompletedProcess[str]:
        return command("--config-dir", str(conf), *args, timeout=300)

    proc = cosimrun("+experiment=ss", "hydra.run.dir=run", "+components.ss.params.A.1.1=-1")
    assert proc.returncode == 0, proc.stderr
    res = load_results(tmp_path / "run" / "results.h5")
    t = res.history("ss")["y[1]"].time
    y = np.column_stack([res.history("ss")[p].values for p in ("y[1]", "y[2]")])
    np.testing.assert_allclose(y, exact([[-1.0, 1.0], [-2.0, -4.0]], B0, X00, 0.0, t), rtol=0, atol=TOL)

    proc = cosimrun("-m", "+experiment=ss", "++components.ss.params.A.1.1=-1,-2", "hydra/launcher=basic",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert proc.returncode == 0, proc.stderr
    for job, a11 in ((0, -1.0), (1, -2.0)):
        res = load_results(tmp_path / "sweep" / str(job) / "results.h5")
        y = np.column_stack([res.history("ss")[p].values for p in ("y[1]", "y[2]")])
        np.testing.assert_allclose(y, exact([[a11, 1.0], [-2.0, -4.0]], B0, X00, 0.0, t), rtol=0, atol=TOL)

    for override, line in [
        ("components.ss.params.A[1,1]=-1",
         "cosimrun: error: components.ss.params.A[1,1]: Hydra's overrides allow no '[' in a key; name the array "
         "element by its indices: components.ss.params.A.1.1=-1"),
        ("+components.ss.params.A.3.1=-1",
         "cosimrun: error: components.ss.params.A.3.1: -1: no element [3,1]: A is a 2x2 array (valid: A.1.1 to "
         "A.2.2, 1-based, row-major)"),
    ]:
        proc = cosimrun("+experiment=ss", "hydra.run.dir=bad", override)
        assert proc.returncode == 2
        assert [x for x in proc.stderr.splitlines() if x.strip()] == [line]
        assert not (tmp_path / "bad").exists()
