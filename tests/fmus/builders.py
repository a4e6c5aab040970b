"""Build the test FMUs from the sources in this directory (offline: gcc and pythonfmu only).

C models use the framework header that :mod:`cosimrun.components.fmu` ships
(:data:`~cosimrun.components.fmu.FMI2_CS_FRAMEWORK`) and compile against the
FMI headers of FMPy; pythonfmu models are generated from ``pygain.py.in`` with
a class (and so module and model identifier) name unique per variant, since
pythonfmu imports the model module into the running interpreter by that name.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

from cosimrun.components.fmu import build_c_fmu, build_example

HERE = Path(__file__).resolve().parent


def pendulum(directory: Path) -> Path:
    """The shipped example pendulum (torque -> q, omega; rollback; end stop inside the FMU)."""
    return build_example("pendulum", directory)


def feedthrough(directory: Path, rollback: bool = True) -> Path:
    """``y = k * u`` with declared feedthrough; ``steps`` (Integer) and ``positive`` (Boolean) outputs."""
    identifier = "feedthrough" if rollback else "feedthrough_norollback"
    xml = (HERE / "feedthrough.xml").read_text().format(identifier=identifier, rollback=str(rollback).lower())
    return build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier, model_description=xml,
                       source=(HERE / "feedthrough.c").read_text(),
                       defines={"CAN_GET_SET_STATE": int(rollback)})


def bouncing_ball(directory: Path) -> Path:
    """A bouncing ball (outputs h, v) whose impacts happen inside ``fmi2DoStep``."""
    return build_c_fmu(directory / "bouncing_ball.fmu", model_identifier="bouncing_ball",
                       model_description=(HERE / "bouncing_ball.xml").read_text(),
                       source=(HERE / "bouncing_ball.c").read_text())


def pythonfmu_gain(directory: Path, handle_state: bool) -> Path:
    """The pythonfmu gain model, with or without FMU-state support."""
    from pythonfmu.builder import FmuBuilder

    name = "cosimrun_test_pygain_state" if handle_state else "cosimrun_test_pygain_nostate"
    script = directory / f"{name}.py"
    script.write_text((HERE / "pygain.py.in").read_text().replace("MODEL_CLASS", name))
    try:
        return Path(FmuBuilder.build_FMU(script, dest=directory, canGetAndSetFMUstate=handle_state))
    finally:
        if str(directory) in sys.path:
            sys.path.remove(str(directory))


def model_exchange_only(directory: Path) -> Path:
    """An FMU that only supports model exchange (no binary needed: it is refused from its description)."""
    xml = (HERE / "feedthrough.xml").read_text().format(identifier="feedthrough", rollback="true")
    xml = xml.replace("<CoSimulation ", "<ModelExchange ")
    path = directory / "model_exchange_only.fmu"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("modelDescription.xml", xml)
    return path


def without_binary(directory: Path) -> tuple[Path, str]:
    """A co-simulation FMU with a binary for another platform only; returns it and that platform."""
    import fmpy

    other, ext = ("linux64", ".so") if fmpy.platform == "win64" else ("win64", ".dll")
    xml = (HERE / "feedthrough.xml").read_text().format(identifier="feedthrough", rollback="true")
    path = directory / "other_platform_only.fmu"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("modelDescription.xml", xml)
        zf.writestr(f"binaries/{other}/feedthrough{ext}", b"not really a library")
    return path, other


def fmi3(directory: Path) -> Path:
    """An FMU whose model description says FMI 3.0."""
    xml = (HERE / "feedthrough.xml").read_text().format(identifier="feedthrough", rollback="true")
    path = directory / "fmi3.fmu"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("modelDescription.xml", xml.replace('fmiVersion="2.0"', 'fmiVersion="3.0"'))
    return path
