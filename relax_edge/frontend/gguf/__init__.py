"""The GGUF frontend: llama.cpp's model files as IRModules.

`from_gguf(path, max_context=None, dim_bounds=None)` builds a llama / qwen2
decoder (model.py) whose quantized tensors stay in their blocks
(blocks.py: matmul_nbits / gather_nbits); `gguf_tokenizer(path)` is its
tokenizer (tokenizer.py); `GGUFReader` (reader.py) parses any GGUF file as
hostile input, every problem a `GGUFError`.
"""

from .model import from_gguf
from .reader import GGUFError, GGUFReader
from .tokenizer import gguf_tokenizer

__all__ = ["from_gguf", "gguf_tokenizer", "GGUFError", "GGUFReader"]
