"""Cartesian → joint mappings compared in seed 004 (Fig. 5), one module each, by name.

Every module of this package is imported here, so a mapping is added by one file with one
registered class (see ``base``) — or, outside fdcontrol, by a plugin (:mod:`fdcontrol.registry`);
``MAPPING_NAMES``, the service settings, the API schema and the CLI choices are read from ``MAPPINGS``.
"""

from __future__ import annotations

import importlib
import pkgutil

from fdcontrol.mappings.base import (
    MAPPINGS,
    Analysis,
    Mapping,
    MappingProtocol,
    analyze,
    check_param,
    check_positive,
    make_mapping,
    mapping_params,
    settings_kwargs,
)
from fdcontrol.mappings.dls import DampedLeastSquares
from fdcontrol.mappings.fd import ForwardDynamics
from fdcontrol.mappings.ji import JacobianInverse
from fdcontrol.mappings.jt import JacobianTranspose
from fdcontrol.mappings.sdls import SelectivelyDampedLeastSquares
from fdcontrol.params import Param, declare

for _m in pkgutil.iter_modules(__path__):  # further mapping files register on import
    importlib.import_module(f"{__name__}.{_m.name}")

_PAPER_ORDER = ("ji", "jt", "dls", "sdls", "fd")  # seed 004's order; further mappings follow by name


def mapping_names() -> tuple[str, ...]:
    """The registered mapping names (plugins included): seed 004's order, then the rest by name."""
    return tuple(sorted(MAPPINGS.names(),
                        key=lambda n: (_PAPER_ORDER.index(n) if n in _PAPER_ORDER else len(_PAPER_ORDER), n)))


#: which mapping drives the loop, declared once (fdcontrol.params); each mapping declares its own parameters
PARAMS = declare("mapping", Param("mapping", "choice", "fd", "the Cartesian → joint mapping (a registered one)",
                                  policy="holding", choices=mapping_names))


def __getattr__(name: str) -> tuple[str, ...]:
    # MAPPING_NAMES is derived when read, so a mapping registered after this import is in it
    if name == "MAPPING_NAMES":
        return mapping_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MAPPINGS", "MAPPING_NAMES", "Analysis", "DampedLeastSquares", "ForwardDynamics", "JacobianInverse",
           "JacobianTranspose", "Mapping", "MappingProtocol", "SelectivelyDampedLeastSquares", "analyze",
           "check_param", "check_positive", "make_mapping", "mapping_names", "mapping_params", "settings_kwargs"]
