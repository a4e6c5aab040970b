"""The worker's side of a sweep job: run a config composed on the driver (or made here), report an outcome.

:func:`run_hydra_job` runs one job; the dask launcher submits jobs in chunks
(:func:`run_hydra_chunk`). It
installs the driver's Hydra state and the sweep's callbacks once per process
(:func:`worker_state`), marks the attempt as started (so that the driver can
tell a job lost while running from one that only waited on a dying worker,
see :func:`started`) and runs the job with :func:`run_composed_job`: what
Hydra's ``run_job`` does (job directory, ``.hydra`` files, job logging,
``hydra.job.env_set``, callbacks, working directory), without the copies of
the config ``run_job`` makes to guard a config it does not own (the worker
owns the one it unpickled) and with libyaml's emitter, which a sweep of short
jobs notices (``benchmarks/bench_sweep.py``).

Nothing here imports dask (only :func:`_worker_address` asks for the worker
it runs on, when there is one).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hydra.core.utils import JobReturn

from cosimrun.runner import signals
from cosimrun.runner._private import flush_loggers
from cosimrun.runner.configtext import dump, forget_experiment_dirs, task_overrides
from cosimrun.runner.joblog import configure_job_log
from cosimrun.runner.layout import register_resolver
from cosimrun.runner.outcome import JobOutcome, describe_exception

if TYPE_CHECKING:
    from hydra.types import TaskFunction
    from omegaconf import DictConfig

    from cosimrun.runner.compose import KeptConfigs
    from cosimrun.runner.plainjob import ResolvedComposition


@dataclass
class JobPayload:
    """A job on its way to a worker: number, overrides and its config pickled, or the shared composition it is
    made from (pickled once per sweep and sent with each chunk) and what :func:`~cosimrun.runner.compose.apply_job`
    needs to make it."""

    num: int
    overrides: list[str]
    config: bytes
    """The job's config pickled; with :attr:`values`, the shared composition the job's config is made from."""
    job_dir: str
    values: list[str] | None = None
    """The job's value overrides, applied on the worker; None: :attr:`config` is the job's."""
    app: list[str] = field(default_factory=list)
    """The job's overrides without Hydra's own (``hydra.overrides.task``)."""
    cache: dict[str, Any] = field(default_factory=dict)
    """The resolver cache of the sweep's config (``${now:...}`` as the driver resolved it)."""
    sweep_dir: str = ""
    sweep_files: bool = False
    """The sweep's ``.hydra`` config files are at its root (:func:`write_sweep_files`): the job writes its
    ``overrides.yaml`` only."""

    def to_config(self) -> DictConfig:
        """A new copy of the job's full config (``hydra`` node included) for each call."""
        config = pickle.loads(self.config)
        if self.values is not None:
            from cosimrun.runner.compose import apply_job  # compose imports this module

            apply_job(config, self.values, self.app, self.cache, self.num, self.sweep_dir)
        return config

    def configs(self) -> tuple[DictConfig, DictConfig]:
        """``(task config, full config)``: new copies, the task's without the ``hydra`` node (as ``run_job``'s).

        The task's is made from the shared composition without its ``hydra`` node (made once per process and
        composition), with the job's value overrides and the sweep's resolver cache: the same config as the
        full one without that node, at a fraction of the cost of a second full copy.
        """
        if self.values is None:
            return _without_hydra(pickle.loads(self.config)), self.to_config()
        return self.task_config(), self.to_config()

    def job_configs(self) -> tuple[DictConfig, DictConfig]:
        """``(task config, full config)`` as :meth:`configs`, the full one this process's own and reused by its
        next job of the same composition (:func:`_job_config`): what a worker runs a job with. Unpickling a new
        full config was the largest part of a short job's cost."""
        if self.values is None:
            return self.configs()
        return self.task_config(), _job_config(self)

    def task_config(self) -> DictConfig:
        """The task's config, made from the shared composition (see :meth:`configs`)."""
        from omegaconf import OmegaConf

        from cosimrun.runner._private import apply_value_overrides
        from cosimrun.runner.compose import parsed_overrides  # compose imports this module

        assert self.values is not None
        task_cfg = pickle.loads(_task_base(self.config))
        apply_value_overrides(parsed_overrides(self.values), task_cfg)
        OmegaConf.set_cache(task_cfg, self.cache)
        return task_cfg


def _without_hydra(config: DictConfig) -> DictConfig:
    """*config* without its ``hydra`` node (in place)."""
    from omegaconf import open_dict, read_write

    with read_write(config), open_dict(config):
        del config["hydra"]
    return config


_TASK_BASES: dict[bytes, bytes] = {}
"""Pickled shared compositions -> the same without their ``hydra`` node, pickled (:func:`_task_base`)."""
_TASK_BASES_KEPT = 8


def _task_base(config: bytes) -> bytes:
    """The shared composition *config* (pickled) without its ``hydra`` node, pickled; made once per process."""
    from cosimrun.runner.compose import pickle_config  # compose imports this module

    return _kept(_TASK_BASES, config, lambda: pickle_config(_without_hydra(pickle.loads(config))))


_T = TypeVar("_T")


def _kept(cache: dict[bytes, _T], composition: bytes, make: Callable[[], _T]) -> _T:
    """*cache*'s entry for the shared *composition* (pickled), made by *make* when missing (an error of *make* is
    raised, nothing kept); a cache holds :data:`_TASK_BASES_KEPT` compositions at the most. The entry is read
    once and the one made returned as made: a job in another thread of the process may clear the cache at any
    moment."""
    try:
        return cache[composition]
    except KeyError:
        pass
    made = make()
    if len(cache) >= _TASK_BASES_KEPT:
        cache.clear()
    cache[composition] = made
    return made


@functools.cache
def kept_configs() -> KeptConfigs:
    """This process's jobs' full configs, one kept per shared composition and value-override keys (see
    :meth:`JobPayload.job_configs`)."""
    from cosimrun.runner.compose import KeptConfigs  # compose imports this module

    return KeptConfigs()


def _job_config(payload: JobPayload) -> DictConfig:
    """Job *payload*'s full config, remade from the one this process's last job of the same shared composition
    and value-override keys used: equal to :meth:`JobPayload.to_config`'s new copy."""
    assert payload.values is not None
    return kept_configs().made(payload.config, payload.values, payload.app, payload.cache, payload.num,
                               payload.sweep_dir)


_COMPOSITIONS: dict[bytes, tuple[ResolvedComposition, tuple[str, tuple[tuple[str, str], ...]]] | None] = {}
"""Pickled shared compositions -> their task config resolved once and the experiment source of their jobs
(:func:`~cosimrun.runner.configtext.experiment_source`); None: OmegaConf resolves each job's (:func:`_resolved_job`)."""


def _resolved_job(payload: JobPayload, config: DictConfig) -> tuple[dict[str, Any], str]:
    """``(plain, text)`` of job *payload* as :func:`~cosimrun.runner.configtext.resolved` gives them from its task
    config (*config*: its full config, Hydra's config of the running job), made from its shared composition's
    resolved once (:mod:`cosimrun.runner.plainjob`) where that gives the same."""
    from cosimrun.runner.compose import parsed_overrides  # compose imports this module
    from cosimrun.runner.configtext import job_experiment_dir, relocated, resolved

    assert payload.values is not None
    composition = _resolved_composition(payload, config)
    if composition is not None:
        resolved_task, source = composition
        keys = [str(o.key_or_group) for o in parsed_overrides(payload.values)]
        plain = resolved_task.job(config, keys)
        if plain is not None:
            return relocated(plain, job_experiment_dir(*source), resolved_task.unchanged_texts(keys))
    return resolved(payload.task_config())


def _resolved_composition(
    payload: JobPayload, config: DictConfig
) -> tuple[ResolvedComposition, tuple[str, tuple[tuple[str, str], ...]]] | None:
    """:data:`_COMPOSITIONS`'s entry of *payload*'s shared composition, made by its first job (*config*: that job's
    full config); None also when resolving it failed (its job's own resolution reports why)."""
    from omegaconf import OmegaConf

    from cosimrun.runner.configtext import experiment_source
    from cosimrun.runner.plainjob import ResolvedComposition

    def make() -> tuple[ResolvedComposition, tuple[str, tuple[tuple[str, str], ...]]] | None:
        task_cfg = pickle.loads(_task_base(payload.config))
        OmegaConf.set_cache(task_cfg, payload.cache)
        made = ResolvedComposition.of(task_cfg)
        return None if made is None else (made, experiment_source(config.hydra))

    try:
        return _kept(_COMPOSITIONS, payload.config, make)
    except Exception:
        return None


@dataclass(frozen=True)
class JobSettings:
    """What :func:`run_composed_job` reads of a job's ``hydra`` node besides the job's own fields: the same for every
    job of a shared composition (value overrides set no ``hydra`` key) unless one of them is an interpolation."""

    chdir: bool
    """``hydra.job.chdir``."""
    output_subdir: str | None
    """``hydra.output_subdir``."""
    env_set: dict[str, Any]
    """``hydra.job.env_set``, resolved as Hydra's ``run_job`` resolves it."""
    log_config: Any
    """``hydra.job_logging`` unresolved as plain data (see :func:`~cosimrun.runner.joblog.configure_job_log`)."""
    shared: bool
    """Whether none of ``chdir``, ``output_subdir`` and ``env_set`` is an interpolation, which may give each job
    another value (``${hydra:job.num}``): only then are the settings kept for the composition's other jobs."""

    @classmethod
    def of(cls, hydra: DictConfig) -> JobSettings:
        """The settings of the job whose ``hydra`` node is *hydra* (its interpolations resolved: call it with the
        job's Hydra config set)."""
        from omegaconf import OmegaConf

        job = hydra.job
        subdir, log_config, env = hydra.output_subdir, hydra.job_logging, job.env_set
        shared = not (OmegaConf.is_interpolation(hydra, "output_subdir") or OmegaConf.is_interpolation(job, "chdir")
                      or OmegaConf.is_interpolation(job, "env_set")
                      or any(OmegaConf.is_interpolation(env, key) for key in env))
        env_set = OmegaConf.to_container(env, resolve=True)
        assert isinstance(env_set, dict)
        return cls(bool(job.chdir), None if subdir is None else str(subdir), env_set,  # type: ignore[arg-type]
                   None if log_config is None else OmegaConf.to_container(log_config, resolve=False), shared)


_SETTINGS: dict[bytes, JobSettings] = {}
"""Pickled shared compositions -> the :class:`JobSettings` of their jobs (:func:`_settings`)."""


def _settings(payload: JobPayload, hydra: DictConfig) -> JobSettings:
    """The :class:`JobSettings` of job *payload*, whose ``hydra`` node is *hydra*: read once per shared composition
    and process when they are :attr:`~JobSettings.shared`, else for each job."""
    if payload.values is None:
        return JobSettings.of(hydra)
    settings = _kept(_SETTINGS, payload.config, lambda: JobSettings.of(hydra))
    return settings if settings.shared else JobSettings.of(hydra)


def idle_hook(callbacks: JobCallbacks, hook: str) -> bool:
    """Whether Hydra's *callbacks* do nothing on *hook* (each callback has Hydra's empty method)."""
    from hydra.experimental.callback import Callback

    listed = getattr(callbacks, "callbacks", None)
    return isinstance(listed, list) and all(getattr(type(c), hook, None) is getattr(Callback, hook) for c in listed)


STARTED_FILE = ".cosimrun-started"
"""In a job directory: one line ``<launch token> <attempt>`` per attempt that started on a worker."""


def mark_started(job_dir: str | os.PathLike[str], token: str, attempt: int) -> bool:
    """Note in the job directory that this attempt started (before anything that might crash); whether the
    directory was made now (the job need not make it again).

    Once per attempt: dask runs a finished job again when the worker holding its
    result died before the driver fetched it; the file keeps the time of the
    attempt's first start, so that the results file that run completed still
    counts as written since (:func:`written_since_start`).
    """
    made = False
    try:
        Path(job_dir).mkdir(parents=True)  # a new directory: no attempt started in it
        made = True
    except FileExistsError:
        if started(job_dir, token, attempt):
            return False
    except OSError:  # a read-only or vanished directory: the job will report it
        return False
    try:
        with open(Path(job_dir) / STARTED_FILE, "a", encoding="utf-8") as f:
            f.write(f"{token} {attempt}\n")
    except OSError:  # a read-only or vanished directory: the job will report it
        pass
    return made


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


def written_since_start(job_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether *path* was last written after the latest attempt in *job_dir* started (not a file of an earlier run).

    Both times come from the file system the worker wrote them to.
    """
    try:
        return Path(path).stat().st_mtime_ns >= (Path(job_dir) / STARTED_FILE).stat().st_mtime_ns
    except OSError:
        return False


class JobCallbacks(Protocol):
    """The job hooks of Hydra's callbacks: ``HydraContext.callbacks`` of the sweep, as Hydra's launchers call them."""

    def on_job_start(self, config: DictConfig, *, task_function: TaskFunction, **kwargs: Any) -> None: ...

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None: ...


@dataclass
class ComposedJobReturn(JobReturn):
    """Hydra's ``JobReturn`` of :func:`run_composed_job`, with the exception of a failed task at hand."""

    error: Exception | None = None
    """What the task raised (``return_value`` would raise it again, with a line on stderr).

    ``cfg``, the task's config, is None when cosimrun's task ran on the job's config resolved without it
    (:func:`run_composed_job`) and no callback's ``on_job_end`` reads it."""


@contextlib.contextmanager
def hydra_config(config: DictConfig) -> Iterator[None]:
    """``HydraConfig.get()`` reads ``config.hydra`` inside the block (so ``${hydra:...}`` resolves), as in a job.

    The config is set as it is, not through ``HydraConfig.set_config``, which
    copies it: the caller owns it.
    """
    from hydra.core.hydra_config import HydraConfig

    instance = HydraConfig.instance()
    saved = instance.cfg
    instance.cfg = config
    try:
        yield
    finally:
        instance.cfg = saved


def run_composed_job(payload: JobPayload, task_function: TaskFunction, callbacks: JobCallbacks, *,
                     dir_made: bool = False) -> ComposedJobReturn:
    """Run *payload* like Hydra's ``run_job(..., job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")``.

    The same job directory (``payload.job_dir``, computed on the driver from
    those keys), ``hydra.runtime.output_dir``, working directory
    (``hydra.job.chdir``), job logging, ``.hydra/{config,hydra,overrides}.yaml``
    (same text), ``hydra.job.env_set``, *callbacks* and ``JobReturn``. The
    config is not copied: the full one, Hydra's config for ``HydraConfig.get()``
    and ``${hydra:...}``, is this process's own (:meth:`JobPayload.job_configs`),
    the task's, without its ``hydra`` node, is a new one. cosimrun's own task
    (:func:`~cosimrun.runner.sweep.sweep_job`) of a job made from a shared
    composition gets no task config: it runs on the job's config resolved from
    the composition's, resolved once (:func:`_resolved_job`), the same that
    resolving its task config gives. *dir_made*: the job directory was made just now (:func:`mark_started`), and
    is not made again.
    """
    from hydra.core.utils import JobRuntime, JobStatus, env_override
    from omegaconf import OmegaConf, open_dict, read_write

    from cosimrun.runner.sweep import JobPlace, run_sweep_job, sweep_job

    plain_task = task_function is sweep_job and payload.values is not None and payload.sweep_files
    task_cfg, config = (None, _job_config(payload)) if plain_task else payload.job_configs()
    output_dir = os.path.abspath(payload.job_dir)
    hydra = config.hydra
    runtime = hydra.runtime
    with read_write(runtime), open_dict(runtime):
        runtime.output_dir = output_dir
    OmegaConf.set_readonly(hydra, True)

    old_cwd = os.getcwd()
    chdir = False
    try:
        with hydra_config(config):
            settings = _settings(payload, hydra)  # its interpolations may read the job's Hydra config
            chdir = settings.chdir
            overrides = task_overrides(hydra) if payload.values is None else list(payload.app)  # what apply_job set
            ret = ComposedJobReturn(overrides=overrides, cfg=task_cfg, hydra_cfg=config)
            if not dir_made:
                Path(output_dir).mkdir(parents=True, exist_ok=True)
            if chdir:
                os.chdir(output_dir)
            ret.working_dir = os.getcwd()
            configure_job_log(hydra.job_logging, hydra.verbose, settings.log_config)
            if settings.output_subdir is not None:
                files = Path(output_dir) / settings.output_subdir
                files.mkdir(parents=True, exist_ok=True)
                # the sweep's config.yaml and hydra.yaml are at its root (write_sweep_files)
                written = [("overrides.yaml", overrides)] if payload.sweep_files else hydra_files(task_cfg, hydra)
                for name, data in written:
                    (files / name).write_text(dump(data), encoding="utf-8")
            with env_override(settings.env_set):
                callbacks.on_job_start(config=config, task_function=task_function)
                try:
                    ret.return_value = (task_function(task_cfg) if not plain_task else run_sweep_job(
                        lambda: _resolved_job(payload, config),
                        JobPlace(Path(output_dir), overrides, payload.num, Path(payload.sweep_dir).absolute())))
                    ret.status = JobStatus.COMPLETED
                except Exception as exc:
                    ret.return_value = exc
                    ret.error = exc
                    ret.status = JobStatus.FAILED
            ret.task_name = JobRuntime.instance().get("name")
            flush_loggers()
            if ret.cfg is None and not idle_hook(callbacks, "on_job_end"):
                ret.cfg = payload.task_config()
            callbacks.on_job_end(config=config, job_return=ret)
            return ret
    finally:
        if chdir:
            os.chdir(old_cwd)


def hydra_files(task_cfg: DictConfig, hydra: DictConfig) -> list[tuple[str, Any]]:
    """``(file name, content)`` of the ``.hydra`` files of a job with config *task_cfg* and Hydra node *hydra*, as
    Hydra's ``run_job`` writes them."""
    from omegaconf import OmegaConf

    return [("config.yaml", task_cfg),
            ("hydra.yaml", {"hydra": OmegaConf.to_container(hydra, resolve=False, enum_to_str=True)}),
            ("overrides.yaml", hydra.overrides.task)]


def write_sweep_files(sweep_dir: str | os.PathLike[str], payload: JobPayload, sweep_overrides: list[str]) -> None:
    """Write the ``.hydra`` files of a sweep at its root, once per launch: ``config.yaml`` and ``hydra.yaml`` of its
    first job *payload*, ``overrides.yaml`` with the sweep's overrides (*sweep_overrides*, as typed).

    The jobs then write their ``overrides.yaml`` only (:attr:`JobPayload.sweep_files`): a job's config is the
    composition of the sweep's primary config with those overrides, under the sweep's ``hydra.yaml`` settings, and
    its results file keeps it resolved (``config_yaml``). Nothing is written when ``hydra.output_subdir`` is null.
    """
    task_cfg, config = payload.configs()
    hydra = config.hydra
    if hydra.output_subdir is None:
        return
    files = Path(sweep_dir) / str(hydra.output_subdir)
    files.mkdir(parents=True, exist_ok=True)
    for name, data in hydra_files(task_cfg, hydra):
        temporary = files / f".{name}.{os.getpid()}.tmp"
        temporary.write_text(dump(list(sweep_overrides) if name == "overrides.yaml" else data), encoding="utf-8")
        temporary.replace(files / name)


@functools.cache
def _load_for_jobs() -> None:
    """Import what every job needs, and cosimrun's own components (not third-party code); once per process."""
    from cosimrun import plugins
    from cosimrun.runner import run, sweep  # noqa: F401

    registry = plugins.get_registry()
    for name in plugins.component_names():
        with contextlib.suppress(Exception):  # a broken entry point is the job's to report
            if plugins.distribution_name(registry.entry_point(name)) == "cosimrun":
                registry.get_component_class(name)


def warm_up(release_frozen: bool = False) -> None:
    """Prepare this process for jobs before the first arrives: imports, builtin components, a frozen heap.

    Called by the dask launcher's worker preload while the cluster starts, and
    by :func:`run_hydra_job` when a sweep's first job arrives. ``gc.freeze``
    moves the objects alive now (modules, Hydra's config store, the unit
    registry) out of the collector's sight, so that the collections a job's
    allocations trigger do not scan them again and again. *release_frozen*
    first returns what an earlier freeze kept (an earlier sweep's Hydra state,
    on a long-lived worker) to the collector, at the price of one full scan.
    """
    import gc

    from cosimrun.fmi.instance import drop_kept_instances

    register_resolver()
    _load_for_jobs()
    forget_experiment_dirs()
    if release_frozen:
        drop_kept_instances()  # another sweep's
        gc.unfreeze()
    gc.collect()
    gc.freeze()


def keep_workers_fmus() -> None:
    """Keep FMU instances between the jobs of this worker process: the next job of an FMU resets the instance the
    last one ended with instead of extracting, loading and instantiating it again (see
    :func:`~cosimrun.fmi.instance.keep_instances`; a job that does not complete drops them, :func:`run_hydra_job`)."""
    from cosimrun.fmi.instance import keep_instances

    keep_instances()


def worker_state(callbacks: JobCallbacks) -> bytes:
    """What :func:`run_hydra_job` installs once per worker process: Hydra's ``Singleton`` state and *callbacks*.

    Pickled once per sweep (``cloudpickle``) on the driver, like the state and
    ``HydraContext`` that Hydra's own launchers hand to their jobs.
    """
    import cloudpickle
    from hydra.core.singleton import Singleton

    return cloudpickle.dumps((Singleton.get_state(), callbacks))


_job_lock = threading.Lock()
_installed_state: str | None = None
_callbacks: JobCallbacks | None = None


def install_state(state: bytes, state_token: str) -> None:
    """Install the driver's Hydra state and the sweep's callbacks (:func:`worker_state`) once per worker process
    and launch (*state_token*), then Hydra's globals for the next job."""
    global _installed_state, _callbacks
    from hydra.core.singleton import Singleton
    from hydra.core.utils import setup_globals

    if _installed_state != state_token:
        import cloudpickle

        singletons, _callbacks = cloudpickle.loads(state)
        Singleton.set_state(singletons)
        warm_up(release_frozen=_installed_state is not None)
        _installed_state = state_token
        if _worker_address():
            keep_workers_fmus()
    setup_globals()


def run_hydra_job(
    payload: JobPayload, task_function: TaskFunction, state: bytes, state_token: str, attempt: int = 1
) -> JobOutcome:
    """Run one composed job on a worker; never raises for a failed job.

    *state* is :func:`worker_state` of the driver, installed once per worker
    process (identified by *state_token*). A task that raises (or exits)
    becomes a ``failed`` outcome with the error and traceback. Jobs in one
    worker process run one at a time: Hydra's config singletons and the
    working directory are process-wide.
    """
    from cosimrun.runner.sweep import managed_job

    with _job_lock:
        start = time.perf_counter()
        signals.watch_crashes(say=False)  # a crash in native code: its cause for the driver (signals.crash_cause)
        dir_made = mark_started(payload.job_dir, state_token, attempt)
        value: Any
        try:
            install_state(state, state_token)
            assert _callbacks is not None
            with managed_job():
                ret = run_composed_job(payload, task_function, _callbacks, dir_made=dir_made)
            if ret.error is not None:
                error, trace = describe_exception(ret.error)
                value = JobOutcome(payload.num, "failed", payload.overrides, error=error, traceback=trace)
            else:
                value = ret.return_value
        except BaseException as exc:  # SystemExit or KeyboardInterrupt from a task, or Hydra failing on this job
            if isinstance(exc, KeyboardInterrupt) and signals.from_signal(exc):  # the worker is being closed
                raise
            error, trace = describe_exception(exc)
            value = JobOutcome(payload.num, "failed", payload.overrides, error=error, traceback=trace)
        if not isinstance(value, JobOutcome):  # a task function that is not cosimrun's: keep its value
            value = JobOutcome(payload.num, "complete", payload.overrides, summaries={"return_value": value})
        if value.status != "complete":  # no FMU instance a job failed in runs the next one
            from cosimrun.fmi.instance import drop_kept_instances

            drop_kept_instances()
        value.job_time_s = time.perf_counter() - start
        value.attempts = attempt
        value.worker = _worker_address()
        return value


def run_hydra_chunk(
    payloads: list[JobPayload], task_function: TaskFunction, state: bytes, state_token: str, attempts: list[int]
) -> list[JobOutcome]:
    """Run the jobs of a chunk one after the other, each as :func:`run_hydra_job` (a failing job fails alone;
    each marks its start, so that the driver can tell which jobs of a chunk a dying worker had run)."""
    from cosimrun.storage.chunkfile import chunk_results

    outcomes = []
    with chunk_results(chunk_file(payloads[0], state_token, attempts[0])) as chunk:
        for i, (payload, attempt) in enumerate(zip(payloads, attempts, strict=True)):
            chunk.num = payload.num
            outcome = run_hydra_job(payload, task_function, state, state_token, attempt)
            if i < len(payloads) - 1:  # kept should the worker die before the chunk ends
                save_outcome(payload.job_dir, state_token, attempt, outcome)
            outcomes.append(outcome)
    return outcomes


def chunk_file(first: JobPayload, token: str, attempt: int) -> Path:
    """The results file of the chunk whose first job is *first* under ``storage.layout: per_chunk``:
    ``<sweep dir>/chunks/<first // 1000>k/chunk-<first>-<launch token>-<attempt>.h5``, unique per chunk task (a
    job run again, alone or in another chunk, lands in another file)."""
    from cosimrun.runner.layout import SHARD_SIZE

    sweep_dir = Path(first.sweep_dir or Path(first.job_dir).parent)
    return sweep_dir / "chunks" / f"{first.num // SHARD_SIZE}k" / f"chunk-{first.num}-{token}-{attempt}.h5"


OUTCOME_FILE = ".cosimrun-outcome.json"
"""In a job directory: the outcome of the job's last attempt that finished inside a chunk."""


def save_outcome(job_dir: str, token: str, attempt: int, outcome: JobOutcome) -> None:
    """Leave *outcome* of attempt *attempt* of launch *token* in *job_dir* (:func:`finished_outcome` reads it): a job
    that finished inside a task (a chunk's, an ensemble's rerun of a member) keeps its outcome should the worker
    die before the task returns."""
    import json

    from cosimrun.runner.outcome import outcome_row
    from cosimrun.storage.sweep_index import json_value

    record = {"token": token, "attempt": attempt, "outcome": outcome_row(outcome)}
    with contextlib.suppress(OSError):  # a read-only or vanished directory: the chunk's result still says
        (Path(job_dir) / OUTCOME_FILE).write_text(json.dumps(record, default=json_value), encoding="utf-8")


def finished_outcome(job_dir: str | os.PathLike[str], token: str, attempt: int) -> JobOutcome | None:
    """The outcome attempt *attempt* of launch *token* left in *job_dir* when it finished inside a chunk (None
    when it did not finish there)."""
    import json

    from cosimrun.runner.outcome import outcome_from_row

    try:
        record = json.loads((Path(job_dir) / OUTCOME_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if record.get("token") != token or record.get("attempt") != attempt:
        return None
    return outcome_from_row(record["outcome"])


def _worker_address() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:
        return ""
