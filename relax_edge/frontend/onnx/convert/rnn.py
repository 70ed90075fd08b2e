"""ONNX import: recurrent networks (RNN, GRU, LSTM)."""
