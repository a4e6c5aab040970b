"""Run results in HDF5: the streaming writer, the ``Results`` reader and the check of a finished file."""

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
from cosimrun.storage.verify import verify_results

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
    "verify_results",
    "write_run_summary",
]
