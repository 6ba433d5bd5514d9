"""Frontends: ONNX (and, later, PyTorch) models onto the op registry."""
