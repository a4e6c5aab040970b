"""Errors of Hydra, OmegaConf and YAML as one-line :class:`ConfigError`\\ s, and what a run that never started leaves.

Hydra reports a bad override, a YAML syntax error or a key missing from the
schema as a multi-line report (or a traceback) with exit status 1.
:func:`config_error` turns such an error into a :class:`ConfigError` whose
``str`` is one line, ``<key or file:line>: <what is wrong>; <what is valid>``,
naming the key as the builder would (:func:`cosimrun.config.build.unknown_key`
for unknown keys, the schema for the expected types). The ``cosimrun``
command prints it and exits with status 2 (``HYDRA_FULL_ERROR=1`` keeps Hydra's
report). :func:`remove_unused_dir` removes the directory Hydra made for a run
that never ran.

Hydra and OmegaConf are imported where they are used: this module's callers
have them loaded already.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import shutil
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from cosimrun.config import build, schema
from cosimrun.errors import ConfigError, unknown_option

GRAMMAR_URL = "https://hydra.cc/docs/advanced/override_grammar/basic/"

Locate = Callable[[str, str], "str | None"]
"""``locate(group, option)``: the file of a config group option (``experiment``, ``pendulum_switch``), or None."""

_VALUE_FLAGS = ("--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
                "--config-dir", "-cd", "--info", "-i", "--experimental-rerun")
"""Hydra's command-line flags that take the next argument as their value."""

_KINDS = {"Float": "a number", "Integer": "an integer", "Boolean": "true or false", "String": "a string"}


def full_error_requested() -> bool:
    """Whether ``HYDRA_FULL_ERROR=1`` asks for Hydra's complete report instead of one line."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def config_error(exc: BaseException, argv: Sequence[str] = (), locate: Locate | None = None) -> ConfigError | None:
    """*exc*, raised while Hydra read the command line or composed the config, as a ConfigError; None for others.

    *argv* is the command line (to find the override that does not parse) and
    *locate* finds the file of a config group option (to name it in the error).
    """
    import yaml
    from hydra.errors import (
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
        SearchPathException,
    )
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(exc, ConfigError):
        return exc
    chain = list(_chain(exc))
    marked = next((e for e in chain if isinstance(e, yaml.MarkedYAMLError)), None)
    if marked is not None:
        return _yaml_error(marked)
    if isinstance(exc, OverrideParseException):
        return _grammar_error(exc, argv)
    if isinstance(exc, MissingConfigException):
        return _missing_option(exc)
    if isinstance(exc, SearchPathException):
        return ConfigError("--config-dir", f"{_first_line(exc)}; give an existing directory")
    omegaconf_error = next((e for e in chain if isinstance(e, OmegaConfBaseException) and e.full_key is not None),
                           None)
    if not isinstance(exc, ConfigCompositionException | OmegaConfBaseException):
        return None
    origin = _origin(str(exc), locate)
    if omegaconf_error is not None:
        error = _omegaconf_error(omegaconf_error, origin)
    else:
        error = _composition_error(str(exc))
    if origin and error.key is not None and not error.key.endswith(origin[1]):
        error.message += f" (in {origin[1]})"
    return error


def _chain(exc: BaseException | None) -> Iterable[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _first_line(exc: BaseException | str) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _shown(path: str) -> str:
    """*path* relative to the working directory when it is under it."""
    with contextlib.suppress(ValueError):
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    return path


def _yaml_error(exc: Any) -> ConfigError:
    mark = exc.problem_mark or exc.context_mark
    where = f"{_shown(mark.name)}:{mark.line + 1}" if mark is not None else "YAML"
    problem = exc.problem or "invalid YAML"
    context = ""
    if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
        context = f" ({exc.context} at line {exc.context_mark.line + 1})"
    if "\\t" in problem or "\t" in problem:
        advice = "indent with spaces, not tabs"
    elif "block" in f"{problem} {exc.context}":
        advice = "indent the keys of one mapping to the same depth, with spaces"
    else:
        advice = "check the YAML syntax there (close brackets and quotes; quote values holding ': ' or '#')"
    return ConfigError(where, f"{problem}{context}; {advice}")


def _overrides(argv: Sequence[str]) -> list[str]:
    """The overrides among *argv* (not flags nor their values)."""
    found, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUE_FLAGS:
            skip = True
        elif not arg.startswith("-"):
            found.append(arg)
    return found


def _grammar_error(exc: BaseException, argv: Sequence[str]) -> ConfigError:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for line in _overrides(argv):
        try:
            parser.parse_override(line)
        except Exception as bad:  # noqa: BLE001 - Hydra's parser raises HydraException or ANTLR's errors
            key = line.split("=", 1)[0].lstrip("+~") if "=" in line else ""
            element = re.fullmatch(r"(.+\.params\..+)\[([\d,\s]+)\]", key)
            if element:  # an FMU's array element (cosimrun.fmi.parameters)
                dotted = ".".join([element[1], *(i.strip() for i in element[2].split(","))])
                return ConfigError(key, f"Hydra's overrides allow no '[' in a key; name the array element by its "
                                        f"indices: {line[:len(line) - len(line.lstrip('+~'))]}{dotted}="
                                        f"{line.split('=', 1)[1]}")
            return ConfigError(
                key or line,
                f"cannot parse the override {line!r}: {_first_line(bad)}; write key=value and quote a value "
                f"holding = , [ ] {{ }} ( ) or spaces, e.g. 'key=\"a=b\"' (see {GRAMMAR_URL})",
            )
    return ConfigError("overrides", f"{_first_line(exc)}; write key=value (see {GRAMMAR_URL})")


def _missing_option(exc: Any) -> ConfigError:
    missing = str(exc.missing_cfg_file or "")
    group, _, option = missing.rpartition("/")
    options = list(exc.options or ())
    if group and options:
        return unknown_option(group, option, options)
    return ConfigError(group or None, " ".join(line.strip() for line in str(exc).splitlines() if line.strip()))


def _origin(message: str, locate: Locate | None) -> tuple[str, str] | None:
    """``(group/option, file)`` of the config file Hydra names in ``In 'experiment/x': ...``, if any."""
    match = re.match(r"In '([^']+)'", message)
    if not match or "/" not in match.group(1):
        return None
    group, _, option = match.group(1).rpartition("/")
    found = locate(group, option) if locate is not None else None
    return match.group(1), _shown(found) if found else f"{match.group(1)}.yaml"


def _omegaconf_error(exc: Any, origin: tuple[str, str] | None) -> ConfigError:
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    key = str(exc.full_key)
    message = str(exc.msg).splitlines()[0] if exc.msg else _first_line(exc)
    if _SHAPE_ERROR.match(message):
        if not key and origin is not None:  # OmegaConf names no key when a file replaces a whole section
            key = _replaced_in_file(origin[1]) or key
        shape = _schema_shape(key) if key else None
        if shape is not None:  # said from the schema: OmegaConf's message names the same two types both ways
            other = "a list" if shape == "a mapping" else "a mapping"
            return ConfigError(key, f"{other} cannot replace {shape}{_expected(key)}")
    if isinstance(exc, ConfigKeyError | AttributeError) and "not in" in message:
        path, _, name = key.rpartition(".")
        if origin is not None and not path and name == origin[0].rpartition("/")[0]:
            return ConfigError(origin[1], f"its keys land under {name!r}, not at the top level; add "
                                          "'# @package _global_' as the first line of the file")
        parent = getattr(exc, "parent_node", None)
        node = OmegaConf.to_container(parent, resolve=False) if OmegaConf.is_dict(parent) else {}
        if build.known_keys(path, node if isinstance(node, dict) else {}) is None:  # free-form: checked when built
            return ConfigError(key, f"not in the config; add it with '+{key}=VALUE' (the builder checks it)")
        return build.unknown_key(path, name, node if isinstance(node, dict) else {})
    return ConfigError(key or None, f"{_plain(message)}{_expected(key)}")


_SHAPE_ERROR = re.compile(r"Cannot merge \w+Config with \w+Config|Merge error: \w+ is not a subclass of \w+")
"""OmegaConf's messages on a list given for a mapping of the schema, or a mapping for a list."""


def _schema_shape(key: str) -> str | None:
    """``"a mapping"`` or ``"a list"``: what the schema holds at dotted *key*; None for other or free-form keys."""
    node: Any = schema.CosimConfig
    for part in key.split("."):
        if not dataclasses.is_dataclass(node):
            return None
        node = typing.get_type_hints(node).get(part)
    if dataclasses.is_dataclass(node) or typing.get_origin(node) is dict:
        return "a mapping"
    return "a list" if typing.get_origin(node) is list else None


def _replaced_in_file(file: str) -> str | None:
    """The top-level key of config *file* holding a list where the schema has a mapping, or the reverse."""
    import yaml

    try:
        data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    for key, value in data.items():
        shape = _schema_shape(str(key))
        if (shape == "a mapping" and isinstance(value, list)) or (shape == "a list" and isinstance(value, dict)):
            return str(key)
    return None


def _plain(message: str) -> str:
    """OmegaConf's message on a value of the wrong type, said in the config's words."""
    converted = re.match(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", message)
    if converted:
        return f"{converted.group(1)!r} is not {_KINDS.get(converted.group(2), converted.group(2).lower())}"
    merged = re.match(r"Cannot merge (\w+)Config with (\w+)Config", message)
    if merged:
        kinds = {"Dict": "a mapping", "List": "a list"}
        return f"{kinds.get(merged.group(2), merged.group(2))} cannot replace {kinds.get(merged.group(1), '')}"
    assigned = re.match(r"Cannot assign (\w+) to (\w+)", message)
    if assigned:
        return f"a value of type {assigned.group(1)} cannot go where a {assigned.group(2).lower()} is expected"
    text = re.match(r"Cannot convert '(\w+)' to string: '(.*)'", message)
    if text:
        return f"{text.group(2)} (a {text.group(1)}) is not a string"
    return message


def _expected(key: str) -> str:
    """``; expected a number, e.g. run.dt=0.01`` from the schema field at *key* ("" when not a scalar field)."""
    parts = key.split(".")
    if parts == ["components"]:
        return f"; components must map names to components: {build.COMPONENTS_EXAMPLE}"
    if len(parts) == 2 and parts[0] == "components":
        return "; write a component as {type: TYPE, params: {NAME: VALUE, ...}}"
    if len(parts) == 3 and parts[0] == "components" and parts[2] in ("params", "initial", "units"):
        return "; write it as a mapping {NAME: VALUE, ...}"
    node: Any = schema.CosimConfig
    field = None
    for part in parts:
        if not dataclasses.is_dataclass(node):
            return ""
        field = next((f for f in dataclasses.fields(node) if f.name == part), None)
        if field is None:
            return ""
        node = typing.get_type_hints(node).get(part)
    kind = build.TYPE_NAMES.get(node)
    if kind is None or field is None:
        return ""
    return f"; expected {kind}, e.g. {key}={field.default}"


_COMPOSITION = [
    (r"Could not append to config\. An item is already at '([^']+)'",
     lambda k: f"already set; drop the '+' to change it ({k}=...), or use '++{k}=...' to add or change it"),
    (r"Could not override '([^']+)'\. No match in the defaults list",
     lambda k: f"not selected by default; select it with +{k}=NAME"),
    (r"Could not delete from config\. '([^']+)' does not exist",
     lambda k: "nothing to delete there; check the key"),
    (r"Multiple values for ([\w/]+)",
     lambda k: f"given twice; select one {k} (several values sweep with -m: {k}=a,b)"),
    (r"Could not override '([^']+)'",
     lambda k: f"unknown key; add it with '+{k}=...' only if it belongs there"),
]


def _composition_error(message: str) -> ConfigError:
    body = re.sub(r"^In '[^']+': ", "", message.strip())
    for pattern, explain in _COMPOSITION:
        match = re.search(pattern, body)
        if match:
            return ConfigError(match.group(1), explain(match.group(1)))
    return ConfigError(None, "; ".join(line.strip() for line in body.splitlines() if line.strip()))


def remove_unused_dir(directory: str | os.PathLike[str], hydra_files: Iterable[str] = (".hydra",)) -> bool:
    """Remove *directory* if it holds only what Hydra writes before a run (*hydra_files*, empty logs).

    A config error found after Hydra made the run directory, or ``action=describe``,
    leaves nothing behind: the directory goes, and so do its parents that this
    leaves empty, up to the working directory. Log handlers writing into it are
    closed first. Returns whether it was removed.
    """
    path = Path(directory).absolute()
    if not path.is_dir():
        return False
    keep = set(hydra_files)
    for entry in path.iterdir():
        empty_log = entry.suffix == ".log" and entry.is_file() and entry.stat().st_size == 0
        if entry.name not in keep and not empty_log:
            return False
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in list(getattr(logger, "handlers", ())):
            filename = getattr(handler, "baseFilename", None)
            if filename and Path(filename).parent == path:
                logger.removeHandler(handler)
                handler.close()
    shutil.rmtree(path, ignore_errors=True)
    cwd = Path.cwd().absolute()
    parent = path.parent
    while parent != cwd and cwd in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
    return not path.exists()
