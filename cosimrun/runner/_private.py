"""Every private API of a library that the sweep machinery relies on, in one place.

Each :class:`PrivateAPI` names the attribute, how it is used (the parameters it
is called with, the members it must have), the library version it was checked
against and why the public way is not taken (its measured cost, for the
``pendulum_switch`` jobs of ``benchmarks/bench_sweep.py``). The functions below
are the only callers. ``tests/runner/test_private.py`` checks every entry of
:data:`USES` against the installed libraries; at run time, a use whose shape
changed raises :class:`PrivateAPIChanged`, which the callers that have a
public (slower) way catch to take it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import pkgutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cosimrun.errors import CosimrunError


class PrivateAPIChanged(CosimrunError, RuntimeError):
    """A private API cosimrun relies on is missing or has another shape in the installed library."""


@dataclass(frozen=True)
class PrivateAPI:
    """A private attribute of a library and the shape cosimrun relies on."""

    module: str
    name: str
    """Dotted path inside :attr:`module` (``Class.method``)."""
    checked_with: str
    """``distribution version`` it was checked against."""
    why: str
    params: tuple[str, ...] | None = None
    """Leading parameters it is called with (any further ones need defaults); None: not called."""
    members: tuple[str, ...] = ()
    """Attributes it must have."""
    kind: type | None = None
    """The type of a value that is read or set rather than called."""

    def get(self) -> Any:
        """The attribute, checked (once per process) to still have the expected shape.

        Looked up again at every call: Hydra's plugin scan executes plugin modules again, and a class kept from
        before would no longer be the one its own methods' ``super(Class, self)`` names.
        """
        _checked(self)
        return pkgutil.resolve_name(f"{self.module}:{self.name}")

    def describe(self) -> str:
        return f"{self.module}.{self.name} (checked with {self.checked_with}; {self.why})"


@functools.cache
def _checked(api: PrivateAPI) -> Any:
    where = f"{api.module}.{api.name}"
    try:
        obj = pkgutil.resolve_name(f"{api.module}:{api.name}")
    except (ImportError, AttributeError) as exc:
        raise PrivateAPIChanged(f"{where} is gone ({exc}); it was {api.describe()}") from exc
    if api.params is not None:
        problem = _call_problem(obj, api.params)
        if problem:
            raise PrivateAPIChanged(f"{where} {problem}; it was {api.describe()}")
    missing = [m for m in api.members if not hasattr(obj, m)]
    if missing:
        raise PrivateAPIChanged(f"{where} has no {', '.join(missing)}; it was {api.describe()}")
    if api.kind is not None and not isinstance(obj, api.kind):
        kind = f"is a {type(obj).__name__}, not a {api.kind.__name__}"
        raise PrivateAPIChanged(f"{where} {kind}; it was {api.describe()}")
    return obj


def _call_problem(obj: Any, params: Sequence[str]) -> str:
    """Why *obj* cannot be called with *params* first (any further parameter needs a default); "" if it can."""
    try:
        found = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return "is not callable"
    names = [p.name for p in found]
    if names[: len(params)] != list(params) or any(p.default is p.empty for p in found[len(params) :]):
        return f"takes ({', '.join(names)}), expected ({', '.join(params)}, [optional parameters])"
    return ""


OMEGACONF_STR_REPRESENTER = PrivateAPI(
    "omegaconf._utils",
    "OmegaConfDumper.str_representer",
    checked_with="omegaconf 2.3.1",
    why=(
        "OmegaConf.to_yaml emits with PyYAML's pure-Python emitter: 7 ms for a job's task config and 11 ms for "
        "its hydra node against 3 and 5 ms with libyaml's emitter and this representer (quotes strings that read "
        "as other types); with OmegaConf.to_yaml for the .hydra files and the results file's config text a "
        "worker's job took some 50 ms more"
    ),
    params=("dumper", "data"),
)
FLUSH_LOGGERS = PrivateAPI(
    "hydra.core.utils",
    "_flush_loggers",
    checked_with="hydra-core 1.3.8",
    why=(
        "what Hydra's run_job does after the task; the worker runs jobs like run_job without its costs "
        "(the public run_job took 52 ms per job against 17 ms: three deep copies of the config, YAML by "
        "PyYAML's pure-Python emitter), and logging has no public way to flush every handler"
    ),
    params=(),
)
_COMPOSITION = (
    "the driver composes jobs that differ only in values from one shared composition: 5 to 12 ms per job "
    "against 113 to 230 ms for Hydra's full composition (load_sweep_config), measured on a loaded machine"
)
CONFIG_LOADER_IMPL = PrivateAPI(
    "hydra._internal.config_loader_impl",
    "ConfigLoaderImpl",
    checked_with="hydra-core 1.3.8",
    why=_COMPOSITION + " (the loader whose parts the shared compositions use)",
)
PARSE_OVERRIDES_AND_CREATE_CACHING_REPO = PrivateAPI(
    "hydra._internal.config_loader_impl",
    "ConfigLoaderImpl._parse_overrides_and_create_caching_repo",
    checked_with="hydra-core 1.3.8",
    why=_COMPOSITION + " (the config repository with the sweep's search path, to tell config groups from keys)",
    params=("self", "config_name", "overrides"),
)
GROUP_EXISTS = PrivateAPI(
    "hydra._internal.config_repository",
    "CachingConfigRepository.group_exists",
    checked_with="hydra-core 1.3.8",
    why=_COMPOSITION + " (whether an override names a config group)",
    params=("self", "config_path"),
)
APPLY_OVERRIDES_TO_CONFIG = PrivateAPI(
    "hydra._internal.config_loader_impl",
    "ConfigLoaderImpl._apply_overrides_to_config",
    checked_with="hydra-core 1.3.8",
    why=_COMPOSITION + " (a job's value overrides applied to a copy of the shared composition, as Hydra does)",
    params=("overrides", "cfg"),
)
GET_OVERRIDES_DIRNAME = PrivateAPI(
    "hydra._internal.config_loader_impl",
    "get_overrides_dirname",
    checked_with="hydra-core 1.3.8",
    why=_COMPOSITION + " (hydra.job.override_dirname, as Hydra derives it)",
    params=("overrides", "exclude_keys", "item_sep", "kv_sep"),
)
BASIC_SWEEPER = PrivateAPI(
    "hydra._internal.core_plugins.basic_sweeper",
    "BasicSweeper",
    checked_with="hydra-core 1.3.8",
    why=(
        "cosimrun's sweeper is Hydra's basic sweeper (expansion, batches, hydra.sweeper.params) with a cheaper "
        "batch check; the basic sweeper composes every job in full to check it (113 to 230 ms per job, measured "
        "on a loaded machine) and has no public import path"
    ),
    params=("max_batch_size", "params"),
    members=("setup", "sweep", "validate_batch_is_legal"),
)
DISTRIBUTED_FORKSERVER_PRELOAD_SET = PrivateAPI(
    "distributed.utils",
    "_forkserver_preload_set",
    checked_with="distributed 2026.8.0",
    why=(
        "distributed fills the fork server's preload list on first use, importing pandas into the driver only "
        "for that (0.5 s per sweep, while the cluster starts); cosimrun's fork server runs with its own list"
    ),
    kind=bool,
)
RUN_AND_REPORT = PrivateAPI(
    "hydra._internal.utils",
    "run_and_report",
    checked_with="hydra-core 1.3.8",
    why=(
        "Hydra reports an error raised while it parses the overrides or composes the config (a YAML syntax "
        "error, a key missing from the schema, a value of the wrong type) in several lines or a traceback with "
        "exit status 1, and offers no hook; the cosimrun command wraps this function, looked up by Hydra's "
        "_run_hydra and _run_app at each call, to say such errors in one line with exit status 2 and hand every "
        "other error to it"
    ),
    params=("func",),
)

USES: tuple[PrivateAPI, ...] = (
    OMEGACONF_STR_REPRESENTER,
    FLUSH_LOGGERS,
    CONFIG_LOADER_IMPL,
    PARSE_OVERRIDES_AND_CREATE_CACHING_REPO,
    GROUP_EXISTS,
    APPLY_OVERRIDES_TO_CONFIG,
    GET_OVERRIDES_DIRNAME,
    BASIC_SWEEPER,
    DISTRIBUTED_FORKSERVER_PRELOAD_SET,
    RUN_AND_REPORT,
)
"""Every private API used, for the test that checks them."""


def omegaconf_str_representer() -> Callable[[Any, str], Any]:
    """OmegaConf's YAML representer of strings, for a dumper on libyaml's emitter."""
    return OMEGACONF_STR_REPRESENTER.get()


def flush_loggers() -> None:
    """Flush every logging handler, as Hydra's ``run_job`` does after the task."""
    FLUSH_LOGGERS.get()()


class ValueOverrides:
    """Hydra's config loader parts that apply a job's value overrides to a shared composition.

    For Hydra 1.3's own config loader; ``PrivateAPIChanged`` for another loader or version.
    """

    def __init__(self, loader: Any, config_name: str | None, hydra_overrides: list[str]) -> None:
        if not isinstance(loader, CONFIG_LOADER_IMPL.get()):
            raise PrivateAPIChanged(f"the config loader is a {type(loader).__name__}, not Hydra's ConfigLoaderImpl")
        GROUP_EXISTS.get()  # the repository's method used below, checked first
        _, self._repo = PARSE_OVERRIDES_AND_CREATE_CACHING_REPO.get()(loader, config_name, hydra_overrides)
        APPLY_OVERRIDES_TO_CONFIG.get()  # checked here: jobs composed from shared compositions need them
        GET_OVERRIDES_DIRNAME.get()

    def group_exists(self, key: str) -> bool:
        """Whether *key* names a config group (in the sweep's search path, ``hydra.searchpath`` included)."""
        return bool(self._repo.group_exists(key))



def apply_value_overrides(overrides: list[Any], config: Any) -> None:
    """Apply parsed value overrides to *config*, as Hydra's composition does (no config loader needed)."""
    APPLY_OVERRIDES_TO_CONFIG.get()(overrides, config)


def overrides_dirname(overrides: list[Any], exclude_keys: list[str], item_sep: str, kv_sep: str) -> str:
    """``hydra.job.override_dirname`` of parsed overrides, as Hydra derives it."""
    return str(GET_OVERRIDES_DIRNAME.get()(overrides=overrides, exclude_keys=exclude_keys, item_sep=item_sep,
                                           kv_sep=kv_sep))


def basic_sweeper(max_batch_size: int | None, params: dict[str, str] | None) -> Any:
    """A Hydra ``BasicSweeper``; its ``launcher`` attribute holds the launcher once it is set up."""
    sweeper = BASIC_SWEEPER.get()(max_batch_size, params)
    if not hasattr(sweeper, "launcher"):
        raise PrivateAPIChanged(f"a BasicSweeper has no launcher attribute; it was {BASIC_SWEEPER.describe()}")
    return sweeper


def skip_distributed_forkserver_preload() -> None:
    """Tell distributed the fork server's preload list is set, so that it does not compute one of its own."""
    import distributed.utils

    DISTRIBUTED_FORKSERVER_PRELOAD_SET.get()
    distributed.utils._forkserver_preload_set = True


@contextlib.contextmanager
def hydra_error_reporting(handle: Callable[[Exception], None]) -> Iterator[None]:
    """Inside the block Hydra's error reporting first calls *handle* with each error, which may exit (``SystemExit``).

    Errors *handle* returns from go on to Hydra's ``run_and_report`` as before.
    ``PrivateAPIChanged`` when that function is gone or has another shape.
    """
    import hydra._internal.utils as utils

    original = RUN_AND_REPORT.get()

    def run_and_report(func: Callable[[], Any]) -> Any:
        def handled() -> Any:
            try:
                return func()
            except Exception as exc:
                handle(exc)
                raise

        return original(handled)

    utils.run_and_report = run_and_report
    try:
        yield
    finally:
        utils.run_and_report = original
