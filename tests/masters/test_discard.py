"""FMUs that end a step early (``fmi2Discard``) and FMUs that only take fixed steps, under every master.

The FMU (``tests/fmus/discard.c``) integrates ``x' = u`` exactly and ends a step
that would cross its parameter ``t_discard`` there, reporting it as its last
successful time. Coupled to an ODE component (``v' = -x``, ``u = v``), a run in
which it discards must equal a reference run of the same FMU without discards
whose step is cut at ``t_discard`` by a time event: the same arithmetic on the
same time axis, so they agree to rounding (compared to 1e-12; they are in fact
bitwise equal).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fmus import builders  # tests/fmus (tests/ is on sys.path, see tests/conftest.py)
from fmus.builders import component as fmu

from cosimrun import CoSimComponent, DenseTime, PortSpec, PortType
from cosimrun.components.sources import Step
from cosimrun.core.ode import OdeComponent
from cosimrun.errors import ConfigError, FMUError, SimulationError, StepDiscarded
from cosimrun.masters import IJCSA, GaussSeidel, Hybrid, Jacobi, Master
from cosimrun.masters.explicit import ExplicitRun
from cosimrun.storage import load_results
from cosimrun.system import System

T_DISCARD, DT, TF = 0.53, 0.1, 1.0
MASTERS = {
    "jacobi": Jacobi,
    "gauss_seidel": GaussSeidel,
    "hybrid": Hybrid,
    "ijcsa": IJCSA,
    "ijcsa_iterate": lambda: IJCSA(iterate_steps=True),
}
HEAD = "component 'f' ended the step from t=0.5 to 0.6 early at t=0.53; the run cannot continue: "


# ---------------------------------------------------------------------------- FMUs and components
@pytest.fixture(autouse=True)
def fmu_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The extraction cache of these tests (never the user's)."""
    monkeypatch.setenv("COSIMRUN_FMU_CACHE", str(tmp_path_factory.getbasetemp() / "fmu-cache"))


@pytest.fixture(scope="session")
def fmu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("discard-fmus")


@pytest.fixture(scope="session")
def discard_fmu(fmu_dir: Path) -> Path:
    return builders.discard(fmu_dir)


@pytest.fixture(scope="session")
def fixed_fmu(fmu_dir: Path) -> Path:
    return builders.discard(fmu_dir, variable_step=False)


@pytest.fixture(scope="session")
def passive_fmu(fmu_dir: Path) -> Path:
    return builders.discard(fmu_dir, rollback=False)


class Spring(OdeComponent):
    """``v' = -x``: with the FMU's ``x' = v`` an oscillator, so the coupling matters."""

    def __init__(self, name: str = "spring") -> None:
        super().__init__(name)
        self.add_state("v", "m/s", initial=0.5)
        self.add_input("x", "m")

    def derivatives(self, t, x, u):
        return np.array([-u[0]])


class Source(CoSimComponent):
    """``y = 1 m/s``, without rollback."""

    def __init__(self, name: str = "src") -> None:
        super().__init__(name)
        self.output_specs = {"y": PortSpec("y", PortType.REAL, "out", "m/s")}

    def _initialize_component(self, t0):
        pass

    def _do_step_internal(self, t, dt):
        pass

    def _update_output_states(self, t=None, event_names=()):
        self.outputs["y"].value = 1.0

    def get_state(self):
        return {}

    def set_state(self, state, t):
        pass


class Clock(OdeComponent):
    """``tau' = 1`` with an event where ``tau`` passes ``at``."""

    def __init__(self, name: str, at: float) -> None:
        super().__init__(name)
        self.add_state("tau", "s")
        self.add_state_event("tick", lambda t, x, u: x[0] - at, 1)

    def derivatives(self, t, x, u):
        return np.ones(1)


def oscillator(path: Path, t_discard: float = T_DISCARD, cut: float | None = None, fmu_first: bool = False,
               extra: tuple[CoSimComponent, ...] = ()) -> System:
    """The FMU coupled to a :class:`Spring`; *cut*: a time event there; the spring is stepped first by default."""
    system = System("s")
    f, spring = fmu("f", path, t_discard=t_discard), Spring()
    for comp in ([f, spring] if fmu_first else [spring, f]):
        system.add_component(comp)
    if cut is not None:
        step = Step("cut")
        step.set_parameters(step_time=cut)
        system.add_component(step)
    for comp in extra:
        system.add_component(comp)
    system.connect("f.x -> spring.x")
    system.connect("spring.v -> f.u")
    return system


def run(system: System, master: Master, tf: float = TF) -> Any:
    try:
        return system.run(0.0, tf, DT, master=master)
    finally:
        system.free()


def trajectories(result: Any, *ports: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {p: result.history.get_port_trajectory(*p.split(".")) for p in ports}


def assert_same_histories(result: Any, reference: Any, *ports: str) -> None:
    for port, (t, y) in trajectories(result, *ports).items():
        t_ref, y_ref = trajectories(reference, port)[port]
        np.testing.assert_array_equal(t, t_ref, err_msg=port)
        np.testing.assert_allclose(y, y_ref, rtol=0, atol=1e-12, err_msg=port)


# ---------------------------------------------------------------------------- a step ended early is cut there
@pytest.mark.parametrize("name", list(MASTERS))
def test_a_discarded_step_is_cut_at_the_last_successful_time_and_matches_a_run_cut_there(
    name: str, discard_fmu: Path
) -> None:
    result = run(oscillator(discard_fmu), MASTERS[name]())
    reference = run(oscillator(discard_fmu, t_discard=1e300, cut=T_DISCARD), MASTERS[name]())
    assert result.events == [(DenseTime(T_DISCARD, 0), "f", "discard")]
    assert result.stats.discards == 1 and reference.stats.discards == 0
    assert_same_histories(result, reference, "f.x", "spring.v")
    t, _ = trajectories(result, "f.x")["f.x"]
    assert T_DISCARD in t.tolist() and len(t) == round(TF / DT) + 2  # the grid plus the cut instant
    if name == "gauss_seidel":  # the spring stepped first, to 0.6: rolled back and stepped to 0.53
        assert result.stats.rollbacks == 1
    if name == "jacobi":  # the FMU steps first: nothing to roll back, and no checkpoint in any step
        assert result.stats.rollbacks == 0


def test_gauss_seidel_with_the_fmu_stepped_first_leaves_it_where_it_stopped(discard_fmu: Path) -> None:
    result = run(oscillator(discard_fmu, fmu_first=True), GaussSeidel())
    reference = run(oscillator(discard_fmu, t_discard=1e300, cut=T_DISCARD, fmu_first=True), GaussSeidel())
    assert result.stats.discards == 1 and result.stats.rollbacks == 0
    assert_same_histories(result, reference, "f.x", "spring.v")


def test_a_passive_fmu_under_the_hybrid_master_cuts_the_step_too(passive_fmu: Path) -> None:
    """An FMU without FMU state steps after the accepted trial; its discard takes the step again up to there."""
    result = run(oscillator(passive_fmu), Hybrid())
    reference = run(oscillator(passive_fmu, t_discard=1e300, cut=T_DISCARD), Hybrid())
    assert result.events == [(DenseTime(T_DISCARD, 0), "f", "discard")]
    assert_same_histories(result, reference, "f.x", "spring.v")


def test_a_state_event_inside_the_cut_step_is_located_before_the_discard(discard_fmu: Path) -> None:
    result = run(oscillator(discard_fmu, extra=(Clock("clock", 0.515),)), Hybrid())
    (t_event, _, event), (t_discard, _, discard) = result.events
    assert (event, discard) == ("tick", "discard")
    assert t_event.t == pytest.approx(0.515, abs=1e-9) and t_discard == DenseTime(T_DISCARD, 0)


def test_two_fmus_ending_one_step_early_cut_it_at_the_earlier_instant(discard_fmu: Path) -> None:
    """Jacobi steps both FMUs first: the second discards on the way to the first's instant; both take their turn."""
    system = oscillator(discard_fmu, t_discard=0.57, extra=(fmu("g", discard_fmu, t_discard=0.53),))
    system.connect("spring.v -> g.u")
    result = run(system, Jacobi())
    assert result.events == [(DenseTime(0.53, 0), "g", "discard"), (DenseTime(0.57, 0), "f", "discard")]
    assert result.stats.discards == 2 and result.stats.rollbacks == 1  # f, at 0.57, back to 0.5
    reference_system = oscillator(discard_fmu, t_discard=1e300, cut=0.53,
                                  extra=(fmu("g", discard_fmu), Step("cut2")))
    reference_system.components["cut2"].set_parameters(step_time=0.57)
    reference_system.connect("spring.v -> g.u")
    assert_same_histories(result, run(reference_system, Jacobi()), "f.x", "g.x", "spring.v")


@pytest.mark.parametrize("t_discard", [1e300, T_DISCARD])
def test_jacobi_steps_the_fmus_first_without_changing_a_bit(t_discard: float, discard_fmu: Path) -> None:
    """Against the priority order, where the components before the FMU are checkpointed and rolled back."""

    class PriorityOrderRun(ExplicitRun):
        def _step_order(self):
            return list(self.order)

    @dataclass(frozen=True)
    class PriorityOrderJacobi(Jacobi):
        def start(self, system: System) -> PriorityOrderRun:
            return PriorityOrderRun(self, system)

    def system() -> System:
        return oscillator(discard_fmu, t_discard=t_discard, extra=(Spring("other"),))

    master, plain = Jacobi(extrapolation=1), PriorityOrderJacobi(extrapolation=1)
    first, second = system(), system()
    result, reference = run(first, master), run(second, plain)
    assert [c.name for c, _, _ in first.master_run.plan][0] == "f"
    assert [c.name for c, _, _ in second.master_run.plan][-1] == "f"
    assert result.stats.rollbacks == 0 and reference.stats.rollbacks == reference.stats.discards
    assert result.events == reference.events
    for port in ("f.x", "spring.v", "other.v"):
        (t, y), (t_ref, y_ref) = trajectories(result, port)[port], trajectories(reference, port)[port]
        assert np.array_equal(t, t_ref) and np.array_equal(y, y_ref), port


# ---------------------------------------------------------------------------- discards that cannot be recovered
def test_a_component_that_cannot_roll_back_stepped_before_the_fmu_fails_the_run_in_one_line(
    discard_fmu: Path,
) -> None:
    system = System("s")
    system.add_component(Source())
    system.add_component(fmu("f", discard_fmu, t_discard=T_DISCARD))
    system.connect("src.y -> f.u")
    with pytest.raises(SimulationError) as info:
        run(system, GaussSeidel())
    assert str(info.value) == HEAD + (
        "component 'src' was already stepped to t=0.6 and cannot roll back (supports_rollback is False) "
        "to be stepped to t=0.53 with the others")
    assert (info.value.component, info.value.time) == ("f", 0.5)
    assert not isinstance(info.value, StepDiscarded)
    # Jacobi steps the FMU first: nothing has to roll back
    system = System("s")
    system.add_component(Source())
    system.add_component(fmu("f", discard_fmu, t_discard=T_DISCARD))
    system.connect("src.y -> f.u")
    assert run(system, Jacobi()).stats.discards == 1


def test_a_discard_without_a_usable_last_successful_time_fails_as_before(fmu_dir: Path) -> None:
    path = builders.discard(fmu_dir, reports_time=False)
    with pytest.raises(FMUError) as info:
        run(oscillator(path), Jacobi())
    assert not isinstance(info.value, StepDiscarded)
    assert str(info.value).startswith(
        "FMU component 'f' (discard_notime.fmu): fmi2DoStep from t=0.5 with step 0.1 returned fmi2Discard; FMU log: ")


# ---------------------------------------------------------------------------- FMUs that take fixed steps only
FIXED = "component 'f' cannot handle variable communication step sizes (canHandleVariableCommunicationStepSize=false)"


@pytest.mark.parametrize("name", list(MASTERS))
def test_a_fixed_step_fmu_is_stepped_by_run_dt_only(name: str, fixed_fmu: Path) -> None:
    system = oscillator(fixed_fmu, t_discard=1e300)
    f = system.components["f"]
    run(system, MASTERS[name]())
    assert f.outputs["h_min"].value == pytest.approx(DT, rel=1e-12)
    assert f.outputs["h_max"].value == pytest.approx(DT, rel=1e-12)


def test_a_fixed_step_fmu_refuses_a_run_whose_end_is_off_the_grid(fixed_fmu: Path) -> None:
    with pytest.raises(ConfigError) as info:
        run(oscillator(fixed_fmu, t_discard=1e300), GaussSeidel(), tf=1.05)
    assert str(info.value) == (f"{FIXED}, so every step must be dt=0.1, but tf=1.05 is not on the grid "
                               "t0 + k*dt (the last step would be 0.05); choose tf on the grid")


def test_a_fixed_step_fmu_fails_where_a_time_event_would_cut_its_step(fixed_fmu: Path) -> None:
    with pytest.raises(SimulationError) as info:
        run(oscillator(fixed_fmu, t_discard=1e300, cut=0.55), Jacobi())
    assert str(info.value) == (f"{FIXED} and steps by dt=0.1 only, but the time event of component 'cut' at "
                               "t=0.55 would step it from t=0.5 to 0.55")
    assert info.value.time == 0.5


def test_a_fixed_step_fmu_fails_where_the_hybrid_master_locates_an_event(fixed_fmu: Path) -> None:
    with pytest.raises(SimulationError, match=rf"^{FIXED.replace('(', '[(]').replace(')', '[)]')} and steps by dt=0.1 "
                                       r"only, but locating or probing a state event would step it from t=0.5 to "):
        run(oscillator(fixed_fmu, t_discard=1e300, extra=(Clock("clock", 0.515),)), Hybrid())


def test_a_fixed_step_fmu_fails_where_another_fmu_ends_a_step_early(fixed_fmu: Path, discard_fmu: Path) -> None:
    system = oscillator(discard_fmu, extra=(fmu("g", fixed_fmu),))
    system.connect("spring.v -> g.u")
    with pytest.raises(SimulationError) as info:
        run(system, Jacobi())
    assert str(info.value) == HEAD + (
        "component 'g' cannot handle variable communication step sizes "
        "(canHandleVariableCommunicationStepSize=false), so it cannot be stepped to t=0.53 with the others")


def test_a_fixed_step_fmu_that_ends_a_step_early_fails(fixed_fmu: Path) -> None:
    with pytest.raises(FMUError) as info:
        run(oscillator(fixed_fmu), GaussSeidel())
    assert not isinstance(info.value, StepDiscarded)
    assert str(info.value).startswith(
        "FMU component 'f' (discard_fixed.fmu): fmi2DoStep from t=0.5 with step 0.1 returned fmi2Discard (last "
        "successful time 0.53); it cannot handle variable communication step sizes "
        "(canHandleVariableCommunicationStepSize=false), so it cannot step on from there")


# ---------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_a_discard_is_in_the_results_file_of_a_complete_run(tmp_path: Path, discard_fmu: Path) -> None:
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    (tmp_path / "conf" / "experiment" / "discarding.yaml").write_text(f"""\
# @package _global_
defaults:
  - override /master: gauss_seidel
name: discarding
run: {{t0: 0.0, tf: 1.0, dt: 0.1}}
components:
  drive: {{type: sine, params: {{amplitude: 1.0, unit: m/s, frequency: 0.5}}}}
  f: {{type: fmu, params: {{path: {discard_fmu}, t_discard: 0.55}}}}
connections:
  - drive.y -> f.u
""")
    exe = shutil.which("cosimrun", path=str(Path(sys.executable).parent))
    assert exe is not None
    proc = subprocess.run([exe, f"--config-dir={tmp_path / 'conf'}", "+experiment=discarding", "hydra.run.dir=run"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COSIMRUN_FMU_CACHE": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert "discarding: complete" in proc.stdout and " | 1 discard | " in proc.stdout
    res = load_results(tmp_path / "run")
    assert res.status == "complete"
    assert res.events[["time", "micro", "component", "event"]].values.tolist() == [[0.55, 0, "f", "discard"]]
    assert res.stats["discards"] == 1
    t, _ = res.history("f")["x"]
    assert 0.55 in t.tolist()
