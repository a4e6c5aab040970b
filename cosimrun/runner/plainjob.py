"""A worker's job config resolved as plain data from its shared composition's, resolved once per process.

A job a worker makes from a shared composition (:mod:`cosimrun.runner.compose`) differs from it only in its value
overrides. Its task config resolved (``OmegaConf.to_container(task_cfg, resolve=True, enum_to_str=True)``, what
:func:`~cosimrun.runner.configtext.resolved` gives the run) is then the composition's resolved, with each overridden
key set to the value Hydra's override gave it in the job's full config (typed and checked there, errors included),
and each interpolation that calls a resolver resolved again by OmegaConf for the job. That holds when no
interpolation reads an overridden key, each reads plain references to other nodes of the task config and the
resolvers of :data:`ROOT_FREE_RESOLVERS` only, and the config's keys are plain names: :meth:`ResolvedComposition.of`
checks the composition once, :meth:`ResolvedComposition.job` the job's keys; either says None for anything else,
and the job's config is resolved by OmegaConf.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from cosimrun.runner.configtext import NODE_REFERENCE, RELOCATED_ENTRY, dump

ROOT_FREE_RESOLVERS = ("oc.env", "now", "hydra", "python_version")
"""Resolvers whose value does not depend on the config they are resolved in (the job's full config or its task
config): the environment, the resolver cache (the same in both), Hydra's config, Python's version."""

_RESOLVER_CALL = re.compile(r"\$\{(?:" + "|".join(re.escape(r) for r in ROOT_FREE_RESOLVERS) + r"):[^${}\\'\"]*\}")
"""A call of one of :data:`ROOT_FREE_RESOLVERS` with literal arguments (nested calls are matched innermost first)."""

_KEY = re.compile(r"[A-Za-z_][\w-]*")
"""A key of a mapping that a dotted key names as it is."""

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Interpolation:
    """An interpolation of a composition's task config."""

    path: Path
    """Where it is (keys and list indices)."""
    reads: frozenset[str]
    """The dotted keys it reads, also through the interpolations it reads."""
    calls_resolver: bool
    """Whether its value comes from a resolver (also through the interpolations it reads): resolved for each job."""


@dataclass(frozen=True)
class ResolvedComposition:
    """The task config of a shared composition resolved once, and what of it each job resolves again."""

    plain: dict[str, Any]
    """The task config resolved, its component paths as they are (not relocated)."""
    interpolations: tuple[Interpolation, ...]
    texts: dict[str, str]
    """Top-level key -> the YAML text of its entry in :attr:`plain` (:func:`~cosimrun.runner.configtext.dump`)."""

    @classmethod
    def of(cls, task_cfg: Any) -> ResolvedComposition | None:
        """*task_cfg* (a composition's task config, no ``hydra`` node) resolved, or None when a job's config could
        not be made from it (see the module). Resolution errors are raised."""
        from omegaconf import OmegaConf

        raw = OmegaConf.to_container(task_cfg, resolve=False)
        found: list[tuple[Path, str]] = []
        if not isinstance(raw, dict) or not _interpolations(raw, (), found):
            return None
        interpolations = []
        for path, text in found:
            parsed = _parsed(text)
            if parsed is None:
                return None
            interpolations.append(Interpolation(path, *parsed))
        interpolations = _transitive(interpolations)
        if any(overlap(key, "hydra") for i in interpolations for key in i.reads):
            return None  # the task config has no hydra node: OmegaConf reports the error
        plain = OmegaConf.to_container(task_cfg, resolve=True, enum_to_str=True)
        assert isinstance(plain, dict)
        return cls(plain, tuple(interpolations), {key: dump({key: value}) for key, value in plain.items()})

    def job(self, config: Any, keys: Sequence[str]) -> dict[str, Any] | None:
        """The task config resolved of the job whose full config is *config* (the composition with value overrides
        of *keys* applied), a new container; None when OmegaConf is to resolve it (an interpolation reads one of
        *keys*, a key's value is an interpolation or a container, a key is new). Resolution errors are raised."""
        from omegaconf import OmegaConf

        if any(overlap(read, key) for i in self.interpolations for read in i.reads for key in keys):
            return None
        plain = _copied(self.plain)
        for key in keys:
            node = _node(config, key)
            if node is None or not _set(plain, tuple(key.split(".")), _plain_value(node._value())):
                return None
        for interpolation in self.interpolations:
            if interpolation.calls_resolver:
                value = OmegaConf.select(config, ".".join(str(k) for k in interpolation.path), throw_on_missing=True)
                _set(plain, interpolation.path, _plain_value(value))
        return plain

    def unchanged_texts(self, keys: Sequence[str]) -> dict[str, str]:
        """:attr:`texts` of the top-level entries that a job with value overrides of *keys* has as the composition
        has them: no key, resolver or relocated file path in them (for
        :func:`~cosimrun.runner.configtext.relocated`)."""
        changed = {key.partition(".")[0] for key in keys} | {RELOCATED_ENTRY}
        changed.update(str(i.path[0]) for i in self.interpolations if i.calls_resolver)
        return {key: text for key, text in self.texts.items() if key not in changed}


def _interpolations(value: Any, path: Path, found: list[tuple[Path, str]]) -> bool:
    """Collect ``(path, text)`` of the interpolations in the plain data *value* (at *path*) into *found*; False
    when a mapping key is not a plain name (a dotted key could not name it)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or not _KEY.fullmatch(key) or not _interpolations(item, (*path, key), found):
                return False
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if not _interpolations(item, (*path, index), found):
                return False
    elif isinstance(value, str) and "${" in value:
        found.append((path, value))
    return True


def _parsed(text: str) -> tuple[frozenset[str], bool] | None:
    """``(keys read, calls a resolver)`` of an interpolation of text, plain references and root-free resolver
    calls; None for anything else (escapes, relative references, other resolvers)."""
    if "\\" in text:
        return None
    reads = frozenset(match.group(1) for match in NODE_REFERENCE.finditer(text))
    rest = NODE_REFERENCE.sub("", text)
    calls = False
    while True:
        rest, count = _RESOLVER_CALL.subn("", rest)
        if not count:
            break
        calls = True
    return None if "${" in rest else (reads, calls)


def _transitive(interpolations: list[Interpolation]) -> list[Interpolation]:
    """*interpolations* with what they read through the interpolations they read added."""
    changed = True
    while changed:
        changed = False
        for n, one in enumerate(interpolations):
            reads, calls = set(one.reads), one.calls_resolver
            for other in interpolations:
                where = ".".join(str(k) for k in other.path)
                if other is not one and any(overlap(read, where) for read in one.reads):
                    reads |= other.reads
                    calls = calls or other.calls_resolver
            if reads != one.reads or calls != one.calls_resolver:
                interpolations[n] = Interpolation(one.path, frozenset(reads), calls)
                changed = True
    return interpolations


def overlap(a: str, b: str) -> bool:
    """Whether dotted keys *a* and *b* name the same node or one holds the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _node(config: Any, key: str) -> Any:
    """The value node at dotted *key* of *config*; None when it is missing, a container or an interpolation."""
    from omegaconf import Container, OmegaConf

    parent_key, _, name = key.rpartition(".")
    try:
        parent = OmegaConf.select(config, parent_key, throw_on_missing=True) if parent_key else config
        node = parent._get_node(int(name) if OmegaConf.is_list(parent) else name)
    except Exception:
        return None
    if node is None or isinstance(node, Container) or node._is_interpolation():
        return None
    return node


def _plain_value(value: Any) -> Any:
    """*value* as ``OmegaConf.to_container(..., resolve=True, enum_to_str=True)`` gives it."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True, enum_to_str=True)
    return value.name if isinstance(value, Enum) else value


def _copied(value: Any) -> Any:
    """A copy of the plain data *value*: its mappings and lists new, its scalars shared."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _set(plain: Any, path: Sequence[str | int], value: Any) -> bool:
    """Set the node at *path* (keys, list indices as numbers or digits) of *plain* to *value*; False when there is
    none."""
    *parents, last = path
    try:
        for part in parents:
            plain = plain[_key(plain, part)]
        key = _key(plain, last)
        if isinstance(plain, dict) and key not in plain:
            return False
        plain[key] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True


def _key(container: Any, part: str | int) -> Any:
    """What indexes *container* for *part*: a list's index (a number or digits; None, which no list takes, for
    anything else), a mapping's key as it is."""
    if not isinstance(container, list):
        return part
    return int(part) if isinstance(part, int) or part.isdigit() else None
