"""Einsum in every equation form ONNX allows, against ONNX Runtime (`onnx_cases` in conftest): explicit and
implicit outputs, diagonals (a label repeated in a term), ellipses of different ranks, scalar operands and
results, upper-case labels and spaces."""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng(30)


def _normal(*shape):
    return _rng.standard_normal(shape).astype("float32")


_FORMS = [
    ("bij, bjk -> bik", [(5, 2, 3), (5, 3, 4)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("i,i", [(5,), (5,)]),
    ("ij->", [(3, 4)]),
    ("ii", [(4, 4)]),
    ("ii->i", [(4, 4)]),
    ("...ii ->...i", [(3, 5, 5)]),
    ("iij->ji", [(3, 3, 2)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (5, 4, 2)]),
    ("...j,j", [(2, 3, 4), (4,)]),
    ("AbC,Cb->A", [(2, 3, 4), (4, 3)]),
    ("->", [()]),
    ("ij,,jk->ik", [(2, 3), (), (3, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ijk->kji", [(2, 3, 4)]),
]


def test_einsum_forms_match_onnxruntime(onnx_cases):
    onnx_cases([{"op": "Einsum", "inputs": [_normal(*shape) for shape in shapes], "attrs": {"equation": equation}}
                for equation, shapes in _FORMS], opset=17, rtol=1e-5, atol=1e-5)
