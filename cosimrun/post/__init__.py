"""Looking at results without writing code: plot, report, compare and export runs and sweeps.

Each command is one module with the Python function it wraps
(:func:`~cosimrun.post.plot.plot_run`, :func:`~cosimrun.post.report.write_report`,
:func:`~cosimrun.post.compare.compare`, :func:`~cosimrun.post.export.export`), its
``add_arguments(parser)`` and ``run(args)``; :mod:`cosimrun.post.commands`
dispatches ``cosimrun NAME ...`` to them, and :mod:`cosimrun.post.signals` reads
what they all read.
"""
