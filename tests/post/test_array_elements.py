"""Elements of FMI 3 array ports (``ss.y[1]``) selected by plot, compare and export, and CSV columns named so.

The run is the FMI 3 state-space FMU (``tests/fmus/state_space3.c``: ``x' = A x + B u``,
``y = x``, ``y`` an array of 2 elements in m) driven by a constant input; its truth is
the exact solution (``expm`` of the augmented matrix), which RK4 on 1 ms substeps meets
to 1e-12. The results file keeps the element names as they are (``/components/ss/y[1]``:
HDF5 names may hold ``[``, ``]`` and ``,``), so every command reads them back by name.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from scipy.linalg import expm

from cosimrun.errors import UnknownNameError
from cosimrun.post import commands
from cosimrun.post.compare import compare
from cosimrun.post.export import export
from cosimrun.post.plot import plot_run
from cosimrun.post.signals import read_csv, select
from cosimrun.runner.run import prepare, run_experiment

U, TF, DT = 1.5, 1.0, 0.01
A, B, X0 = np.array([[0.0, 1.0], [-2.0, -3.0]]), np.array([0.0, 1.0]), np.array([1.0, 0.0])
"""The FMU's defaults."""


def exact(t: np.ndarray) -> np.ndarray:
    """``(y[1], y[2])`` at *t*, shape ``(len(t), 2)``."""
    m = np.zeros((3, 3))
    m[:2, :2], m[:2, 2] = A, B * U
    return np.array([(expm(m * ti) @ np.r_[X0, 1.0])[:2] for ti in t])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory of the state-space FMU with its input held at U."""
    root = tmp_path_factory.mktemp("arrays")
    cfg = {"name": "ss", "run": {"t0": 0.0, "tf": TF, "dt": DT},
           "components": {"ss": {"type": "fmu", "params": {"path": str(builders.state_space3(root))}},
                          "u": {"type": "constant", "params": {"value": U}}},
           "connections": ["u.y -> ss.u"]}
    outcome = run_experiment(cfg, root / "run", experiment=prepare(cfg))
    assert outcome.ok, outcome.error
    return root / "run"


def command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], list[str]]:
    """``cosimrun <argv>`` in-process: exit status, stdout lines, stderr lines."""
    with pytest.raises(SystemExit) as end:
        commands.main(list(argv))
    out, err = capsys.readouterr()
    return end.value.code, out.splitlines(), err.splitlines()


def test_patterns_take_element_brackets_literally() -> None:
    names = ["ss.y[1]", "ss.y[2]", "ss.y1", "ss.A[1,2]", "ball.h", "ball.v"]
    assert select(names, ["ss.y[1]"]) == ["ss.y[1]"]
    assert select(names, ["y[2]"]) == ["ss.y[2]"]
    assert select(names, ["ss.y[*]"]) == ["ss.y[1]", "ss.y[2]"]
    assert select(names, ["ss.A[1,2]", "ss.A[*,2]"]) == ["ss.A[1,2]"]
    assert select(names, ["ball.[hv]"]) == ["ball.h", "ball.v"]  # other brackets are still character classes
    with pytest.raises(UnknownNameError) as info:
        select(names, ["ss.y[3]"], "in run")
    assert str(info.value) == ("unknown signal 'ss.y[3]' in run; did you mean 'ss.y[2]' or 'ss.y[1]' or 'ss.y1'? "
                               "(known: ball.h, ball.v, ss.A[1,2], ss.y1, ss.y[1], ss.y[2])")


def test_the_results_file_names_elements_as_they_are(run: Path) -> None:
    with h5py.File(run / "results.h5") as f:
        group = f["components/ss"]
        assert [name for name in group if name.startswith("y")] == ["y[1]", "y[2]"]
        assert group["y[1]"].attrs["units"] == "m"
        y = np.column_stack([group["y[1]"][:], group["y[2]"][:]])
        np.testing.assert_allclose(y, exact(group["time"][:]), rtol=0, atol=1e-10)


def test_plot_selects_an_element(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fig = plot_run(run, ["ss.y[1]"])
    (line,) = fig.axes[0].lines
    assert line.get_label() == "ss.y[1]"
    np.testing.assert_allclose(line.get_ydata(), exact(line.get_xdata())[:, 0], rtol=0, atol=1e-10)
    code, out, err = command(capsys, "plot", str(run), "ss.y[2]", "ss.y[*]", "-o", str(tmp_path / "y.png"))
    assert (code, out, err) == (0, [f"plot: {tmp_path / 'y.png'}"], [])
    assert (tmp_path / "y.png").stat().st_size > 0
    code, out, err = command(capsys, "plot", str(run), "ss.y[3]", "-o", str(tmp_path / "no.png"))
    assert (code, out) == (2, [])
    assert err == [f"cosimrun: error: plot: unknown signal 'ss.y[3]' in {run / 'results.h5'}; did you mean "
                   "'ss.y[2]' or 'ss.y[1]'? (known: ss.y[1], ss.y[2], u.y)"]


def test_export_writes_elements_that_compare_reads_back(run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    export(run, "csv", tmp_path)
    frame = pd.read_csv(tmp_path / "ss.csv")
    assert [c for c in frame.columns if c.startswith("y")] == ["y[1] [m]", "y[2] [m]"]
    signals = read_csv(tmp_path / "ss.csv")
    assert (signals["y[1]"].unit, signals["y[2]"].unit) == ("m", "m")
    np.testing.assert_allclose(np.column_stack([signals["y[1]"].values, signals["y[2]"].values]),
                               exact(signals["y[1]"].time), rtol=0, atol=1e-10)
    result = compare(run, tmp_path / "ss.csv", ports=["ss.y[1]"])
    assert [(s.name, s.max_deviation, s.ok) for s in result.signals] == [("ss.y[1]", 0.0, True)]

    frame["y[2] [m]"] += 1e-3  # outside the default tolerance of y[2] (1e-6 + 1e-3 * its largest magnitude)
    frame.to_csv(tmp_path / "off.csv", index=False)
    code, out, _ = command(capsys, "compare", str(run), str(tmp_path / "off.csv"), "--ports", "ss.y[*]")
    assert code == 1
    assert out[0].startswith("ss.y[1] [m]") and out[0].endswith("ok")
    assert out[1].startswith("ss.y[2] [m]  max deviation 0.001 ") and "FAIL from t=0 s" in out[1]
    assert out[2] == "FAIL: ss.y[2] first differs at t=0 s (1 of 2 signals fail)"

    (parquet,) = export(run, "parquet", tmp_path)
    table = pd.read_parquet(parquet, filters=[("component", "==", "ss"), ("record", "==", "sample")])
    np.testing.assert_array_equal(table["ss.y[2]"].to_numpy(), signals["y[2]"].values)


def test_a_csv_column_named_by_an_element_is_that_name_without_a_unit(tmp_path: Path) -> None:
    path = tmp_path / "ref.csv"
    path.write_text('time,ss.y[1],"A[1,2]",h [m],v[2] [m/s],w [1],p(bar)\n0,1,2,3,4,5,6\n1,1,2,3,4,5,6\n')
    signals = read_csv(path)
    assert {name: s.unit for name, s in signals.items()} == {
        "ss.y[1]": None, "A[1,2]": None, "h": "m", "v[2]": "m/s", "w": "1", "p": "bar"}
