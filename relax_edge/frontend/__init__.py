"""Model importers. `from_onnx` turns an ONNX model into an IRModule whose
dynamic dimensions are symbolic.

The ONNX frontend (and the onnx package under it) is imported on first use of
`from_onnx` or `OnnxImportError`, so that `import relax_edge` works without
onnx for modules built in Python.
"""

__all__ = ["from_onnx", "OnnxImportError", "from_genai"]


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from . import onnx as onnx_frontend
    except ModuleNotFoundError as err:
        if err.name != "onnx" and not (err.name or "").startswith("onnx."):
            raise
        from ..errors import RelaxEdgeError
        raise RelaxEdgeError(f"the ONNX frontend ({name}) needs the onnx package: "
                             "pip install 'onnx>=1.15'") from err
    value = globals()[name] = getattr(onnx_frontend, name)
    return value


def __dir__():
    return sorted([*globals(), *__all__])
