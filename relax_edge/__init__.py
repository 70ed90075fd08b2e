"""relax_edge: an embedded and mobile compiler SDK for ML models with dynamic shapes.

    import relax_edge as rxe
    mod = ...                       # built with rxe.ir.Builder and rxe.op
    ref = rxe.interpret(mod, x)     # numpy reference of any module
"""

from . import farm, ir, op  # noqa: E402
from .build import Artifact, build  # noqa: E402
from .deploy import DeviceError, GenerateResult, RuntimeCheckError, connect  # noqa: E402
from .errors import InterpretError, RelaxEdgeError, ShapeError, TypeInferenceError, VerifyError  # noqa: E402
from .interp import interpret  # noqa: E402
from .ir import Builder, IRModule, SizeVar, TensorType, TupleType, Var, print_module, verify  # noqa: E402
from .pipeline import optimize  # noqa: E402
from .version import __version__  # noqa: E402

__all__ = [
    "__version__", "farm", "ir", "op", "interpret", "optimize", "build", "connect", "Artifact", "RuntimeCheckError",
    "GenerateResult", "from_gguf", "GGUFError",
    "DeviceError", "from_onnx", "OnnxImportError", "Builder", "IRModule", "SizeVar", "TensorType",
    "TupleType", "Var", "print_module", "verify", "RelaxEdgeError", "ShapeError",
    "TypeInferenceError", "VerifyError", "InterpretError", "package",
]


def __getattr__(name: str):
    """from_onnx and OnnxImportError import the ONNX frontend (and onnx) on first use, package the
    Android packaging (jinja2 templates)."""
    if name in ("from_onnx", "OnnxImportError", "from_genai"):   # from_genai: an ONNX Runtime GenAI folder
        from . import frontend
        return getattr(frontend, name)
    if name in ("from_gguf", "GGUFError"):
        from .frontend import gguf
        return getattr(gguf, name)
    if name == "package":   # rxe.package: the Android app package (relax_edge/android/package.py)
        from .android.package import package
        return package
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "from_onnx", "OnnxImportError", "from_gguf", "GGUFError", "from_genai", "package"])
