"""DFT, STFT and the window functions, against ONNX Runtime (`onnx_cases` in conftest)."""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng(28)


def _normal(*shape):
    return _rng.standard_normal(shape).astype("float32")


def _int(value):
    return np.array(value, "int64")


def test_dft_every_mode_matches_onnxruntime(onnx_cases):
    real, pair = _normal(2, 8, 3, 1), _normal(2, 8, 3, 2)
    cases = [
        {"op": "DFT", "inputs": [real], "attrs": {}},
        {"op": "DFT", "inputs": [pair, None, _int(2)], "attrs": {"inverse": 1}, "consts": (2,)},
        {"op": "DFT", "inputs": [real, _int(6)], "attrs": {"onesided": 1}, "consts": (1,)},
        {"op": "DFT", "inputs": [pair, _int(11), _int(1)], "attrs": {}, "consts": (1, 2)},
        {"op": "DFT", "inputs": [pair[:, :5]], "attrs": {"inverse": 1, "onesided": 1}},
        {"op": "DFT", "inputs": [pair[:, :5], _int(9)], "attrs": {"inverse": 1, "onesided": 1}, "consts": (1,)},
    ]
    onnx_cases(cases, opset=20, rtol=1e-4, atol=1e-4)
    onnx_cases([{"op": "DFT", "inputs": [pair], "attrs": {"axis": 2, "inverse": 1}}], opset=17, rtol=1e-4, atol=1e-4)


def test_stft_and_windows_match_onnxruntime(onnx_cases):
    signal = _normal(2, 40, 1)
    onnx_cases([
        {"op": "STFT", "inputs": [signal, _int(5), None, _int(8)], "attrs": {}, "consts": (1, 3)},
        {"op": "STFT", "inputs": [signal, _int(3), np.hanning(10).astype("float32")], "attrs": {"onesided": 0},
         "consts": (1, 2)},
    ], opset=17, rtol=1e-4, atol=1e-4)
    onnx_cases([{"op": op, "inputs": [np.array(n, "int32")], "attrs": {"periodic": periodic}, "consts": (0,),
                 "out_types": (1,)}
                for op in ("HannWindow", "HammingWindow", "BlackmanWindow") for n, periodic in ((10, 1), (7, 0))],
               opset=17, rtol=1e-5, atol=1e-6)
