"""cosimrun's Hydra launcher: run the jobs of a sweep on dask (``hydra/launcher=dask``).

Hydra imports every public module of the ``hydra_plugins`` namespace when it
starts, so this package keeps dask out of them: ``dask_launcher`` holds the
config schema and the ``Launcher`` class. The modules with a leading
underscore (skipped by Hydra's scan) are imported when a sweep is launched:
``_core`` launches a batch of jobs, ``_cluster`` connects to dask (or starts a
local cluster), ``_returns`` turns finished tasks into outcomes and Hydra's
``JobReturn``, ``_progress`` shows the sweep's progress. ``_forkserver``
starts the local workers' fork server as the command starts and ``_worker`` is
their preload.
"""
