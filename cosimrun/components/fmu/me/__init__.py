"""FMI 2.0 and 3.0 model-exchange FMUs as cosimrun components, integrated by cosimrun's own integrators.

In a config::

    components:
      ball:
        type: fmu
        params:
          path: models/ball.fmu        # a model-exchange-only FMU runs as model exchange
          interface: me                # needed only when the FMU offers co-simulation too
          integrator: cvode            # rk4 (default, with substeps), rk45, dop853, radau, bdf, lsoda, cvode
          rtol: 1.0e-8
          e: 0.7                       # FMU parameters, start values, aliases: as for co-simulation FMUs

The package, one job per module:

* :mod:`~cosimrun.components.fmu.me.component`: :class:`ModelExchangeFMU`, the
  FMU component's parameters, ports and life cycle joined with
  :class:`~cosimrun.core.ode.OdeComponent`'s integrators, rollback and state events;
* :mod:`~cosimrun.components.fmu.me.functions`: the FMI 2.0 and 3.0
  model-exchange functions through ctypes (continuous-time calls, event iteration).
"""

from cosimrun.components.fmu.me.component import ModelExchangeFMU

__all__ = ["ModelExchangeFMU"]
