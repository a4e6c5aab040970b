"""Run results in HDF5: the streaming writer and the ``Results`` reader."""

from cosimrun.storage.hdf5 import (
    FORMAT,
    FORMAT_VERSION,
    HDF5Writer,
    check_name,
    partial_path,
    write_history,
    write_run_result,
    write_run_summary,
)
from cosimrun.storage.results import PortSeries, Results, load_results

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "HDF5Writer",
    "PortSeries",
    "Results",
    "check_name",
    "load_results",
    "partial_path",
    "write_history",
    "write_run_result",
    "write_run_summary",
]
