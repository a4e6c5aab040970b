"""The package list in pyproject.toml and the installed config packages."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("cosimrun", "hydra_plugins")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found - {"cosimrun.conf"} <= listed, f"missing from pyproject packages: {sorted(found - listed)}"
    assert "cosimrun.conf" in listed


def test_configs_are_importable_package_data() -> None:
    conf = resources.files("cosimrun.conf")
    assert (conf / "config.yaml").is_file()
    masters = {p.name for p in (conf / "master").iterdir()}
    assert {"jacobi.yaml", "gauss_seidel.yaml", "ijcsa.yaml", "hybrid.yaml"} <= masters
    experiments = {p.name for p in (conf / "experiment").iterdir()}
    assert {"pendulum_switch.yaml", "bouncing_ball.yaml", "coupled_oscillators.yaml"} <= experiments


def test_lazy_top_level_names_all_resolve() -> None:
    import cosimrun
    import cosimrun.core

    for package in (cosimrun, cosimrun.core):
        names = set(package.__all__) - {"__version__"}
        assert names == set(package._LAZY)
        for name in names:
            assert getattr(package, name) is not None
        assert names <= set(dir(package))


def test_the_command_starts_without_the_engine() -> None:
    """``cosimrun --list-components`` and a sweep's driver do not import pint, scipy or the engine."""
    import subprocess
    import sys

    code = (
        "import sys; from cosimrun.cli import _precheck; _precheck(['+experiment=pendulum_switch']); "
        "import hydra_plugins.cosimrun_dask_launcher._core; "
        "print(sorted(m for m in ('pint', 'scipy', 'cosimrun.core.component') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_pyarrow_is_only_in_the_parquet_extra() -> None:
    """A plain install does not pull pyarrow (170 MB), used only by ``cosimrun export --format parquet``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("pyarrow")]
    assert project["optional-dependencies"]["parquet"] == ["pyarrow>=14"]
    assert "cosimrun[parquet]" in project["optional-dependencies"]["test"]


def test_parquet_export_without_pyarrow_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """Without pyarrow, ``cosimrun export --format parquet`` names the extra to install and exits 2, writing nothing;
    the other formats work as before."""
    import subprocess
    import sys

    cli = "from cosimrun.cli import main; main()"
    no_pyarrow = "import sys; sys.modules['pyarrow'] = None; " + cli  # import pyarrow fails, as when not installed

    def cosimrun(code: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)

    made = cosimrun(cli, "+experiment=bouncing_ball", "run.tf=0.2", "hydra.run.dir=run")
    assert made.returncode == 0, made.stderr
    proc = cosimrun(no_pyarrow, "export", "run", "--format", "parquet")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("cosimrun: error: export: --format parquet needs pyarrow, which is not installed: "
                           "pip install 'cosimrun[parquet]'\n")
    assert not (tmp_path / "run" / "export").exists()
    proc = cosimrun(no_pyarrow, "export", "run", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run" / "export" / "ball.csv").is_file()
