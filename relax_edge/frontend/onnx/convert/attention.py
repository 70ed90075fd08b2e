"""ONNX import: the attention family (Attention, RMSNormalization, RotaryEmbedding, ...) over existing operators."""
