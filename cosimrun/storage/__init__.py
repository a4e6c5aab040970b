"""Run results in HDF5: the streaming writer, the ``Results`` reader, the check of a finished file, what a
sweep reads of a run's file (:mod:`~cosimrun.storage.summary`) and the sweep index file.

Results files and sweep indexes are read and written here only; the runner and the tools ask storage.
"""

from cosimrun.storage.hdf5 import (
    FORMAT,
    FORMAT_VERSION,
    HDF5Writer,
    check_name,
    partial_path,
    write_history,
    write_run_result,
    write_run_summary,
    written_path,
)
from cosimrun.storage.results import PortSeries, Results, load_results
from cosimrun.storage.summary import RunStatus, final_values, largest_coupling_error, read_run_status, results_attrs
from cosimrun.storage.sweep_index import INDEX_FILE, SweepIndex, read_sweep_index, write_sweep_index
from cosimrun.storage.verify import verify_results

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "INDEX_FILE",
    "HDF5Writer",
    "PortSeries",
    "Results",
    "RunStatus",
    "SweepIndex",
    "check_name",
    "final_values",
    "largest_coupling_error",
    "load_results",
    "partial_path",
    "read_run_status",
    "read_sweep_index",
    "results_attrs",
    "write_history",
    "write_run_result",
    "verify_results",
    "write_run_summary",
    "write_sweep_index",
    "written_path",
]
