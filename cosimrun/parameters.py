"""The public import path of declared component parameters for plugin authors (``from cosimrun.parameters import
Parameter``); the implementation is :mod:`cosimrun.core.parameters`, part of the engine's component contract."""

from cosimrun.core.parameters import Parameter, declared_parameters, dimension_name, value_in_unit

__all__ = ["Parameter", "declared_parameters", "dimension_name", "value_in_unit"]
