"""ONNX import: the loss operators (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss) over existing operators."""
