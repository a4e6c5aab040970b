"""cosimrun's Hydra sweeper (``hydra/sweeper=cosimrun``, the default): Hydra's basic sweeper, validating cheaply."""
