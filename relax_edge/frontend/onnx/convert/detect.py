"""ONNX import: detection-head operators with data-dependent output sizes (TopK, NonMaxSuppression, ...)."""
