"""Sweeps: the job body, the sweep index, resume bookkeeping and ``load_sweep``.

A sweep (``cosimrun -m ...``) runs one experiment per job; Hydra's sweeper
expands the overrides and a launcher runs the jobs (the dask launcher in
``hydra_plugins.cosimrun_dask_launcher`` by default, ``hydra/launcher=basic``
runs them one after the other in the driver process). Each job writes its own
results file in its job directory (``<sweep dir>/<job number>/results.h5``).

The driver keeps an index in the sweep directory, ``index.h5``, rewritten
(atomically) as jobs finish, laid out netCDF-style like a results file::

    /            attrs: format="cosimrun-sweep", format_version, experiment, updated,
                 n_jobs, n_complete, n_failed, n_interrupted, n_pending, n_reused,
                 jobs_wall_time_s (first job start to last job end), columns, params, summaries
    run          int64 (n,)   job number: the dimension scale of every column
    status       str          pending | complete | failed | interrupted
    overrides    str          the job's overrides, space separated
    <param>      one column per override key (``components.ball.params.e``, ``master``)
    final.<comp>.<port>       the port's last recorded value
    wall_time_s  float64      the simulation's wall time (NaN when it did not run)
    job_time_s   float64      the whole job's wall time on its worker
    path         str          results file relative to the sweep directory ("" if none)
    error, traceback, worker  str
    attempts     int64        how often the job was started (0: reused by a resume)
    reused       bool         taken over from an earlier run of the sweep (resume)
    /runs/<run>  HDF5 external link to the job's results file (``/`` of it)

``load_sweep(dir)`` reads the table as a DataFrame; ``load_sweep_dataset``
opens the runs' histories of one component as one xarray Dataset along ``run``.

Nothing here imports dask: the launcher owns that. Hydra, pandas and xarray are
imported where they are used.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import math
import os
import pickle
import sys
import threading
import time
import traceback as _traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import h5py
import numpy as np

from cosimrun.storage.hdf5 import FORMAT, partial_path
from cosimrun.storage.results import read_column

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr
    from omegaconf import DictConfig

INDEX_FILE = "index.h5"
SWEEP_FORMAT = "cosimrun-sweep"
SWEEP_FORMAT_VERSION = 1
SUMMARY_PREFIX = "final."
"""Summary columns are named ``final.<component>.<port>``."""

_STR = h5py.string_dtype("utf-8")
_BASE_COLUMNS = (
    "status",
    "overrides",
    "wall_time_s",
    "job_time_s",
    "path",
    "error",
    "traceback",
    "attempts",
    "reused",
    "worker",
)
_RESERVED = frozenset((*_BASE_COLUMNS, "run", "runs"))
FAILED_STATUSES = frozenset({"failed", "interrupted"})


# ---------------------------------------------------------------------- job outcome
@dataclass
class JobOutcome:
    """What one job of a sweep left behind; the return value of a sweep job."""

    num: int
    status: str
    """``complete``, ``failed``, ``interrupted`` or ``pending`` (not finished yet)."""
    overrides: list[str] = field(default_factory=list)
    path: str = ""
    """Absolute path of the job's results file; ``""`` when none was written."""
    error: str = ""
    traceback: str = ""
    wall_time_s: float = math.nan
    """Wall time of the simulation itself (as the run measured it; NaN when it did not run)."""
    job_time_s: float = math.nan
    """Wall time of the whole job on its worker (set up, run, write, summarize)."""
    summaries: dict[str, Any] = field(default_factory=dict)
    """``{"comp.port": last recorded value}``."""
    attempts: int = 1
    reused: bool = False
    worker: str = ""
    objective: float | None = None
    """The value an optimizing sweeper (Optuna) gets: see :func:`objective_value`."""

    @property
    def ok(self) -> bool:
        return self.status == "complete"

    def __float__(self) -> float:
        if self.objective is None:
            raise TypeError(
                f"sweep job #{self.num} has no objective value: set hydra.launcher.objective to an index "
                "column such as final.<component>.<port> for a sweeper that optimizes (e.g. Optuna)"
            )
        return float(self.objective)

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES


def objective_value(outcome: JobOutcome, column: str) -> float:
    """The number in index column *column* (``final.<comp>.<port>``, ``wall_time_s``, ...) of *outcome*.

    NaN when the job did not complete or the value is not a number (Optuna
    records such a trial as failed and goes on).
    """
    if not outcome.ok:
        return math.nan
    if column.startswith(SUMMARY_PREFIX):
        value = outcome.summaries.get(column[len(SUMMARY_PREFIX) :])
    else:
        value = outcome.summaries.get(column, getattr(outcome, column, None))
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _describe_exception(exc: BaseException) -> tuple[str, str]:
    return f"{type(exc).__name__}: {exc}", "".join(_traceback.format_exception(exc))


def final_values(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"comp.port": last value}`` of every recorded port of a results file ("" / {} if unreadable)."""
    out: dict[str, Any] = {}
    path = Path(path)
    if not path.exists() and partial_path(path).exists():
        path = partial_path(path)
    try:
        with h5py.File(path, "r", locking=False) as f:
            comps = f.get("components")
            if comps is None:
                return out
            for comp, group in comps.items():
                names = [n for n in group if n not in ("time", "micro")]
                n = min((group[x].shape[0] for x in ("time", *names)), default=0)
                for name in names:
                    ds = group[name]
                    if n == 0 or ds.attrs.get("port_type") in ("event", b"event"):
                        continue
                    value = ds[n - 1]
                    if h5py.check_string_dtype(ds.dtype) is not None:
                        out[f"{comp}.{name}"] = (
                            value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                        )
                    elif ds.attrs.get("dtype") in ("bool", b"bool"):
                        out[f"{comp}.{name}"] = bool(value)
                    elif np.issubdtype(ds.dtype, np.number):
                        out[f"{comp}.{name}"] = value.item()
    except (OSError, KeyError):
        pass
    return out


def outcome_from_file(num: int, overrides: Sequence[str], path: str | os.PathLike[str]) -> JobOutcome:
    """The outcome recorded in an existing results file (used for jobs a resume takes over)."""
    path = Path(path)
    with h5py.File(path, "r", locking=False) as f:
        attrs = {k: f.attrs[k] for k in ("status", "error", "traceback", "wall_time_s") if k in f.attrs}
    text = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in attrs.items() if k != "wall_time_s"}
    return JobOutcome(
        num=num,
        status=text.get("status", "failed"),
        overrides=list(overrides),
        path=str(path),
        error=text.get("error", ""),
        traceback=text.get("traceback", ""),
        wall_time_s=float(attrs.get("wall_time_s", math.nan)),
        summaries=final_values(path),
        attempts=0,
        reused=True,
    )


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
    from omegaconf import OmegaConf

    from cosimrun.runner.run import prepare, run_experiment

    start = time.perf_counter()
    hydra_cfg = HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = list(hydra_cfg.overrides.task)
    num = int(hydra_cfg.job.num)
    outcome = JobOutcome(num=num, status="failed", overrides=overrides)
    interrupted = False
    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(plain, dict)
        experiment = prepare(plain)
        if experiment.action == "describe":
            print(f"#{num} {' '.join(overrides)}\n{experiment.system.describe()}")
            outcome.status = "complete"
        else:
            run = run_experiment(
                plain,
                out_dir,
                config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
                overrides=overrides,
                experiment=experiment,
            )
            outcome = replace(
                outcome,
                status=run.status,
                path=str(run.path),
                error=run.error or "",
                wall_time_s=run.wall_time_s,
                summaries=final_values(run.path),
            )
            if run.status != "complete":
                outcome.traceback = _file_attr(run.path, "traceback")
            interrupted = run.status == "interrupted"
    except KeyboardInterrupt:
        outcome.status, outcome.error = "interrupted", "interrupted by the user"
        interrupted = True
    except Exception as exc:  # a config error or a bug: this job fails, the sweep goes on
        outcome.error, outcome.traceback = _describe_exception(exc)
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
    """The job's full composed config (``DictConfig`` including the ``hydra`` node)."""
    job_dir: Path
    results_path: Path

    def payload(self) -> JobPayload:
        """What goes to the worker: the pickled config (needs no config files there)."""
        return JobPayload(self.num, list(self.overrides), _dumps(self.config), str(self.job_dir))


@dataclass
class JobPayload:
    """A composed job on its way to a worker: numbers, overrides and the config pickled once."""

    num: int
    overrides: list[str]
    config: bytes
    job_dir: str

    def to_config(self) -> DictConfig:
        return pickle.loads(self.config)


STARTED_FILE = ".cosimrun-started"
"""In a job directory: one line ``<launch token> <attempt>`` per attempt that started on a worker."""


def mark_started(job_dir: str | os.PathLike[str], token: str, attempt: int) -> None:
    """Note in the job directory that this attempt started (before anything that might crash)."""
    try:
        Path(job_dir).mkdir(parents=True, exist_ok=True)
        with open(Path(job_dir) / STARTED_FILE, "a", encoding="utf-8") as f:
            f.write(f"{token} {attempt}\n")
    except OSError:  # a read-only or vanished directory: the job will report it
        pass


def started(job_dir: str | os.PathLike[str], token: str, attempt: int) -> bool:
    """Whether attempt *attempt* of launch *token* started running (see :func:`mark_started`).

    A dask worker may hold a job that waits for its thread; when the worker
    dies, dask reports that job as lost too. Such a job is submitted again
    without counting an attempt.
    """
    try:
        lines = (Path(job_dir) / STARTED_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return f"{token} {attempt}" in lines


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
    return JobSpec(num, list(overrides), config, job_dir, job_dir / storage_file)


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
    is the same config as a full composition (a test checks that). Anything
    else, a config loader that is not Hydra 1.3's ``ConfigLoaderImpl``, or any
    error on the way is composed in full, so Hydra reports its own errors.
    """

    max_bases = 64

    def __init__(self, hydra_context: Any, master_config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.master_config = master_config
        self._bases: dict[tuple[str, ...], DictConfig | None] = {}
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
        import copy

        from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
        from omegaconf import OmegaConf

        try:
            split = self._split(overrides)
            if split is None or not split[2]:
                return None
            parsed, structural, values = split
            signature = tuple(ov.input_line for ov in structural)
            if signature not in self._bases:
                if len(self._bases) >= self.max_bases:
                    self._bases.pop(next(iter(self._bases)))
                try:
                    self._bases[signature] = self.hydra_context.config_loader.load_sweep_config(
                        self.master_config, list(signature)
                    )
                except Exception:  # the full composition will raise Hydra's error for the job
                    self._bases[signature] = None
            base = self._bases[signature]
            if base is None:
                return None
            config = copy.deepcopy(base)
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
    """The resolved task config that the job's run stores (``config_yaml``), as ``run_job`` would see it."""
    from omegaconf import OmegaConf, open_dict, read_write

    config = spec.config.copy()
    with read_write(config), open_dict(config):
        config.hydra = spec.config.hydra.copy()
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(spec.job_dir)
    with _hydra_config(config):
        try:
            return OmegaConf.to_yaml(_task_config(config), resolve=True)
        except Exception:  # unresolvable: the job will report it; it just cannot be reused
            return ""


def _task_config(config: DictConfig) -> DictConfig:
    """The task's view of a job config: a copy without the ``hydra`` node (as ``run_job`` makes it)."""
    import copy

    from omegaconf import open_dict, read_write

    task_cfg = copy.deepcopy(config)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]
    return task_cfg


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


_job_lock = threading.Lock()
_installed_state: str | None = None


def run_hydra_job(
    payload: JobPayload, task_function: Any, state: bytes, state_token: str, attempt: int = 1
) -> JobOutcome:
    """Run one composed job on a worker with Hydra's ``run_job``; never raises for a failed job.

    *state* is Hydra's ``Singleton`` state from the driver, pickled once per
    sweep (``cloudpickle``) and installed once per worker process (identified by
    *state_token*). A task that raises (or exits) becomes a ``failed`` outcome
    with the error and traceback. Jobs in one worker process run one at a
    time: Hydra's config singletons and the working directory are process-wide.
    """
    global _installed_state
    from hydra._internal.callbacks import Callbacks
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals
    from hydra.types import HydraContext

    with _job_lock:
        start = time.perf_counter()
        mark_started(payload.job_dir, state_token, attempt)
        value: Any
        try:
            if _installed_state != state_token:
                import cloudpickle

                Singleton.set_state(cloudpickle.loads(state))
                _installed_state = state_token
            setup_globals()
            config = payload.to_config()
            with managed_job():
                ret = run_job(
                    hydra_context=HydraContext(config_loader=None, callbacks=Callbacks(config)),  # type: ignore[arg-type]
                    task_function=task_function,
                    config=config,
                    job_dir_key="hydra.sweep.dir",
                    job_subdir_key="hydra.sweep.subdir",
                )
            value = ret._return_value
            if ret.status == JobStatus.FAILED:
                error, trace = _describe_exception(value)
                value = JobOutcome(payload.num, "failed", payload.overrides, error=error, traceback=trace)
        except BaseException as exc:  # SystemExit from a task, or Hydra itself failing on this job
            if isinstance(exc, KeyboardInterrupt):
                raise
            error, trace = _describe_exception(exc)
            value = JobOutcome(payload.num, "failed", payload.overrides, error=error, traceback=trace)
        if not isinstance(value, JobOutcome):  # a task function that is not cosimrun's: keep its value
            value = JobOutcome(payload.num, "complete", payload.overrides, summaries={"return_value": value})
        value.job_time_s = time.perf_counter() - start
        value.attempts = attempt
        value.worker = _worker_address()
        return value


def job_return(spec: JobSpec, outcome: JobOutcome) -> Any:
    """The ``JobReturn`` Hydra's sweeper gets: status ``COMPLETED``, *outcome* as return value.

    Failed jobs are completed Hydra jobs too, so that the sweeper does not stop
    the sweep at the first failure; the sweep's exit status comes from
    :func:`finish`.
    """
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    return JobReturn(
        overrides=list(spec.overrides),
        cfg=OmegaConf.masked_copy(spec.config, [k for k in spec.config if k != "hydra"]),
        hydra_cfg=spec.config,
        working_dir=str(spec.job_dir) if spec.config.hydra.job.chdir else os.getcwd(),
        task_name=str(spec.config.hydra.job.name),
        status=JobStatus.COMPLETED,
        _return_value=outcome,
    )


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:
        return ""


# ---------------------------------------------------------------------- index
def _override_items(overrides: Iterable[str]) -> dict[str, Any]:
    """``{key: typed value}`` of task overrides (``+a.b=1`` -> ``{"a.b": 1}``); deletions are left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out: dict[str, Any] = {}
    items = [o for o in overrides if not o.startswith("hydra.") and not o.startswith("hydra/")]
    try:
        parsed = OverridesParser.create().parse_overrides(items)
    except Exception:  # not Hydra syntax (hand-made outcomes): split at the first '='
        for item in items:
            key, sep, value = item.lstrip("+~").partition("=")
            if sep:
                out[key] = value
        return out
    for ov in parsed:
        if ov.is_delete():
            continue
        key = ov.key_or_group if ov.package is None else f"{ov.key_or_group}@{ov.package}"
        try:
            value = ov.value()
        except Exception:
            value = ov.get_value_element_as_str()
        if isinstance(value, list | dict):
            value = ov.get_value_element_as_str()
        out[key] = value
    return out


def _column(values: list[Any]) -> tuple[np.ndarray, str]:
    """A column array and its kind (``bool``, ``int``, ``float``, ``str``) from Python values (None: missing)."""
    present = [v for v in values if v is not None]
    missing = len(present) < len(values)
    if present and all(isinstance(v, bool | np.bool_) for v in present):
        if not missing:
            return np.array(values, dtype=np.int8), "bool"
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64), "float"
    numeric = all(isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) for v in present)
    if present and numeric:
        if not missing and all(isinstance(v, int | np.integer) for v in present):
            return np.array(values, dtype=np.int64), "int"
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64), "float"
    if not present:
        return np.full(len(values), math.nan), "float"
    arr = np.empty(len(values), dtype=object)
    arr[:] = ["" if v is None else str(v) for v in values]
    return arr, "str"


def _column_name(name: str) -> str:
    name = name.replace("/", "|")
    return f"param.{name}" if name in _RESERVED else name


def write_index(
    path: str | os.PathLike[str], outcomes: Iterable[JobOutcome], attrs: Mapping[str, Any] | None = None
) -> Path:
    """Write the sweep index of *outcomes* to *path* (atomically: a temporary file renamed over it)."""
    path = Path(path)
    rows = sorted(outcomes, key=lambda o: o.num)
    root = path.parent
    params = [_override_items(o.overrides) for o in rows]
    param_names = list(dict.fromkeys(k for p in params for k in p))
    summary_names = sorted({k for o in rows for k in o.summaries})
    columns: dict[str, list[Any]] = {
        "status": [o.status for o in rows],
        "overrides": [" ".join(o.overrides) for o in rows],
    }
    param_columns = []
    for name in param_names:
        col = _column_name(name)
        param_columns.append(col)
        columns[col] = [p.get(name) for p in params]
    summary_columns = []
    for name in summary_names:
        col = _column_name(SUMMARY_PREFIX + name)
        summary_columns.append(col)
        columns[col] = [o.summaries.get(name) for o in rows]
    columns.update(
        wall_time_s=[float(o.wall_time_s) for o in rows],
        job_time_s=[float(o.job_time_s) for o in rows],
        path=[_relative(o.path, root) for o in rows],
        error=[o.error for o in rows],
        traceback=[o.traceback for o in rows],
        attempts=[int(o.attempts) for o in rows],
        reused=[bool(o.reused) for o in rows],
        worker=[o.worker for o in rows],
    )
    counts = _counts(rows)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with h5py.File(tmp, "w", track_order=True, locking=False) as f:
        f.attrs["_NCProperties"] = np.bytes_(f"version=2,cosimrun,hdf5={h5py.version.hdf5_version}")
        f.attrs["format"] = SWEEP_FORMAT
        f.attrs["format_version"] = np.int32(SWEEP_FORMAT_VERSION)
        f.attrs["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        for key, value in {**counts, **(attrs or {})}.items():
            f.attrs[key] = value
        f.attrs["columns"] = np.array(list(columns), dtype=_STR)
        f.attrs["params"] = np.array(param_columns, dtype=_STR)
        f.attrs["summaries"] = np.array(summary_columns, dtype=_STR)
        run = f.create_dataset("run", data=np.array([o.num for o in rows], dtype=np.int64), maxshape=(None,))
        run.make_scale("run")
        run.attrs["_Netcdf4Dimid"] = np.int32(0)
        run.attrs["_Netcdf4Coordinates"] = np.array([0], dtype=np.int32)
        for name, values in columns.items():
            data, kind = _column(values)
            if kind == "str":
                ds = f.create_dataset(name, shape=(len(data),), dtype=_STR, maxshape=(None,))
                if len(data):
                    ds[...] = data
            else:
                ds = f.create_dataset(name, data=data, maxshape=(None,))
            if kind == "bool":
                ds.attrs["dtype"] = "bool"
            if name in ("wall_time_s", "job_time_s"):
                ds.attrs["units"] = "s"
            ds.dims[0].attach_scale(run)
            ds.attrs["_Netcdf4Coordinates"] = np.array([0], dtype=np.int32)
        links = f.create_group("runs", track_order=True)
        for o, rel in zip(rows, columns["path"], strict=True):
            target = _link_target(o.path, rel, root)
            if target:
                links[str(o.num)] = h5py.ExternalLink(target, "/")
    os.replace(tmp, path)
    return path


def _relative(path: str, root: Path) -> str:
    if not path:
        return ""
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive
        return str(path)


def _link_target(path: str, rel: str, root: Path) -> str:
    """The file an external link should point at: the results file, else its ``.partial``, else none."""
    if not path:
        return ""
    if Path(path).exists():
        return rel
    if partial_path(path).exists():
        return rel + ".partial"
    return ""


def _counts(rows: Sequence[JobOutcome]) -> dict[str, int]:
    statuses = [o.status for o in rows]
    return {
        "n_jobs": len(rows),
        "n_complete": statuses.count("complete"),
        "n_failed": statuses.count("failed"),
        "n_interrupted": statuses.count("interrupted"),
        "n_pending": statuses.count("pending"),
        "n_reused": sum(o.reused for o in rows),
    }


class SweepRecorder:
    """Driver-side bookkeeping of one sweep directory: outcomes by job number and the index file.

    The index is rewritten when a job is recorded, at most every *min_interval*
    seconds (plus :meth:`flush` at the end of every batch), so that an
    interrupted sweep still has an index of what finished.
    """

    def __init__(self, sweep_dir: str | os.PathLike[str], min_interval: float = 0.5) -> None:
        self.sweep_dir = Path(sweep_dir).absolute()
        self.index_path = self.sweep_dir / INDEX_FILE
        self.min_interval = min_interval
        self.outcomes: dict[int, JobOutcome] = {}
        self._last_write = -math.inf
        self._dirty = False
        self.experiment = ""
        self._first_start = math.inf
        self._last_end = -math.inf

    def add_pending(self, num: int, overrides: Sequence[str]) -> None:
        self.outcomes[num] = JobOutcome(num, "pending", list(overrides), attempts=0)
        self._dirty = True

    def record(self, outcome: JobOutcome) -> None:
        now = time.monotonic()
        if not outcome.reused and not math.isnan(outcome.job_time_s):
            self._first_start = min(self._first_start, now - outcome.job_time_s)
            self._last_end = now
        self.outcomes[outcome.num] = outcome
        self._dirty = True
        if time.monotonic() - self._last_write >= self.min_interval:
            self.flush()

    def interrupt_pending(self) -> None:
        for num, o in self.outcomes.items():
            if o.status == "pending":
                self.outcomes[num] = replace(o, status="interrupted", error="the sweep was interrupted")
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty or not self.outcomes:
            return
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        write_index(self.index_path, self.outcomes.values(), self.attrs())
        self._last_write = time.monotonic()
        self._dirty = False

    @property
    def jobs_wall_time_s(self) -> float:
        """From the start of the first job run here to the end of the last one (NaN before any)."""
        return self._last_end - self._first_start if self._last_end >= self._first_start else math.nan

    def attrs(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "jobs_wall_time_s": self.jobs_wall_time_s}

    @property
    def failed(self) -> list[JobOutcome]:
        return [o for _, o in sorted(self.outcomes.items()) if o.failed]

    def summary(self) -> str:
        """A short block: counts, then one line per failed job with its error, then the index path."""
        rows = list(self.outcomes.values())
        c = _counts(rows)
        head = f"sweep: {c['n_jobs']} jobs, {c['n_complete']} complete"
        head += f" ({c['n_reused']} reused)" if c["n_reused"] else ""
        head += f", {c['n_failed']} failed"
        head += f", {c['n_interrupted']} interrupted" if c["n_interrupted"] else ""
        head += f", {c['n_pending']} not run" if c["n_pending"] else ""
        lines = [head]
        for o in self.failed:
            if o.status == "failed":
                lines.append(f"  #{o.num} failed: {' '.join(_task_overrides(o.overrides))}: {o.error}")
        lines.append(f"index: {self.index_path}")
        if c["n_interrupted"] or c["n_pending"]:
            lines.append(
                f"to finish it, run the same command with hydra.sweep.dir={self.sweep_dir} hydra.launcher.resume=true"
            )
        return "\n".join(lines)


def _task_overrides(overrides: Sequence[str]) -> list[str]:
    return [o for o in overrides if not o.startswith("hydra.")]


_recorders: dict[Path, SweepRecorder] = {}


def recorder_for(sweep_dir: str | os.PathLike[str]) -> SweepRecorder:
    """The driver's recorder of *sweep_dir* (created on first use)."""
    key = Path(sweep_dir).absolute()
    if key not in _recorders:
        _recorders[key] = SweepRecorder(key)
    return _recorders[key]


def finish(stream: TextIO | None = None) -> int:
    """End of the command: flush every index, print each sweep's summary; 1 if a job failed, else 0.

    Called by ``cosimrun``'s ``main()`` after Hydra returns (nothing happens when no sweep ran).
    """
    code = 0
    for sweep_dir in list(_recorders):
        recorder = _recorders.pop(sweep_dir)
        if not recorder.outcomes:
            continue
        recorder.flush()
        failed = bool(recorder.failed)
        print(recorder.summary(), file=(stream or (sys.stderr if failed else sys.stdout)))
        code = code or int(failed)
    return code


# ---------------------------------------------------------------------- reading
def _index_path(sweep: str | os.PathLike[str]) -> Path:
    path = Path(sweep)
    return path / INDEX_FILE if path.is_dir() else path


def load_sweep(sweep: str | os.PathLike[str]) -> pd.DataFrame:
    """The sweep index of a sweep directory (or an ``index.h5``) as a DataFrame indexed by ``run``.

    Columns: ``status``, ``overrides``, one per override key (the swept
    parameters, typed), ``final.<comp>.<port>`` summaries, ``wall_time_s``,
    ``path`` (relative to the sweep directory), ``error``, ``traceback``,
    ``attempts``, ``reused``, ``worker``. ``df.attrs`` holds ``sweep_dir``,
    ``params`` and ``summaries`` (column names). Pass the frame (or a filtered
    part of it) to :func:`load_sweep_dataset` to read the runs' histories.
    """
    import pandas as pd

    path = _index_path(sweep)
    if not path.exists():
        raise FileNotFoundError(f"no sweep index {path}")
    with h5py.File(path, "r", locking=False) as f:
        if _attr_str(f.attrs.get("format")) != SWEEP_FORMAT:
            raise ValueError(f"{path} is not a cosimrun sweep index")
        columns = [_attr_str(c) for c in f.attrs["columns"]]
        data = {c: read_column(f[c]) for c in columns}
        index = pd.Index(f["run"][...], name="run")
        params = [_attr_str(c) for c in f.attrs.get("params", [])]
        summaries = [_attr_str(c) for c in f.attrs.get("summaries", [])]
    df = pd.DataFrame(data, index=index)
    df.attrs.update(sweep_dir=str(path.parent.absolute()), params=params, summaries=summaries)
    return df


def _attr_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_sweep_dataset(
    sweep: str | os.PathLike[str] | pd.DataFrame,
    component: str,
    ports: Sequence[str] | None = None,
    *,
    time: Sequence[float] | np.ndarray | None = None,
    sweep_dir: str | os.PathLike[str] | None = None,
) -> xr.Dataset:
    """The histories of *component* in every run of a sweep as one Dataset along ``run``.

    *sweep* is a sweep directory or a frame from :func:`load_sweep` (filter it
    to choose runs, e.g. ``df[df.status == "complete"]``). Runs have their own
    time grids (events, adaptive steps), so by default the dims are ``(run,
    sample)``: ``time`` and ``micro`` are variables over both, shorter runs are
    padded (NaN, ``micro`` -1) and ``n_samples`` gives each run's length. With
    *time* the ports are put on that common grid instead (dims ``(run, time)``):
    real ports interpolated linearly, others held from the last sample, the value
    right after an event at event instants, NaN outside a run's interval.
    The index columns (status, swept parameters, summaries, ...) become
    coordinates along ``run``; runs without a results file are all NaN.
    """
    import pandas as pd
    import xarray as xr

    from cosimrun.storage.results import load_results

    if isinstance(sweep, pd.DataFrame):
        df = sweep
        root = Path(sweep_dir or df.attrs.get("sweep_dir", "."))
    else:
        df = load_sweep(sweep)
        root = Path(df.attrs["sweep_dir"])
    histories: list[dict[str, Any] | None] = []
    port_info: dict[str, tuple[str | None, str]] = {}
    for rel in df["path"]:
        series = None
        if rel:
            with contextlib.suppress(FileNotFoundError, KeyError, OSError, ValueError):
                res = load_results(root / rel)
                if component in res.components:
                    series = res.history(component, list(ports) if ports is not None else None)
                    for name, s in series.items():
                        port_info.setdefault(name, (s.unit, s.port_type))
        histories.append(series)
    names = list(ports) if ports is not None else list(port_info)
    n_runs = len(df)
    data_vars: dict[str, Any] = {}
    coords: dict[str, Any] = {"run": np.asarray(df.index)}
    if time is None:
        n = max((len(next(iter(h.values()))) for h in histories if h), default=0)
        t = np.full((n_runs, n), np.nan)
        micro = np.full((n_runs, n), -1, dtype=np.int64)
        lengths = np.zeros(n_runs, dtype=np.int64)
        values = {name: _padded(port_info.get(name, (None, "real"))[1], n_runs, n) for name in names}
        for i, h in enumerate(histories):
            if not h:
                continue
            first = next(iter(h.values()))
            k = len(first)
            lengths[i] = k
            t[i, :k], micro[i, :k] = first.time, first.micro
            for name in names:
                if name in h:
                    values[name][i, :k] = h[name].values
        dims = ("run", "sample")
        data_vars["time"] = (dims, t, {"units": "s"})
        data_vars["micro"] = (dims, micro)
        data_vars["n_samples"] = ("run", lengths)
    else:
        grid = np.asarray(time, dtype=np.float64)
        values = {name: _padded(port_info.get(name, (None, "real"))[1], n_runs, len(grid)) for name in names}
        for i, h in enumerate(histories):
            if not h:
                continue
            for name in names:
                if name in h:
                    values[name][i, :] = _on_grid(h[name], grid)
        dims = ("run", "time")
        coords["time"] = ("time", grid, {"units": "s"})
    for name in names:
        unit, kind = port_info.get(name, (None, "real"))
        attrs = {"port_type": kind}
        if unit:
            attrs["units"] = unit
        data_vars[name] = (dims, values[name], attrs)
    for col in df.columns:
        if col not in ("traceback",):
            coords[col] = ("run", np.asarray(df[col]))
    ds = xr.Dataset(data_vars, coords=coords, attrs={"component": component, "sweep_dir": str(root)})
    return ds


def _padded(kind: str, n_runs: int, n: int) -> np.ndarray:
    if kind == "string":
        out = np.empty((n_runs, n), dtype=object)
        out[...] = ""
        return out
    return np.full((n_runs, n), np.nan)


def _on_grid(series: Any, grid: np.ndarray) -> np.ndarray:
    t = np.asarray(series.time, dtype=np.float64)
    v = np.asarray(series.values)
    if len(t) == 0:
        return np.full(len(grid), np.nan)
    # several samples at one instant (events, superdense time): between instants np.interp uses the
    # left limit, at the instant itself the last sample (the value after the event), like the hold below
    inside = (grid >= t[0]) & (grid <= t[-1])
    if series.port_type == "real":
        out = np.interp(grid, t, v.astype(np.float64))
        out[~inside] = np.nan
        return out
    pos = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 1)
    held = v[pos]
    if series.port_type == "string":
        held = held.astype(object)
        held[~inside] = ""
        return held
    held = held.astype(np.float64)
    held[~inside] = np.nan
    return held
