"""Legalizations: each operator as a tensor program (see common.py).
Importing this package registers them on the operator records."""

from . import bitcast, detect, elementwise, manipulate, nn, quant, random, reduce, resize, scatter  # noqa: F401
from .common import LegalizeContext, broadcast_indices, legalization, load_broadcast

__all__ = ["LegalizeContext", "broadcast_indices", "legalization", "load_broadcast"]
