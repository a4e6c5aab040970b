"""cosimrun's Hydra launcher: run the jobs of a sweep on dask (``hydra/launcher=dask``).

Hydra imports every public module of the ``hydra_plugins`` namespace when it
starts, so this package keeps dask out of them: ``dask_launcher`` holds the
config schema and the ``Launcher`` class, ``_core`` (skipped by Hydra's scan
because of its leading underscore) imports dask when a sweep is launched, and
``_forkserver`` starts the local workers' fork server as the command starts.
"""
