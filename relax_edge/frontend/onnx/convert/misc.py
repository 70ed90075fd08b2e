"""ONNX import: operators expressed over existing ones (pooling, windows, cropping, ...)."""
