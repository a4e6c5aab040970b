"""``hydra.launcher.chunk_seconds=inf`` passes the launcher's check (a number >= 0) and then ends the sweep with a
raw ``OverflowError`` once the first job's duration sizes the chunks (``math.floor(inf / mean)`` in
``_Batch._target_size``), leaving the other jobs not run. It must be refused in one line, as ``nan`` is."""

from __future__ import annotations

import math

import pytest

from hydra_plugins.cosimrun_dask_launcher.dask_launcher import DaskLauncher


@pytest.mark.xfail(strict=True, reason="DaskLauncher accepts chunk_seconds=inf (hydra_plugins/cosimrun_dask_launcher/"
                                       "dask_launcher.py, the chunk_seconds >= 0 check) and _core._Batch._target_size "
                                       "raises OverflowError on it")
def test_an_infinite_chunk_seconds_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        DaskLauncher(chunk_seconds=math.inf)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("cosimrun: error: hydra.launcher.chunk_seconds=inf cannot work: ")
