"""Configs as plain data and as YAML text, as OmegaConf writes them, with libyaml's emitter.

``OmegaConf.to_yaml`` emits through PyYAML's pure-Python emitter: a few
milliseconds for a Hydra job config, paid several times per sweep job (the
``.hydra`` files, the results file's ``config_yaml``). :func:`dump` gives the
same text with the C emitter and OmegaConf's string representer (a private
API, see :mod:`cosimrun.runner._private`); without libyaml or that
representer it is ``OmegaConf.to_yaml``. :func:`resolved` resolves a config
once for both the plain container the run is built from and its YAML text,
with the relative file paths of its components made absolute
(:func:`relocate_paths`, against :func:`experiment_dir`);
:func:`task_overrides` gives a job's overrides as the user wrote them;
:func:`resolved_container` resolves a node whose interpolations are plain
references to other nodes without OmegaConf's grammar parser.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cosimrun.runner._private import PrivateAPIChanged, omegaconf_str_representer


@functools.cache
def _dumper() -> type | None:
    """libyaml's dumper with OmegaConf's string representer; None without either."""
    emitter = getattr(yaml, "CDumper", None)
    if emitter is None:  # PyYAML without libyaml
        return None
    try:
        representer = omegaconf_str_representer()
    except PrivateAPIChanged:
        return None

    class CDumper(emitter):  # type: ignore[misc, valid-type]
        """libyaml's dumper with OmegaConf's string representer (quotes strings that read as other types)."""

    CDumper.add_representer(str, representer)
    return CDumper


def dump(data: Any) -> str:
    """YAML text of a config (``DictConfig``/``ListConfig``, unresolved) or of plain data, as ``OmegaConf.to_yaml``."""
    from omegaconf import OmegaConf

    dumper = _dumper()
    if dumper is None:
        return OmegaConf.to_yaml(data)
    if OmegaConf.is_config(data):
        data = OmegaConf.to_container(data, resolve=False, enum_to_str=True)
    return yaml.dump(data, Dumper=dumper, default_flow_style=False, allow_unicode=True, sort_keys=False)


NODE_REFERENCE = re.compile(r"\$\{([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\}")
"""A plain absolute reference to another node: ``${hydra.job.name}``."""


class _NotPlain(Exception):
    """A string that is not text with plain node references only: left to OmegaConf."""


def resolved_container(node: Any, raw: Any = None) -> Any:
    """``OmegaConf.to_container(node, resolve=True)`` of the config node *node*, without OmegaConf's grammar parser
    when every interpolation in it is a string of text and plain references to other nodes (``${a.b}``), each
    naming a value that is no container: Hydra's ``job_logging`` (a log file named
    ``${hydra.runtime.output_dir}/${hydra.job.name}.log``), which parsing again for each job of a warm worker
    costs about a millisecond. Anything else (resolvers, relative or nested references, escapes, a reference
    whose value is not text where it is the whole string) is resolved by OmegaConf, errors included. *raw*:
    ``OmegaConf.to_container(node, resolve=False)`` when the caller has it (it is not changed)."""
    from omegaconf import OmegaConf

    if raw is None:
        raw = OmegaConf.to_container(node, resolve=False)
    root = node._get_root()
    try:
        return _substituted(raw, root)
    except _NotPlain:
        return OmegaConf.to_container(node, resolve=True)


def _substituted(value: Any, root: Any) -> Any:
    """*value* (plain data) with the node references of its strings replaced by their values (see
    :func:`resolved_container`); :class:`_NotPlain` for anything else."""
    if isinstance(value, dict):
        return {key: _substituted(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [_substituted(item, root) for item in value]
    if not isinstance(value, str) or "${" not in value:
        return value
    if "\\" in value:
        raise _NotPlain
    parts, end = [], 0
    for match in NODE_REFERENCE.finditer(value):
        parts += [value[end:match.start()], _referenced(root, match.group(1))]
        end = match.end()
    parts.append(value[end:])
    if any("${" in text for text in parts[::2]):
        raise _NotPlain
    if len(parts) == 3 and not parts[0] and not parts[2] and not isinstance(parts[1], str):
        raise _NotPlain  # the whole string is one reference: its value keeps its type, as OmegaConf converts it
    return "".join(str(part) for part in parts)


def _referenced(root: Any, key: str) -> Any:
    """The resolved value of the node *key* of *root*; :class:`_NotPlain` when it is missing, None, a container
    or cannot be resolved."""
    from omegaconf import OmegaConf

    try:
        found = OmegaConf.select(root, key, throw_on_missing=True, throw_on_resolution_failure=True)
    except Exception:
        raise _NotPlain from None
    if found is None or OmegaConf.is_config(found):
        raise _NotPlain
    return found


def resolved(cfg: Any, base_dir: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], str]:
    """``(plain, text)``: *cfg* resolved once, as a plain dict and as ``OmegaConf.to_yaml(cfg, resolve=True)``.

    Relative component file paths are made absolute against *base_dir*, by
    default the directory of the experiment's file when a Hydra job is running
    (:func:`experiment_dir`), so that the text records the files the run reads.
    """
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if not isinstance(plain, dict):
        raise TypeError(f"expected a mapping config, got {type(plain).__name__}")
    return relocated(plain, _running_experiment_dir() if base_dir is None else base_dir)


def relocated(plain: dict[str, Any], base_dir: str | os.PathLike[str] | None,
              known: Mapping[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """``(plain, text)`` of :func:`resolved` from the resolved config *plain* (its own: changed in place), its
    relative component file paths made absolute against *base_dir* (None: left as they are); *known*: the text of
    some of its top-level entries (see :func:`dump_entries`)."""
    if base_dir is not None:
        _relocate(plain, base_dir)
    return plain, dump(plain) if known is None else dump_entries(plain, known)


def dump_entries(plain: Mapping[str, Any], known: Mapping[str, str]) -> str:
    """:func:`dump` of the mapping *plain*, the text of each top-level entry named in *known* taken from there
    (``dump({key: value})`` of the same value): in block style a mapping's text is its entries' in turn."""
    if not plain:
        return dump(plain)
    return "".join(known[key] if key in known else dump({key: value}) for key, value in plain.items())


RELOCATED_ENTRY = "components"
"""The top-level entry of a plain config whose file paths :func:`relocate_paths` rewrites."""

PATH_PARAMETERS = {"fmu": "path", "table": "path"}
"""Component type -> its parameter naming a file, which :func:`relocate_paths` resolves."""


def relocate_paths(cfg: Mapping[str, Any], base_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A copy of the plain config *cfg* whose relative component file paths are resolved against *base_dir*.

    The parameters of :data:`PATH_PARAMETERS` are rewritten, also in the modes
    of ``multi`` components. Absolute paths, ``~`` paths, ``example:NAME`` FMUs
    and values that are not strings stay as they are (the component checks them).
    """
    out = copy.deepcopy(dict(cfg))
    _relocate(out, base_dir)
    return out


def _relocate(cfg: dict[str, Any], base_dir: str | os.PathLike[str]) -> None:
    """:func:`relocate_paths` in place."""
    base = Path(base_dir).absolute()
    for params, name in _file_parameters(cfg):
        if _is_relative(params.get(name)):
            params[name] = str(base / params[name])


def _file_parameters(cfg: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """``(params, name)`` of each parameter of :data:`PATH_PARAMETERS` in the plain config *cfg* (the modes of
    ``multi`` components included)."""
    for comp in (cfg.get(RELOCATED_ENTRY) or {}).values():
        if not isinstance(comp, dict):
            continue
        modes = comp.get("modes") if comp.get("type") == "multi" else None
        for node in [comp, *(modes.values() if isinstance(modes, dict) else ())]:
            name = PATH_PARAMETERS.get(node.get("type")) if isinstance(node, dict) else None
            params = node.get("params") if name else None
            if isinstance(params, dict):
                yield params, name


def input_files(cfg: Mapping[str, Any]) -> list[Path]:
    """The files the components of the plain config *cfg* read (FMUs, tables) that exist, absolute (relative ones
    against the working directory, as a run opens them): not the ``example:NAME`` FMUs, which come with cosimrun."""
    found = []
    for params, name in _file_parameters(cfg):
        value = params.get(name)
        if isinstance(value, str) and value and not value.startswith("example:"):
            path = Path(value).expanduser().absolute()
            if path.is_file():
                found.append(path)
    return list(dict.fromkeys(found))


def _is_relative(value: Any) -> bool:
    """Whether *value* is a relative file path (not ``example:NAME``, ``~...`` or absolute)."""
    return (isinstance(value, str) and bool(value) and not value.startswith(("example:", "~"))
            and not Path(value).is_absolute())


def experiment_dir(hydra_cfg: Any) -> Path | None:
    """The directory of the file of the chosen experiment (``hydra.runtime.choices.experiment``), if it is a file.

    The file is looked up as Hydra found it: in ``hydra.runtime.config_sources``
    in order, the first holding ``experiment/<choice>.yaml`` (a directory, a
    ``--config-dir``, a package such as a plugin's config package). None when
    no experiment was chosen or it is not a file on disk (a structured config,
    a zipped package).
    """
    return _experiment_dir(*experiment_source(hydra_cfg))


def experiment_source(hydra_cfg: Any) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``(experiment choice or "", ((schema, path) of each config source, ...))`` of the ``hydra`` node."""
    choice = (hydra_cfg.runtime.get("choices") or {}).get("experiment")
    sources = tuple((str(s.schema), str(s.path)) for s in hydra_cfg.runtime.get("config_sources") or ())
    return str(choice or ""), sources


def _experiment_dir(choice: str, sources: tuple[tuple[str, str], ...]) -> Path | None:
    if not choice:
        return None
    relative = f"experiment/{choice}.yaml"
    for schema, where in sources:
        if schema == "file":
            file: Any = Path(where, relative)
        elif schema == "pkg":
            try:
                file = resources.files(where).joinpath(relative)
            except (ValueError, ModuleNotFoundError, TypeError):
                continue
        else:
            continue
        if file.is_file():
            return Path(os.path.realpath(file)).parent if isinstance(file, os.PathLike) else None
    return None


job_experiment_dir = functools.lru_cache(maxsize=64)(_experiment_dir)
""":func:`_experiment_dir` looked up once per process for each choice and list of sources: every job of a
sweep asks (:func:`forget_experiment_dirs` starts again)."""


def forget_experiment_dirs() -> None:
    """Look the experiments' files of the jobs up again: a worker does when a new sweep arrives."""
    job_experiment_dir.cache_clear()


def _running_experiment_dir() -> Path | None:
    """:func:`experiment_dir` of the Hydra job in progress (looked up once per sweep); None outside of one."""
    from hydra.core.hydra_config import HydraConfig

    return job_experiment_dir(*experiment_source(HydraConfig.get())) if HydraConfig.initialized() else None


def task_overrides(hydra_cfg: Any) -> list[str]:
    """A job's overrides (``hydra.overrides.task`` of the ``hydra`` node *hydra_cfg*) as given, unresolved."""
    from omegaconf import OmegaConf

    return [str(o) for o in OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False)]
