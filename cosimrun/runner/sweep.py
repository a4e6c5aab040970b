"""Sweep jobs: the job body, jobs composed on the driver, resume bookkeeping.

A sweep (``cosimrun -m ...``) runs one experiment per job; Hydra's sweeper
expands the overrides and a launcher runs the jobs (the dask launcher in
``hydra_plugins.cosimrun_dask_launcher`` by default, ``hydra/launcher=basic``
runs them one after the other in the driver process). Each job writes its own
results file in its job directory (``<sweep dir>/<job number>/results.h5``).

:func:`sweep_job` is the body of one job. The dask launcher composes the jobs on
the driver (:class:`JobComposer`, :class:`JobSpec`), skips on a resume those
whose results are :func:`reusable`, and runs the others on workers with
:func:`cosimrun.runner.worker.run_hydra_job`. The driver records the outcomes
(:mod:`cosimrun.runner.recorder`) in the sweep index (:mod:`cosimrun.runner.index`),
which :mod:`cosimrun.runner.load` reads.

Nothing here imports dask: the launcher owns that. Hydra is imported where it
is used.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import pickle
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py

from cosimrun.runner.configtext import resolved, task_overrides
from cosimrun.runner.outcome import JobOutcome
from cosimrun.runner.recorder import recorder_for
from cosimrun.runner.worker import JobPayload, describe_exception
from cosimrun.storage.hdf5 import FORMAT

if TYPE_CHECKING:
    from omegaconf import DictConfig


# ---------------------------------------------------------------------- the job body
_managed = threading.local()
_driver_pid: int | None = None


def mark_driver() -> None:
    """Declare this process the sweep driver: jobs run in it (``hydra/launcher=basic``) record themselves."""
    global _driver_pid
    _driver_pid = os.getpid()


@contextlib.contextmanager
def managed_job() -> Any:
    """Jobs run inside this block are recorded by their launcher, not by themselves."""
    previous = getattr(_managed, "active", False)
    _managed.active = True
    try:
        yield
    finally:
        _managed.active = previous


def sweep_job(cfg: DictConfig) -> JobOutcome:
    """Hydra task body of one sweep job: run the experiment, never raise for a failed run.

    The run writes ``<job dir>/<storage.file>``; configuration errors and
    failures during the run come back as a ``failed`` outcome with the error
    and traceback, so that one job does not stop the others. Ctrl-C stops the
    sweep (``KeyboardInterrupt`` is raised again once the outcome is recorded).
    """
    from hydra.core.hydra_config import HydraConfig

    from cosimrun.runner.run import prepare, run_experiment

    start = time.perf_counter()
    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = task_overrides(hydra_cfg)
    num = int(hydra_cfg.job.num)
    outcome = JobOutcome(num=num, status="failed", overrides=overrides)
    interrupted = False
    try:
        plain, config_yaml = resolved(cfg)
        experiment = prepare(plain)
        if experiment.action == "describe":
            print(f"#{num} {' '.join(overrides)}\n{experiment.system.describe()}")
            outcome.status = "complete"
        else:
            run = run_experiment(
                plain,
                out_dir,
                config_yaml=config_yaml,
                overrides=overrides,
                experiment=experiment,
            )
            outcome = replace(
                outcome,
                status=run.status,
                path=str(run.path),
                error=run.error or "",
                wall_time_s=run.wall_time_s,
                summaries=run.final_values,
            )
            if run.status != "complete":
                outcome.traceback = _file_attr(run.path, "traceback")
            interrupted = run.status == "interrupted"
    except KeyboardInterrupt:
        outcome.status, outcome.error = "interrupted", "interrupted by the user"
        interrupted = True
    except Exception as exc:  # a config error or a bug: this job fails, the sweep goes on
        outcome.error, outcome.traceback = describe_exception(exc)
    outcome.job_time_s = time.perf_counter() - start
    if not getattr(_managed, "active", False) and _driver_pid == os.getpid():
        sweep_dir = Path(str(hydra_cfg.sweep.dir)).absolute()
        recorder = recorder_for(sweep_dir)
        recorder.record(outcome)
        if outcome.failed and not interrupted:
            print(f"cosimrun: job #{num} {outcome.status}: {outcome.error}", file=sys.stderr)
    if interrupted:
        raise KeyboardInterrupt
    return outcome


def _file_attr(path: str | os.PathLike[str], name: str) -> str:
    try:
        with h5py.File(path, "r", locking=False) as f:
            value = f.attrs.get(name, "")
    except OSError:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------------- jobs composed on the driver
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
            self._payload = JobPayload(self.num, list(self.overrides), _dumps(self.config), str(self.job_dir))
            self.config = None
        return self._payload


def _class_by_name(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


class _ConfigPickler(pickle.Pickler):
    """Pickles classes by name even when the module now holds another class object of that name.

    Hydra's plugin scan executes plugin modules again, so the dataclass that a
    config node was typed with (``BasicLauncherConf``, ...) is no longer the one
    its module exports and the standard pickler refuses it (dask would then fall
    back to cloudpickle, some 40 ms per job config instead of 2).
    """

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type):
            module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
            if module and module != "__main__" and "<locals>" not in qualname:
                try:
                    found = _class_by_name(module, qualname)
                except (ImportError, AttributeError):
                    return NotImplemented
                if found is not obj and isinstance(found, type):
                    return _class_by_name, (module, qualname)
        return NotImplemented


def _dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    _ConfigPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def compose_job(hydra_context: Any, master_config: DictConfig, overrides: Sequence[str], num: int) -> JobSpec:
    """Compose job *num* on the driver like Hydra's launchers do, with an absolute sweep directory.

    ``${now:...}`` in ``hydra.sweep.dir`` is resolved here, once, so workers in
    other processes or on other hosts write into the same directory (which must
    be on a filesystem they share, at the same path). A full composition per
    job; :class:`JobComposer` shares compositions between jobs that differ only
    in values.
    """
    config = hydra_context.config_loader.load_sweep_config(master_config, list(overrides))
    return _job_spec(config, master_config, overrides, num)


def _job_spec(config: DictConfig, master_config: DictConfig, overrides: Sequence[str], num: int) -> JobSpec:
    from omegaconf import OmegaConf, open_dict

    sweep_dir = Path(str(master_config.hydra.sweep.dir)).absolute()
    with open_dict(config):
        config.hydra.job.id = f"{config.hydra.job.name}_{num}"
        config.hydra.job.num = num
        config.hydra.sweep.dir = str(sweep_dir)
    try:
        subdir = OmegaConf.select(config, "hydra.sweep.subdir")
    except Exception:  # uses ${hydra:...}: resolve it the way run_job does
        with _hydra_config(config):
            subdir = OmegaConf.select(config, "hydra.sweep.subdir")
    job_dir = sweep_dir / str(subdir)
    try:
        storage_file = str(OmegaConf.select(config, "storage.file", default="results.h5"))
    except Exception:  # unresolvable: the job will say so
        storage_file = "results.h5"
    job = config.hydra.job
    return JobSpec(
        num, list(overrides), config, job_dir, job_dir / storage_file, str(job.name), bool(job.chdir)
    )


class JobComposer:
    """Composes the jobs of one sweep like :func:`compose_job`, sharing compositions between jobs.

    A Hydra composition takes some 50 ms of driver CPU. Jobs whose overrides
    differ only in *value overrides* (``key=value`` on a key that is no config
    group: no ``+``/``++``/``~`` prefix, no package, no ``hydra`` key, a scalar
    value) share one composition per distinct list of the other overrides; each
    job gets a copy of it with its value overrides applied by Hydra's own
    ``ConfigLoaderImpl._apply_overrides_to_config`` and the fields that
    ``ConfigLoaderImpl.load_configuration`` derives from the overrides set as it
    would (``hydra.overrides.task``, ``hydra.job.override_dirname``). The result
    is the same config as a full composition (a test checks that). A job with
    no value overrides is a composition of its own, kept like the shared ones
    (the sweeper's check and the launch compose it once). Anything else, a
    config loader that is not Hydra 1.3's ``ConfigLoaderImpl``, or any error on
    the way is composed in full, so Hydra reports its own errors.
    """

    max_bases = 64

    def __init__(self, hydra_context: Any, master_config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.master_config = master_config
        self._bases: dict[tuple[str, ...], bytes | None] = {}
        """Base compositions, pickled: unpickling copies a config some ten times faster than ``deepcopy``."""
        self._repo: Any = None
        self._parser: Any = None
        self._enabled = True
        self.shared = 0
        """Jobs composed from a shared composition (the others were composed in full)."""
        try:
            from hydra._internal.config_loader_impl import ConfigLoaderImpl
            from hydra.core.override_parser.overrides_parser import OverridesParser
            from omegaconf import OmegaConf

            loader = hydra_context.config_loader
            if not isinstance(loader, ConfigLoaderImpl):
                raise TypeError(type(loader).__name__)
            hydra_overrides = OmegaConf.to_container(master_config.hydra.overrides.hydra)
            assert isinstance(hydra_overrides, list)
            self._hydra_overrides = [str(o) for o in hydra_overrides]
            # the repository with the search path the job compositions use (hydra.searchpath included)
            _, self._repo = loader._parse_overrides_and_create_caching_repo(
                master_config.hydra.job.config_name, self._hydra_overrides
            )
            self._parser = OverridesParser.create()
        except Exception:  # another loader or Hydra version: full compositions
            self._enabled = False

    def compose(self, overrides: Sequence[str], num: int) -> JobSpec:
        config = self._shared(list(overrides)) if self._enabled else None
        if config is None:
            return compose_job(self.hydra_context, self.master_config, overrides, num)
        self.shared += 1
        return _job_spec(config, self.master_config, overrides, num)

    def validate(self, overrides: Sequence[str]) -> None:
        """Check that a job composes (raising Hydra's error when not), as Hydra's sweepers do before a launch."""
        if self._enabled and self._shared(list(overrides)) is not None:
            return
        self.hydra_context.config_loader.load_sweep_config(self.master_config, list(overrides))

    def _split(self, overrides: list[str]) -> tuple[list[Any], list[Any], list[Any]] | None:
        """``(parsed, structural, values)`` of a job's overrides; None when they are better composed in full."""
        from hydra.core.override_parser.types import OverrideType, ValueType

        parsed = self._parser.parse_overrides(overrides=overrides)
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
                and not self._repo.group_exists(key)
            )
            (values if plain else structural).append(ov)
        config_keys = [ov.key_or_group for ov in structural if not self._repo.group_exists(ov.key_or_group)]
        for ov in values:
            key = ov.key_or_group
            if any(k == key or k.startswith(key + ".") or key.startswith(k + ".") for k in config_keys):
                return None  # applied in another order than Hydra would: compose in full
        return parsed, structural, values

    def _shared(self, overrides: list[str]) -> DictConfig | None:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
        from omegaconf import OmegaConf

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
                    self._bases[signature] = _dumps(
                        self.hydra_context.config_loader.load_sweep_config(self.master_config, list(signature))
                    )
                except Exception:  # the full composition will raise Hydra's error for the job
                    self._bases[signature] = None
            base = self._bases[signature]
            if base is None:
                return None
            config = pickle.loads(base)
            ConfigLoaderImpl._apply_overrides_to_config(values, config)
            # what load_configuration derives from the overrides (the master's hydra overrides are all hydra.*)
            app = [ov for ov in parsed if not ov.is_hydra_override()]
            task = config.hydra.overrides.task
            while len(task):
                task.pop()
            for ov in app:
                task.append(ov.input_line)
            dirname = config.hydra.job.config.override_dirname
            config.hydra.job.override_dirname = get_overrides_dirname(
                overrides=app, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep, exclude_keys=dirname.exclude_keys
            )
            OmegaConf.copy_cache(from_config=self.master_config, to_config=config)
            return config
        except Exception:  # not sure: compose in full
            return None


@contextlib.contextmanager
def _hydra_config(config: DictConfig) -> Any:
    from hydra.core.hydra_config import HydraConfig

    instance = HydraConfig.instance()
    saved = instance.cfg
    try:
        instance.set_config(config)
        yield
    finally:
        instance.cfg = saved


def expected_config_yaml(spec: JobSpec) -> str:
    """The resolved task config that the job's run stores (``config_yaml``), as the worker's job would see it."""
    from omegaconf import open_dict, read_write

    task_cfg, config = spec.payload().configs()
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(spec.job_dir)
    with _hydra_config(config):
        try:
            return resolved(task_cfg)[1]
        except Exception:  # unresolvable: the job will report it; it just cannot be reused
            return ""


def reusable(spec: JobSpec) -> bool:
    """Whether a resume may skip *spec*: its results file is complete and was made from the same config."""
    path = spec.results_path
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r", locking=False) as f:
            attrs = {k: f.attrs.get(k) for k in ("format", "status", "config_yaml")}
    except OSError:
        return False
    text = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
    if text["format"] != FORMAT or text["status"] != "complete" or not text["config_yaml"]:
        return False
    return text["config_yaml"] == expected_config_yaml(spec)
