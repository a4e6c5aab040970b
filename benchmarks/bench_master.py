"""Master overhead benchmark: microseconds per component-step of Jacobi and Gauss-Seidel.

A ring and a chain of N trivial components (one REAL input ``u``, one REAL
output ``y``; explicit Euler ``x += (u + 1) * dt``, ``y = x``, so no direct
feedthrough and the ring is not an algebraic loop), history on, are run with
each master. Side by side, in one process:

* cosimrun, the component written the documented way (``inputs['u'].get()``,
  ``outputs['y'].set(x, t)``), and a variant that reads/assigns ``.value``;
* syssimx (a peer framework on PyPI), the same component source on its base
  class, when it is importable (the column is skipped otherwise);
* a bare Python loop doing the same arithmetic and history appends: once on
  plain lists, once with one object and one method call per component.

Targets (issue): cosimrun <= 0.8 us per component-step and >= 3x faster than
syssimx. A bouncing-ball event section (trial steps per event, target <= 8)
runs when ``cosimrun.masters.Hybrid`` and ``cosimrun.core.ode.OdeComponent``
exist, with the shipped experiment's ball over its whole run (event-time error
against the analytic sequence, trial steps per event for flights longer and
shorter than a step) and an indicator held over 1 ms internal steps (as an FMU
output; target <= 30 trial steps per event on average and none above
ceil(log2(dt / tolerance)) + 4) next to it, in a Python stand-in and in the
test FMU ball (``tests/fmus/bouncing_ball.c`` with ``internal_step``).
``--profile`` adds a cProfile breakdown of the N=100 ring.

A builtin-component section times ``Constant -> Integrator`` (the library's
blocks, RK4 with 10 substeps) per macro step beside two trivial components,
under each master, against a bare loop doing the same RK4 arithmetic on numpy
arrays; ``--against DIR`` times the same system from another source tree (a
checkout of an older commit) in a child process, interleaved, for before/after
figures.

Usage::

    python benchmarks/bench_master.py --quick
    python benchmarks/bench_master.py                      # N = 10, 100, 1000; 10,000 steps
    python benchmarks/bench_master.py --sizes 100 --steps 2000 --profile
    python benchmarks/bench_master.py --builtin-only --builtin-steps 100000 --against /tmp/old

Benchmarks are never run as tests.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import math
import pstats
import statistics
import subprocess
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.components.blocks import Integrator
from cosimrun.components.sources import Constant
from cosimrun.core.component import CoSimComponent
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.system import System

try:  # the peer framework is optional
    import syssimx
    from syssimx.system.algorithms import GaussSeidelAlgorithm, JacobiAlgorithm

    SYSSIMX_ERROR = None
except Exception as exc:  # noqa: BLE001 - any import failure means "not available"
    syssimx = None
    SYSSIMX_ERROR = f"{type(exc).__name__}: {exc}"

DT = 2.0**-10
"""Macro step: a power of two, so ``k * dt`` is exact and both frameworks take exactly ``steps`` steps."""

TIMER: Callable[[], float] = time.perf_counter
"""Wall clock by default; ``--clock cpu`` switches to process CPU time (steadier on a busy machine)."""

TARGET_US = 0.8
TARGET_SPEEDUP = 3.0
TARGET_TRIALS_PER_EVENT = 8.0
TARGET_HELD_TRIALS_PER_EVENT = 30.0
"""Mean trial steps per event on the held (piecewise-constant) indicator; no event above the bisection bound."""
MASTERS = ("jacobi", "gauss_seidel")
TOPOLOGIES = ("ring", "chain")


# ---------------------------------------------------------------------------------------- components
class AccumulatorBody:
    """The component's user code, shared verbatim by the cosimrun and syssimx classes.

    ``x += (u + 1) * dt``, ``y = x``: a state output, no direct feedthrough, and a
    step of ``dt = 0`` (syssimx's settling step at ``t0``) changes nothing.
    """

    def _declare(self, port_spec: Any, port_type: Any) -> None:
        self.input_specs = {"u": port_spec("u", port_type.REAL, "in")}
        self.output_specs = {"y": port_spec("y", port_type.REAL, "out")}
        self._x = 0.0

    def _initialize_component(self, t0: float) -> None:
        self._x = 0.0

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._x += (self.inputs["u"].get() + 1.0) * dt

    def _update_output_states(self, t: float | None = None, event_names: Any = None) -> None:
        self.outputs["y"].set(self._x, t=t)

    def get_state(self) -> dict[str, Any]:
        return {"x": {"value": self._x, "unit": None}}

    def set_state(self, state: dict[str, Any], t: float) -> None:
        self._x = float(state["x"]["value"])
        self.t = t


class CosimAccumulator(AccumulatorBody, CoSimComponent):
    """cosimrun component, documented style: ``port.get()`` / ``port.set(value, t)``."""

    def __init__(self, name: str) -> None:
        CoSimComponent.__init__(self, name)
        self._declare(PortSpec, PortType)


class CosimAccumulatorValue(CosimAccumulator):
    """cosimrun component reading and assigning ``port.value`` directly (no validation, no timestamp)."""

    def _do_step_internal(self, t: float, dt: float) -> None:
        self._x += (self.inputs["u"].value + 1.0) * dt

    def _update_output_states(self, t: float | None = None, event_names: Any = None) -> None:
        self.outputs["y"].value = self._x


if syssimx is not None:

    class SyssimxAccumulator(AccumulatorBody, syssimx.CoSimComponent):
        """The same user code on syssimx's base class."""

        def __init__(self, name: str) -> None:
            syssimx.CoSimComponent.__init__(self, name)
            self._declare(syssimx.PortSpec, syssimx.PortType)


# ---------------------------------------------------------------------------------------- topology
def names(n: int) -> list[str]:
    """Zero-padded, so name order is ring order (syssimx sorts each generation by name)."""
    width = len(str(n - 1))
    return [f"c{i:0{width}d}" for i in range(n)]


def edges(topology: str, n: int) -> list[tuple[int, int]]:
    """``(src, dst)`` component indices: ``i -> i+1``, plus ``n-1 -> 0`` for the ring."""
    pairs = [(i, i + 1) for i in range(n - 1)]
    if topology == "ring":
        pairs.append((n - 1, 0))
    return pairs


# ---------------------------------------------------------------------------------------- runners
@dataclass
class Outcome:
    """One timed run: wall seconds, final outputs and samples recorded per component."""

    seconds: float
    finals: list[float]
    samples: int
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def build_cosimrun(topology: str, n: int, cls: type[CoSimComponent]) -> System:
    system = System(f"{topology}{n}")
    comps = [system.add_component(cls(name)) for name in names(n)]
    for src, dst in edges(topology, n):
        system.connect(f"{comps[src].name}.y", f"{comps[dst].name}.u")
    return system


def run_cosimrun(topology: str, n: int, master: str, steps: int, cls: type[CoSimComponent]) -> Outcome:
    system = build_cosimrun(topology, n, cls)
    algo = Jacobi() if master == "jacobi" else GaussSeidel()
    start = TIMER()
    stats = system.run(0.0, steps * DT, DT, master=algo).stats
    seconds = TIMER() - start
    comps = list(system.components.values())
    finals = [c.outputs["y"].value for c in comps]
    samples = {len(c.history.get_port_history("y")) for c in comps}
    assert stats.macro_steps == steps, (stats.macro_steps, steps)
    return Outcome(seconds, finals, samples.pop() if len(samples) == 1 else -1)


def run_syssimx(topology: str, n: int, master: str, steps: int) -> Outcome:
    from syssimx import Connection
    from syssimx import System as SxSystem

    system = SxSystem(f"{topology}{n}")
    comps = [SyssimxAccumulator(name) for name in names(n)]
    for comp in comps:
        system.add_component(comp)
    for src, dst in edges(topology, n):
        system.add_connection(Connection(comps[src].name, "y", comps[dst].name, "u"))
    system.set_algorithm(JacobiAlgorithm() if master == "jacobi" else GaussSeidelAlgorithm())
    start = TIMER()
    system.initialize(0.0)
    system.run(0.0, steps * DT, DT)
    seconds = TIMER() - start
    finals = [c.outputs["y"].get() for c in comps]
    samples = {len(c.history.get_port_history("y")) for c in comps}
    # With no direct feedthrough every component sits in one generation, and syssimx's
    # Gauss-Seidel sets all inputs of a generation before stepping it: Jacobi semantics.
    note = "jacobi semantics" if master == "gauss_seidel" and len(system.execution_order) == 1 else ""
    return Outcome(seconds, finals, samples.pop() if len(samples) == 1 else -1, note)


def bare_lists(topology: str, n: int, master: str, steps: int) -> Outcome:
    """Plain lists of floats: same arithmetic, same order, one ``array('d')`` pair of appends per sample."""
    src = [n] * n  # index n holds the constant 0.0 of an unconnected input
    for s, d in edges(topology, n):
        src[d] = s
    y = [0.0] * (n + 1)
    hist_t = [array("d", [0.0]) for _ in range(n)]
    hist_v = [array("d", [0.0]) for _ in range(n)]
    plan = [(i, src[i], hist_t[i].append, hist_v[i].append) for i in range(n)]
    dt = DT
    start = TIMER()
    if master == "jacobi":
        for k in range(1, steps + 1):
            t1 = k * dt
            u = y[:]
            for i, s, add_t, add_v in plan:
                v = y[i] + (u[s] + 1.0) * dt
                y[i] = v
                add_t(t1)
                add_v(v)
    else:  # Gauss-Seidel: in place, so i reads its producer's fresh value (the ring's back edge lags)
        for k in range(1, steps + 1):
            t1 = k * dt
            for i, s, add_t, add_v in plan:
                v = y[i] + (y[s] + 1.0) * dt
                y[i] = v
                add_t(t1)
                add_v(v)
    seconds = TIMER() - start
    return Outcome(seconds, y[:n], len(hist_t[0]))


class _BareComp:
    __slots__ = ("u", "x", "y", "add_t", "add_v")

    def __init__(self) -> None:
        self.u = self.x = self.y = 0.0
        t, v = array("d", [0.0]), array("d", [0.0])
        self.add_t, self.add_v = t.append, v.append

    def step(self, t: float, dt: float) -> None:
        self.x += (self.u + 1.0) * dt
        t1 = t + dt
        self.y = self.x
        self.add_t(t1)
        self.add_v(self.y)


def bare_objects(topology: str, n: int, master: str, steps: int) -> Outcome:
    """One object and one ``step`` call per component-step; links copied attribute to attribute."""
    comps = [_BareComp() for _ in range(n)]
    links = [(comps[d], comps[s]) for s, d in edges(topology, n)]
    dt = DT
    start = TIMER()
    if master == "jacobi":
        for k in range(steps):
            t = k * dt
            for c in comps:
                c.step(t, dt)
            for dst, src in links:
                dst.u = src.y
    else:
        fresh = {id(d): s for d, s in links}
        plan = [(c, fresh.get(id(c))) for c in comps]
        for k in range(steps):
            t = k * dt
            for c, s in plan:
                if s is not None:
                    c.u = s.y
                c.step(t, dt)
    seconds = TIMER() - start
    return Outcome(seconds, [c.y for c in comps], steps + 1)


# ---------------------------------------------------------------------------------------- measuring
def best_of_each(repeat: int, runs: dict[str, Callable[[], Outcome] | None]) -> dict[str, Outcome | None]:
    """Fastest of *repeat* runs of each entry, taken round-robin so load changes hit every column alike."""
    best: dict[str, Outcome | None] = dict.fromkeys(runs)
    for _ in range(repeat):
        for key, fn in runs.items():
            if fn is None:
                continue
            gc.collect()
            out = fn()
            prev = best[key]
            if prev is None or out.seconds < prev.seconds:
                best[key] = out
            del out
    return best


def warm_up(have_sx: bool) -> None:
    """One small run of everything first, so one-time costs (imports, unit registry caches) stay out."""
    for master in MASTERS:
        run_cosimrun("ring", 4, master, 10, CosimAccumulator)
        if have_sx:
            run_syssimx("ring", 4, master, 10)


def max_rel_diff(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b, strict=True)), default=0.0)


def us(out: Outcome | None, work: int) -> str:
    return "-" if out is None else f"{out.seconds / work * 1e6:.3f}"


def ratio(num: Outcome | None, den: Outcome | None) -> str:
    return "-" if num is None or den is None else f"{num.seconds / den.seconds:.2f}x"


def fmt_row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def run_table(args: argparse.Namespace) -> bool:
    """Print the main table; return whether every cosimrun cell met both targets."""
    have_sx = syssimx is not None and not args.no_syssimx
    header = ["system", "N", "master", "cosimrun", ".value", "syssimx", "sx/cosim", "bare", "bare-obj",
              "cosim/bare", "check"]
    widths = [6, 5, 12, 9, 8, 8, 8, 7, 8, 10, 12]
    print(f"us per component-step ({args.clock} time), {args.steps} steps of dt={DT:g}, history on, "
          f"best of {args.repeat} (1 above 2e6 component-steps)")
    print(f"python {sys.version.split()[0]}, cosimrun vs "
          + (f"syssimx {syssimx.__version__}" if have_sx else f"syssimx unavailable ({SYSSIMX_ERROR or 'skipped'})"))
    print()
    print(fmt_row(header, widths))
    print(fmt_row(["-" * w for w in widths], widths))
    all_ok = True
    notes: list[str] = []
    warm_up(have_sx)
    for topology in args.topologies:
        for n in args.sizes:
            for master in args.masters:
                work = n * args.steps
                rep = args.repeat if work <= 2_000_000 else 1
                res = best_of_each(rep, {
                    "cos": partial(run_cosimrun, topology, n, master, args.steps, CosimAccumulator),
                    "val": partial(run_cosimrun, topology, n, master, args.steps, CosimAccumulatorValue),
                    "sx": partial(run_syssimx, topology, n, master, args.steps) if have_sx else None,
                    "bare": partial(bare_lists, topology, n, master, args.steps),
                    "obj": partial(bare_objects, topology, n, master, args.steps),
                })
                cos, val, sx, bare, obj = (res[k] for k in ("cos", "val", "sx", "bare", "obj"))
                assert cos is not None and val is not None and bare is not None and obj is not None
                # equivalence: same samples recorded, same final outputs
                where = f"{topology} N={n} {master}"
                for label, out, ref in (("cosimrun", cos, bare), (".value", val, bare), ("bare-obj", obj, bare)):
                    diff = max_rel_diff(out.finals, ref.finals)
                    if diff > 1e-12 or out.samples != ref.samples:
                        notes.append(f"{where}: {label} differs from bare loop (rel {diff:.2e}, "
                                     f"samples {out.samples} vs {ref.samples})")
                if sx is not None:
                    # syssimx's Gauss-Seidel has Jacobi semantics here: compare it with the Jacobi loop
                    ref = bare if master == "jacobi" or not sx.note else bare_lists(topology, n, "jacobi", args.steps)
                    diff = max_rel_diff(sx.finals, ref.finals)
                    if diff > 1e-12 or sx.samples != ref.samples:
                        notes.append(f"{where}: syssimx differs from bare loop (rel {diff:.2e}, "
                                     f"samples {sx.samples} vs {ref.samples})")
                    if sx.note:
                        notes.append(f"{where}: syssimx ran with {sx.note} (no feedthrough: one generation)")
                ok_us = cos.seconds / work * 1e6 <= TARGET_US
                ok_sx = sx is None or sx.seconds / cos.seconds >= TARGET_SPEEDUP
                all_ok = all_ok and ok_us and ok_sx
                check = ("ok" if ok_us else "SLOW") + "/" + ("-" if sx is None else "ok" if ok_sx else "<3x")
                print(fmt_row([topology, str(n), master, us(cos, work), us(val, work), us(sx, work),
                               ratio(sx, cos), us(bare, work), us(obj, work), ratio(cos, bare), check], widths),
                      flush=True)
                del cos, val, sx, bare, obj, res
    print()
    print(f"check: cosimrun <= {TARGET_US} us per component-step / syssimx >= {TARGET_SPEEDUP:g}x slower "
          "(SLOW, <3x: missed; '-': syssimx not run)")
    print("columns: cosimrun = documented component (port.get/port.set); .value = same, reading/assigning "
          "port.value; bare = list loop; bare-obj = one object + method call per component; "
          "sx/cosim = syssimx time / cosimrun time")
    print("equivalence: every run records steps+1 samples per component; final outputs are compared "
          "with the bare loop of the same master (syssimx's Gauss-Seidel with the Jacobi one)")
    print("timing: cosimrun = System.run (initialize + steps); syssimx = initialize + run, which also "
          "builds its result arrays (a few % of its time); bare loops = steps only")
    for note in dict.fromkeys(notes):
        print("  note:", note)
    print(f"targets met in every cell: {'yes' if all_ok else 'no'}")
    return all_ok


# ---------------------------------------------------------------------------------------- builtin components
BUILTIN_SUBSTEPS = 10
"""The Integrator's default ``substeps`` (RK4 sub-steps per macro step), which the bare loop repeats."""

BUILTIN_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
import cosimrun
assert cosimrun.__file__.startswith(sys.argv[1]), cosimrun.__file__
from cosimrun.components.blocks import Integrator
from cosimrun.components.sources import Constant
from cosimrun.masters import GaussSeidel, Jacobi
from cosimrun.system import System
master, steps, dt = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
timer = time.perf_counter if sys.argv[5] == "wall" else time.process_time
system = System("builtin")
source = Constant("c")
source.set_parameters(value=1.0)
system.add_component(source)
system.add_component(Integrator("i"))
system.connect("c.y", "i.u")
start = timer()
system.run(0.0, steps * dt, dt, master=Jacobi() if master == "jacobi" else GaussSeidel())
print(timer() - start, repr(system.components["i"].outputs["y"].value))
"""
"""The builtin case as a child process importing cosimrun from the tree ``argv[1]`` (``--against``): only the
library API that every version has."""


def build_builtin() -> System:
    """``Constant(value=1) -> Integrator`` (default parameters: ``y' = k u``, RK4, 10 substeps)."""
    system = System("builtin")
    source = Constant("c")
    source.set_parameters(value=1.0)
    system.add_component(source)
    system.add_component(Integrator("i"))
    system.connect("c.y", "i.u")
    return system


def run_builtin(master: str, steps: int) -> Outcome:
    system = build_builtin()
    algo = Jacobi() if master == "jacobi" else GaussSeidel()
    start = TIMER()
    stats = system.run(0.0, steps * DT, DT, master=algo).stats
    seconds = TIMER() - start
    integrator = system.components["i"]
    assert stats.macro_steps == steps, (stats.macro_steps, steps)
    return Outcome(seconds, [integrator.outputs["y"].value], len(integrator.history.get_port_history("y")))


def run_builtin_tree(root: str, master: str, steps: int) -> Outcome:
    """The builtin case run by the cosimrun in source tree *root*, in a child process."""
    out = subprocess.run([sys.executable, "-c", BUILTIN_CHILD, root, master, str(steps), repr(DT),
                          "wall" if TIMER is time.perf_counter else "cpu"], capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"--against {root}: {out.stderr.strip().splitlines()[-1] if out.stderr else out.returncode}")
    seconds, y = out.stdout.split()
    return Outcome(float(seconds), [float(y)], steps + 1)


def bare_builtin(steps: int) -> Outcome:
    """The Integrator's RK4 arithmetic on numpy arrays (same operations in the same order, so the same bits)
    with ``y' = k u`` as a plain function, plus the two outputs' history appends: no master, no ports."""
    k, u, x = np.array(1.0), np.array([1.0]), np.array([0.0])
    s2, s3, s4, w, v = (np.empty(1) for _ in range(5))
    hist_t, hist_c, hist_i = array("d", [0.0]), array("d", [1.0]), array("d", [0.0])
    multiply, add = np.multiply, np.add

    def f(t: float, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        return k * u

    dt = DT
    start = TIMER()
    h = dt / BUILTIN_SUBSTEPS
    h2, h6 = 0.5 * h, h / 6.0
    a_h, a_h2, a_h6, two = np.array(h), np.array(h2), np.array(h6), np.array(2.0)
    for step in range(steps):
        t = step * dt
        for i in range(BUILTIN_SUBSTEPS):
            ti = t + i * h
            k1 = f(ti, x, u)
            multiply(k1, a_h2, out=w)
            add(w, x, out=s2)
            k2 = f(ti + h2, s2, u)
            multiply(k2, a_h2, out=w)
            add(w, x, out=s3)
            k3 = f(ti + h2, s3, u)
            multiply(k3, a_h, out=w)
            add(w, x, out=s4)
            k4 = f(ti + h, s4, u)
            add(k2, k3, out=w)
            multiply(w, two, out=v)
            add(v, k1, out=w)
            add(w, k4, out=v)
            multiply(v, a_h6, out=w)
            x += w
        hist_t.append((step + 1) * dt)
        hist_c.append(1.0)
        hist_i.append(float(x[0]))
    seconds = TIMER() - start
    return Outcome(seconds, [float(x[0])], len(hist_t))


def median_of_each(repeat: int, runs: dict[str, Callable[[], Outcome] | None]) -> dict[str, Outcome | None]:
    """The run of median time of *repeat* runs of each entry, taken round-robin like :func:`best_of_each`."""
    done: dict[str, list[Outcome]] = {key: [] for key, fn in runs.items() if fn is not None}
    for _ in range(repeat):
        for key, fn in runs.items():
            if fn is not None:
                gc.collect()
                done[key].append(fn())
    out: dict[str, Outcome | None] = dict.fromkeys(runs)
    for key, outcomes in done.items():
        middle = statistics.median_low([o.seconds for o in outcomes])
        out[key] = next(o for o in outcomes if o.seconds == middle)
    return out


def builtin_components(args: argparse.Namespace) -> bool:
    """Per-step cost of builtin components beside trivial ones and a bare loop; return whether every run of
    the builtin case recorded the bare loop's final value and sample count (and the ``--against`` tree's)."""
    steps = args.builtin_steps
    print()
    print(f"builtin components: Constant -> Integrator (rk4, {BUILTIN_SUBSTEPS} substeps), us per macro step "
          f"({args.clock} time), {steps} steps of dt={DT:g}, history on, median of {args.repeat}")
    header = ["master", "trivial x2", "builtin", "bare rk4", "builtin/bare", "overhead"]
    widths = [12, 10, 9, 9, 12, 9]
    for n, root in enumerate(args.against, 1):
        header += [f"against{n}", f"builtin/against{n}"]
        widths += [9, 17]
        print(f"against{n}: {root} (child process, same clock, interleaved)")
    print(fmt_row(header, widths))
    print(fmt_row(["-" * w for w in widths], widths))
    run_builtin(args.masters[0], 10)
    ok = True
    for master in args.masters:
        res = median_of_each(args.repeat, {
            "trivial": partial(run_cosimrun, "chain", 2, master, steps, CosimAccumulator),
            "builtin": partial(run_builtin, master, steps),
            "bare": partial(bare_builtin, steps),
            **{root: partial(run_builtin_tree, root, master, steps) for root in args.against},
        })
        trivial, builtin, bare = (res[k] for k in ("trivial", "builtin", "bare"))
        assert trivial is not None and builtin is not None and bare is not None
        same = builtin.finals == bare.finals and builtin.samples == bare.samples
        cells = [master, us(trivial, steps), us(builtin, steps), us(bare, steps), ratio(builtin, bare),
                 f"{(builtin.seconds - bare.seconds) / steps * 1e6:.2f}"]
        for root in args.against:
            against = res[root]
            assert against is not None
            same = same and against.finals == builtin.finals
            cells += [us(against, steps), ratio(builtin, against)]
        ok = ok and same
        print(fmt_row(cells, widths) + ("" if same else "  DIFFERS"), flush=True)
    print("columns: trivial x2 = two trivial components (chain); builtin = Constant -> Integrator; bare rk4 = the "
          "same RK4 arithmetic in a plain loop; overhead = builtin - bare (master, ports, recording), us per step"
          + ("; againstN = the builtin case from the Nth --against tree" if args.against else ""))
    print(f"equivalence: the builtin runs end on the bare loop's bits{' and the against trees' if args.against else ''}"
          f" with steps+1 samples: {'yes' if ok else 'no'}")
    return ok


# ---------------------------------------------------------------------------------------- events
def bouncing_ball(args: argparse.Namespace) -> None:
    """Trial steps per event of the Hybrid master on a bouncing ball (event tolerance 1e-10)."""
    print()
    print("bouncing ball: Hybrid(time_tolerance=1e-10), target <= "
          f"{TARGET_TRIALS_PER_EVENT:g} trial steps per event")
    try:
        from cosimrun.masters import Hybrid  # type: ignore[attr-defined]
    except ImportError as exc:
        print(f"  skipped: cosimrun.masters.Hybrid is not importable ({exc})")
        return
    try:
        from cosimrun.core.ode import OdeComponent
    except ImportError as exc:
        print(f"  skipped: cosimrun.core.ode.OdeComponent is not importable ({exc})")
        return
    import numpy as np

    g, e, h0, tf, dt = 9.81, 0.8, 1.0, 3.0, 0.01

    class Ball(OdeComponent):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.add_state("h", "m", initial=h0)
            self.add_state("v", "m/s")
            self.add_state_event("ground", lambda t, x, u: x[0], direction=-1,
                                 update=lambda t, x, u: np.array([0.0, -e * x[1]]))

        def derivatives(self, t: float, x: Any, u: Any) -> Any:
            return np.array([x[1], -g])

    system = System("ball")
    system.add_component(Ball("ball"))
    try:
        start = TIMER()
        result = system.run(0.0, tf, dt, master=Hybrid(time_tolerance=1e-10))
        seconds = TIMER() - start
    except Exception as exc:  # noqa: BLE001 - report, do not hide the rest of the benchmark
        print(f"  failed: {type(exc).__name__}: {exc}")
        return
    stats = result.stats
    t1 = math.sqrt(2.0 * h0 / g)
    exact, t = [], t1
    for k in range(1, 100):
        if t > tf:
            break
        exact.append(t)
        t += 2.0 * t1 * e**k
    found = sorted(float(getattr(when, "t", when)) for when, _comp, name in result.events if name == "ground")
    err = max((abs(a - b) for a, b in zip(found, exact, strict=False)), default=float("nan"))
    per_event = stats.trial_steps_per_event
    print(f"  events {stats.events} (analytic {len(exact)}), trial steps {stats.trial_steps}, "
          f"trial steps per event {per_event:.2f} [{'ok' if per_event <= TARGET_TRIALS_PER_EVENT else 'MISS'}], "
          f"max event-time error {err:.2e} s, wall {seconds * 1e3:.1f} ms")
    shipped_ball(Hybrid)
    held_indicator(Hybrid)
    held_fmu(Hybrid)


def shipped_ball(hybrid: Any) -> None:
    """The shipped experiment's ball (5 s, 38 impacts down to 0.2 ms flights) at two tolerances."""
    from cosimrun.components.mechanics import BouncingBall

    g, e, dt = 9.81, 0.8, 0.01
    for tol in (1e-10, 1e-12):
        system = System("ball")
        ball = BouncingBall("ball")
        system.add_component(ball)
        start = TIMER()
        result = system.run(0.0, 5.0, dt, master=hybrid(time_tolerance=tol))
        seconds = TIMER() - start
        found = [when.t for when, _comp, _name in result.events]
        exact = [math.sqrt(2.0 / g)]
        for k in range(1, len(found)):
            exact.append(exact[-1] + 2.0 * e**k * math.sqrt(2.0 * g) / g)
        late = [a - b for a, b in zip(found, exact, strict=True)]
        flights = [b - a for a, b in zip([0.0, *found], found, strict=False)]
        trials = result.stats.event_trial_steps
        long_ = [n for n, f in zip(trials, flights, strict=True) if f > dt]
        short = [n for n, f in zip(trials, flights, strict=True) if f <= dt]
        print(f"  shipped ball, time_tolerance={tol:g}: {len(found)} impacts, event time - analytic in "
              f"[{min(late):.1e}, {max(late):.1e}] s (max {max(map(abs, late)) / tol:.2f} tolerances), trial steps "
              f"per event {sum(long_) / len(long_):.2f} on flights > dt (max {max(long_)}), "
              f"{sum(short) / len(short):.2f} on flights <= dt (max {max(short)}), rests: {ball.resting}, "
              f"wall {seconds * 1e3:.1f} ms")


def held_indicator(hybrid: Any) -> None:
    """Trial steps per event on an indicator held over internal steps of 1 ms (as an FMU output)."""
    tol, dt, tf, hold, level0, drop = 1e-10, 0.01, 1.0, 1e-3, 0.97, 0.0613
    bound = math.ceil(math.log2(dt / tol)) + 4

    class Held(CoSimComponent):
        """``y = exp(-t_k) - level`` at the last internal step ``t_k``; each event lowers ``level``."""

        def __init__(self, name: str) -> None:
            CoSimComponent.__init__(self, name)
            self.output_specs = {"y": PortSpec("y", PortType.REAL, "out")}
            self.add_event_indicator("low", lambda c: c.y, direction=-1)

        def _value(self, t: float) -> float:
            return math.exp(-math.floor(t / hold) * hold) - self.level

        def _initialize_component(self, t0: float) -> None:
            self.level = level0
            self.y = self._value(t0)

        def _do_step_internal(self, t: float, dt: float) -> None:
            self.y = self._value(t + dt)

        def _update_output_states(self, t: float | None = None, event_names: Any = None) -> None:
            self.outputs["y"].value = self.y

        def _handle_events_internal(self, event_names: Any, t: float) -> None:
            self.level -= drop
            self.y = self._value(t)

        def get_state(self) -> dict[str, Any]:
            return {"level": {"value": self.level, "unit": None}}

        def set_state(self, state: dict[str, Any], t: float) -> None:
            self.level = float(state["level"]["value"])

        def snapshot_state(self) -> Any:
            return self.level, self.y

        def restore_state(self, snapshot: Any, t: float) -> None:
            self.level, self.y = snapshot
            self.t = t

    exact, level = [], level0
    while -math.log(level) < tf:
        exact.append(math.ceil(-math.log(level) / hold) * hold)
        level -= drop
    system = System("held")
    system.add_component(Held("held"))
    report_held(f"held indicator (1 ms internal step, dt={dt:g})", system, hybrid(time_tolerance=tol),
                (tf, dt, bound), exact, "")


def report_held(label: str, system: System, master: Any, run: tuple[float, float, int], exact: list[float],
                truth: str) -> None:
    """Run *system* to ``run = (tf, dt, bound)`` and print its events against *exact* and the trial-step targets."""
    tf, dt, bound = run
    try:
        start = TIMER()
        result = system.run(0.0, tf, dt, master=master)
        seconds = TIMER() - start
    except Exception as exc:  # noqa: BLE001 - report, do not hide the rest of the benchmark
        print(f"  {label} failed: {type(exc).__name__}: {exc}")
        return
    finally:
        system.free()
    stats = result.stats
    found = [when.t for when, _comp, _name in result.events]
    err = max((abs(a - b) for a, b in zip(found, exact, strict=False)), default=float("nan"))
    per_event = stats.trial_steps_per_event
    worst = max(stats.event_trial_steps, default=0)
    verdict = "ok" if per_event <= TARGET_HELD_TRIALS_PER_EVENT and worst <= bound else "MISS"
    print(f"  {label}: events {stats.events} (expected {len(exact)}), trial steps per event {per_event:.2f} "
          f"(target <= {TARGET_HELD_TRIALS_PER_EVENT:g}; max {worst}, bound {bound}) [{verdict}], max event-time "
          f"error {err:.2e} s{truth}, wall {seconds * 1e3:.1f} ms")


def held_fmu(hybrid: Any) -> None:
    """The same bound on a real FMU output: the test FMU ball (``tests/fmus/bouncing_ball.c``) advancing on a 1 ms
    internal grid and holding h, v in between; indicator v rising through zero, truth the first grid point after
    each analytic impact (flights until 3.95 s stay longer than two macro steps, so every descent is seen)."""
    import tempfile

    from cosimrun.components.fmu import FMUComponent, build_c_fmu

    tol, dt, tf, hold, g, e = 1e-10, 0.01, 3.95, 1e-3, 9.81, 0.8
    bound = math.ceil(math.log2(dt / tol)) + 4
    exact, t_imp, k = [], math.sqrt(2.0 / g), 1
    while t_imp < tf:
        exact.append((math.floor(t_imp / hold) + 1) * hold)
        t_imp += 2.0 * e**k * math.sqrt(2.0 * g) / g
        k += 1
    sources = Path(__file__).resolve().parents[1] / "tests" / "fmus"
    with tempfile.TemporaryDirectory(prefix="cosimrun-bench-held-fmu-") as tmp:
        try:
            path = build_c_fmu(Path(tmp) / "bouncing_ball.fmu", model_identifier="bouncing_ball",
                               model_description=(sources / "bouncing_ball.xml").read_text(),
                               source=(sources / "bouncing_ball.c").read_text())
        except Exception as exc:  # noqa: BLE001 - report, do not hide the rest of the benchmark
            print(f"  held FMU output: not built ({type(exc).__name__}: {exc})")
            return
        ball = FMUComponent("ball")
        ball.set_parameters(path=str(path), internal_step=hold, events={"bounce": {"port": "v", "direction": 1}})
        system = System("held_fmu")
        system.add_component(ball)
        report_held(f"held FMU output (ball FMU, v on a 1 ms internal grid, dt={dt:g})", system,
                    hybrid(time_tolerance=tol), (tf, dt, bound), exact, " against the grid point")


# ---------------------------------------------------------------------------------------- profile
def profile(args: argparse.Namespace) -> None:
    """cProfile of cosimrun on the ring: own time per function in ns per component-step."""
    n = 100 if 100 in args.sizes else args.sizes[0]
    steps = args.steps
    work = n * steps
    for master in args.masters:
        gc.collect()
        plain = run_cosimrun("ring", n, master, steps, CosimAccumulator).seconds
        system = build_cosimrun("ring", n, CosimAccumulator)
        algo = Jacobi() if master == "jacobi" else GaussSeidel()
        prof = cProfile.Profile()
        gc.collect()
        prof.enable()
        system.run(0.0, steps * DT, DT, master=algo)
        prof.disable()
        stats = pstats.Stats(prof)
        rows = []
        total = 0.0
        for (filename, line, func), (_cc, ncalls, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            total += tottime
            where = filename.rsplit("/cosimrun/", 1)[-1] if "/cosimrun/" in filename else filename.rsplit("/", 1)[-1]
            rows.append((tottime, ncalls, f"{where}:{line}({func})"))
        rows.sort(reverse=True)
        print()
        print(f"profile: cosimrun {master}, ring N={n}, {steps} steps: {plain / work * 1e9:.0f} ns per "
              f"component-step unprofiled, {total / work * 1e9:.0f} ns under cProfile")
        print(f"  {'own ns/cs':>9}  {'scaled':>6}  {'calls/cs':>8}  function   (scaled = share x unprofiled time)")
        for tottime, ncalls, label in rows[: args.profile_rows]:
            share = tottime / total
            print(f"  {tottime / work * 1e9:9.0f}  {share * plain / work * 1e9:6.0f}  {ncalls / work:8.2f}  {label}")


# ---------------------------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 steps, N = 10 and 100 (smoke run)")
    parser.add_argument("--steps", type=int, default=None, help="macro steps per run (default 10,000)")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=None,
                        help="comma-separated component counts (default 10,100,1000)")
    parser.add_argument("--topologies", type=lambda s: s.split(","), default=list(TOPOLOGIES),
                        help="ring,chain")
    parser.add_argument("--masters", type=lambda s: s.split(","), default=list(MASTERS),
                        help="jacobi,gauss_seidel")
    parser.add_argument("--repeat", type=int, default=3,
                        help="best of this many runs for cells of <= 2e6 component-steps (default 3)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall: perf_counter (default); cpu: process_time, steadier when other processes run")
    parser.add_argument("--no-syssimx", action="store_true", help="skip the syssimx column")
    parser.add_argument("--no-table", action="store_true", help="skip the main table")
    parser.add_argument("--profile", action="store_true", help="cProfile cosimrun on the ring (N=100)")
    parser.add_argument("--builtin-steps", type=int, default=None,
                        help="macro steps of the builtin-component section (default 20,000; --quick 2,000)")
    parser.add_argument("--builtin-only", action="store_true",
                        help="only the builtin-component section (no table, no event section)")
    parser.add_argument("--no-builtin", action="store_true", help="skip the builtin-component section")
    parser.add_argument("--against", metavar="DIR", action="append", default=[],
                        help="also time the builtin case with the cosimrun of source tree DIR (e.g. a git worktree "
                             "of an older commit); may be given more than once")
    parser.add_argument("--profile-rows", type=int, default=15)
    args = parser.parse_args(argv)
    if args.steps is None:
        args.steps = 1_000 if args.quick else 10_000
    if args.sizes is None:
        args.sizes = [10, 100] if args.quick else [10, 100, 1000]
    if args.builtin_steps is None:
        args.builtin_steps = 2_000 if args.quick else 20_000
    for root in args.against:
        if not (Path(root) / "cosimrun" / "__init__.py").is_file():
            parser.error(f"--against: {root!r} holds no cosimrun package (cosimrun/__init__.py)")
    for name, valid in (("topologies", TOPOLOGIES), ("masters", MASTERS)):
        bad = [v for v in getattr(args, name) if v not in valid]
        if bad:
            parser.error(f"--{name}: unknown {bad} (valid: {', '.join(valid)})")
    if args.steps < 1 or args.builtin_steps < 1 or args.repeat < 1 or any(n < 2 for n in args.sizes):
        parser.error("--steps, --builtin-steps and --repeat must be >= 1 and every size >= 2")
    return args


def main(argv: list[str] | None = None) -> int:
    global TIMER
    args = parse_args(argv)
    TIMER = time.perf_counter if args.clock == "wall" else time.process_time
    if not args.no_table and not args.builtin_only:
        run_table(args)
    same = True
    if not args.no_builtin:
        same = builtin_components(args)
    if not args.builtin_only:
        bouncing_ball(args)
    if args.profile:
        profile(args)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
