"""Recorded trajectories of ports, components and whole systems.

Values go into growable typed buffers (:mod:`array` for numbers, a list only for
strings): an append is amortized O(1) and reading copies the filled part into a
numpy array with one ``memcpy``. Each sample also carries a superdense micro
index, stored sparsely because it is non-zero only at event instants.
"""

from __future__ import annotations

import csv
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.core.events import DenseTime
from cosimrun.core.ports import PortType
from cosimrun.core.units import compile_conversion
from cosimrun.errors import ConfigError, UnknownNameError

_TYPECODES: dict[PortType, tuple[str, Any]] = {
    PortType.REAL: ("d", np.float64),
    PortType.INT: ("q", np.int64),
    PortType.BOOL: ("b", np.bool_),
    PortType.EVENT: ("b", np.bool_),
}


class PortHistory:
    """Time series of one port: times, values and superdense micro indices."""

    __slots__ = ("port_name", "unit", "port_type", "_t", "_v", "_micro", "_dtype")

    def __init__(self, port_name: str, unit: str | None = None, port_type: PortType | str = PortType.REAL) -> None:
        self.port_name = port_name
        self.unit = unit
        self.port_type = PortType(port_type)
        self._t = array("d")
        self._micro: dict[int, int] = {}
        code_dtype = _TYPECODES.get(self.port_type)
        if code_dtype is None:
            self._v: array | list = []
            self._dtype: Any = object
        else:
            self._v = array(code_dtype[0])
            self._dtype = code_dtype[1]

    def append(self, t: float, value: Any, micro: int = 0) -> None:
        """Record *value* at time *t* (and micro step *micro*)."""
        if micro:
            self._micro[len(self._t)] = micro
        self._t.append(t)
        self._v.append(value)

    def appenders(self) -> tuple[Callable[[float], None], Callable[[Any], None]]:
        """The bound ``append`` of the time and value buffers: the step loop's fast path.

        Appending through them records a sample at micro step 0; they stay valid
        across ``clear`` and ``truncate``.
        """
        return self._t.append, self._v.append

    def extend(self, times: array | np.ndarray, values: np.ndarray, micro: np.ndarray | None = None) -> None:
        """Append many samples at once; *micro* gives their micro steps (all 0 when ``None``)."""
        if micro is not None:
            base = len(self)
            for k in np.flatnonzero(micro).tolist():
                self._micro[base + k] = int(micro[k])
        if self._dtype is object:
            self._v.extend(values.tolist())
        else:
            self._v.frombytes(np.ascontiguousarray(values, dtype=self._dtype).tobytes())
        if isinstance(times, array):
            self._t.extend(times)
        else:
            self._t.frombytes(np.ascontiguousarray(times, dtype=np.float64).tobytes())

    def __len__(self) -> int:
        """Samples recorded so far."""
        return len(self._t)

    def clear(self) -> None:
        """Forget every sample."""
        del self._t[:]
        del self._v[:]
        self._micro.clear()

    def truncate(self, n: int) -> None:
        """Keep only the first *n* samples (a standalone component rolled back)."""
        del self._t[n:]
        del self._v[n:]
        for k in [k for k in self._micro if k >= n]:
            del self._micro[k]

    def slice(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(time, values, micro)`` of samples ``start:stop``."""
        t = np.array(self._t[start:stop], dtype=np.float64)
        chunk = self._v[start:stop]
        if self._dtype is object:
            v = np.empty(len(chunk), dtype=object)
            v[:] = chunk
        else:
            v = np.array(chunk, dtype=self._dtype)
        m = np.zeros(len(t), dtype=np.int32)
        for k, micro in self._micro.items():
            if start <= k < stop:
                m[k - start] = micro
        return t, v, m

    @property
    def time(self) -> np.ndarray:
        """Sample times in seconds."""
        return np.array(self._t, dtype=np.float64)

    @property
    def values(self) -> np.ndarray:
        """Sample values in the port's own unit."""
        if self._dtype is object:
            out = np.empty(len(self._v), dtype=object)
            out[:] = self._v
            return out
        return np.array(self._v, dtype=self._dtype)

    @property
    def micro(self) -> np.ndarray:
        """Superdense micro index of each sample (0 except at event instants)."""
        out = np.zeros(len(self._t), dtype=np.int32)
        for k, m in self._micro.items():
            out[k] = m
        return out

    def get_values(self, as_unit: str | None = None) -> np.ndarray:
        """Values, converted to *as_unit* when given."""
        values = self.values
        if as_unit is None or as_unit == self.unit:
            return values
        conv = compile_conversion(self.unit, as_unit)
        return conv.scale * values.astype(np.float64) + conv.offset

    def to_dict(self, as_unit: str | None = None) -> dict[str, Any]:
        """``{'time', 'values', 'unit'}`` with values converted to *as_unit*."""
        return {"time": self.time, "values": self.get_values(as_unit), "unit": as_unit or self.unit}

    def to_tuple(self, as_unit: str | None = None) -> tuple[np.ndarray, np.ndarray, str | None]:
        """``(time, values, unit)`` with values converted to *as_unit*."""
        return self.time, self.get_values(as_unit), as_unit or self.unit

    def __repr__(self) -> str:
        return f"PortHistory({self.port_name!r}, unit={self.unit!r}, n={len(self)})"


@dataclass
class ComponentHistory:
    """The port histories of one component."""

    component_name: str
    _port_histories: dict[str, PortHistory] = field(default_factory=dict)

    def add_port(self, port_name: str, unit: str | None = None, port_type: PortType | str = PortType.REAL) -> None:
        """Register a port for recording (a no-op when it already exists)."""
        if port_name not in self._port_histories:
            self._port_histories[port_name] = PortHistory(port_name, unit, port_type)

    def append(self, port_name: str, t: float, value: Any, micro: int = 0) -> None:
        """Record one sample of *port_name*."""
        self.get_port_history(port_name).append(t, value, micro)

    def get_port_history(self, port_name: str) -> PortHistory:
        """The history of one port; ``KeyError`` lists the recorded ports."""
        try:
            return self._port_histories[port_name]
        except KeyError:
            raise UnknownNameError("port", port_name, self._port_histories, f"in {self.component_name!r}") from None

    def get_all_histories(self) -> dict[str, PortHistory]:
        """Every port history by port name."""
        return dict(self._port_histories)

    @property
    def port_names(self) -> list[str]:
        return list(self._port_histories)

    def __len__(self) -> int:
        return max((len(h) for h in self._port_histories.values()), default=0)

    def _select(self, port_names: Iterable[str] | None) -> list[str]:
        names = list(self._port_histories) if port_names is None else list(port_names)
        for name in names:
            self.get_port_history(name)
        return names

    def to_dict(
        self, port_names: list[str] | None = None, units: dict[str, str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """``{port: {'time', 'values', 'unit'}}``, converting units where asked."""
        units = units or {}
        return {n: self._port_histories[n].to_dict(units.get(n)) for n in self._select(port_names)}

    def to_arrays(
        self, port_names: list[str] | None = None, units: dict[str, str] | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(time, {port: values})`` over the component's common time axis."""
        units = units or {}
        names = self._select(port_names)
        if not names:
            return np.empty(0), {}
        time = self._port_histories[names[0]].time
        values = {}
        for n in names:
            h = self._port_histories[n]
            if len(h) != len(time) or not np.array_equal(h.time, time):
                raise ConfigError(
                    None, f"port {n!r} of {self.component_name!r} was recorded on its own time axis; use to_dict()"
                )
            values[n] = h.get_values(units.get(n))
        return time, values

    def clear(self, port_names: list[str] | None = None) -> None:
        """Clear the named ports' histories, or all of them."""
        for n in self._select(port_names):
            self._port_histories[n].clear()


@dataclass
class SystemHistory:
    """Histories of every component in a system plus the events that happened."""

    system_name: str
    _component_histories: dict[str, ComponentHistory] = field(default_factory=dict)
    _event_histories: dict[tuple[str, str], list[DenseTime]] = field(default_factory=dict)

    def add_component(self, component_name: str, component_history: ComponentHistory) -> None:
        """Register a component's history under *component_name*."""
        self._component_histories[component_name] = component_history

    def get_component_history(self, component_name: str) -> ComponentHistory:
        try:
            return self._component_histories[component_name]
        except KeyError:
            raise UnknownNameError("component", component_name, self._component_histories) from None

    def get_all_histories(self) -> dict[str, ComponentHistory]:
        return dict(self._component_histories)

    def record_event(self, component_name: str, event_name: str, t: float | DenseTime) -> None:
        """Record that *event_name* of *component_name* happened at *t*."""
        when = t if isinstance(t, DenseTime) else DenseTime(float(t))
        self._event_histories.setdefault((component_name, event_name), []).append(when)

    def get_event_history(self, component_name: str, event_name: str) -> list[DenseTime]:
        return list(self._event_histories.get((component_name, event_name), []))

    def get_all_event_histories(self) -> dict[tuple[str, str], list[DenseTime]]:
        return {k: list(v) for k, v in self._event_histories.items()}

    def event_log(self) -> list[tuple[DenseTime, str, str]]:
        """Every recorded event as ``(time, component, event)`` in superdense time order."""
        log = [(t, c, e) for (c, e), times in self._event_histories.items() for t in times]
        return sorted(log, key=lambda row: row[0])

    def _selection(
        self, component_names: list[str] | None, port_names: dict[str, list[str]] | None
    ) -> list[tuple[str, list[str]]]:
        comps = list(self._component_histories) if component_names is None else component_names
        port_names = port_names or {}
        out = []
        for c in comps:
            hist = self.get_component_history(c)
            out.append((c, hist._select(port_names.get(c))))
        return out

    def to_dict(
        self,
        component_names: list[str] | None = None,
        port_names: dict[str, list[str]] | None = None,
        units: dict[str, dict[str, str]] | None = None,
        format: str = "nested",
    ) -> dict[str, Any]:
        """Histories as ``{comp: {port: {...}}}`` (nested) or ``{'comp.port': {...}}`` (flat)."""
        if format not in ("nested", "flat"):
            raise ConfigError("format", f"must be 'nested' or 'flat', got {format!r}")
        units = units or {}
        nested = {
            c: self._component_histories[c].to_dict(ports, units.get(c))
            for c, ports in self._selection(component_names, port_names)
        }
        if format == "nested":
            return nested
        return {f"{c}.{p}": d for c, ports in nested.items() for p, d in ports.items()}

    def to_arrays(
        self,
        component_names: list[str] | None = None,
        port_names: dict[str, list[str]] | None = None,
        units: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, tuple[np.ndarray, dict[str, np.ndarray]]]:
        """``{comp: (time, {port: values})}``."""
        units = units or {}
        return {
            c: self._component_histories[c].to_arrays(ports, units.get(c))
            for c, ports in self._selection(component_names, port_names)
        }

    def get_port_trajectory(
        self, component: str, port: str, as_unit: str | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(time, values)`` of one port."""
        h = self.get_component_history(component).get_port_history(port)
        return h.time, h.get_values(as_unit)

    def clear(self, component_names: list[str] | None = None, port_names: dict[str, list[str]] | None = None) -> None:
        """Clear port histories (all by default) and, when clearing all, the events."""
        for c, ports in self._selection(component_names, port_names):
            self._component_histories[c].clear(ports)
        if component_names is None and port_names is None:
            self._event_histories.clear()

    def save_csv(
        self,
        filepath: str | Path,
        component_names: list[str] | None = None,
        port_names: dict[str, list[str]] | None = None,
        units: dict[str, dict[str, str]] | None = None,
        long_format: bool = False,
    ) -> None:
        """Write histories to one CSV file.

        Wide: ``time, comp.port [unit], ...`` with one row per sample instant
        (ports sampled on different instants leave empty cells, so an empty
        string value reads back as a missing sample; use the long format for
        string ports). An instant recorded twice (before and after an event)
        gives two rows with the same time. Long/tidy:
        ``time, micro, component, port, value, unit``.
        """
        flat = self.to_dict(component_names, port_names, units, format="flat")
        micro = {
            key: self._component_histories[key.split(".", 1)[0]].get_port_history(key.split(".", 1)[1]).micro
            for key in flat
        }
        with open(filepath, "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            if long_format:
                writer.writerow(["time", "micro", "component", "port", "value", "unit"])
                for key, d in flat.items():
                    comp, port = key.split(".", 1)
                    for t, m, v in zip(d["time"], micro[key], d["values"], strict=True):
                        writer.writerow([repr(float(t)), int(m), comp, port, _cell(v), d["unit"] or ""])
                return
            header = ["time"] + [f"{k} [{d['unit']}]" if d["unit"] else k for k, d in flat.items()]
            rows: dict[tuple[float, int], list[str]] = {}
            for col, d in enumerate(flat.values()):
                seen: dict[float, int] = {}
                for t, v in zip(d["time"], d["values"], strict=True):
                    t = float(t)
                    k = seen[t] = seen.get(t, -1) + 1
                    rows.setdefault((t, k), [""] * len(flat))[col] = _cell(v)
            writer.writerow(header)
            for (t, _k), cells in sorted(rows.items()):
                writer.writerow([repr(t), *cells])

    @staticmethod
    def load_csv(filepath: str | Path) -> dict[str, Any]:
        """Read a CSV written by :meth:`save_csv` (wide or long, detected from the header).

        Returns ``{comp: {port: {'time', 'values', 'unit'}}}``.
        """
        with open(filepath, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        if not rows:
            return {}
        header, body = rows[0], rows[1:]
        series: dict[tuple[str, str], tuple[list[float], list[Any], str | None]] = {}
        if {"component", "port", "value"} <= set(header):
            ix = {name: i for i, name in enumerate(header)}
            for row in body:
                key = (row[ix["component"]], row[ix["port"]])
                unit = row[ix["unit"]] if "unit" in ix and row[ix["unit"]] else None
                times, values, _ = series.setdefault(key, ([], [], unit))
                times.append(float(row[ix["time"]]))
                values.append(row[ix["value"]])
        else:
            columns = []
            for name in header[1:]:
                label, unit = (name[:-1].split(" [", 1) + [None])[:2] if name.endswith("]") else (name, None)
                comp, port = label.split(".", 1)
                columns.append((comp, port))
                series[(comp, port)] = ([], [], unit)
            for row in body:
                t = float(row[0])
                for (comp, port), cell in zip(columns, row[1:], strict=True):
                    if cell != "":
                        series[(comp, port)][0].append(t)
                        series[(comp, port)][1].append(cell)
        out: dict[str, Any] = {}
        for (comp, port), (times, values, unit) in series.items():
            out.setdefault(comp, {})[port] = {"time": np.array(times), "values": _as_array(values), "unit": unit}
        return out


def _cell(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    return str(value)


def _as_array(cells: list[str]) -> np.ndarray:
    """Type a loaded column as a whole: bool, int, float, else strings.

    Deciding per column (not per cell) keeps a string port whose values merely
    look numeric or boolean in some rows intact as strings.
    """
    if not cells:
        return np.empty(0, dtype=np.float64)
    if all(c in ("True", "False") for c in cells):
        return np.array([c == "True" for c in cells], dtype=bool)
    for kind, dtype in ((int, np.int64), (float, np.float64)):
        try:
            return np.array([kind(c) for c in cells], dtype=dtype)
        except (ValueError, OverflowError):
            pass
    out = np.empty(len(cells), dtype=object)
    out[:] = cells
    return out
