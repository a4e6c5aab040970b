"""An SSP archive built in the tests: the example pendulum in a loop with two feedthrough gains.

``pendulum.q [rad] -> gainA.u [N]`` passes the number (suppressUnitConversion) through
``3 q + 0.5``; ``gainA.y [N] -> gainB.u [kN]`` converts N to kN and then applies
``2 x + 0.1``; ``gainB.y [kN] -> pendulum.torque [N.m]`` passes ``-10 x`` unconverted.
Parameters: ``gainA.k`` and the pendulum's start angle (in a unit the SSV defines) from SSV
files bound to the components, ``gainB.k`` from an inline set bound to the system with the
prefix ``gainB.``, and the pendulum's ``length`` (in cm) from another, named ``pendulum.length``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

SSD = """<?xml version="1.0" encoding="UTF-8"?>
<ssd:SystemStructureDescription version="1.0" name="loop" description="pendulum with gains"
    xmlns:ssd="http://ssp-standard.org/SSP1/SystemStructureDescription"
    xmlns:ssc="http://ssp-standard.org/SSP1/SystemStructureCommon"
    xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues">
  <ssd:System name="root">
    <ssd:ParameterBindings>
      <ssd:ParameterBinding prefix="gainB.">
        <ssd:ParameterValues>
          <ssv:ParameterSet version="1.0" name="gain B">
            <ssv:Parameters><ssv:Parameter name="k"><ssv:Real value="0.8"/></ssv:Parameter></ssv:Parameters>
          </ssv:ParameterSet>
        </ssd:ParameterValues>
      </ssd:ParameterBinding>
      <ssd:ParameterBinding>
        <ssd:ParameterValues>
          <ssv:ParameterSet version="1.0" name="system values">
            <ssv:Parameters>
              <ssv:Parameter name="pendulum.length"><ssv:Real value="150" unit="cm"/></ssv:Parameter>
            </ssv:Parameters>
          </ssv:ParameterSet>
        </ssd:ParameterValues>
      </ssd:ParameterBinding>
    </ssd:ParameterBindings>
    <ssd:Elements>
      <ssd:Component name="pendulum" source="resources/pendulum.fmu">
        <ssd:Connectors>
          <ssd:Connector name="torque" kind="input"><ssc:Real unit="N.m"/></ssd:Connector>
          <ssd:Connector name="q" kind="output"><ssc:Real unit="rad"/>
            <ssd:ConnectorGeometry x="1" y="0.5"/></ssd:Connector>
        </ssd:Connectors>
        <ssd:ElementGeometry x1="0" y1="0" x2="10" y2="10"/>
        <ssd:ParameterBindings>
          <ssd:ParameterBinding source="resources/pendulum.ssv"/>
        </ssd:ParameterBindings>
      </ssd:Component>
      <ssd:Component name="gainA" source="resources/feedthrough.fmu" implementation="CoSimulation">
        <ssd:Connectors>
          <ssd:Connector name="u" kind="input"><ssc:Real unit="N"/></ssd:Connector>
          <ssd:Connector name="y" kind="output"><ssc:Real unit="newton"/></ssd:Connector>
          <ssd:Connector name="k" kind="parameter"><ssc:Real/></ssd:Connector>
        </ssd:Connectors>
        <ssd:ParameterBindings>
          <ssd:ParameterBinding type="application/x-ssp-parameter-set" source="resources/gainA.ssv"/>
        </ssd:ParameterBindings>
      </ssd:Component>
      <ssd:Component name="gainB" type="application/x-fmu-sharedlibrary" source="resources/feedthrough_kN.fmu">
        <ssd:Connectors>
          <ssd:Connector name="u" kind="input"><ssc:Real unit="kN"/></ssd:Connector>
          <ssd:Connector name="y" kind="output"><ssc:Real unit="kN"/></ssd:Connector>
        </ssd:Connectors>
      </ssd:Component>
    </ssd:Elements>
    <ssd:Connections>
      <ssd:Connection startElement="pendulum" startConnector="q" endElement="gainA" endConnector="u"
          suppressUnitConversion="true">
        <ssc:LinearTransformation factor="3" offset="0.5"/>
      </ssd:Connection>
      <ssd:Connection startElement="gainA" startConnector="y" endElement="gainB" endConnector="u">
        <ssc:LinearTransformation factor="2" offset="0.1"/>
        <ssd:ConnectionGeometry pointsX="1 2" pointsY="1 2"/>
      </ssd:Connection>
      <ssd:Connection startElement="gainB" startConnector="y" endElement="pendulum" endConnector="torque"
          suppressUnitConversion="true">
        <ssc:LinearTransformation factor="-10"/>
      </ssd:Connection>
    </ssd:Connections>
  </ssd:System>
  <ssd:Units>
    <ssc:Unit name="N.m"><ssc:BaseUnit kg="1" m="2" s="-2"/></ssc:Unit>
    <ssc:Unit name="newton"><ssc:BaseUnit kg="1" m="1" s="-2"/></ssc:Unit>
  </ssd:Units>
  <ssd:DefaultExperiment startTime="0" stopTime="2"/>
</ssd:SystemStructureDescription>
"""

SSV_GAIN = """<?xml version="1.0" encoding="UTF-8"?>
<ssv:ParameterSet version="1.0" name="gain A" xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues">
  <ssv:Parameters><ssv:Parameter name="k"><ssv:Real value="1.5"/></ssv:Parameter></ssv:Parameters>
</ssv:ParameterSet>
"""

SSV_PENDULUM = """<?xml version="1.0" encoding="UTF-8"?>
<ssv:ParameterSet version="1.0" name="pendulum" xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues"
    xmlns:ssc="http://ssp-standard.org/SSP1/SystemStructureCommon">
  <ssv:Parameters><ssv:Parameter name="q"><ssv:Real value="20" unit="degree"/></ssv:Parameter></ssv:Parameters>
  <ssv:Units>
    <ssc:Unit name="degree"><ssc:BaseUnit rad="1" factor="0.017453292519943295"/></ssc:Unit>
  </ssv:Units>
</ssv:ParameterSet>
"""

FILES = {"resources/gainA.ssv": SSV_GAIN, "resources/pendulum.ssv": SSV_PENDULUM}

HAND_WRITTEN = """# @package _global_
name: loop_by_hand
run: {t0: 0.0, tf: 2.0, dt: 0.01}
components:
  pendulum: {type: fmu, params: {path: PENDULUM, length: 150 cm, start: {q: 20 deg}}}
  gainA: {type: fmu, params: {path: FEEDTHROUGH, k: 1.5}}
  gainB: {type: fmu, params: {path: FEEDTHROUGH_KN, k: 0.8}}
connections:
  - {src: pendulum.q, dst: gainA.u, scale: 3.0, offset: 0.5, convert_units: false}
  - {src: gainA.y, dst: gainB.u, scale: 2.0, offset: 0.1}
  - {src: gainB.y, dst: pendulum.torque, scale: -10.0, convert_units: false}
"""
"""The same system written as an experiment by hand (FMU paths filled in by the ``hand_written`` fixture)."""


MakeSSP = Callable[..., Path]
"""The ``make_ssp`` fixture's type."""
