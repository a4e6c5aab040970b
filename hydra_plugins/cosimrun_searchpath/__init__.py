"""Hydra search-path plugin: configs of cosimrun plugin packages.

A package that ships experiments declares the package holding its
``experiment/`` folder in the entry-point group ``cosimrun.configs``::

    [project.entry-points."cosimrun.configs"]
    mypkg = "mypkg.conf"

and ``cosimrun +experiment=NAME`` finds them after cosimrun's own.
"""

from hydra_plugins.cosimrun_searchpath.searchpath import CosimrunSearchPathPlugin

__all__ = ["CosimrunSearchPathPlugin"]
