"""The FMI subsystem: what cosimrun knows of FMI 2.0 and 3.0, below the FMU components.

One job per module:

* :mod:`~cosimrun.fmi.fmi2`, :mod:`~cosimrun.fmi.fmi3`: the FMI 2.0 and 3.0 C
  APIs through ctypes (signatures, instances, FMU states, log messages);
  :mod:`~cosimrun.fmi.me`: the model-exchange calls of both versions;
* :mod:`~cosimrun.fmi.description`: reading and checking an FMU file
  (:func:`~cosimrun.fmi.description.read_fmu`), into the classes of
  :mod:`~cosimrun.fmi.model` with the units of :mod:`~cosimrun.fmi.units`;
* :mod:`~cosimrun.fmi.extraction`: size limits and the hash-keyed extraction cache;
* :mod:`~cosimrun.fmi.instance`: :class:`~cosimrun.fmi.instance.FMUInstance`,
  one per FMU a component runs, composed of a part per concern: the library
  (:class:`~cosimrun.fmi.instance.Library`), the ports
  (:mod:`~cosimrun.fmi.ports`), the parameter and start values
  (:mod:`~cosimrun.fmi.parameters`), and per instantiation a co-simulation
  :class:`~cosimrun.fmi.step.Stepper` (discard, early return, stop requests,
  the step split around its C call) or a model-exchange
  :class:`~cosimrun.fmi.exchange.Exchange`; values move through the compiled
  pushers and pullers of :mod:`~cosimrun.fmi.values`;
* :mod:`~cosimrun.fmi.errors`: status names and :class:`~cosimrun.fmi.errors.FMULog`
  (an FMU's last messages, its errors).

Nothing here imports a component, the config layer or a master; the components
(``type: fmu``) are in :mod:`cosimrun.components.fmu`. Importing this package
imports none of its modules.
"""
