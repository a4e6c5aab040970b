"""Signal sources: constant, step, ramp, sine and a CSV time table.

Every source has one output ``y`` whose unit is the parameter ``unit`` (``None``:
a plain number). Magnitudes (``value``, ``initial``, ``amplitude``, ...) are
numbers in that unit or quantities such as ``"40 deg"``, checked against it
when the parameters are checked and converted at initialize; times are in
seconds (or quantities such as ``"500 ms"``). Outputs are exact functions of time evaluated at the end of each
step, and discontinuities and kinks are announced through
:meth:`~cosimrun.core.component.CoSimComponent.next_time_event` so a master
puts a communication point exactly on them. At a breakpoint the value after it
applies (right-continuous).

Every source is vectorizable: its magnitudes, and a sine's frequency and phase,
may differ between an ensemble's members (plain numbers in the unit); the
times of breakpoints (``step_time``, ``start_time``, ``end_time``) are
time events and stay the same for all members (``shared_parameters``).
"""

from __future__ import annotations

import bisect
import csv
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from cosimrun.components._base import StatelessComponent, parameter_error, set_output, time_tol, where
from cosimrun.core.component import NO_EVENTS
from cosimrun.core.parameters import Parameter, value_in_unit
from cosimrun.core.ports import PortSpec, PortType
from cosimrun.core.units import UnitLike
from cosimrun.errors import ComponentStateError, DataFileError, suggest


def _magnitude(default: float, doc: str, unit: str = "{unit}") -> Parameter:
    """A magnitude in the output unit: a number in it or a quantity such as ``"40 deg"``."""
    return Parameter(float, unit=unit, default=default, doc=doc)


class _Source(StatelessComponent):
    """Base of sources: output ``y`` in the unit given by parameter ``unit``."""

    PARAMETERS = {"unit": Parameter("unit", doc="unit of the output y (null: a plain number)")}
    vectorizable = True
    shared_parameters: tuple[str, ...] = ()
    """Numeric parameters that must be the same for all members of an ensemble (those that set time events)."""

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self.output_specs["y"] = PortSpec("y", PortType.REAL, "out", None, "source signal")

    def _port_units(self) -> dict[str, UnitLike]:
        return {"y": self.parameters["unit"]}

    def _mag(self, name: str) -> float:
        """Parameter *name* as a float in its unit (the output unit, for magnitudes); an ensemble's array of
        members' values (numbers in that unit, checked per member) as it is."""
        value = self.parameters[name]
        if isinstance(value, np.ndarray):
            return value  # type: ignore[return-value]
        return value_in_unit(self, name)  # type: ignore[return-value]

    def value(self, t: float) -> float:
        """The output at time *t*."""
        raise NotImplementedError

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        t = self.t if t is None else t
        set_output(self.outputs["y"], self.value(t), t)


class Constant(_Source):
    """Constant signal ``y = value``."""

    PARAMETERS = {"value": _magnitude(0.0, "the constant output")}

    def _setup(self) -> None:
        self._value = self._mag("value")

    def value(self, t: float) -> float:
        return self._value


class Step(_Source):
    """Step from ``initial`` to ``final`` at ``step_time`` (hit exactly through a time event)."""

    PARAMETERS = {
        "initial": _magnitude(0.0, "output before step_time"),
        "final": _magnitude(1.0, "output from step_time on"),
        "step_time": Parameter(float, unit="s", default=1.0, doc="time of the step"),
    }
    shared_parameters = ("step_time",)

    def _setup(self) -> None:
        self._initial, self._final = self._mag("initial"), self._mag("final")
        self._t_step = self.parameters["step_time"]

    def value(self, t: float) -> float:
        return self._final if t >= self._t_step - time_tol(self._t_step) else self._initial

    def next_time_event(self, t: float) -> float | None:
        t_step = self.parameters["step_time"]
        return t_step if t < t_step - time_tol(t_step) else None


class Ramp(_Source):
    """Ramp ``y = offset + slope * (t - start_time)`` between ``start_time`` and ``end_time`` (held outside)."""

    PARAMETERS = {
        "slope": _magnitude(1.0, "rate of change, in the output unit per second", unit="({unit}) / s"),
        "offset": _magnitude(0.0, "output up to start_time"),
        "start_time": Parameter(float, unit="s", default=0.0, doc="time the ramp starts"),
        "end_time": Parameter(float, unit="s", doc="time the ramp ends (null: never)"),
    }
    shared_parameters = ("start_time", "end_time")

    def check_parameters(self) -> None:
        super().check_parameters()
        p = self.parameters
        if p["end_time"] is not None and not p["end_time"] > p["start_time"]:
            raise parameter_error(self, "end_time", f"must be > start_time = {p['start_time']!r} (or null)",
                                  p["end_time"])

    def _setup(self) -> None:
        self._slope = self._mag("slope")
        self._offset = self._mag("offset")

    def value(self, t: float) -> float:
        p = self.parameters
        t_end = p["end_time"]
        s = min(t, t_end) if t_end is not None else t
        return self._offset + self._slope * max(0.0, s - p["start_time"])

    def next_time_event(self, t: float) -> float | None:
        for te in (self.parameters["start_time"], self.parameters["end_time"]):
            if te is not None and t < te - time_tol(te):
                return te
        return None


class Sine(_Source):
    """Sine wave ``y = offset + amplitude * sin(2*pi*frequency*t + phase)``."""

    PARAMETERS = {
        "amplitude": _magnitude(1.0, "amplitude"),
        "frequency": Parameter(float, unit="Hz", default=1.0, ge=0, doc="frequency"),
        "phase": Parameter(float, unit="rad", default=0.0, doc="phase at t = 0"),
        "offset": _magnitude(0.0, "mean value"),
    }

    def _setup(self) -> None:
        self._amplitude, self._offset = self._mag("amplitude"), self._mag("offset")
        self._phase = self.parameters["phase"]
        self._omega = 2.0 * math.pi * self.parameters["frequency"]

    def value(self, t: float) -> float:
        angle = self._omega * t + self._phase
        return self._offset + self._amplitude * (np.sin(angle) if isinstance(angle, np.ndarray) else math.sin(angle))


def _whole(text: str) -> int:
    """A whole number written as an integer or a float with no fraction (``3``, ``3.0``)."""
    value = float(text)
    if not value.is_integer():
        raise ValueError(text)
    return int(value)


def _boolean(text: str) -> bool:
    """``0``, ``1``, ``true`` or ``false`` (any case)."""
    word = text.strip().lower()
    if word in ("1", "true", "1.0"):
        return True
    if word in ("0", "false", "0.0"):
        return False
    raise ValueError(text)


_PARSERS = {"real": float, "int": _whole, "bool": _boolean}
"""How a table cell is read for each output ``type``."""


class Table(_Source):
    """Time table read from a CSV file, interpolated ``linear`` or held (``previous``).

    The file has a header row; ``time_column`` (default ``time``) holds
    non-decreasing times in seconds and ``value_column`` the values (default:
    a column named ``value``, else the only other column). Lines starting with
    ``#`` are skipped. A time listed twice marks a jump. Before the first and
    after the last row the end values are held. With ``time_events`` every
    row time is a time event, so breakpoints are hit exactly. A relative path
    in an experiment is made absolute against the experiment file's directory
    by the runner (``cosimrun.runner.configtext.relocate_paths``); one left
    relative is resolved against the working directory at initialize. With
    ``type: int`` or ``bool`` the output is an INT or BOOL port (no unit, held
    between rows: ``interpolation: previous``), read from whole numbers or
    ``0``/``1``/``true``/``false``.
    """

    PARAMETERS = {
        "path": Parameter("path", doc="the CSV file (required)"),
        "time_column": Parameter(str, default="time", doc="column of the times in seconds"),
        "value_column": Parameter(str, doc="column of the values (null: 'value', else the only other column)"),
        "interpolation": Parameter("choice", choices=("linear", "previous"), default="linear",
                                   doc="between rows: linear, or hold the previous value"),
        "time_events": Parameter(bool, default=True, doc="make every row time a time event"),
        "type": Parameter("choice", choices=("real", "int", "bool"), default="real",
                          doc="the output's type: real, or int / bool (whole numbers; 0, 1, true or false) with "
                              "interpolation previous and no unit"),
    }

    def __init__(self, name: str, label: str | None = None, group: str | None = None) -> None:
        super().__init__(name, label, group)
        self._times: list[float] = []
        self._values: list[float] = []

    def set_parameters(self, **parameters: Any) -> None:
        """Set parameters; ``type`` re-declares the output's type (before initialize)."""
        super().set_parameters(**parameters)
        kind = PortType(self.parameters["type"])
        spec = self.output_specs["y"]
        if spec.type is kind or (kind is not PortType.REAL and self.parameters["unit"] is not None):
            return  # unchanged, or refused with a unit by check_parameters
        if self.is_initialized:
            raise ComponentStateError(f"{where(self)}: the type of 'y' can only change before initialize (or after "
                                      "reset)", component=self.name)
        self.output_specs["y"] = dataclasses.replace(spec, type=kind, unit=spec.unit if kind is PortType.REAL else None)

    def check_parameters(self) -> None:
        p = self.parameters
        if p["type"] != "real":
            if p["unit"] is not None:
                raise parameter_error(self, "unit", f"must be null for type {p['type']!r} (only real outputs carry "
                                                    "a unit)", p["unit"])
            if p["interpolation"] != "previous":
                raise parameter_error(self, "interpolation", f"must be 'previous' for type {p['type']!r}",
                                      p["interpolation"])
        super().check_parameters()
        self._times, self._values = self._load()

    def _setup(self) -> None:
        self._times, self._values = self._load()
        self._linear = self.parameters["interpolation"] == "linear"

    def _load(self) -> tuple[list[float], list[float]]:
        p = self.parameters
        if p["path"] is None:
            raise parameter_error(self, "path", "must name a CSV file with a header row", None)
        path = Path(p["path"]).expanduser()
        shown = f"{p['path']!r} ({path.resolve()})"
        if not path.is_file():
            raise DataFileError(f"{where(self)}: parameter 'path': CSV file not found: {shown}", path=str(path))
        with path.open(newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
        if not rows:
            raise DataFileError(f"{where(self)}: CSV file {shown} is empty (expected a header row and data rows)",
                                path=str(path))
        header = [c.strip() for c in rows[0]]
        t_col = p["time_column"]
        v_col = p["value_column"]
        if t_col not in header:
            raise DataFileError(f"{where(self)}: CSV file {shown} has no time column {t_col!r}"
                                f"{suggest(t_col, header)} (columns: {', '.join(header)}); set 'time_column'",
                                path=str(path))
        if v_col is None:
            others = [c for c in header if c != t_col]
            if "value" in others:
                v_col = "value"
            elif len(others) == 1:
                v_col = others[0]
            else:
                raise DataFileError(f"{where(self)}: CSV file {shown} has columns {', '.join(header)}; set "
                                    "'value_column' to pick the value column", path=str(path))
        elif v_col not in header:
            raise DataFileError(f"{where(self)}: CSV file {shown} has no value column {v_col!r}"
                                f"{suggest(v_col, header)} (columns: {', '.join(header)})", path=str(path))
        ti, vi = header.index(t_col), header.index(v_col)
        kind = p["type"]
        parse = _PARSERS[kind]
        times, values = [], []
        for line, row in enumerate(rows[1:], start=2):
            try:
                t, v = float(row[ti]), parse(row[vi])
            except (IndexError, ValueError):
                expected = {"real": "numbers", "int": "a number and a whole number",
                            "bool": "a number and 0, 1, true or false"}[kind]
                raise DataFileError(f"{where(self)}: CSV file {shown}, data row {line}: expected {expected} in "
                                    f"columns {t_col!r} and {v_col!r}, got {row!r}", path=str(path), row=line) from None
            if not (math.isfinite(t) and math.isfinite(v)):
                raise DataFileError(f"{where(self)}: CSV file {shown}, data row {line}: values must be finite, "
                                    f"got {row!r}", path=str(path), row=line)
            times.append(t)
            values.append(v)
        if not times:
            raise DataFileError(f"{where(self)}: CSV file {shown} has a header but no data rows", path=str(path))
        dt = np.diff(times)
        if np.any(dt < 0):
            i = int(np.argmax(dt < 0))
            raise DataFileError(f"{where(self)}: CSV file {shown}: column {t_col!r} must not decrease "
                                f"({times[i]!r} is followed by {times[i + 1]!r})", path=str(path))
        if np.any((dt[1:] == 0) & (dt[:-1] == 0)):
            i = int(np.argmax((dt[1:] == 0) & (dt[:-1] == 0)))
            raise DataFileError(f"{where(self)}: CSV file {shown}: time {times[i]!r} appears more than twice "
                                "(a jump needs exactly two rows)", path=str(path))
        return times, values

    @property
    def times(self) -> np.ndarray:
        """The table's times (after initialize or ``check_parameters``)."""
        return np.array(self._times)

    @property
    def values(self) -> np.ndarray:
        """The table's values in the output unit."""
        return np.array(self._values)

    def value(self, t: float) -> float:
        times, values = self._times, self._values
        i = bisect.bisect_right(times, t + time_tol(t)) - 1
        if i < 0:
            return values[0]
        if i >= len(times) - 1 or not self._linear:
            return values[i]
        t0, t1 = times[i], times[i + 1]
        frac = min(1.0, max(0.0, (t - t0) / (t1 - t0)))
        return values[i] + frac * (values[i + 1] - values[i])

    def _update_output_states(self, t: float | None = None, event_names: Any = NO_EVENTS) -> None:
        if self.output_specs["y"].type is PortType.REAL:
            return super()._update_output_states(t, event_names)
        t = self.t if t is None else t
        port = self.outputs["y"]
        port.value = self.value(t)
        port.t_last = t
        return None

    def next_time_event(self, t: float) -> float | None:
        if not self.parameters["time_events"] or not self._times:
            return None
        i = bisect.bisect_right(self._times, t + time_tol(t))
        return self._times[i] if i < len(self._times) else None
