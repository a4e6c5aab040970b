"""The errors cosimrun raises on purpose: one family, with the culprit in fields.

::

    CosimrunError
    ├── ConfigError                 wrong before the run starts   key, suggestion
    │   ├── NameLookupError         also a KeyError
    │   │   ├── UnknownNameError                                   kind, name, known
    │   │   ├── DuplicateNameError                                 kind, name
    │   │   └── MissingNameError
    │   ├── PluginError
    │   ├── InvalidConnectionError                                 connection
    │   ├── MissingInitialValueError                               port
    │   ├── InitializationError     no consistent initial point    loop, port, residual, time
    │   ├── IncompatibleUnitsError
    │   └── DataFileError           a data file read as input      path, row
    ├── SimulationError             wrong during the run           component, time
    │   ├── LoopConvergenceError
    │   ├── EventLocalizationError
    │   │   └── ZenoError           events accumulating in time     indicator
    │   ├── NonFiniteValueError                                    port
    │   ├── ModelOutputError        also a ValueError: a model function's result of the wrong shape
    │   │                                                          function, expected, got
    │   ├── StepEndedEarly          a step ended early              reached, event
    │   └── FMUError
    │       ├── FMUFileError        an FMU that cannot be used as given (also a ConfigError)
    │       │   └── FMULimitError   an FMU above a limit           path, size, limit, setting
    │       └── StepDiscarded       an FMU's discard (also a StepEndedEarly)  last_successful_time
    ├── ComponentContractError      also a TypeError: a declaration or object of the wrong kind
    │                                                              component, port
    ├── ComponentStateError         also a RuntimeError: not now, or not by this component
    │                                                              component
    ├── ResultsWriteError           also an OSError                path, reason, errno
    ├── ResultsReadError            also a ValueError: not a results file / sweep index
    │                                                              path, expected, found
    ├── ResultsDataError            also a ValueError: data a writer cannot store
    │                                                              component, port
    ├── ResultsStateError           also a RuntimeError: a write after close, a shrunk history
    │                                                              path
    └── SweepDirectoryInUseError    another sweep holds the dir    path, holder

``ConfigError.key`` is the dotted path of the culprit *as far as the raiser knows
it*: the engine names a parameter (``e``) or a master setting
(``time_tolerance``), and the config builder places it in the experiment with
:meth:`ConfigError.within` (``components.ball.params.e``, ``master.time_tolerance``).
Nothing reads a key back out of a message's text.

``ConfigError`` is also a ``ValueError`` and ``SimulationError`` a
``RuntimeError``, so code written against the reference API's documented
exceptions (``KeyError`` for unknown names, ``ValueError`` for invalid values)
keeps catching them. The classes outside those two keep the built-in base the
library raised before them: ``ComponentContractError`` (a ``TypeError``) is a
mistake in code, not in a config value (a class's ``PARAMETERS`` or a
``Parameter`` written wrong, an object given as a component that is not one, a
port value of the wrong type); ``ComponentStateError`` (a ``RuntimeError``) a
call the component cannot take now or at all (an input set before
``initialize``, a unit changed after it, an event indicator on a component
that cannot roll back).

A few built-in exceptions stay as they are, as Python's conventions want
them: ``NotImplementedError`` for a hook a component does not implement,
``FileNotFoundError`` for a file that is not there, ``AttributeError`` from a
module's ``__getattr__``, and the plain errors of internal invariants (a
master handing a component a snapshot that is not its own), listed with their
reasons in ``tests/test_errors.py``.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "ComponentContractError",
    "ComponentStateError",
    "ConfigError",
    "CosimrunError",
    "DataFileError",
    "DuplicateNameError",
    "EventLocalizationError",
    "FMUFileError",
    "FMULimitError",
    "FMUError",
    "IncompatibleUnitsError",
    "InitializationError",
    "InvalidConnectionError",
    "LoopConvergenceError",
    "MissingInitialValueError",
    "MissingNameError",
    "ModelOutputError",
    "NameLookupError",
    "NonFiniteValueError",
    "PluginError",
    "ResultsDataError",
    "ResultsReadError",
    "ResultsStateError",
    "ResultsWriteError",
    "SimulationError",
    "StepDiscarded",
    "StepEndedEarly",
    "SweepDirectoryInUseError",
    "UnknownNameError",
    "ZenoError",
    "did_you_mean",
    "suggest",
    "unknown_name",
    "unknown_option",
]


class CosimrunError(Exception):
    """Base of every error cosimrun raises on purpose.

    Errors copy and pickle with their fields (a sweep's worker sends them to
    the driver), whatever their constructor's signature.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, dict(self.__dict__))


def _rebuild(cls: type[CosimrunError], args: tuple[Any, ...], fields: dict[str, Any]) -> CosimrunError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(fields)
    return error


class ConfigError(CosimrunError, ValueError):
    """Something is wrong before the run starts: a config key, a parameter, a connection, a plugin.

    ``str(exc)`` is ``"<key>: <message>"`` (just the message without a key);
    ``suggestion`` is the closest valid name when one is close, else ``None``.
    """

    def __init__(self, key: str | None, message: str, *, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.key = key or None
        self.message = message
        self.suggestion = suggestion

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message

    def within(self, prefix: str) -> ConfigError:
        """A copy whose key is placed under *prefix* (``prefix.key``, or *prefix* when there is no key)."""
        placed = copy.copy(self)
        placed.key = f"{prefix}.{self.key}" if self.key else prefix
        return placed


class NameLookupError(ConfigError, KeyError):
    """A name that is unknown, given twice or missing; also a ``KeyError`` (as the reference API raises).

    ``str`` is the message itself, not ``KeyError``'s quoted repr of it.
    """

    def __init__(self, message: str, *, key: str | None = None, suggestion: str | None = None) -> None:
        super().__init__(key, message, suggestion=suggestion)

    def __str__(self) -> str:
        return ConfigError.__str__(self)


class UnknownNameError(NameLookupError):
    """A name (parameter, port, component, mode ...) that does not exist.

    ``kind`` says what was looked up, ``name`` what was asked for, ``known``
    the valid names; ``key`` is ``None`` unless the raiser knows where the
    name sits in a config (the builder places it).
    """

    def __init__(
        self, kind: str, name: str, known: Iterable[str], where: str = "", *, key: str | None = None
    ) -> None:
        self.kind, self.name = kind, str(name)
        self.known = sorted(str(k) for k in known)
        close = did_you_mean(self.name, self.known)
        super().__init__(unknown_name(kind, self.name, self.known, where), key=key,
                         suggestion=close[0] if close else None)


class DuplicateNameError(NameLookupError):
    """A name registered twice (a component in a system, an event indicator, a subscription).

    ``kind`` says what was registered (``component``, ``event indicator`` ...) and ``name`` the name, when
    the raiser gives them.
    """

    def __init__(self, message: str, *, kind: str | None = None, name: str | None = None,
                 key: str | None = None) -> None:
        super().__init__(message, key=key)
        self.kind, self.name = kind, name


class MissingNameError(NameLookupError):
    """Names that must all be given and are not (a ``set_state`` without every state)."""


class PluginError(ConfigError):
    """A component type that is not installed, fails to load, or is not a component class."""

    def __init__(self, message: str, *, suggestion: str | None = None) -> None:
        super().__init__(None, message, suggestion=suggestion)


class InvalidConnectionError(ConfigError):
    """A connection that cannot be made (unknown port, direction, type or unit mismatch)."""

    def __init__(self, message: str, *, connection: str | None = None, suggestion: str | None = None) -> None:
        super().__init__(None, message, suggestion=suggestion)
        self.connection = connection


class MissingInitialValueError(ConfigError):
    """An input that closes an algebraic loop has no initial value; ``port`` is ``"comp.input"``.

    Not raised since the coupled initialization solves a torn loop from its inputs' start values (an unsolvable
    one is an :class:`InitializationError`); kept for code that catches it."""

    def __init__(self, message: str, port: str) -> None:
        super().__init__(None, message)
        self.port = port


class InitializationError(ConfigError):
    """The coupled initialization found no consistent initial point of an algebraic loop: ``loop`` is the loop's
    inputs (``"comp.input"``, tear inputs first), ``port`` the input with the largest residual, ``residual`` its
    size and ``time`` the initial time."""

    def __init__(self, message: str, *, loop: list[str], port: str, residual: float, time: float) -> None:
        super().__init__(None, message)
        self.loop = list(loop)
        self.port = port
        self.residual = float(residual)
        self.time = float(time)


class IncompatibleUnitsError(ConfigError):
    """Two units of different dimensions where a conversion is needed."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class SimulationError(CosimrunError, RuntimeError):
    """Something went wrong during the run; ``component`` and ``time`` say where, when known."""

    def __init__(self, message: str, *, component: str | None = None, time: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.component = component
        self.time = time


class LoopConvergenceError(SimulationError):
    """An algebraic loop (or a strongly coupled step) did not converge."""


class EventLocalizationError(SimulationError):
    """Events could not be handled (for example an endless cascade at one instant)."""


class ZenoError(EventLocalizationError):
    """One indicator's events accumulate in time (a Zeno run); ``indicator`` names it."""

    def __init__(self, message: str, *, component: str, time: float, indicator: str) -> None:
        super().__init__(message, component=component, time=time)
        self.indicator = indicator


class NonFiniteValueError(SimulationError):
    """A recorded output became NaN or infinite; ``port`` is the output's name."""

    def __init__(self, message: str, *, component: str, time: float, port: str) -> None:
        super().__init__(message, component=component, time=time)
        self.port = port


class FMUError(SimulationError):
    """An FMU call failed (status discard, error or fatal) or an FMU cannot be loaded."""


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Close matches of *word* among *choices*, best first."""
    return difflib.get_close_matches(str(word), [str(c) for c in choices], n=n, cutoff=0.6)


def suggest(word: str, choices: Iterable[str], n: int = 3) -> str:
    """``"; did you mean 'x'?"`` for close matches of *word*, or ``""``."""
    close = did_you_mean(word, choices, n)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown_name(kind: str, name: Any, known: Iterable[str], where: str = "") -> str:
    """``unknown port 'x' in 'comp'; did you mean 'y'? (known: y, z)``."""
    known = sorted(str(k) for k in known)
    where = f" {where}" if where else ""
    listing = ", ".join(known) if len(known) <= 30 else ", ".join(known[:30]) + ", ..."
    return f"unknown {kind} {name!r}{where}{suggest(str(name), known)} (known: {listing or 'none'})"


def unknown_option(group: str, option: str, options: Iterable[str]) -> ConfigError:
    """``<group>: unknown <group> '<option>'; did you mean ...? (available: ...)`` for a config group option
    (an experiment, a master)."""
    options = sorted(str(o) for o in options)
    return ConfigError(group, f"unknown {group} {option!r}{suggest(option, options)} (available: {', '.join(options)})")


class SweepDirectoryInUseError(CosimrunError):
    """A sweep directory is held by another sweep that is (or may be) still running.

    ``path`` is the directory's lock file, ``holder`` what it records:
    ``{"pid", "host", "started", ...}``.
    """

    def __init__(self, message: str, *, path: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.path = path
        self.holder = holder


class FMUFileError(FMUError, ConfigError):
    """An FMU that cannot be used as given (a malformed archive, an entry it cannot extract, a shared library that
    does not load or lacks FMI functions): bad input, so also a :class:`ConfigError` without key, reported in one
    line wherever it is met (``component``/``time`` name the component once it has one)."""

    def __init__(self, message: str, *, component: str | None = None, time: float | None = None) -> None:
        Exception.__init__(self, message)  # the two bases' constructors take different arguments
        self.key, self.message, self.suggestion = None, message, None
        self.component, self.time = component, time


class FMULimitError(FMUFileError):
    """An FMU file above a limit: ``path``, ``size`` and ``limit`` (in bytes, or counts of array elements or ports),
    ``setting`` (what raises it)."""

    def __init__(self, message: str, *, path: str, size: int, limit: int, setting: str,
                 component: str | None = None, time: float | None = None) -> None:
        super().__init__(message, component=component, time=time)
        self.path, self.size, self.limit, self.setting = path, size, limit, setting


class StepEndedEarly(SimulationError):
    """A component ended its step before the requested end, at ``reached`` inside the step.

    ``time`` is the step's start. The component is left at ``reached`` (time
    and outputs), so a master can make that instant the communication point
    of every component and go on; uncaught, it ends the run like any
    :class:`SimulationError`. Components that may raise it declare
    :attr:`~cosimrun.core.component.CoSimComponent.may_discard`.
    """

    def __init__(self, message: str, *, component: str, time: float, reached: float,
                 event: str | None = None) -> None:
        super().__init__(message, component=component, time=time)
        self.reached = reached
        self.event = event
        """The component's event at that instant, recorded under this name (``early_return``: an FMI 3 FMU
        returned early at an event it handled there); ``None``: a plain cut, recorded as ``discard``."""


class StepDiscarded(FMUError, StepEndedEarly):
    """An FMU's ``fmi2DoStep`` returned ``fmi2Discard`` (or an FMI 3 step returned early) at its last successful time.

    ``reached`` is the FMU's last successful time (also ``last_successful_time``).
    """

    def __init__(self, message: str, *, component: str, time: float, last_successful_time: float,
                 event: str | None = None) -> None:
        StepEndedEarly.__init__(self, message, component=component, time=time, reached=last_successful_time,
                                event=event)

    @property
    def last_successful_time(self) -> float:
        """The FMU's last successful time: where the step ended (:attr:`reached`)."""
        return self.reached


class ResultsWriteError(CosimrunError, OSError):
    """A results file, an ensemble's file or a sweep index could not be written (disk full, file-size limit, I/O error).

    ``path`` is the file, ``reason`` the operating system's error (``[Errno 27] File too
    large``); ``errno`` is set when known. Also an ``OSError``, so code catching I/O errors
    catches it. ``str(exc)`` is ``"cannot write results to <path>: <reason>"``.
    """

    def __init__(self, path: str, reason: str, errno: int | None = None) -> None:
        super().__init__(f"cannot write results to {path}: {reason}")
        self.path = path
        self.reason = reason
        self.errno = errno

    def __str__(self) -> str:
        return f"cannot write results to {self.path}: {self.reason}"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.reason, self.errno)


class ComponentContractError(CosimrunError, TypeError):
    """A declaration or an object of the wrong kind for the component contract: a mistake in code.

    A class's ``PARAMETERS`` or a ``Parameter`` written wrong, an object given as a component (or a mode,
    or switch regions) that is not one, a port value of the wrong type. ``component`` names the component
    (or the class) and ``port`` the port, when known. Also a ``TypeError``, as before it.
    """

    def __init__(self, message: str, *, component: str | None = None, port: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.component = component
        self.port = port


class ComponentStateError(CosimrunError, RuntimeError):
    """A call the component cannot take now (before ``initialize``, or after it) or at all (rollback).

    ``component`` names it. Also a ``RuntimeError``, as before it.
    """

    def __init__(self, message: str, *, component: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.component = component


class ModelOutputError(SimulationError, ValueError):
    """A component's model function returned a result of the wrong shape: a mistake in the component.

    ``function`` is the function (``state_equation``, ``derivatives``, ``compute_outputs`` ...),
    ``expected`` and ``got`` the shapes. Also a ``ValueError``, as before it.
    """

    def __init__(self, message: str, *, component: str, time: float | None, function: str,
                 expected: tuple[int, ...], got: tuple[int, ...]) -> None:
        super().__init__(message, component=component, time=time)
        self.function = function
        self.expected, self.got = tuple(expected), tuple(got)


class DataFileError(ConfigError):
    """A data file given as input that cannot be used: a table's CSV, a reference or results file to read.

    ``path`` is the file, ``row`` the data row at fault as the message numbers it (``None``: the file as a
    whole); ``key`` is the setting that names the file, when the raiser knows it.
    """

    def __init__(self, message: str, *, path: str, row: int | None = None, key: str | None = None) -> None:
        super().__init__(key, message)
        self.path = path
        self.row = row


class ResultsReadError(CosimrunError, ValueError):
    """A file read as a cosimrun results file or sweep index that is not one: ``path``, the ``expected``
    format and the one ``found`` (``None``: the file names none)."""

    def __init__(self, message: str, *, path: str, expected: str, found: str | None) -> None:
        super().__init__(message)
        self.path, self.expected, self.found = path, expected, found


class ResultsDataError(CosimrunError, ValueError):
    """Data a results writer cannot store as given (ports missing, values and times of unequal length, a
    malformed event or mode-switch row, ports on different time axes); ``component`` and ``port`` when known."""

    def __init__(self, message: str, *, component: str | None = None, port: str | None = None) -> None:
        super().__init__(message)
        self.component, self.port = component, port


class ResultsStateError(CosimrunError, RuntimeError):
    """A results writer asked for what its state does not allow: a write after it was closed, or a history
    shorter than what the file already holds. ``path`` is the results file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
