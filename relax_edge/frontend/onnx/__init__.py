"""ONNX frontend: `from_onnx(model, dim_bounds=None, input_shapes=None, constant_inputs=None,
max_constant_bytes=None, kv_cache=None, max_context=None)`; every problem with a model raises
OnnxImportError. `kv_pairs(mod)`: the past/present pairs of a KV-cache decoder found at import (kv_cache.py).
`from_genai(folder, max_context=None, int8_activations=False)`: an ONNX Runtime GenAI model folder (genai.py)."""

from .context import OnnxImportError
from .genai import from_genai
from .importer import from_onnx
from .kv_cache import KVPair, kv_pairs

__all__ = ["from_onnx", "OnnxImportError", "KVPair", "kv_pairs", "from_genai"]
