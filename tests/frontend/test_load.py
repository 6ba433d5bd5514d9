"""Model dispatch: an ONNX model, a torch module and a `file.py:factory` string all become graphs, and
arguments that do not fit the kind of model are refused."""

import io
import warnings

import pytest
import torch

from tilegrad.errors import TilegradError
from tilegrad.frontend.load import import_model

FACTORY = """import torch


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()), (torch.randn(2, 4),)
"""


def _module():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()


def _shapes(g):
    return [tuple(v.type.shape) for v in g.inputs], [tuple(v.type.shape) for v in g.outputs]


def test_every_kind_of_model_gives_the_same_shapes(tmp_path):
    module, x = _module(), torch.randn(2, 4)
    (tmp_path / "models.py").write_text(FACTORY)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), buf, input_names=["x"], dynamo=False)
    want = ([(2, 4)], [(2, 3)])
    assert _shapes(import_model(module, (x,))) == want
    assert _shapes(import_model(buf.getvalue())) == want
    assert _shapes(import_model(f"{tmp_path / 'models.py'}:make")) == want


def test_arguments_that_do_not_fit_the_model_are_refused(tmp_path):
    (tmp_path / "models.py").write_text(FACTORY)
    with pytest.raises(TilegradError, match="needs example inputs"):
        import_model(_module())
    with pytest.raises(TilegradError, match="makes its own example inputs"):
        import_model(f"{tmp_path / 'models.py'}:make", (torch.randn(2, 4),))
