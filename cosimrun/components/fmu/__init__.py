"""FMI 2.0 and 3.0 FMUs as cosimrun components, on FMPy's low-level API.

In a config::

    components:
      plant:
        type: fmu
        params:
          path: models/pendulum.fmu        # first: it defines the ports and the other parameters
          mass: 1.5                        # FMU parameters (causality parameter, fixed or tunable)
          length: "80 cm"                  # quantities are converted to the variable's unit
          start: {q: 0.5}                  # start values of other variables (initial exact/approx)
          aliases: {body.phi: angle}       # FMU variable -> port name
          events: {stop: {port: gap, direction: 1}}   # zero crossings of outputs as cosimrun events
          interface: cs                    # cs | me; default: co-simulation if the FMU offers it

``type: fmu`` reads the model description before it builds the component
(:meth:`FMUComponent.resolve_class`): an FMU runs as co-simulation
(:class:`FMUComponent`, this package) unless it offers model exchange only or
``interface: me`` asks for it; model exchange is
:class:`cosimrun.components.fmu.me.ModelExchangeFMU`. An ``interface`` the FMU
does not offer is a ``ConfigError`` at ``params.interface`` naming what it offers.

How it works:

* **path** is read as soon as it is set: the model description gives the ports
  (causality input/output; Real, Integer/Enumeration, Boolean, String), their
  units (the variable's ``unit``, else its declared type's; Modelica spellings
  such as ``m/s2``, ``N.m``, ``1`` are translated for pint by
  :func:`modelica_unit_to_pint`), the parameters, the physical state (variables
  named by ``derivative`` attributes) and the direct feedthrough
  (``ModelStructure/Outputs`` dependencies on inputs; no ``dependencies``
  attribute means "all inputs", as the standard says). A missing file, a file
  that is no FMU, FMI 1.0, an FMU without the interface asked for or without
  a binary for this platform fail right there. Parameters set
  before ``path`` are kept and checked when ``path`` arrives (so any order
  works, but an unknown name is then reported on ``path``); the config builder
  applies ``params`` in mapping order, so write ``path`` first.
* **Limits.** Before anything is read or extracted, an FMU whose files unpack
  to more than 2 GiB (sum of the zip entries' sizes) or whose
  ``modelDescription.xml`` is larger than 64 MiB is refused with an
  :class:`~cosimrun.errors.FMULimitError` naming the file, the size, the limit
  and how to raise it (``COSIMRUN_FMU_MAX_UNPACKED_SIZE=4GiB``,
  ``COSIMRUN_FMU_MAX_DESCRIPTION_SIZE=256MiB``); a model description declaring
  more than 100000 array elements or 2000 inputs and outputs is refused before
  any variable is made (``COSIMRUN_FMU_MAX_ARRAY_ELEMENTS``,
  ``COSIMRUN_FMU_MAX_PORTS``). Entries with absolute paths or ``..`` are
  refused, symbolic links are extracted as plain files (an entry inside one is
  refused), and the model description is parsed without external entities or
  entity expansion bombs (expat refuses both). An FMU that cannot be used (a
  malformed description, a library that does not load or lacks FMI
  functions) raises :class:`~cosimrun.errors.FMUFileError`, also a
  ``ConfigError``: one line and exit status 2 on the command line.
* **Extraction** happens once per FMU file (keyed by its SHA-256) into a cache
  shared by all runs and processes of the user (``$COSIMRUN_FMU_CACHE``, by
  default ``~/.cache/cosimrun/extracted``): a sweep's workers extract it once;
  an entry changed since (checked against its manifest) is extracted again.
  ``action=describe`` and ``info`` read the model description only: the
  library is neither extracted nor loaded.
  The cached files are read-only; ``private_copy: true`` runs the component
  from a private, writable copy (for FMUs that write into their resources
  directory), as does a second instance of an FMU that declares
  ``canBeInstantiatedOnlyOncePerProcess``. Entries unused for 30 days
  (``COSIMRUN_FMU_CACHE_MAX_AGE``, in days) are removed when the cache is
  next used; see :mod:`~cosimrun.fmi.extraction`.
* **initialize(t0)** instantiates the FMU, calls ``fmi2SetupExperiment(t0)``,
  sets the parameters and start values given in the config, enters
  initialization mode, sets the inputs and exits it. **do_step** sets all
  inputs, calls ``fmi2DoStep`` and reads all outputs; a ``fmi2Discard``,
  ``fmi2Error`` or ``fmi2Fatal`` raises :class:`FMUError` naming the component,
  the FMU, the time, the step and the status with the FMU's last log messages,
  except a ``fmi2Discard`` whose ``fmi2LastSuccessfulTime`` lies inside the
  step: that raises :class:`~cosimrun.errors.StepDiscarded`, and the masters
  make that instant a communication point of every component and go on (see
  :class:`FMUComponent`). An FMU with ``canHandleVariableCommunicationStepSize``
  false is stepped by one step size only.
* **Loops**: direct feedthrough is declared from the model description before
  ``initialize`` returns, so the base class never perturbs an FMU. Loop
  iteration (:meth:`evaluate_outputs`) sets the inputs and reads the outputs
  with ``fmi2Set*``/``fmi2Get*`` between two steps; ``fmi2DoStep`` is never
  called with a zero step. This relies on the FMU recomputing outputs that
  depend directly on inputs when they are read after new inputs were set, as
  FMI 2.0 requires for outputs with declared dependencies on inputs (FMI 3.0
  states it explicitly for Step Mode). An FMU that only refreshes outputs in
  ``fmi2DoStep`` must not declare such dependencies; it is then no part of an
  algebraic loop (the loop is broken by its step delay).
* **Rollback** (``snapshot_state``/``restore_state``) uses
  ``fmi2GetFMUstate``/``fmi2SetFMUstate``; a snapshot frees its FMU state when
  it is garbage-collected. FMUs with ``canGetAndSetFMUstate="false"`` report
  ``supports_rollback = False``: they run as passive components under the
  hybrid master and are refused as event sources (``events``) with a message
  saying why.
* **Events**: FMI 2.0 co-simulation has no event interface; an FMU handles its
  own events inside ``fmi2DoStep``. ``events`` turns zero crossings of outputs
  into cosimrun events (located by rollback under the hybrid master) that other
  components can subscribe to or that switch modes; ``handle_event`` only
  refreshes the outputs.
* **Physical state** (``get_state``/``set_state``, used when a multi-model
  component switches modes) is the value of every state variable. FMI 2.0 lets
  a co-simulation master set such variables only before initialization, so
  ``set_state`` re-instantiates the FMU at the given time with the states as
  start values (parameters and inputs are set again). Discrete internal
  variables of the FMU start afresh.
* ``path: example:pendulum`` builds the shipped example FMU (a C pendulum, see
  :data:`EXAMPLES`) with the C compiler into a cache directory on first use;
  ``python -m cosimrun.components.fmu build-example DIR`` writes it to ``DIR``
  and ``python -m cosimrun.components.fmu info MODEL.fmu`` lists what a
  component made from an FMU looks like.

* **FMI 3.0** co-simulation FMUs run through the same component (the version
  comes from the model description; :mod:`~cosimrun.fmi.fmi3` holds
  the calls). Every FMI 3 type is a port: ``Float32``/``Float64`` REAL,
  ``Int8`` ... ``UInt64`` and ``Enumeration`` INT (with the type's range checked
  when set), ``Boolean`` BOOL, ``String``; an array variable is one port per
  element, ``name[i]`` (1-based, ``name[i,j]`` for two dimensions, row-major),
  set and read whole. Units come from the variable or its declared type, else
  from ``UnitDefinitions``. Rollback uses ``fmi3GetFMUState``/``fmi3SetFMUState``.
  An FMU with ``hasEventMode`` is instantiated with event mode and early return
  allowed: an ``fmi3DoStep`` that returns early at ``lastSuccessfulTime`` (its
  event) is handled there in the FMU's event mode (``fmi3EnterEventMode``,
  ``fmi3UpdateDiscreteStates`` until settled, ``fmi3EnterStepMode``) and raises
  :class:`~cosimrun.errors.StepDiscarded`, so every master makes that instant a
  communication point as for FMI 2's discard (no search; recorded as an
  ``early_return`` event of the FMU); an event at a step's end is handled
  there likewise.
  Clocks (clocked or scheduled partitions) and ``Binary`` ports are refused
  with one line; intermediate update is not used (the callback is not given,
  which the standard allows).

FMI 1.0 FMUs are refused with a clear message.

The FMI code is the subsystem :mod:`cosimrun.fmi` (bindings, model
description, extraction, one :class:`~cosimrun.fmi.instance.FMUInstance` per
FMU); this package holds the components that delegate to it, one job per module:

* :mod:`~cosimrun.components.fmu.base`: :class:`~cosimrun.components.fmu.base.FMUBase`,
  what both components share (own settings, ``path``, ports, life cycle, rollback,
  physical state), delegated to the component's ``FMUInstance``;
* :mod:`~cosimrun.components.fmu.component`: :class:`FMUComponent` (co-simulation:
  the step around :class:`~cosimrun.fmi.step.Stepper`);
* :mod:`~cosimrun.components.fmu.me`: :class:`~cosimrun.components.fmu.me.ModelExchangeFMU`
  (model exchange, integrated by cosimrun);
* :mod:`~cosimrun.components.fmu.build`: building C FMUs and the shipped
  examples, whose C sources (the framework header ``cosimrun_fmi2cs.h``, the
  example models and their model descriptions) are package data in ``c/``;
* :mod:`~cosimrun.components.fmu.cli`: the ``python -m`` command line.
"""

from cosimrun.components.fmu.build import EXAMPLES, build_c_fmu, build_example
from cosimrun.components.fmu.build import FMI2_CS_FRAMEWORK as FMI2_CS_FRAMEWORK
from cosimrun.components.fmu.build import FRAMEWORK_HEADER as FRAMEWORK_HEADER
from cosimrun.components.fmu.build import Example as Example
from cosimrun.components.fmu.build import find_c_compiler as find_c_compiler
from cosimrun.components.fmu.build import fmi_headers as fmi_headers
from cosimrun.components.fmu.build import resolve_example as resolve_example
from cosimrun.components.fmu.cli import describe as describe
from cosimrun.components.fmu.cli import main as main
from cosimrun.components.fmu.component import FMUComponent
from cosimrun.fmi.description import FMUModel, modelica_unit_to_pint, read_fmu
from cosimrun.fmi.description import FMUVariable as FMUVariable
from cosimrun.fmi.errors import STATUS_NAMES as STATUS_NAMES
from cosimrun.fmi.errors import FMUError
from cosimrun.fmi.extraction import cache_directory as cache_directory
from cosimrun.fmi.extraction import extracted_directories as extracted_directories
from cosimrun.fmi.instance import FMUInstance as FMUInstance

__all__ = [
    "EXAMPLES",
    "FMUComponent",
    "FMUError",
    "FMUModel",
    "build_c_fmu",
    "build_example",
    "modelica_unit_to_pint",
    "read_fmu",
]
