"""Sweep jobs composed on the driver: :class:`JobSpec`, :func:`compose_job` and :class:`JobComposer`.

The dask launcher composes every job's config on the driver (so workers need
only the installed packages, not the config directories) and sends it to a
worker as a pickled :class:`cosimrun.runner.worker.JobPayload`.
:class:`JobComposer` shares one composition between jobs that differ only in
values (a full Hydra composition per job dominates the driver's time); such a
job's payload can instead carry that composition and the job's overrides, and
its worker makes the config (:func:`apply_job`).
"""

from __future__ import annotations

import functools
import io
import pickle
import pkgutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cosimrun.runner.layout import RESOLVER
from cosimrun.runner.overrides import parsed_plain
from cosimrun.runner.plainjob import overlap
from cosimrun.runner.worker import JobPayload, hydra_config

if TYPE_CHECKING:
    from hydra.types import HydraContext
    from omegaconf import DictConfig


LAYOUT_SUBDIR = f"${{{RESOLVER}:${{hydra.sweep.dir}},${{hydra.job.num}}}}"
"""``hydra.sweep.subdir`` of cosimrun's config: job folders sharded (:mod:`cosimrun.runner.layout`)."""


@dataclass
class JobSpec:
    """One job, composed on the driver."""

    num: int
    overrides: list[str]
    config: Any
    """The job's full composed config (``DictConfig`` including the ``hydra`` node); None once pickled."""
    job_dir: Path
    results_path: Path
    task_name: str = ""
    """``hydra.job.name``."""
    chdir: bool = False
    """``hydra.job.chdir``: the job runs in its job directory."""
    _payload: JobPayload | None = field(default=None, repr=False)

    def payload(self) -> JobPayload:
        """What goes to the worker: the pickled config (needs no config files there).

        The config is pickled once and then let go, so that a sweep of many
        jobs holds some 20 kB per job rather than its config objects.
        """
        if self._payload is None:
            self._payload = JobPayload(self.num, list(self.overrides), pickle_config(self.config), str(self.job_dir))
            self.config = None
        return self._payload

    def full_config(self) -> DictConfig:
        """The job's composed config (composed from its payload when the worker is to compose it)."""
        return self.config if self.config is not None else self.payload().to_config()


class _ConfigPickler(pickle.Pickler):
    """Pickles classes by name even when the module now holds another class object of that name.

    Hydra's plugin scan executes plugin modules again, so the dataclass that a
    config node was typed with (``BasicLauncherConf``, ...) is no longer the one
    its module exports and the standard pickler refuses it (dask would then fall
    back to cloudpickle, many times slower per job config).
    """

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type):
            module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
            if module and module != "__main__" and "<locals>" not in qualname:
                name = f"{module}:{qualname}"
                try:
                    found = pkgutil.resolve_name(name)
                except (ImportError, AttributeError, ValueError):
                    return NotImplemented
                if found is not obj and isinstance(found, type):
                    return pkgutil.resolve_name, (name,)
        return NotImplemented


def pickle_config(obj: Any) -> bytes:
    """*obj* (a config) pickled as jobs carry it (classes by name, see :class:`_ConfigPickler`)."""
    buffer = io.BytesIO()
    _ConfigPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def compose_job(hydra_context: HydraContext, master_config: DictConfig, overrides: Sequence[str], num: int) -> JobSpec:
    """Compose job *num* on the driver like Hydra's launchers do, with an absolute sweep directory.

    ``${now:...}`` in ``hydra.sweep.dir`` is resolved here, once, so workers in
    other processes or on other hosts write into the same directory (which must
    be on a filesystem they share, at the same path). A full composition per
    job; :class:`JobComposer` shares compositions between jobs that differ only
    in values.
    """
    config = hydra_context.config_loader.load_sweep_config(master_config, list(overrides))
    return _job_spec(config, master_config, overrides, num)


def _set_job(config: DictConfig, num: int, sweep_dir: str) -> None:
    """Set what a launcher sets in a job's config: ``hydra.job.id``, ``hydra.job.num``, ``hydra.sweep.dir``."""
    from omegaconf import open_dict

    hydra = _child(config, "hydra")
    job, sweep = _child(hydra, "job"), _child(hydra, "sweep")
    with open_dict(job), open_dict(sweep):  # not the whole config: opening it walks every node
        job.id = f"{job.name}_{num}"
        job.num = num
        if _raw(sweep, "dir") != sweep_dir:  # the same for every job of a sweep (a worker's kept config has it)
            sweep.dir = sweep_dir


def _child(container: Any, key: str) -> Any:
    """*container*'s child container *key*, as ``container.key`` gives it, taken without resolving it when it is no
    interpolation (a job's config is made from such children many times per job)."""
    from omegaconf import Container

    node = container._get_node(key)
    return node if isinstance(node, Container) and not node._is_interpolation() else container[key]


def _raw(container: Any, key: str | int) -> Any:
    """The value of *container*'s child *key* as set, an interpolation unresolved (None when there is none)."""
    node = container._get_node(key, throw_on_missing_key=False) if isinstance(key, str) else container._get_node(key)
    return None if node is None else node._value()


def _job_spec(config: DictConfig, master_config: DictConfig, overrides: Sequence[str], num: int) -> JobSpec:
    from omegaconf import OmegaConf

    sweep_dir = Path(str(master_config.hydra.sweep.dir)).absolute()
    _set_job(config, num, str(sweep_dir))
    try:
        subdir = OmegaConf.select(config, "hydra.sweep.subdir")
    except Exception:  # uses ${hydra:...}: resolve it the way run_job does
        with hydra_config(config):
            subdir = OmegaConf.select(config, "hydra.sweep.subdir")
    job_dir = sweep_dir / str(subdir)
    try:
        storage_file = str(OmegaConf.select(config, "storage.file", default="results.h5"))
    except Exception:  # unresolvable: the job will say so
        storage_file = "results.h5"
    job = config.hydra.job
    return JobSpec(num, list(overrides), config, job_dir, job_dir / storage_file, str(job.name), bool(job.chdir))


def apply_job(config: DictConfig, values: list[str], app: list[str], cache: dict[str, Any], num: int,
              sweep_dir: str) -> None:
    """Make a copy of a shared composition (*config*) job *num*'s config: its value overrides *values* applied
    by Hydra's own function, what Hydra derives from its overrides *app* (``hydra.overrides.task``,
    ``hydra.job.override_dirname``), the resolver *cache* of the sweep's config (``${now:...}``) and the job's
    fields. Needs no config files: workers run it on the composition sent with a chunk."""
    from omegaconf import OmegaConf

    from cosimrun.runner._private import apply_value_overrides, overrides_dirname

    apply_value_overrides(parsed_overrides(values), config)
    hydra = _child(config, "hydra")
    job = _child(hydra, "job")
    task = _child(_child(hydra, "overrides"), "task")
    if len(task) == len(app):  # a worker's kept config (see worker._job_config): its lines but the values
        for i, line in enumerate(app):
            if _raw(task, i) != line:
                task[i] = line
    else:
        del task[:]  # not pop(), which resolves each line it returns
        for line in app:
            task.append(line)
    dirname = _child(_child(job, "config"), "override_dirname")
    job.override_dirname = overrides_dirname(
        parsed_overrides(app), exclude_keys=dirname.exclude_keys, item_sep=dirname.item_sep,
        kv_sep=dirname.kv_sep
    )
    OmegaConf.set_cache(config, cache)
    _set_job(config, num, sweep_dir)


class KeptConfigs:
    """Full configs made from shared compositions, one kept per composition and keys of value overrides, each
    remade into the next job's config that asks for the same (:meth:`made`).

    The same config as :func:`apply_job` on a new copy of the composition: jobs of one composition with the same
    keys set the same keys (scalars, see :class:`JobComposer`) and every field :func:`apply_job` sets, so nothing
    of the last job is left. Unpickling a new full copy is the largest part of making a short job's config.
    """

    size = 8

    def __init__(self) -> None:
        self._kept: dict[tuple[bytes, tuple[str, ...]], tuple[DictConfig, Any]] = {}
        """(composition pickled, value-override keys) -> the config last made and its ``hydra`` node's read-only
        flag as composed."""

    def made(self, base: bytes, values: list[str], app: list[str], cache: dict[str, Any], num: int,
             sweep_dir: str) -> DictConfig:
        """Job *num*'s config (see :func:`apply_job`), raising what it raises; the config is the caller's until
        its next call, which remakes it. A config that could not be made is not kept."""
        from omegaconf import OmegaConf

        key = (base, tuple(str(o.key_or_group) for o in parsed_overrides(values)))
        kept = self._kept.pop(key, None)
        if kept is None:
            if len(self._kept) >= self.size:
                self._kept.clear()
            config = pickle.loads(base)
            read_only = config.hydra._get_node_flag("readonly")
        else:
            config, read_only = kept
            OmegaConf.set_readonly(config.hydra, read_only)  # as composed: a job's run made it read-only
        apply_job(config, values, app, cache, num, sweep_dir)
        self._kept[key] = (config, read_only)
        return config


@functools.cache
def _overrides_parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def parsed_overrides(overrides: Sequence[str]) -> list[Any]:
    """Hydra's parsed *overrides* (``Override`` objects, which nothing changes), parsed once for the many times a
    sweep's driver makes a job's config (the sweeper's check, the launch, a resume's config check). Hydra parses
    each line on its own; so does this, keeping each line's parse: the lines the jobs share are parsed once."""
    return [_parsed(line) for line in overrides]


@functools.lru_cache(maxsize=1 << 14)
def _parsed(line: str) -> Any:
    plain = parsed_plain(line)  # a job's own values, mostly: Hydra's parser takes milliseconds per line
    return plain if plain is not None else _overrides_parser().parse_overrides(overrides=[line])[0]


class JobComposer:
    """Composes the jobs of one sweep like :func:`compose_job`, sharing compositions between jobs.

    A full Hydra composition is the driver's largest cost per job. Jobs whose overrides
    differ only in *value overrides* (``key=value`` on a key that is no config
    group: no ``+``/``++``/``~`` prefix, no package, no ``hydra`` key, a scalar
    value) share one composition per distinct list of the other overrides; each
    job gets a copy of it with its value overrides applied by Hydra's own
    ``ConfigLoaderImpl._apply_overrides_to_config`` and the fields that
    ``ConfigLoaderImpl.load_configuration`` derives from the overrides set as it
    would (``hydra.overrides.task``, ``hydra.job.override_dirname``); those
    private parts of Hydra are reached through :mod:`cosimrun.runner._private`. The result
    is the same config as a full composition (a test checks that). A job with
    no value overrides is a composition of its own, kept like the shared ones
    (the sweeper's check and the launch compose it once). Anything else, a
    config loader that is not Hydra 1.3's ``ConfigLoaderImpl``, or any error on
    the way is composed in full, so Hydra reports its own errors.
    """

    max_bases = 64

    def __init__(self, hydra_context: HydraContext, master_config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.master_config = master_config
        self._bases: dict[tuple[str, ...], bytes | None] = {}
        """Base compositions, pickled: unpickling copies a config some ten times faster than ``deepcopy``."""
        self._loader: Any = None
        """:class:`cosimrun.runner._private.ValueOverrides` of the config loader."""
        self._templates: dict[tuple[str, ...], tuple[str, str, str, bool] | None] = {}
        """What of a shared composition tells where a job the worker makes writes (see :meth:`_where`), per
        composition: read once, not per job."""
        self._checked = KeptConfigs()
        """The configs :meth:`validate` makes, one per shared composition and value-override keys."""
        self._groups: dict[str, bool] = {}
        """Key -> whether it names a config group, asked once per key."""
        self._enabled = True
        self.shared = 0
        """Jobs composed from a shared composition (the others were composed in full)."""
        try:
            from omegaconf import OmegaConf

            from cosimrun.runner._private import ValueOverrides

            hydra_overrides = OmegaConf.to_container(master_config.hydra.overrides.hydra)
            assert isinstance(hydra_overrides, list)
            self._loader = ValueOverrides(
                hydra_context.config_loader, master_config.hydra.job.config_name, [str(o) for o in hydra_overrides]
            )
            _overrides_parser()
        except Exception:  # another loader or Hydra version: full compositions
            self._enabled = False

    def compose(self, overrides: Sequence[str], num: int, on_worker: bool = False) -> JobSpec:
        """Job *num* with *overrides*, from a shared composition when it can be.

        With *on_worker* such a job is left for the worker to make (its payload
        carries the shared composition and the job's overrides, see
        :func:`apply_job`) when its folder and results file do not depend on
        its value overrides; the driver then only computes where it writes.
        """
        from omegaconf import OmegaConf

        plan = self._plan(list(overrides)) if self._enabled else None
        if plan is None:
            return compose_job(self.hydra_context, self.master_config, overrides, num)
        signature, base, values, app = plan
        sweep_dir = str(Path(str(self.master_config.hydra.sweep.dir)).absolute())
        cache = OmegaConf.get_cache(self.master_config)
        if on_worker:
            where = self._where(signature, base, values, num, sweep_dir)
            if where is not None:
                job_dir, results_path, name, chdir = where
                payload = JobPayload(num, list(overrides), base, str(job_dir), values, app, cache, sweep_dir)
                self.shared += 1
                return JobSpec(num, list(overrides), None, job_dir, results_path, name, chdir, payload)
        config = self._made(base, values, app, cache, num, sweep_dir)
        if config is None:  # Hydra's composition says what is wrong
            return compose_job(self.hydra_context, self.master_config, overrides, num)
        self.shared += 1
        return _job_spec(config, self.master_config, overrides, num)

    def validate(self, overrides: Sequence[str]) -> None:
        """Check that a job composes (raising Hydra's error when not), as Hydra's sweepers do before a launch."""
        plan = self._plan(list(overrides)) if self._enabled else None
        if plan is not None:
            from omegaconf import OmegaConf

            _, base, values, app = plan
            try:
                self._checked.made(base, values, app, OmegaConf.get_cache(self.master_config), 0, "")
                return
            except Exception:  # Hydra's composition says what is wrong
                pass
        self.hydra_context.config_loader.load_sweep_config(self.master_config, list(overrides))

    @staticmethod
    def _made(base: bytes, values: list[str], app: list[str], cache: dict[str, Any], num: int,
              sweep_dir: str) -> DictConfig | None:
        """A job's config made from a shared composition (:func:`apply_job`); None when that fails."""
        config = pickle.loads(base)
        try:
            apply_job(config, values, app, cache, num, sweep_dir)
        except Exception:  # a key the config does not have, a value of the wrong type: composed in full
            return None
        return config

    def _where(self, signature: tuple[str, ...], base: bytes, values: list[str], num: int,
               sweep_dir: str) -> tuple[Path, Path, str, bool] | None:
        """``(job folder, results file, hydra.job.name, hydra.job.chdir)`` of a job of the shared composition
        *signature*, when its value overrides cannot change them (None otherwise)."""
        from omegaconf import OmegaConf

        from cosimrun.runner.layout import job_subdir

        if signature not in self._templates:
            if len(self._templates) >= self.max_bases:
                self._templates.pop(next(iter(self._templates)))
            template = pickle.loads(base)
            try:
                subdir = OmegaConf.to_container(template.hydra.sweep, resolve=False)["subdir"]
                storage = template.get("storage")
                layout = None if storage is None or OmegaConf.is_interpolation(storage, "file") else (
                    str(subdir), str(storage.file), str(template.hydra.job.name), bool(template.hydra.job.chdir))
            except Exception:  # a config of another shape: the driver composes its jobs
                layout = None
            self._templates[signature] = layout
        layout = self._templates[signature]
        if layout is None or any(v.lstrip("+").partition("=")[0] == "storage.file" for v in values):
            return None
        subdir, file, name, chdir = layout
        if subdir == LAYOUT_SUBDIR:
            job_dir = Path(sweep_dir) / job_subdir(sweep_dir, num)
        elif subdir == "${hydra.job.num}":
            job_dir = Path(sweep_dir) / str(num)
        else:
            return None
        return job_dir, job_dir / file, name, chdir

    def _split(self, overrides: list[str]) -> tuple[list[Any], list[Any], list[Any]] | None:
        """``(parsed, structural, values)`` of a job's overrides; None when they are better composed in full."""
        from hydra.core.override_parser.types import OverrideType, ValueType

        parsed = parsed_overrides(overrides)
        structural, values = [], []
        for ov in parsed:
            key = ov.key_or_group
            plain = (
                ov.type == OverrideType.CHANGE
                and ov.package is None
                and ov.value_type == ValueType.ELEMENT
                and key != "hydra"
                and not ov.is_hydra_override()
                and isinstance(ov.value(), str | int | float | bool | type(None))
                and not self._group_exists(key)
            )
            (values if plain else structural).append(ov)
        config_keys = [ov.key_or_group for ov in structural if not self._group_exists(ov.key_or_group)]
        for ov in values:
            key = ov.key_or_group
            if any(overlap(k, key) for k in config_keys):
                return None  # applied in another order than Hydra would: compose in full
        return parsed, structural, values

    def _group_exists(self, key: str) -> bool:
        if key not in self._groups:
            self._groups[key] = self._loader.group_exists(key)
        return self._groups[key]

    def _plan(self, overrides: list[str]) -> tuple[tuple[str, ...], bytes, list[str], list[str]] | None:
        """``(signature, shared composition pickled, value overrides, overrides without hydra ones)`` of a job
        that a shared composition makes; None when it is composed in full."""
        try:
            split = self._split(overrides)
            if split is None:
                return None
            parsed, structural, values = split
            signature = tuple(ov.input_line for ov in structural)
            if signature not in self._bases:
                if len(self._bases) >= self.max_bases:
                    self._bases.pop(next(iter(self._bases)))
                try:
                    self._bases[signature] = pickle_config(
                        self.hydra_context.config_loader.load_sweep_config(self.master_config, list(signature))
                    )
                except Exception:  # the full composition will raise Hydra's error for the job
                    self._bases[signature] = None
            base = self._bases[signature]
            if base is None:
                return None
            # what load_configuration derives from the overrides (the master's hydra overrides are all hydra.*)
            app = [ov.input_line for ov in parsed if not ov.is_hydra_override()]
            return signature, base, [ov.input_line for ov in values], app
        except Exception:  # not sure: compose in full
            return None
