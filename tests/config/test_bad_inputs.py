"""Bad input, whichever way it arrives, ends with one line naming the key, exit status 2 and no run directory.

Most cases run the ``cosimrun`` entry point in-process (``cosimrun.cli.main``
with ``sys.argv`` patched; Hydra allows repeated calls), in an empty working
directory that must stay empty but for the test's own config files. A few run
the command as a subprocess (``HYDRA_FULL_ERROR=1``, ``--version``, a sweep).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import forkserver

from cosimrun import cli
from cosimrun.config.build import build_experiment
from cosimrun.errors import ConfigError
from cosimrun.exits import EXIT_CONFIG

EXPERIMENTS = {
    "nohdr": "name: nohdr\ncomponents:\n  g: {type: gain}\n",
    "badindent": "# @package _global_\nname: badindent\ncomponents:\n  g:\n    type: gain\n   params: {k: 1}\n",
    "tabs": "# @package _global_\nname: tabs\ncomponents:\n\tg: {type: gain}\n",
    "unclosed": "# @package _global_\nname: unclosed\ncomponents: {g: {type: gain}\n",
    "aslist": "# @package _global_\nname: aslist\ncomponents:\n  g: [1, 2]\n",
    "scalarparams": "# @package _global_\nname: scalarparams\ncomponents:\n  g: {type: gain, params: 3}\n",
    "runkey": "# @package _global_\nname: runkey\ncomponents:\n  g: {type: gain}\nrun: {tff: 2}\n",
    "compkey": "# @package _global_\nname: compkey\ncomponents:\n  g: {type: gain, foo: 3}\n",
    "topkey": "# @package _global_\nname: topkey\ncomponents:\n  g: {type: gain}\nconections: []\n",
    "modes": "# @package _global_\nname: modes\ncomponents:\n  g: {type: gain, modes: {a: {type: gain}}}\n",
    "modekey": (
        "# @package _global_\nname: modekey\ncomponents:\n  m:\n    type: multi\n"
        "    modes: {a: {type: gain, initial: {u: 0}}}\n"
    ),
    "componentlist": "# @package _global_\nname: componentlist\ncomponents:\n  - {type: sine}\n",
    "connectionmap": "# @package _global_\nname: connectionmap\ncomponents: {g: {type: gain}}\nconnections: {a: b}\n",
    "masterkey": (
        "# @package _global_\ndefaults:\n  - override /master: hybrid\nname: masterkey\n"
        "components:\n  g: {type: gain}\nmaster: {time_tolerence: 1.0e-9}\n"
    ),
}

BALL = ["+experiment=bouncing_ball"]
PENDULUM = ["+experiment=pendulum_switch"]

# (id, arguments, expected part of the line, whether it suggests a name: True, False or None (either))
CLI_CASES = [
    ("plus-run-tff", [*BALL, "+run.tff=1"], "run.tff: unknown key 'tff' in run; did you mean 'tf'?", True),
    ("plus-param", [*BALL, "+components.ball.param.e=0.1"],
     "components.ball.param: unknown key 'param' in components.ball; did you mean 'params'?", True),
    ("plus-compresion", [*BALL, "+storage.compresion=lzf"],
     "storage.compresion: unknown key 'compresion' in storage; did you mean 'compression'", True),
    ("plus-conections", [*BALL, "+conections=[]"],
     "conections: unknown key 'conections' at the top level; did you mean 'connections'", True),
    ("plus-component-events", [*BALL, "+components.ball.events=[]"],
     "components.ball.events: unknown key 'events' in components.ball (known: initial, params, type, units)", False),
    ("plus-storage-foo", [*BALL, "+storage.foo=1"], "storage.foo: unknown key 'foo' in storage (known: ", False),
    ("storage-foo", [*BALL, "storage.foo=1"], "storage.foo: unknown key 'foo' in storage (known: ", False),
    ("storage-flush", [*BALL, "storage.flush_intervall=3"],
     "storage.flush_intervall: unknown key 'flush_intervall' in storage; did you mean 'flush_interval'", True),
    ("run-dt-abc", [*BALL, "run.dt=abc"], "run.dt: 'abc' is not a number; expected a number, e.g. run.dt=0.01", False),
    ("run-dt-empty", [*BALL, "run.dt="], "run.dt: '' is not a number", False),
    ("grammar-a=b=c", [*BALL, "a=b=c"], "a: cannot parse the override 'a=b=c': mismatched input '='", False),
    ("grammar-open-list", [*BALL, "run.dt=[1,"], "run.dt: cannot parse the override 'run.dt=[1,'", False),
    ("grammar-no-equal", [*BALL, "run.dt"], "run.dt: cannot parse the override 'run.dt'", False),
    ("component-as-list", [*BALL, "components.ball=[1,2]"], "components.ball: a list cannot replace a mapping", False),
    ("params-scalar", [*BALL, "components.ball.params=3"], "components.ball.params: 3 is not a mapping", False),
    ("master-int", [*BALL, "master.max_micro_steps=abc"],
     "master.max_micro_steps: 'abc' is not an integer; expected an integer, e.g. 100", False),
    ("master-bool", [*BALL, "master.use_hints=3"], "master.use_hints: 3 is not true or false", False),
    ("master-float", [*BALL, "master.time_tolerance=small"], "master.time_tolerance: 'small' is not a number", False),
    ("master-struct", [*BALL, "master.time_tolerence=1e-9"],
     "master.time_tolerence: unknown setting 'time_tolerence' of the hybrid master; did you mean 'time_tolerance'",
     True),
    ("master-plus", [*BALL, "+master.time_tolerence=1e-9"],
     "master.time_tolerence: unknown setting 'time_tolerence' of the hybrid master; did you mean", True),
    ("master-choice", [*BALL, "master.on_nonconvergence=wrn"],
     "master.on_nonconvergence: 'wrn' is not valid; did you mean 'warn'", True),
    ("storage-csv", [*BALL, "storage.file=results.csv"],
     "storage.file: 'results.csv' does not name an HDF5 file; end it in .h5, .hdf5, .nc", False),
    ("storage-dotdot", [*BALL, "storage.file=.."], "storage.file: '..' must be a plain file name", False),
    ("storage-flush-type", [*BALL, "storage.flush_interval=abc"], "storage.flush_interval: 'abc' is not an integer",
     False),
    ("storage-bool", [*BALL, "storage.allow_nonfinite=maybe"], "storage.allow_nonfinite: ", False),
    ("storage-compression", [*BALL, "storage.compression=zip"], "storage.compression: 'zip' is not supported", False),
    ("storage-level", [*BALL, "storage.compression_level=12"], "storage.compression_level: 12 is not in 0..9", False),
    ("storage-record", [*BALL, "storage.record=[bal]"], "storage.record[0]: unknown component 'bal'; did you mean",
     True),
    ("name-list", [*BALL, "name=[1]"], "name: [1] (a list) is not a string", False),
    ("plus-existing", [*BALL, "+run.tf=1"], "run.tf: already set; drop the '+'", False),
    ("launcher", [*BALL, "hydra/launcher=dsk"], "hydra/launcher: unknown hydra/launcher 'dsk'; did you mean 'dask'",
     True),
    ("delete-missing", [*BALL, "~components.nope"], "components.nope: nothing to delete", False),
    ("experiment", ["+experiment=bouncing_bal"], "experiment: unknown experiment 'bouncing_bal'; did you mean", True),
    ("master", [*BALL, "master=hybrd"], "master: unknown master 'hybrd'; did you mean 'hybrid'", True),
    ("action", [*BALL, "action=describ"], "action: unknown action 'describ'; did you mean 'describe'", True),
    ("run-dt-zero", [*BALL, "run.dt=0"], "run.dt: the macro step must be positive", False),
    ("run-tf-negative", [*BALL, "run.tf=-1"], "run.tf: the end time", False),
    ("selector-not-multi", [*BALL, "+components.ball.selector={type: threshold}"],
     "components.ball.selector: only components of type multi have selector (type is 'bouncing_ball')", False),
    ("component-type", [*BALL, "components.ball.type=bouncing_bal"],
     "components.ball.type: unknown component type 'bouncing_bal'", True),
    ("param-not-there", [*BALL, "components.ball.params.ee=1"],
     "components.ball.params.ee: not in the config; add it with '+components.ball.params.ee=VALUE'", False),
    ("plus-param-unknown", [*BALL, "+components.ball.params.ee=1"],
     "components.ball.params.ee: unknown parameter 'ee' of component 'ball'; did you mean 'e'?", True),
    ("added-param-unknown", [*BALL, "+components.k={type: constant, params: {valu: 1}}"],
     "components.k.params.valu: unknown parameter 'valu' of component 'k'; did you mean 'value'?", True),
    ("added-key-unknown", [*BALL, "+components.k={typ: constant}"],
     "components.k.typ: unknown key 'typ' in components.k; did you mean 'type'?", True),
    ("added-no-type", [*BALL, "+components.k={params: {value: 1}}"], "components.k.type: missing", False),
    ("connection-port", [*BALL, "connections=['ball.h -> ball.nope']"], "connections[0]: ", None),
    ("connection-key", [*BALL, "connections=[{src: ball.h, dts: ball.h}]"],
     "connections[0].dts: unknown key 'dts' in connections[0]; did you mean 'dst'?", True),
    ("connections-string", [*BALL, "connections=abc"], "connections: ", False),
    ("events-item", [*BALL, "events=[1]"], "events[0]: write an event connection as", False),
    ("multi-mode-param", [*PENDULUM, "+components.pendulum.modes.linear.params.lenght=2"],
     "components.pendulum.modes.linear.params.lenght: unknown parameter 'lenght'", True),
    ("multi-mode-key", [*PENDULUM, "+components.pendulum.modes.linear.parms={}"],
     "components.pendulum.modes.linear.parms: unknown key 'parms' in components.pendulum.modes.linear; "
     "did you mean 'params'?", True),
    # a multi component has no params of its own: never "unknown key 'params' ... did you mean 'params'"
    ("multi-params-override", [*PENDULUM, "components.pendulum.params.length=2"],
     "components.pendulum.params: a multi component takes its parameters per mode: "
     "components.pendulum.modes.MODE.params (linear, nonlinear)", False),
    ("multi-params-added", [*PENDULUM, "+components.pendulum.params.length=2"],
     "components.pendulum.params: a multi component takes its parameters per mode: "
     "components.pendulum.modes.MODE.params (linear, nonlinear)", False),
    ("multi-key-typo", [*PENDULUM, "components.pendulum.parms=1"],
     "components.pendulum.parms: unknown key 'parms' in components.pendulum "
     "(known: hysteresis, initial, initial_mode, modes, selector, type, units)", False),
    ("multi-key-near", [*PENDULUM, "+components.pendulum.selectr={}"],
     "components.pendulum.selectr: unknown key 'selectr' in components.pendulum; did you mean 'selector'?", True),
    ("multi-key-in-mode", [*PENDULUM, "+components.pendulum.modes.linear.initial.torque=1"],
     "components.pendulum.modes.linear.initial: initial belongs to the multi component, not to one of its modes: "
     "components.pendulum.initial (a mode has type, params, units)", False),
    ("describe", [*BALL, "action=describe", "+run.tff=1"], "run.tff: unknown key 'tff' in run", True),
    ("cfg-job", [*BALL, "run.dt=abc", "--cfg", "job"], "run.dt: 'abc' is not a number", False),
    ("config-dir-missing", ["--config-dir", "nowhere", *BALL], "--config-dir: Additional config directory", False),
    ("file-no-header", ["+experiment=nohdr"],
     "cfg/experiment/nohdr.yaml: its keys land under 'experiment', not at the top level; "
     "add '# @package _global_' as the first line of the file", False),
    ("file-indent", ["+experiment=badindent"],
     "cfg/experiment/badindent.yaml:6: expected <block end>, but found '<block mapping start>'", False),
    ("file-tab", ["+experiment=tabs"], "cfg/experiment/tabs.yaml:4: found character '\\t'", False),
    ("file-unclosed", ["+experiment=unclosed"], "cfg/experiment/unclosed.yaml:4: expected ',' or '}'", False),
    ("file-component-list", ["+experiment=aslist"], "components.g: [1, 2] is not a mapping", False),
    ("file-components-list", ["+experiment=componentlist"],
     "components: a list cannot replace a mapping; components must map names to components: "
     "{NAME: {type: TYPE, params: {...}}, ...} (in cfg/experiment/componentlist.yaml)", False),
    ("components-list", [*BALL, "components=[{type: sine}]"],
     "components: a list cannot replace a mapping; components must map names to components: {NAME: ", False),
    ("file-connections-mapping", ["+experiment=connectionmap"],
     "connections: a mapping cannot replace a list (in cfg/experiment/connectionmap.yaml)", False),
    ("connections-mapping", [*BALL, "connections={a: b}"], "connections: a mapping cannot replace a list", False),
    ("selector-port-and-bounds", [*PENDULUM, "components.pendulum.selector.port=qq",
                                  "components.pendulum.selector.lower=0.35", "components.pendulum.selector.upper=0.25"],
     "components.pendulum.selector.port: unknown output port 'qq' for the selector of multi component 'pendulum'; "
     "did you mean 'q'? (known: omega, q)", True),
    ("file-params-scalar", ["+experiment=scalarparams"], "components.g.params: 3 is not a mapping", False),
    ("file-run-key", ["+experiment=runkey"],
     "run.tff: unknown key 'tff' in run; did you mean 'tf'? (known: checkpoint, dt, restart, start_from, t0, tf) "
     "(in cfg/experiment/runkey.yaml)",
     True),
    ("file-component-key", ["+experiment=compkey"], "components.g.foo: unknown key 'foo' in components.g", False),
    ("file-top-key", ["+experiment=topkey"],
     "conections: unknown key 'conections' at the top level; did you mean 'connections'", True),
    ("file-modes", ["+experiment=modes"], "components.g.modes: only components of type multi have modes", False),
    ("file-mode-key", ["+experiment=modekey"],
     "components.m.modes.a.initial: initial belongs to the multi component, not to one of its modes: "
     "components.m.initial", False),
    ("file-master-key", ["+experiment=masterkey"],
     "master.time_tolerence: unknown setting 'time_tolerence' of the hybrid master; did you mean", True),
    ("sweep-common", ["-m", *BALL, "run.tf=0.1,0.2", "+run.tff=1", "hydra/launcher=basic"],
     "run.tff: unknown key 'tff' in run; did you mean 'tf'?", True),
    ("sweep-struct", ["-m", *BALL, "run.tf=0.1,0.2", "storage.foo=1", "hydra/launcher=basic"],
     "storage.foo: unknown key 'foo' in storage", False),
    ("sweep-param", ["-m", *BALL, "run.tf=0.1,0.2", "+components.ball.params.ee=1", "hydra/launcher=basic"],
     "components.ball.params.ee: unknown parameter 'ee'", True),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory holding only ``cfg/experiment/*.yaml`` (the bad experiment files)."""
    folder = tmp_path / "cfg" / "experiment"
    folder.mkdir(parents=True)
    for name, text in EXPERIMENTS.items():
        (folder / f"{name}.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """``cosimrun ARGS`` in-process: its exit status (0 when ``main`` returns)."""
    monkeypatch.setattr(sys, "argv", ["cosimrun", *args])
    try:
        cli.main()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def left_behind(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_relative_to(root / "cfg"))


def check_line(stderr: str, expected: str, suggests: bool | None) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith("cosimrun: error: ") and expected in line, line
    if suggests is not None:
        assert ("did you mean" in line) == suggests, line
    return line


@pytest.mark.parametrize(("args", "expected", "suggests"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_bad_input_on_the_command_line(workdir, monkeypatch, capsys, args, expected, suggests) -> None:
    dirs = [] if args[0] == "--config-dir" else ["--config-dir", "cfg"]
    code = run_main(monkeypatch, *dirs, *args)
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG, err
    check_line(err, expected, suggests)
    assert left_behind(workdir) == []


BUILD_CASES = [
    ("root-not-mapping", [1], "the config [1] is not a mapping"),
    ("components-list", {"components": ["g"]}, "components: ['g'] is not a mapping"),
    ("component-string", {"components": {"g": "gain"}}, "components.g: 'gain' is not a mapping"),
    ("type-not-string", {"components": {"g": {"type": 3}}}, "components.g.type: 3 is not a component type name"),
    ("initial-list", {"components": {"g": {"type": "gain", "initial": [1]}}},
     "components.g.initial: [1] is not a mapping"),
    ("units-list", {"components": {"g": {"type": "gain", "units": ["m"]}}},
     "components.g.units: ['m'] is not a mapping"),
    ("modes-scalar", {"components": {"m": {"type": "multi", "modes": 3}}}, "components.m.modes: 3 is not a mapping"),
    ("mode-scalar", {"components": {"m": {"type": "multi", "modes": {"a": 3}}}},
     "components.m.modes.a: 3 is not a mapping"),
    ("connection-no-dst", {"components": {"g": {"type": "gain"}}, "connections": [{"src": "g.y"}]},
     "connections[0]: a connection mapping needs dst"),
    ("events-string", {"components": {"g": {"type": "gain"}}, "events": "g.x -> g"},
     "events: 'g.x -> g' is not a list"),
    ("record-int", {"components": {"g": {"type": "gain"}}, "storage": {"record": 3}},
     "storage.record: 3 is not a list"),
    ("master-bool-as-float", {"components": {"g": {"type": "gain"}}, "master": {"name": "hybrid",
                                                                              "time_tolerance": True}},
     "master.time_tolerance: True is not a number"),
    ("run-mapping", {"components": {"g": {"type": "gain"}}, "run": 3}, "run: 3 is not a mapping"),
    ("run-key", {"components": {"g": {"type": "gain"}}, "run": {"dtt": 1}}, "run.dtt: unknown key 'dtt' in run"),
    ("storage-nc", {"components": {"g": {"type": "gain"}}, "storage": {"file": "out.txt"}},
     "storage.file: 'out.txt' does not name an HDF5 file"),
]


@pytest.mark.parametrize(("cfg", "expected"), [c[1:] for c in BUILD_CASES], ids=[c[0] for c in BUILD_CASES])
def test_bad_input_to_the_builder(cfg, expected) -> None:
    with pytest.raises(ConfigError) as info:
        build_experiment(cfg)
    assert str(info.value).startswith(expected)
    assert "\n" not in str(info.value)


def test_there_are_at_least_sixty_bad_inputs() -> None:
    assert len(CLI_CASES) + len(BUILD_CASES) >= 60


def test_results_files_may_be_h5_hdf5_or_nc() -> None:
    for name in ("r.h5", "r.HDF5", "r.nc"):
        exp = build_experiment({"components": {"g": {"type": "gain"}}, "storage": {"file": name}})
        assert exp.storage.file == name


@pytest.mark.parametrize(
    "args",
    [
        [*BALL, "run.tf=0.05", "+components.k={type: constant, params: {value: 2.0}}"],
        [*PENDULUM, "run.tf=0.05", "components.ctrl={type: pid, params: {kp: 2}}"],
        [*PENDULUM, "run.tf=0.05", "~components.ref", "+components.ref={type: constant, params: {value: 0.1}}"],
    ],
    ids=["added", "replaced-by-merge", "removed-and-added"],
)
def test_a_component_added_or_replaced_on_the_command_line_runs(workdir, monkeypatch, capsys, args) -> None:
    from cosimrun.storage import load_results

    assert run_main(monkeypatch, *args, "hydra.run.dir=out") == 0, capsys.readouterr().err
    res = load_results(workdir / "out" / "results.h5")
    assert res.status == "complete"
    if "+components.k" in args[-1]:
        _, y = res.history("k")["y"]
        assert y[-1] == 2.0
    if "components.ctrl" in args[-1]:
        assert res.config["components"]["ctrl"]["params"]["kp"] == 2
    if "~components.ref" in args:
        assert res.config["components"]["ref"] == {"type": "constant", "params": {"value": 0.1}}


def test_describe_leaves_no_run_directory(workdir, monkeypatch, capsys) -> None:
    assert run_main(monkeypatch, *BALL, "action=describe") == 0
    assert "ball" in capsys.readouterr().out
    assert left_behind(workdir) == []


def test_version_and_help(workdir, monkeypatch, capsys) -> None:
    import hydra

    import cosimrun

    assert run_main(monkeypatch, "--version") == 0
    out = capsys.readouterr().out
    assert out.strip() == f"cosimrun {cosimrun.__version__} (Hydra {hydra.__version__})"
    assert run_main(monkeypatch, "--help") == 0
    out = capsys.readouterr().out
    for text in ("+experiment=NAME", "action=describe", "-m ", "--list-components [NAME]", "--cfg job",
                 "--hydra-help", "bouncing_ball", "gauss_seidel", "HYDRA_FULL_ERROR=1"):
        assert text in out, text
    assert run_main(monkeypatch, "--hydra-help") == 0
    assert "Hydra (" in capsys.readouterr().out
    assert left_behind(workdir) == []


def cosimrun(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return forkserver.run(forkserver.Form.run_cli(), list(args), {**os.environ, **env}, cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_through_the_command(workdir) -> None:
    proc = cosimrun("--config-dir", "cfg", "+experiment=badindent", cwd=workdir)
    assert proc.returncode == EXIT_CONFIG, proc.stderr
    check_line(proc.stderr, "cfg/experiment/badindent.yaml:6: expected <block end>", False)
    proc = cosimrun(*BALL, "+run.tff=1", cwd=workdir)
    assert proc.returncode == EXIT_CONFIG, proc.stderr
    check_line(proc.stderr, "run.tff: unknown key 'tff' in run; did you mean 'tf'?", True)
    assert left_behind(workdir) == []


def test_hydra_full_error_shows_hydras_report(workdir) -> None:
    proc = cosimrun(*BALL, "run.dt=abc", cwd=workdir, HYDRA_FULL_ERROR="1")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "full_key: run.dt" in proc.stderr
    assert "cosimrun: error:" not in proc.stderr
