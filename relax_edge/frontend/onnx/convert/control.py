"""ONNX import: control flow (If, Loop, Scan)."""
