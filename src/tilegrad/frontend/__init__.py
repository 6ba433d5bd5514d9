"""Frontends: ONNX and PyTorch models onto the op registry."""
