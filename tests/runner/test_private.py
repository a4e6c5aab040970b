"""The private APIs of Hydra, OmegaConf and distributed that cosimrun relies on still have the shape it uses.

When one of these fails after a library upgrade, read the entry's ``why`` in
``cosimrun/runner/_private.py``: adapt the use to the new version (and update
``checked_with``), or take the public way it names.
"""

from __future__ import annotations

import pytest

from cosimrun.runner import _private
from cosimrun.runner._private import USES, PrivateAPI, PrivateAPIChanged


@pytest.mark.parametrize("api", USES, ids=lambda api: f"{api.module}.{api.name}")
def test_private_api_has_the_shape_cosimrun_uses(api: PrivateAPI) -> None:
    try:
        api.get()
    except PrivateAPIChanged as exc:
        pytest.fail(f"private API changed: {exc}", pytrace=False)


def test_every_private_api_is_listed_once() -> None:
    declared = [v for v in vars(_private).values() if isinstance(v, PrivateAPI)]
    assert sorted(map(PrivateAPI.describe, declared)) == sorted(map(PrivateAPI.describe, USES))
    assert len(set(USES)) == len(USES)


def test_the_basic_sweeper_has_a_launcher_attribute() -> None:
    try:
        sweeper = _private.basic_sweeper(None, None)
    except PrivateAPIChanged as exc:
        pytest.fail(f"private API changed: {exc}", pytrace=False)
    assert sweeper.launcher is None  # until it is set up


def test_a_private_class_is_the_one_its_module_holds_now() -> None:
    """Hydra's plugin scan executes the basic sweeper's module again: the sweeper made afterwards must be of the new
    class, or its methods' ``super(BasicSweeper, self)`` fail (seen when this file's tests ran before a sweep's)."""
    import importlib

    import hydra._internal.core_plugins.basic_sweeper as module

    _private.basic_sweeper(None, None)
    importlib.reload(module)
    sweeper = _private.basic_sweeper(None, None)
    assert type(sweeper) is module.BasicSweeper  # so super(BasicSweeper, sweeper) in its methods works


def test_a_changed_private_api_is_reported_with_what_it_was_for() -> None:
    gone = PrivateAPI("hydra.core.utils", "_no_such_function", checked_with="hydra-core 1.3.8", why="a test", params=())
    with pytest.raises(PrivateAPIChanged, match=r"_no_such_function is gone .*checked with hydra-core 1\.3\.8; a test"):
        gone.get()
    reshaped = PrivateAPI("hydra.core.utils", "_flush_loggers", checked_with="hydra-core 1.3.8", why="x", params=("a",))
    with pytest.raises(PrivateAPIChanged, match=r"takes \(\), expected \(a, \[optional parameters\]\)"):
        reshaped.get()
    retyped = PrivateAPI("distributed.utils", "_forkserver_preload_set", checked_with="d", why="x", kind=str)
    with pytest.raises(PrivateAPIChanged, match="is a bool, not a str"):
        retyped.get()


def test_hydra_error_reporting_hands_errors_to_the_handler_first_and_restores_hydras(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hydra._internal.utils as utils

    # Hydra re-raises instead of reporting under HYDRA_FULL_ERROR=1 or a tracer (a debugger, coverage): neither here
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    monkeypatch.setattr(utils, "is_under_debugger", lambda: False)
    original = utils.run_and_report
    seen: list[Exception] = []

    def handle(exc: Exception) -> None:
        seen.append(exc)
        if isinstance(exc, KeyError):
            raise SystemExit(2)

    def boom(exc: Exception):
        def func():
            raise exc

        return func

    with _private.hydra_error_reporting(handle):
        assert utils.run_and_report(lambda: 42) == 42
        with pytest.raises(SystemExit) as stopped:
            utils.run_and_report(boom(KeyError("x")))
        assert stopped.value.code == 2
        with pytest.raises(SystemExit) as reported:  # not handled: Hydra reports it and exits 1
            utils.run_and_report(boom(ValueError("y")))
        assert reported.value.code == 1
    assert utils.run_and_report is original
    assert [type(e) for e in seen] == [KeyError, ValueError]
