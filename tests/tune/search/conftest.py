"""The search tests' fixtures: the tuning task of a packed GEMM, made to measure."""

from __future__ import annotations

import pytest
import torch

from tilegrad.tune.model import model_graph
from tilegrad.tune.task import extract_tasks


@pytest.fixture
def matmul_task():
    """A maker of the tuning task of x (m, k) @ w (k, n) with a constant w: the pipeline makes it a packed GEMM with
    the weight prepacked."""
    def make(m: int, k: int, n: int):
        class MatMul(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(k, n))

            def forward(self, x):
                return x @ self.w

        torch.manual_seed(0)
        (task,) = extract_tasks(model_graph(MatMul().eval(), example_inputs=(torch.randn(m, k),)))
        return task
    return make
