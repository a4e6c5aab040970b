"""``hydra.launcher.chunk_seconds=inf`` is refused in one line, as ``nan`` is (accepted, it ended the sweep with a
raw ``OverflowError`` once the first job's duration sized the chunks, leaving the other jobs not run)."""

from __future__ import annotations

import math

import pytest

from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher


def test_an_infinite_chunk_seconds_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        DaskLauncher(chunk_seconds=math.inf)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("cosimrun: error: hydra.launcher.chunk_seconds=inf cannot work: ")
