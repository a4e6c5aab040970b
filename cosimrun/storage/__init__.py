"""Run results in HDF5: the streaming writer and the ``Results`` reader."""

from cosimrun.storage.hdf5 import (
    FORMAT,
    FORMAT_VERSION,
    HDF5Writer,
    HistoryStreamer,
    check_name,
    partial_path,
    write_run_result,
)
from cosimrun.storage.results import PortSeries, Results, load_results

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "HDF5Writer",
    "HistoryStreamer",
    "PortSeries",
    "Results",
    "check_name",
    "load_results",
    "partial_path",
    "write_run_result",
]
