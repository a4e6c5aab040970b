"""Build the test FMUs from the sources in this directory (offline: gcc and pythonfmu only).

C models include the framework header that :mod:`cosimrun.components.fmu` ships
as package data (``cosimrun/components/fmu/c/cosimrun_fmi2cs.h``, written next
to the model with the ``cosimrun_fmi.h`` it shares with the model-exchange
frameworks here by :func:`~cosimrun.components.fmu.build_c_fmu`) and compile
against the FMI headers of FMPy; pythonfmu models are generated from
``pygain.py.in`` with a class (and so module and model identifier) name unique
per variant, since pythonfmu imports the model module into the running
interpreter by that name.
"""

from __future__ import annotations

import re
import sys
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cosimrun.components.fmu import FMUComponent, build_c_fmu, build_example

HERE = Path(__file__).resolve().parent


def component(name: str, path: Path, cls: type[Any] = FMUComponent, **params: Any) -> Any:
    """A component of class *cls* (a co-simulation ``FMUComponent`` by default) named *name* on the FMU at *path*,
    with *params* set."""
    comp = cls(name)
    comp.set_parameters(path=str(path), **params)
    return comp


def _c_fmu(directory: Path, identifier: str, model: str, xml: str, defines: Mapping[str, Any] | None = None) -> Path:
    """Compile ``<model>.c`` with model description *xml* into ``<directory>/<identifier>.fmu``."""
    return build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier, model_description=xml,
                       source=_inline_headers((HERE / f"{model}.c").read_text()), defines=defines)


def _inline_headers(source: str) -> str:
    """*source* with each ``#include "NAME"`` of a header in tests/fmus replaced by that header, itself inlined
    (a built FMU's source is one file)."""

    def header(match: re.Match[str]) -> str:
        path = HERE / match.group(1)
        return _inline_headers(path.read_text()) if path.is_file() else match.group(0)

    return re.sub(r'^#include "([^"/]+\.h)".*$', header, source, flags=re.M)


def _feedthrough_xml(identifier: str = "feedthrough", rollback: bool = True) -> str:
    return (HERE / "feedthrough.xml").read_text().format(identifier=identifier, rollback=str(rollback).lower())


def _archive(path: Path, files: Mapping[str, str | bytes]) -> Path:
    """A zip archive at *path* holding *files* (archive name -> content), e.g. an FMU without a usable binary."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)
    return path


def pendulum(directory: Path) -> Path:
    """The shipped example pendulum (torque -> q, omega; rollback; end stop inside the FMU)."""
    return build_example("pendulum", directory)


def feedthrough(directory: Path, rollback: bool = True) -> Path:
    """``y = k * u`` with declared feedthrough; ``steps`` (Integer) and ``positive`` (Boolean) outputs."""
    identifier = "feedthrough" if rollback else "feedthrough_norollback"
    return _c_fmu(directory, identifier, "feedthrough", _feedthrough_xml(identifier, rollback),
                  defines={"CAN_GET_SET_STATE": int(rollback)})


def affine(directory: Path) -> Path:
    """``y = a * u + b + q * u^2`` with declared feedthrough, and ``u0``, the input it started with (coupled
    initialization)."""
    return _c_fmu(directory, "affine", "affine", (HERE / "affine.xml").read_text())


LOAD_MARKER = "COSIMRUN_TEST_LOAD_MARKER"
"""The environment variable naming the file the library of :func:`feedthrough_marking_load` writes when loaded."""


def feedthrough_marking_load(directory: Path) -> Path:
    """The ``feedthrough`` FMU whose shared library's constructor (``load_marker.c``) writes ``loaded <pid>`` to the
    file named by :data:`LOAD_MARKER` when the library is loaded (model identifier ``feedthrough_marker``)."""
    identifier = "feedthrough_marker"
    source = _inline_headers((HERE / "feedthrough.c").read_text()) + (HERE / "load_marker.c").read_text()
    return build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier,
                       model_description=_feedthrough_xml(identifier), source=source,
                       defines={"CAN_GET_SET_STATE": 1})


def feedthrough_without_functions(directory: Path) -> Path:
    """The ``feedthrough`` model description with a shared library that exports no FMI function."""
    return build_c_fmu(directory / "feedthrough_nofunctions.fmu", model_identifier="feedthrough",
                       model_description=_feedthrough_xml(), source="int cosimrun_test_nothing(void) { return 0; }\n")


def bouncing_ball(directory: Path) -> Path:
    """A bouncing ball (outputs h, v) whose impacts happen inside ``fmi2DoStep``. With parameter
    ``internal_step`` > 0 it advances only on its grid ``k * internal_step`` and holds h, v in between (piecewise
    constant outputs; the grid time ``t_held`` is part of the FMU state)."""
    return _c_fmu(directory, "bouncing_ball", "bouncing_ball", (HERE / "bouncing_ball.xml").read_text())


def discard(directory: Path, *, variable_step: bool = True, rollback: bool = True,
            reports_time: bool = True, interpolate: bool = False) -> Path:
    """``x' = u``; a step across parameter ``t_discard`` ends there with ``fmi2Discard`` (outputs x, h_min, h_max,
    discards, steps, du1). Variants: ``canHandleVariableCommunicationStepSize`` false, no FMU state, no
    ``fmi2LastSuccessfulTime``, and ``canInterpolateInputs`` (u integrated as the polynomial of its derivatives)."""
    identifier = "discard" + ("" if variable_step else "_fixed") + ("" if rollback else "_norollback") \
        + ("" if reports_time else "_notime") + ("_interpolating" if interpolate else "")
    xml = (HERE / "discard.xml").read_text().format(identifier=identifier, variable=str(variable_step).lower(),
                                                     rollback=str(rollback).lower(),
                                                     interpolate=str(interpolate).lower())
    return _c_fmu(directory, identifier, "discard", xml,
                  defines={"CAN_GET_SET_STATE": int(rollback), "REPORTS_LAST_SUCCESSFUL_TIME": int(reports_time),
                           "INPUT_DERIVATIVES": int(interpolate)})


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
    xml = _feedthrough_xml().replace("<CoSimulation ", "<ModelExchange ")
    return _archive(directory / "model_exchange_only.fmu", {"modelDescription.xml": xml})


def without_binary(directory: Path) -> tuple[Path, str]:
    """A co-simulation FMU with a binary for another platform only; returns it and that platform."""
    import fmpy

    other, ext = ("linux64", ".so") if fmpy.platform == "win64" else ("win64", ".dll")
    path = _archive(directory / "other_platform_only.fmu", {
        "modelDescription.xml": _feedthrough_xml(),
        f"binaries/{other}/feedthrough{ext}": b"not really a library",
    })
    return path, other


def fmi3(directory: Path) -> Path:
    """An FMU whose model description says FMI 3.0."""
    xml = _feedthrough_xml().replace('fmiVersion="2.0"', 'fmiVersion="3.0"')
    return _archive(directory / "fmi3.fmu", {"modelDescription.xml": xml})


def fmi1(directory: Path) -> Path:
    """An FMU whose model description says FMI 1.0."""
    xml = _feedthrough_xml().replace('fmiVersion="2.0"', 'fmiVersion="1.0"')
    return _archive(directory / "fmi1.fmu", {"modelDescription.xml": xml})


def _fmi3_binaries(built: Path, identifier: str) -> Path:
    """The FMU *built* by :func:`build_c_fmu` (library under FMI 2's platform folder, ``linux64``) rewritten with its
    library *identifier* under FMI 3's platform tuple (``x86_64-linux``), where an FMI 3.0 importer looks."""
    import fmpy

    with zipfile.ZipFile(built) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    library = f"{identifier}{fmpy.sharedLibraryExtension}"
    files[f"binaries/{fmpy.platform_tuple}/{library}"] = files.pop(f"binaries/{fmpy.platform}/{library}")
    built.unlink()
    return _archive(built, files)


def _me_fmu(directory: Path, identifier: str, model: str, rollback: bool, fmi3: bool = False,
            edit: Callable[[str], str] = str) -> Path:
    """Compile model-exchange model ``<model>.c`` on the framework ``cosimrun_fmi2me.h`` (``cosimrun_fmi3me.h``
    with *fmi3*, model description ``<model>3.xml``, changed by *edit*), inlined into the source for its
    ``#include "cosimrun_me.h"``, into ``<directory>/<identifier>.fmu``."""
    header = (HERE / ("cosimrun_fmi3me.h" if fmi3 else "cosimrun_fmi2me.h")).read_text()
    source = re.sub(r'#include "cosimrun_me\.h".*', lambda _: header, (HERE / f"{model}.c").read_text())
    xml = edit((HERE / f"{model}{'3' if fmi3 else ''}.xml").read_text().format(identifier=identifier,
                                                                                rollback=str(rollback).lower()))
    built = build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier, model_description=xml,
                        source=source, defines={"CAN_GET_SET_STATE": int(rollback)})
    return _fmi3_binaries(built, identifier) if fmi3 else built


FEET = '<Unit name="m"><BaseUnit m="1"/><DisplayUnit name="ft" factor="3.280839895013123"/></Unit>'
"""FMI 3's unit m with the display unit ft (``factor``: feet per metre)."""


def _alias3(xml: str, variable: str, alias: str) -> str:
    """FMI 3 model description *xml* with ``<Alias ...>`` text *alias* on variable *variable* and the display unit
    ft of m (:data:`FEET`)."""
    xml = re.sub(rf'(<Float64 name="{variable}" [^>]*?)/>', rf"\1>\n      {alias}\n    </Float64>", xml, count=1)
    if '<Unit name="m">' in xml:
        return xml.replace('<Unit name="m"><BaseUnit m="1"/></Unit>', FEET)
    return xml.replace("  <ModelVariables>", f"  <UnitDefinitions>{FEET}</UnitDefinitions>\n  <ModelVariables>")


def _ball_aliases2(xml: str) -> str:
    """The FMI 2.0 ball's description with outputs ``height`` (alias of h) and ``depth`` (negated alias of h)."""
    extra = "".join(
        f'    <ScalarVariable name="{name}" valueReference="0" causality="output" variability="continuous" '
        f'alias="{kind}">\n      <Real unit="m"/></ScalarVariable>\n'
        for name, kind in (("height", "alias"), ("depth", "negatedAlias")))
    return (xml.replace("  </ModelVariables>", extra + "  </ModelVariables>")
            .replace("    </Outputs>", '      <Unknown index="10" dependencies=""/>\n'
                                       '      <Unknown index="11" dependencies=""/>\n    </Outputs>'))


def me_bouncing_ball(directory: Path, rollback: bool = True, fmi3: bool = False, aliases: bool = False) -> Path:
    """A model-exchange bouncing ball (outputs h, v, impacts; one event indicator, the height), FMI 2.0 or 3.0.
    After an impact it leaves the floor from h = DBL_MIN, as the Reference-FMUs' ball does. With *aliases*, h has
    the FMI 3 alias ``h_ft`` in feet, or the FMI 2 aliases ``height`` and ``depth`` (negated)."""
    identifier = "me_bouncing_ball" + ("3" if fmi3 else "") + ("" if rollback else "_norollback") \
        + ("_aliases" if aliases else "")
    edit = (lambda xml: _alias3(xml, "h", '<Alias name="h_ft" displayUnit="ft"/>')) if aliases and fmi3 \
        else _ball_aliases2 if aliases else str
    return _me_fmu(directory, identifier, "me_bouncing_ball", rollback, fmi3, edit)


def _linear_alias2(xml: str) -> str:
    """The FMI 2.0 linear model's description with input ``w``, an alias of u."""
    return xml.replace("  </ModelVariables>", '    <ScalarVariable name="w" valueReference="2" causality="input" '
                                              'variability="continuous" alias="alias">\n      <Real start="0"/>'
                                              "</ScalarVariable>\n  </ModelVariables>")


def me_linear(directory: Path, rollback: bool = True, fmi3: bool = False, aliases: bool = False) -> Path:
    """A model-exchange ``x' = a x + b u``, ``y = x`` with a time event (``t_jump``: x += jump) and a step
    event (x above ``x_max`` is clamped); outputs x, jumps, clamps; FMI 2.0 or 3.0. With *aliases*, input u has
    the FMI 3 alias ``u_ft`` (u in m, the alias in feet) or the FMI 2 alias ``w``."""
    identifier = "me_linear" + ("3" if fmi3 else "") + ("" if rollback else "_norollback") \
        + ("_aliases" if aliases else "")
    edit = (lambda xml: _alias3(xml.replace('name="u" valueReference="2"', 'name="u" valueReference="2" unit="m"'),
                                "u", '<Alias name="u_ft" displayUnit="ft"/>')) if aliases and fmi3 \
        else _linear_alias2 if aliases else str
    return _me_fmu(directory, identifier, "me_linear", rollback, fmi3, edit)


def me_feedthrough(directory: Path, fmi3: bool = False) -> Path:
    """Model exchange with discrete inputs, as the Reference-FMUs' Feedthrough (``me_feedthrough.c``): y = u, and
    ud, k, on taken at events only; x' = ud + k; event indicator x - level; counters updates and crossings. A
    discrete input set outside initialization or event mode is an FMU error."""
    return _me_fmu(directory, "me_feedthrough" + ("3" if fmi3 else ""), "me_feedthrough", True, fmi3)


def feedthrough_in(directory: Path, unit: str) -> Path:
    """The ``feedthrough`` FMU (``y = k * u``) with its real ports in *unit*, a unit of force, instead of N
    (model identifier ``feedthrough_<unit>``, so *unit* must fit a C identifier, e.g. ``kN``)."""
    from cosimrun.core.units import Q_

    identifier = f"feedthrough_{unit}"
    factor = float(Q_(1.0, unit).to("N").magnitude)
    xml = (_feedthrough_xml(identifier).replace('<Real unit="N"', f'<Real unit="{unit}"')
           .replace("</UnitDefinitions>", f'<Unit name="{unit}"><BaseUnit kg="1" m="1" s="-2" factor="{factor!r}"/>'
                                          "</Unit></UnitDefinitions>"))
    return _c_fmu(directory, identifier, "feedthrough", xml, defines={"CAN_GET_SET_STATE": 1})


def _fmi3_xml(identifier: str, rollback: bool, event_mode: bool) -> str:
    return (HERE / "bouncing_ball3.xml").read_text().format(identifier=identifier, rollback=str(rollback).lower(),
                                                            event_mode=str(event_mode).lower())


def bouncing_ball3(directory: Path, *, rollback: bool = True, event_mode: bool = True, aliases: bool = False) -> Path:
    """The FMI 3.0 co-simulation bouncing ball (``bouncing_ball3.c``): outputs h, v, scaled[1..3] (= gain[i] * h +
    offset, array input gain), bounces (Int32), h32 (Float32), falling (Boolean), phase (String). With event mode
    it returns early at each impact; without, it bounces inside ``fmi3DoStep``. With *aliases*, h has the alias
    ``h_ft`` in feet (as the Reference-FMUs' BouncingBall) and gain the alias ``g_in``. FMI 3 binaries live under
    the platform tuple (:func:`_fmi3_binaries`)."""
    identifier = "bouncing_ball3" + ("" if rollback else "_norollback") + ("" if event_mode else "_noevents") \
        + ("_aliases" if aliases else "")
    xml = _fmi3_xml(identifier, rollback, event_mode)
    if aliases:
        xml = _alias3(xml, "h", '<Alias name="h_ft" displayUnit="ft"/>').replace(
            '<Dimension start="3"/>\n    </Float64>\n    <Float64 name="scaled"',
            '<Dimension start="3"/>\n      <Alias name="g_in"/>\n    </Float64>\n    <Float64 name="scaled"')
    built = _c_fmu(directory, identifier, "bouncing_ball3", xml, defines={"CAN_GET_SET_STATE": int(rollback)})
    return _fmi3_binaries(built, identifier)


def fmi3_clocked(directory: Path) -> Path:
    """An FMI 3.0 co-simulation FMU that declares a clock (refused from its description: no binary needed)."""
    xml = _fmi3_xml("clocked", True, True).replace(
        '<Float64 name="time"', '<Clock name="tick" valueReference="99" causality="input" variability="discrete" '
        'intervalVariability="triggered"/>\n    <Float64 name="time"')
    return _archive(directory / "clocked.fmu", {"modelDescription.xml": xml})


def me_bouncing_ball_with_cs(directory: Path) -> Path:
    """The FMI 2.0 model-exchange ball in an FMU that also declares co-simulation, whose library (another model
    identifier) is no real library: only model exchange can run."""
    import fmpy

    with zipfile.ZipFile(me_bouncing_ball(directory)) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    files["modelDescription.xml"] = files["modelDescription.xml"].replace(
        b"<ModelExchange ", b'<CoSimulation modelIdentifier="me_bouncing_ball_cs" '
                           b'canHandleVariableCommunicationStepSize="true"/>\n  <ModelExchange ')
    files[f"binaries/{fmpy.platform}/me_bouncing_ball_cs{fmpy.sharedLibraryExtension}"] = b"not a library"
    return _archive(directory / "me_bouncing_ball_with_cs.fmu", files)


def stair(directory: Path, *, fmi3: bool = False, interface: str = "cs", event_mode: bool = False,
          rollback: bool = True) -> Path:
    """A stair (``stair.c``: counter = 1 + the instants k * period after the start reached, y = counter) that asks
    to terminate at
    parameter ``t_stop``; FMI 2.0 or 3.0, co-simulation (``interface="cs"``; FMI 3.0 with or without event mode)
    or model exchange (``"me"``). Its default experiment: 0.5 to 6 s by 0.25 s, tolerance 1e-7."""
    identifier = ("stair" + ("3" if fmi3 else "") + ("_me" if interface == "me" else "")
                  + ("_events" if event_mode else "") + ("" if rollback else "_norollback"))
    flag = str(rollback).lower()
    if interface == "me":
        element = (f'<ModelExchange modelIdentifier="{identifier}" canGetAndSetFMU{"S" if fmi3 else "s"}tate="{flag}"'
                   + ("" if fmi3 else ' canNotUseMemoryManagementFunctions="true"') + "/>")
    elif fmi3:
        element = (f'<CoSimulation modelIdentifier="{identifier}" canGetAndSetFMUState="{flag}" '
                   f'canHandleVariableCommunicationStepSize="true" hasEventMode="{str(event_mode).lower()}" '
                   f'canReturnEarlyAfterIntermediateUpdate="{str(event_mode).lower()}"/>')
    else:
        element = (f'<CoSimulation modelIdentifier="{identifier}" canHandleVariableCommunicationStepSize="true" '
                   f'canGetAndSetFMUstate="{flag}" canNotUseMemoryManagementFunctions="true"/>')
    xml = (HERE / ("stair3.xml" if fmi3 else "stair.xml")).read_text().replace("{interface}", element)
    source = (HERE / "stair.c").read_text()
    defines = {"CAN_GET_SET_STATE": int(rollback)}
    if interface == "me" or fmi3:
        header = (HERE / ("cosimrun_fmi3me.h" if fmi3 else "cosimrun_fmi2me.h")).read_text()
        source = re.sub(r'#include "cosimrun_me\.h".*', lambda _: header, source)
        defines["MODEL_EXCHANGE" if interface == "me" else "CO_SIMULATION"] = 1
    built = build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier, model_description=xml,
                        source=source, defines=defines)
    return _fmi3_binaries(built, identifier) if fmi3 else built


def state_space3(directory: Path) -> Path:
    """The FMI 3.0 co-simulation ``x' = A x + B u``, ``y = x`` (``state_space3.c``) with array parameters ``A``
    (2x2, row-major, default ``[[0, 1], [-2, -3]]``), ``B`` (``[0, 1]``) and ``x0`` (``[1, 0]`` m), the input ``u``
    and the array output ``y`` (m): the elements are ports and parameters ``A[1,1]`` ... ``y[2]``."""
    identifier = "state_space3"
    source = _inline_headers((HERE / "state_space3.c").read_text())
    xml = (HERE / "state_space3.xml").read_text().format(identifier=identifier)
    built = build_c_fmu(directory / f"{identifier}.fmu", model_identifier=identifier, model_description=xml,
                        source=source)
    return _fmi3_binaries(built, identifier)


def misbehave(directory: Path) -> Path:
    """``y = t``; a step that never returns from parameter ``hang_at`` on, or crashes from ``crash_at`` on as
    ``crash_how`` says (1 SIGSEGV, 2 abort(), 3 exit(7)); ``work`` (s) of waiting per step."""
    return _c_fmu(directory, "misbehave", "misbehave", (HERE / "misbehave.xml").read_text())
