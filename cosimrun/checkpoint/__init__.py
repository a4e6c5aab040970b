"""Checkpoints: the saved state of a whole coupled system, and runs that continue from one.

- :mod:`.form`: plain values as named, typed arrays and strings (no pickle);
- :mod:`.state`: :class:`SystemState`, the fingerprint of a system and the checksum of a state;
- :mod:`.schedule`: ``run.checkpoint`` and the :class:`Checkpointer` a master calls after each step.

The engine never imports h5py: the results file's ``/checkpoints`` group is written by
:mod:`cosimrun.storage.checkpoints`, which the runner hands to the checkpointer.
"""

from cosimrun.checkpoint.form import StateFormError, pack, unpack
from cosimrun.checkpoint.schedule import Checkpointer, CheckpointSettings
from cosimrun.checkpoint.state import SystemState, checksum, fingerprint, first_difference

__all__ = ["CheckpointSettings", "Checkpointer", "StateFormError", "SystemState", "checksum", "first_difference",
           "fingerprint", "pack", "unpack"]
