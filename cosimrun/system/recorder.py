"""The run-scoped recorder: the one owner of what a run records.

The master tells the :class:`Recorder` which instants are accepted samples
(``sample(t)``, and ``sample(t, micro)`` for the post-event samples at one
instant) and which events happened (``event``). The recorder reads the
selected output ports into typed blocks of at most ``flush_interval`` rows and
hands each full block to a :class:`Sink`, and what it holds once ``flush_seconds``
passed since the last hand-over (so a run that dies hard loses at most that much): the HDF5 writer when the runner
stores a run, a :class:`MemorySink` for library use (what ``System.run``
returns). A run's memory is therefore bounded by the flush interval for every
port, recorded or not (ports not selected are never read), and flushing does
not depend on progress reports.

Every block of real values is checked before it is handed over: a NaN or an
infinity ends the run with :class:`~cosimrun.errors.NonFiniteValueError`
naming the component, the port and the time of the first one, after the
samples before it were handed over (unless the recorder allows non-finite
values). The check is one vectorized pass per block, not a cost per step.

With ``decimate=N`` (``storage.decimate``) the sink gets the samples of every N-th communication point counted
from t0 (the sample at t0 is always one), both samples at every event instant (the one before the event, at micro
step 0, and those after it) and the run's last sample, so jumps and final values stay as they are. Thinning costs
a counter and a comparison per communication point: every sample is buffered as before and only the kept rows of
a block are handed over. The watchers and the non-finite check see every sample, so the estimates a run stores
do not depend on ``decimate``. The counter is part of :meth:`Recorder.position` and :meth:`Recorder.resume`
restores it, so a run continued from a checkpoint thins as the uninterrupted run does (the final checkpoint's
position holds the run's last sample: a run extended from it keeps that sample too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from time import perf_counter
from typing import Any, Protocol

import numpy as np

from cosimrun.core.component import CoSimComponent
from cosimrun.core.defaults import DEFAULT_FLUSH_INTERVAL, DEFAULT_FLUSH_SECONDS
from cosimrun.core.events import DenseTime
from cosimrun.core.history import SystemHistory
from cosimrun.core.ports import PortState, PortType
from cosimrun.errors import ConfigError, NonFiniteValueError, UnknownNameError

PortLayout = Mapping[str, tuple[str | None, str]]
"""``{port: (unit or None, port type value)}`` of one component."""

EventRow = tuple[DenseTime, str, str]
"""``(when, component, event)``."""

CLOCK_CHECK_SECONDS = (0.001, 0.02)
"""The clock is read every *stride* samples, the stride doubled while that is sooner than the first bound and
halved while it is later than the second: a fast run reads it rarely, a slow one at (almost) every sample."""
MAX_STRIDE = 1024

_BLOCK_DTYPES: dict[PortType, Any] = {
    PortType.REAL: np.float64,
    PortType.INT: np.int64,
    PortType.BOOL: np.bool_,
    PortType.EVENT: np.bool_,
}



def port_layout(component: CoSimComponent, ports: Sequence[str]) -> PortLayout:
    """``{port: (unit, port type)}`` of the recorded *ports* of *component*: what a sink is told of them."""
    return {port: (component.outputs[port].spec.unit_name, component.outputs[port].spec.type.value) for port in ports}

class Sink(Protocol):
    """Where a recorder's blocks go (``HDF5Writer`` and :class:`MemorySink` are sinks)."""

    def add_component(self, name: str, ports: PortLayout) -> None:
        """Declare a component and its recorded ports before the first block."""

    def append(
        self, component: str, time: np.ndarray, micro: np.ndarray | None, values: Mapping[str, np.ndarray],
        *, flush: bool = True,
    ) -> None:
        """Take one block of samples of *component*: times, micro steps and ``{port: values}``."""

    def write_events(self, rows: Iterable[EventRow], *, flush: bool = True) -> int:
        """Take events in the order they happened."""

    def n_samples(self, component: str) -> int:
        """How many samples of *component* the sink holds (a block it took counts whole, or not at all)."""

    def n_events(self) -> int:
        """How many events the sink holds."""

    def flush(self) -> None:
        """Make what was taken durable (a file sink flushes; a memory sink has nothing to do)."""


class MemorySink:
    """Keeps every sample in a :class:`SystemHistory` (by default the components' own histories)."""

    def __init__(self, history: SystemHistory) -> None:
        self.history = history
        self._events = 0

    def add_component(self, name: str, ports: PortLayout) -> None:
        comp = self.history.get_component_history(name)
        for port, (unit, kind) in ports.items():
            comp.add_port(port, unit, kind)

    def append(
        self, component: str, time: np.ndarray, micro: np.ndarray | None, values: Mapping[str, np.ndarray],
        *, flush: bool = True,
    ) -> None:
        comp = self.history.get_component_history(component)
        for port, column in values.items():
            comp.get_port_history(port).extend(time, column, micro)

    def write_events(self, rows: Iterable[EventRow], *, flush: bool = True) -> int:
        n = 0
        for when, component, event in rows:
            self.history.record_event(component, event, when)
            n += 1
        self._events += n
        return n

    def n_samples(self, component: str) -> int:
        return len(self.history.get_component_history(component))

    def n_events(self) -> int:
        return self._events

    def flush(self) -> None:
        """Nothing to do: samples are in memory as soon as they are appended."""


def check_resumable(position: Mapping[str, Any], decimate: int) -> None:
    """Refuse (``storage.decimate``) to continue a checkpoint's recorder *position* with another *decimate*: the
    results would be thinned two ways in one file."""
    theirs = int(position.get("decimate", 1))
    if theirs != decimate:
        raise ConfigError("storage.decimate", f"{decimate} differs from the checkpoint's {theirs}: its results record "
                                              f"every {theirs}-th communication point; continue them with "
                                              f"storage.decimate={theirs}")


def _columns(block: np.ndarray | list[list[Any]], n: int, rows: np.ndarray | None = None) -> np.ndarray:
    """The first *n* rows of a block (of them only *rows*, when given), one column per port (a copy: the block is
    reused)."""
    if isinstance(block, list):
        picked = block[:n] if rows is None else [block[i] for i in rows]
        out = np.empty((len(block[0]) if block else 0, len(picked)), dtype=object)
        for i, row in enumerate(picked):
            out[:, i] = row
        return out
    return block[:n].T.copy() if rows is None else block[rows].T.copy()


class Recorder:
    """Samples the selected output ports of a run at the instants the master accepts.

    Create it with a sink, :meth:`attach` it to the components (the system's
    ``run`` does), then the master calls :meth:`sample` and :meth:`event`;
    :meth:`flush` hands over what is buffered (the master calls it at the end
    of the run, also when the run fails, so a failed run keeps what it computed).
    *decimate* thins what is handed over (see the module).
    """

    def __init__(
        self, sink: Sink, flush_interval: int = DEFAULT_FLUSH_INTERVAL, *, allow_nonfinite: bool = False,
        flush_seconds: float = DEFAULT_FLUSH_SECONDS, decimate: int = 1,
    ) -> None:
        if int(flush_interval) < 1:
            raise ConfigError("flush_interval", f"must be >= 1, got {flush_interval!r}")
        if isinstance(decimate, bool) or not isinstance(decimate, int) or decimate < 1:
            raise ConfigError("decimate", f"must be an integer >= 1, got {decimate!r}")
        self.decimate = decimate
        """Hand over the samples of every *decimate*-th communication point (and those at events, and the last)."""
        self._every = decimate - 1
        self._skip = 0
        """Communication points (samples at micro step 0) to drop before the next one kept."""
        self._dropped: list[int] = []
        """The buffered rows not handed over, in order (a sample at an event instant takes its row back out)."""
        self._rows = max(int(flush_interval), 2)
        """Rows of a block: a flush may keep its last row back, and a block of one row must still take the next."""
        if not 0 < flush_seconds < float("inf"):
            raise ConfigError("flush_seconds", f"must be a positive number of seconds, got {flush_seconds!r}")
        self.sink = sink
        self.flush_interval = int(flush_interval)
        self.flush_seconds = float(flush_seconds)
        """Seconds after which :meth:`sample` hands over what is buffered, full block or not."""
        self._due = 0.0
        """When the buffered samples are handed over at the latest (``perf_counter``)."""
        self._stride = 1
        self._check_at = 1
        """The sample count at which :meth:`sample` reads the clock next."""
        self._clock_read = 0.0
        """``perf_counter`` at the last clock reading."""
        self.allow_nonfinite = allow_nonfinite
        """Hand over NaN and infinite values instead of ending the run at the first one."""
        self._checked: list[tuple[np.ndarray, list[tuple[str, str]]]] = []
        """The real blocks and the ``(component, port)`` of each of their columns."""
        self._blocks: list[tuple[np.ndarray, list[PortState]]] = []
        """One block per numeric port type (rows: samples, columns: ports) with the ports it reads."""
        self._strings: list[tuple[list[list[Any]], list[PortState]]] = []
        """String ports, sampled into lists of rows."""
        self._layout: list[tuple[str, list[tuple[str, int, int]]]] | None = None
        self._order: list[np.ndarray | list[list[Any]]] = []
        self._times = np.empty(self._rows)
        self._micro: dict[int, int] = {}
        self._events: list[EventRow] = []
        self._n = 0
        self._handed = 0
        """Samples per component handed to the sink before the buffered ones."""
        self._events_handed = 0
        self._offsets: dict[str, int] = {}
        """Samples each component's sink held before the run (a memory sink may hold earlier ones)."""
        self._events_offset = 0
        self._seen = 0
        """Buffered rows the watchers saw already (by a flush that was interrupted afterwards, or the row a flush
        kept back)."""
        self._watchers: list[Callable[[np.ndarray, np.ndarray, list[tuple[str, str]]], None]] = []

    def attach(
        self, components: Mapping[str, CoSimComponent], selection: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        """Select ports (``{component: [port, ...]}``; every output of every component by default).

        Call after the components are initialized (event ports exist then);
        each selected component is declared to the sink.
        """
        if selection is None:
            selection = {name: list(comp.outputs) for name, comp in components.items()}
        by_kind: dict[PortType, list[PortState]] = {}
        self._layout = []
        for name, ports in selection.items():
            comp = components.get(name)
            if comp is None:
                raise UnknownNameError("component", name, components, "to record")
            placed = []
            for port in ports:
                state = comp.outputs.get(port)
                if state is None:
                    raise UnknownNameError("output", port, comp.outputs, f"of component {name!r} to record")
                group = by_kind.setdefault(state.spec.type, [])
                placed.append((port, list(by_kind).index(state.spec.type), len(group)))
                group.append(state)
            self._layout.append((name, placed))
            self.sink.add_component(name, port_layout(comp, ports))
        self._blocks, self._strings, self._order, self._checked = [], [], [], []
        names = {(g, i): (name, port) for name, placed in self._layout for port, g, i in placed}
        for kind, ports in by_kind.items():
            if kind is PortType.STRING:
                rows: list[list[Any]] = []
                self._strings.append((rows, ports))
                self._order.append(rows)
            else:
                block = np.empty((self._rows, len(ports)), dtype=_BLOCK_DTYPES[kind])
                self._blocks.append((block, ports))
                if kind is PortType.REAL:
                    g = len(self._order)
                    self._checked.append((block, [names[(g, i)] for i in range(len(ports))]))
                self._order.append(block)
        self._n = self._skip = self._seen = 0
        self._dropped = []
        self._micro = {}
        self._handed = self._events_handed = 0
        self._restart_clock()
        self._offsets = {name: self.sink.n_samples(name) for name, _ in self._layout}
        self._events_offset = self.sink.n_events()

    def watch(self, take: Callable[[np.ndarray, np.ndarray, list[tuple[str, str]]], None]) -> None:
        """Also hand every block of recorded real samples to ``take(times, block, names)`` (``names``: the
        ``(component, port)`` of each column) as it is flushed: how the master's coupling-error estimate sees the
        run without a cost per step."""
        self._watchers.append(take)

    @property
    def attached(self) -> bool:
        """Whether :meth:`attach` selected the ports yet."""
        return self._layout is not None

    def position(self) -> dict[str, Any]:
        """How many samples of each recorded component and how many events the sink holds: where a checkpoint taken
        after :meth:`flush` stands in the results; with ``decimate`` > 1 also the setting and the communication
        points to drop before the next one kept (what :meth:`resume` needs to thin on as before)."""
        position: dict[str, Any] = {"samples": {name: self.sink.n_samples(name) for name, _ in self._layout or ()},
                                    "events": self.sink.n_events()}
        if self.decimate > 1:
            position.update(decimate=self.decimate, skip=self._skip)
        return position

    def resume(self, position: Mapping[str, Any]) -> None:
        """Go on counting communication points from a checkpoint's :meth:`position` (a run restored from it takes
        no sample at its instant); a position thinned by another ``decimate`` is refused (:func:`check_resumable`)."""
        check_resumable(position, self.decimate)
        self._skip = int(position.get("skip", 0))

    def sample(self, t: float, micro: int = 0) -> None:
        """Read every selected port as the sample at ``(t, micro)``."""
        n = self._n
        for block, ports in self._blocks:
            block[n] = [p.value for p in ports]
        for rows, ports in self._strings:
            rows.append([p.value for p in ports])
        self._times[n] = t
        if micro:
            self._micro[n] = micro
            dropped = self._dropped
            if dropped and dropped[-1] == n - 1:
                dropped.pop()  # the sample before the event (a flush keeps the row before it back)
        elif self._skip:
            self._skip -= 1
            self._dropped.append(n)
        else:
            self._skip = self._every
        n += 1
        self._n = n
        if n >= self.flush_interval:
            self.flush(final=False)
        elif n >= self._check_at:
            self._tick(n)

    def _tick(self, n: int) -> None:
        """Read the clock after *n* buffered samples: hand them over when they are due, else adapt the stride."""
        now = perf_counter()
        if now >= self._due:
            self.flush(final=False)
            return
        if now - self._clock_read < CLOCK_CHECK_SECONDS[0]:
            self._stride = min(2 * self._stride, MAX_STRIDE)
        elif now - self._clock_read > CLOCK_CHECK_SECONDS[1]:
            self._stride = max(self._stride // 2, 1)
        self._clock_read = now
        self._check_at = n + self._stride

    def _restart_clock(self) -> None:
        now = perf_counter()
        self._due = now + self.flush_seconds
        self._clock_read = now
        self._check_at = self._stride

    def event(self, t: float, micro: int, component: str, name: str) -> None:
        """Note that event *name* of *component* happened at superdense time ``(t, micro)``."""
        self._events.append((DenseTime(t, micro), component, name))
        if len(self._events) >= self.flush_interval:
            self.flush(final=False)

    def flush(self, *, final: bool = True) -> None:
        """Hand the buffered samples and events to the sink and flush it.

        Raises :class:`NonFiniteValueError` after handing over the samples
        before the first non-finite real value (unless ``allow_nonfinite``).

        *final* (the master's call at the end of the run): the last buffered sample is the run's last, handed
        over whatever ``decimate`` says. Otherwise (a full block, ``flush_seconds``, a checkpoint) a last sample
        that ``decimate`` drops is kept back as the first row of the next block: an event right after it, or
        the end of the run, may still keep it.

        A flush that an interrupt stopped half-way can be called again: a
        component's block (or the events) that the sink holds already is not
        handed over twice (nor the part of it a flush that kept its last row
        back handed over), so a file closed after an interrupt holds each
        sample once, in time order.
        """
        self._restart_clock()
        n = self._n
        bad = None if self.allow_nonfinite else self._first_nonfinite(n)
        if bad is not None:
            n = bad[0]
        seen = self._seen
        if n > seen and self._watchers and self._checked:
            block, names = self._checked[0]
            for take in self._watchers:
                take(self._times[seen:n], block[seen:n], names)
            self._seen = n
        dropped = self._dropped
        if bad is not None:  # the rows from the non-finite one on are not handed over
            self._dropped = dropped = [row for row in dropped if row < n]
        last = bool(dropped) and dropped[-1] == n - 1
        back = last and not final and bad is None  # keep the last row back for the next block
        if last and not back:
            dropped.pop()  # the last sample of the run (or the last one before a non-finite value)
        hand = n - back
        picked = None
        if dropped:
            keep = np.ones(hand, dtype=np.bool_)
            keep[[row for row in dropped if row < hand]] = False
            picked = np.flatnonzero(keep)
        m = hand if picked is None else len(picked)
        if m:
            time = self._times[:hand].copy() if picked is None else self._times[picked]
            micro = None
            if self._micro:
                micro = np.zeros(hand, dtype=np.int32)
                for row, step in self._micro.items():
                    if row < hand:
                        micro[row] = step
                if picked is not None:
                    micro = micro[picked]
            columns = [_columns(block, hand, picked) for block in self._order]
            for name, placed in self._layout or ():
                done = self.sink.n_samples(name) - self._offsets[name] - self._handed
                if done >= m:
                    continue  # taken by a flush that was interrupted after it
                # *done* > 0: an interrupted flush took the rows but its last one, which it kept back
                values = {port: columns[g][i][done:] for port, g, i in placed}
                self.sink.append(name, time[done:], None if micro is None else micro[done:], values, flush=False)
        events = self._events
        written = self._events_handed + len(events)
        if events and self.sink.n_events() - self._events_offset != written:
            self.sink.write_events(events, flush=False)
        if back:  # the kept-back row becomes the first (a second call after an interrupt here hands nothing again)
            for block, _ in self._blocks:
                block[0] = block[n - 1]
            self._times[0] = self._times[n - 1]
        # one statement without calls: an interrupt cannot land between these
        self._n, self._handed, self._seen, self._micro, self._events, self._events_handed, self._dropped = (
            int(back), self._handed + m, int(back), {}, [], written, [0] if back else []
        )
        for rows, _ in self._strings:
            del rows[:n - 1 if back else len(rows)]
        self.sink.flush()
        if bad is not None:
            row, component, port, value = bad
            t = float(self._times[row])
            raise NonFiniteValueError(
                f"output {component}.{port} is {value} at t={t:.12g}: the run stops at the first non-finite value",
                component=component, time=t, port=port,
            )

    def _first_nonfinite(self, n: int) -> tuple[int, str, str, float] | None:
        """``(row, component, port, value)`` of the earliest non-finite real sample of the first *n* rows."""
        first = None
        for block, names in self._checked:
            finite = np.isfinite(block[:n])
            if finite.all():
                continue
            row = int(np.argmin(finite.all(axis=1)))
            col = int(np.argmin(finite[row]))
            if first is None or row < first[0]:
                first = (row, *names[col], float(block[row, col]))
        return first
