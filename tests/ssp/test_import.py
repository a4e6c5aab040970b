"""SSP import: the imported experiment runs as the same system written by hand, and bad archives leave nothing."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from ssp_system import SSD, SSV_GAIN, MakeSSP

from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.runner.run import prepare
from cosimrun.ssp import SSPError, cli, import_ssp

MASTERS = [pytest.param(GaussSeidel, id="gauss_seidel"), pytest.param(Jacobi, id="jacobi")]
PORTS = {"pendulum": ("q", "omega"), "gainA": ("y",), "gainB": ("y",)}
ROOT = "SystemStructure.ssd: /ssd:SystemStructureDescription/ssd:System"


def run_file(path: Path, master: type) -> dict[str, np.ndarray]:
    """Run the experiment file *path* in this process; its histories by ``comp.port``, with ``time``."""
    cfg = yaml.safe_load(path.read_text())
    exp = prepare(cfg, base_dir=path.parent)
    try:
        r = exp.system.run(exp.run.t0, exp.run.tf, exp.run.dt, master=master())
        out = {}
        for comp, ports in PORTS.items():
            for port in ports:
                out["time"], out[f"{comp}.{port}"] = r.history.get_port_trajectory(comp, port)
        return out
    finally:
        exp.system.free()


def listing(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.parametrize("master", MASTERS)
def test_the_imported_run_matches_the_system_written_by_hand(make_ssp: MakeSSP, hand_written: Path, tmp_path: Path,
                                                             master: type) -> None:
    result = import_ssp(make_ssp(), tmp_path / "imported")
    assert result.experiment == tmp_path / "imported" / "experiment" / "loop.yaml"
    assert [p.name for p in result.fmus] == ["feedthrough.fmu", "feedthrough_kN.fmu", "pendulum.fmu"]
    imported = run_file(result.experiment, master)
    by_hand = run_file(hand_written / "experiment" / "loop_by_hand.yaml", master)
    assert len(imported["time"]) == 201 and imported["time"][-1] == 2.0
    for signal, values in by_hand.items():
        np.testing.assert_allclose(imported[signal], values, rtol=0, atol=1e-12, err_msg=signal)
    assert imported["pendulum.q"][0] == pytest.approx(math.radians(20.0), rel=1e-15)  # the SSV's start value
    assert np.ptp(imported["pendulum.q"]) > 0.5  # it swings


def test_the_transformations_follow_the_ssp_semantics(make_ssp: MakeSSP, tmp_path: Path) -> None:
    """Under Gauss-Seidel the gains read fresh values: gainA.y = 1.5 (3 q + 0.5) with q passed unconverted,
    gainB.y = 0.8 (2 gainA.y / 1000 + 0.1) with N converted to kN before the transformation."""
    experiment = import_ssp(make_ssp(), tmp_path / "imported").experiment
    built = prepare(yaml.safe_load(experiment.read_text()), base_dir=experiment.parent)
    assert built.system.components["pendulum"].parameters["length"] == pytest.approx(1.5, rel=1e-15)  # 150 cm
    built.system.free()
    s = run_file(experiment, GaussSeidel)
    a = 1.5 * (3.0 * s["pendulum.q"] + 0.5)
    np.testing.assert_allclose(s["gainA.y"][1:], a[1:], rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(s["gainB.y"][1:], 0.8 * (2.0 * a[1:] / 1000.0 + 0.1), rtol=1e-14, atol=1e-14)


def test_the_experiment_file_says_what_was_mapped(make_ssp: MakeSSP, tmp_path: Path) -> None:
    result = import_ssp(make_ssp(), tmp_path / "imported", "loop2")
    cfg = yaml.safe_load(result.experiment.read_text())
    assert result.experiment.read_text().startswith("# @package _global_\n")
    assert cfg["run"] == {"t0": 0.0, "tf": 2.0, "dt": 0.01}
    assert result.notes == ["run.dt = 0.01: the smallest stepSize of the FMUs' default experiments"]
    assert cfg["components"]["pendulum"]["params"] == {"path": "../fmus/loop2/pendulum.fmu", "length": "150.0 cm",
                                                       "start": {"q": "20.0 degree"}}
    assert cfg["components"]["gainB"]["params"]["k"] == 0.8
    assert cfg["connections"][1] == {"src": "gainA.y", "dst": "gainB.u", "scale": 2.0, "offset": 0.1}
    assert cfg["connections"][2] == {"src": "gainB.y", "dst": "pendulum.torque", "scale": -10.0,
                                     "convert_units": False}


def test_without_a_stop_time_the_fmus_choose_and_that_is_stated(make_ssp: MakeSSP, tmp_path: Path) -> None:
    ssd = SSD.replace('<ssd:DefaultExperiment startTime="0" stopTime="2"/>', '<ssd:DefaultExperiment startTime="1"/>')
    result = import_ssp(make_ssp(ssd), tmp_path / "imported")
    run = yaml.safe_load(result.experiment.read_text())["run"]
    assert run == {"t0": 1.0, "tf": 10.0, "dt": 0.01}  # the pendulum FMU's default experiment
    assert result.notes == ["run.tf = 10: the SSD has no DefaultExperiment stopTime (the FMUs' largest)",
                            "run.dt = 0.01: the smallest stepSize of the FMUs' default experiments"]


def test_unreferenced_entries_are_listed(make_ssp: MakeSSP, tmp_path: Path) -> None:
    result = import_ssp(make_ssp(files={"documentation/index.html": "<p/>", "Variant.ssd": "<x/>"}), tmp_path / "d")
    assert result.unused_entries == ["Variant.ssd", "documentation/index.html"]


def _annotations(kind: str | None, prefix: str = "ssd", content: str = "") -> str:
    """An annotation block of one ``ssc:Annotation`` of *kind* (no ``type`` for ``None``) holding *content*."""
    type_attribute = "" if kind is None else f' type="{kind}"'
    return f"<{prefix}:Annotations><ssc:Annotation{type_attribute}>{content}</ssc:Annotation></{prefix}:Annotations>"


TOOL, OMS = "com.example.tool", "org.openmodelica"
OMS_SETTINGS = ('<oms:SimulationInformation xmlns:oms="https://raw.githubusercontent.com/OpenModelica/OMSimulator/'
                'master/schema/oms.xsd"><oms:FixedStepMaster description="oms-ma" stepSize="0.5"/>'
                "</oms:SimulationInformation>")
ANNOTATED = [  # (where in the SSD, what is inserted after it): annotations on most kinds of element
    ("</ssd:Units>", _annotations(TOOL, content='<x:layout xmlns:x="urn:x" zoom="2"/>')),  # the root's
    ('<ssd:System name="root">', _annotations(OMS, content=OMS_SETTINGS)),
    ('<ssd:ParameterBinding prefix="gainB.">', _annotations(TOOL)),
    ('<ssv:ParameterSet version="1.0" name="gain B">', _annotations(TOOL, "ssv")),
    ('<ssd:Component name="pendulum" source="resources/pendulum.fmu">', _annotations(None)),
    ('<ssd:Connector name="torque" kind="input"><ssc:Real unit="N.m"/>', _annotations(TOOL)),
    ('<ssc:LinearTransformation factor="2" offset="0.1"/>', _annotations(TOOL)),
    ('<ssd:DefaultExperiment startTime="0" stopTime="2">', _annotations(OMS) + "</ssd:DefaultExperiment>"),
]


def test_annotations_are_ignored_listed_once_and_change_nothing(make_ssp: MakeSSP, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    ssd = SSD.replace('stopTime="2"/>', 'stopTime="2">')  # the experiment gets a child, closed below
    for anchor, inserted in ANNOTATED:
        assert ssd.count(anchor) == 1, anchor
        ssd = ssd.replace(anchor, anchor + inserted)
    ssv = SSV_GAIN.replace('xmlns:ssv="', 'xmlns:ssc="http://ssp-standard.org/SSP1/SystemStructureCommon" xmlns:ssv="')
    ssv = ssv.replace('<ssv:Real value="1.5"/>', '<ssv:Real value="1.5"/>' + _annotations(TOOL, "ssv"))
    annotated = make_ssp(ssd, "annotated.ssp", files={"resources/gainA.ssv": ssv})
    plain = import_ssp(make_ssp(), tmp_path / "plain", "loop")
    result = import_ssp(annotated, tmp_path / "annotated", "loop")
    assert result.annotations == {TOOL: 6, OMS: 2, "(no type)": 1}
    assert result.annotation_notice == (
        "ignored 9 annotations (tool-specific data, which SSP lets an importer ignore; none changes what cosimrun "
        "maps): com.example.tool (6), org.openmodelica (2), (no type) (1)")
    assert result.experiment.read_text().replace("annotated.ssp", "loop.ssp") == plain.experiment.read_text()
    with_annotations, without = run_file(result.experiment, GaussSeidel), run_file(plain.experiment, GaussSeidel)
    assert with_annotations.keys() == without.keys()
    for signal, values in without.items():
        np.testing.assert_array_equal(with_annotations[signal], values, err_msg=signal)
    assert np.ptp(without["pendulum.q"]) > 0.5  # it swings

    code = cli.run(argparse.Namespace(ssp=str(annotated), directory=str(tmp_path / "cli"), name="x", force=False))
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[1:-1] == ["  run.dt = 0.01: the smallest stepSize of the FMUs' default experiments",
                         f"  {result.annotation_notice}"]  # between the files written and how to run it


def test_without_annotations_there_is_no_notice(make_ssp: MakeSSP, tmp_path: Path) -> None:
    result = import_ssp(make_ssp(), tmp_path / "d")
    assert (result.annotations, result.annotation_notice) == ({}, None)


def test_existing_targets_are_kept_unless_forced(make_ssp: MakeSSP, tmp_path: Path) -> None:
    import_ssp(make_ssp(), tmp_path / "d")
    with pytest.raises(ValueError, match=r"experiment/loop\.yaml exists; pass --force to replace it"):
        import_ssp(make_ssp(), tmp_path / "d")
    (tmp_path / "d" / "fmus" / "loop" / "stale.fmu").write_text("")
    import_ssp(make_ssp(), tmp_path / "d", force=True)
    assert listing(tmp_path / "d") == ["experiment", "experiment/loop.yaml", "fmus", "fmus/loop",
                                       "fmus/loop/feedthrough.fmu", "fmus/loop/feedthrough_kN.fmu",
                                       "fmus/loop/pendulum.fmu"]


# ---------------------------------------------------------------------- refused archives
COMPONENT_2 = f"{ROOT}/ssd:Elements/ssd:Component[2]"
REFUSED = [
    pytest.param("<ssd:Elements>", '<ssd:Elements><ssd:System name="inner"/>',
                 f"{ROOT}/ssd:Elements/ssd:System: element ssd:System is not supported: nested systems are not "
                 "supported; flatten the system into one level of components", id="nested-system"),
    pytest.param('endElement="gainB" endConnector="u">', 'endElement="gainB" endConnector="u" delay="0.1">',
                 f"{ROOT}/ssd:Connections/ssd:Connection[2]: attribute delay='0.1' is not supported (supported "
                 "here: description, endConnector, endElement, id, startConnector, startElement, "
                 "suppressUnitConversion)", id="unknown-attribute"),
    pytest.param('<ssc:LinearTransformation factor="2" offset="0.1"/>',
                 '<ssc:BooleanMappingTransformation><ssc:MapEntry source="true" target="false"/>'
                 "</ssc:BooleanMappingTransformation>",
                 f"{ROOT}/ssd:Connections/ssd:Connection[2]/ssc:BooleanMappingTransformation/ssc:MapEntry: maps "
                 "'true' to 'false'; only mappings of each value to itself are supported (a connection carries a "
                 "value unchanged or through scale and offset on real ports)", id="boolean-mapping"),
    pytest.param('<ssc:LinearTransformation factor="2" offset="0.1"/>',
                 '<ssc:BooleanMappingTransformation><ssc:MapEntry source="true" target="1"/>'
                 '<ssc:MapEntry source="0" target="false"/></ssc:BooleanMappingTransformation>',
                 f"{ROOT}/ssd:Connections/ssd:Connection[2]: a BooleanMappingTransformation applies to Boolean "
                 "connectors; gainA.y is Real", id="identity-mapping-on-real"),
    pytest.param('<ssc:Real unit="N"/></ssd:Connector>', '<ssc:Real unit="N"/><ssc:Integer/></ssd:Connector>',
                 f"{COMPONENT_2}/ssd:Connectors/ssd:Connector[1]/ssc:Integer: a connector has one type; ssc:Real is "
                 "given already", id="two-types"),
    pytest.param('source="resources/feedthrough.fmu" implementation="CoSimulation"',
                 'source="resources/feedthrough.fmu" implementation="ModelExchange"',
                 f"{COMPONENT_2}: component 'gainA': implementation 'ModelExchange' is not supported (cosimrun runs "
                 "FMUs as co-simulation: any, CoSimulation)", id="model-exchange"),
    pytest.param('<ssd:Component name="gainA"', '<ssd:Component name="gain-A"',
                 f"{COMPONENT_2}: component name 'gain-A' cannot name a cosimrun component: it is not a Python "
                 "identifier (letters, digits and underscores, not starting with a digit)", id="component-name"),
    pytest.param('version="1.0" name="loop"', 'version="2.0" name="loop"',
                 "SystemStructure.ssd: /ssd:SystemStructureDescription: SSP version '2.0' is not supported "
                 "(supported: 1.0)", id="version"),
    pytest.param('<ssd:System name="root">',
                 '<ssd:System name="root"><ssd:Connectors><ssd:Connector name="x" kind="input"/></ssd:Connectors>',
                 f"{ROOT}/ssd:Connectors: connectors of the system itself are not supported: cosimrun runs the "
                 "system closed (connect the components to each other)", id="system-connectors"),
    pytest.param('<ssc:Real unit="kN"/></ssd:Connector>\n          <ssd:Connector name="y"',
                 '<ssc:Real unit="N"/></ssd:Connector>\n          <ssd:Connector name="y"',
                 f"{ROOT}/ssd:Elements/ssd:Component[3]/ssd:Connectors/ssd:Connector[1]: connector 'u' is declared "
                 "in N but the FMU's variable is in kN (kN)", id="connector-unit"),
    pytest.param('<ssc:BaseUnit kg="1" m="2" s="-2"/>', '<ssc:BaseUnit kg="1" m="2" s="-2" factor="2"/>',
                 "SystemStructure.ssd: /ssd:SystemStructureDescription/ssd:Units/ssc:Unit[1]: unit 'N.m' is defined "
                 "with BaseUnit kg**1*m**2*s**-2 x 2 +0, which is not what 'N.m' means to cosimrun (N*m); rename "
                 "the unit or correct its definition", id="unit-definition"),
    pytest.param('<ssv:Parameter name="k"><ssv:Real value="0.8"/>', '<ssv:Parameter name="kk"><ssv:Real value="0.8"/>',
                 f"{ROOT}/ssd:ParameterBindings/ssd:ParameterBinding[1]/ssd:ParameterValues/ssv:ParameterSet/"
                 "ssv:Parameters/ssv:Parameter: parameter 'kk' names no variable of the FMU feedthrough_kN.fmu; "
                 "did you mean 'k'?", id="unknown-parameter"),
    pytest.param('startConnector="y" endElement="gainB"', 'startConnector="steps" endElement="gainB"',
                 f"{ROOT}/ssd:Connections/ssd:Connection[2]: a LinearTransformation applies to Real connectors; "
                 "gainA.steps is Integer", id="transform-on-integer"),
    pytest.param('<ssv:Parameter name="pendulum.length"><ssv:Real value="150" unit="cm"/></ssv:Parameter>',
                 '<ssv:Parameter name="pendulum.length"><ssv:Real value="150" unit="cm"/></ssv:Parameter>'
                 '<ssv:Parameter name="pendulum.q"><ssv:Real value="0.5"/></ssv:Parameter>',
                 f"{ROOT}/ssd:ParameterBindings/ssd:ParameterBinding[2]/ssd:ParameterValues/ssv:ParameterSet/"
                 "ssv:Parameters/ssv:Parameter[2]: 'q' = 0.5 contradicts '20.0 degree' given at resources/"
                 "pendulum.ssv: /ssv:ParameterSet/ssv:Parameters/ssv:Parameter", id="contradicting-values"),
]


@pytest.mark.parametrize(("old", "new", "message"), REFUSED)
def test_what_is_not_mapped_is_refused_at_its_element_and_nothing_is_written(
        make_ssp: MakeSSP, tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in SSD
    target = tmp_path / "conf"
    (target / "experiment").mkdir(parents=True)
    (target / "experiment" / "mine.yaml").write_text("# @package _global_\n")
    with pytest.raises(SSPError) as info:
        import_ssp(make_ssp(SSD.replace(old, new, 1)), target)
    assert str(info.value) == message
    assert listing(target) == ["experiment", "experiment/mine.yaml"]


def test_values_in_files_are_refused_at_their_file(make_ssp: MakeSSP, tmp_path: Path) -> None:
    ssv = '<ssv:ParameterSet version="1.0" name="x" xmlns:ssv="http://ssp-standard.org/SSP1/' \
          'SystemStructureParameterValues"><ssv:Parameters><ssv:Parameter name="k"><ssv:Enumeration value="a"/>' \
          "</ssv:Parameter></ssv:Parameters></ssv:ParameterSet>"
    with pytest.raises(SSPError) as info:
        import_ssp(make_ssp(files={"resources/gainA.ssv": ssv}), tmp_path / "new")
    assert str(info.value) == ("resources/gainA.ssv: /ssv:ParameterSet/ssv:Parameters/ssv:Parameter/ssv:Enumeration: "
                               "ssv:Enumeration values are not supported")
    assert not (tmp_path / "new").exists()


def test_an_archive_without_a_system_structure_is_refused(tmp_path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(tmp_path / "empty.ssp", "w") as zf:
        zf.writestr("resources/readme.txt", "nothing")
    with pytest.raises(SSPError, match=r"empty\.ssp: the archive has no SystemStructure\.ssd at its root "
                                       r"\(entries: resources/readme\.txt\)"):
        import_ssp(tmp_path / "empty.ssp", tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_the_command_refuses_a_file_that_is_no_archive_in_one_line(cosimrun, tmp_path: Path) -> None:
    (tmp_path / "system.ssp").write_text("not a zip")
    proc = cosimrun("ssp", "import", "system.ssp", "out")
    assert proc.returncode == 2
    assert proc.stderr == ("cosimrun: error: ssp: system.ssp: not an SSP archive (an SSP file is a zip archive with "
                           "a SystemStructure.ssd)\n")
    assert not (tmp_path / "out").exists()
    bad = cosimrun("ssp", "export", "system.ssp")
    assert bad.returncode == 2
    assert bad.stderr == ("cosimrun: error: ssp: argument ACTION: invalid choice: 'export' (choose from 'import') "
                          "(see 'cosimrun ssp --help')\n")


@pytest.mark.slow
def test_the_command_imports_an_experiment_that_runs_from_the_command_line(
        cosimrun, make_ssp: MakeSSP, hand_written: Path, tmp_path: Path) -> None:
    import cosimrun as api

    make_ssp()
    proc = cosimrun("ssp", "import", "loop.ssp", "conf", "--name", "swing")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "ssp import: wrote conf/experiment/swing.yaml and 3 FMUs in conf/fmus/swing"
    assert proc.stdout.splitlines()[-1] == "run it with: cosimrun --config-dir conf +experiment=swing"
    ran = cosimrun("--config-dir", "conf", "+experiment=swing", "hydra.run.dir=out")
    assert ran.returncode == 0, ran.stderr
    res = api.load_results(tmp_path / "out")
    assert res.status == "complete"
    by_hand = run_file(hand_written / "experiment" / "loop_by_hand.yaml", GaussSeidel)
    for comp, ports in PORTS.items():
        frame = res.to_dataframe(comp)
        for port in ports:
            np.testing.assert_allclose(frame[port].to_numpy(), by_hand[f"{comp}.{port}"], rtol=0, atol=1e-12)
