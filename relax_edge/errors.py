"""The project's exception types.

Every error that bad input can cause is one of these, with a message that
names the function, the variable, the operator or the dimension at fault.
"""


class RelaxEdgeError(Exception):
    """Base class of every error relax_edge raises on purpose."""


class ShapeError(RelaxEdgeError):
    """A symbolic shape expression cannot be built or evaluated."""


class TypeInferenceError(RelaxEdgeError):
    """An operator's type rule rejects its arguments (e.g. a provable shape mismatch)."""


class VerifyError(RelaxEdgeError):
    """An IR module is ill-formed."""


class InterpretError(RelaxEdgeError):
    """A module cannot be run on the given inputs (wrong rank, dtype, dimension...)."""
