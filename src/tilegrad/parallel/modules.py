"""PyTorch modules written within what `capture` reads (no view/reshape: one attention head), which the execution
tests and benchmarks/parallel.py shard: a pre-norm transformer block."""

from __future__ import annotations

import math

import torch


class TransformerBlock(torch.nn.Module):
    """Layer norm, single-head self-attention and a GELU feed-forward of 4x the width, each with a residual."""

    def __init__(self, width: int):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.q, self.k, self.v, self.out = (torch.nn.Linear(width, width) for _ in range(4))
        self.ffn1, self.act, self.ffn2 = torch.nn.Linear(width, 4 * width), torch.nn.GELU(), \
            torch.nn.Linear(4 * width, width)
        self.scale = 1.0 / math.sqrt(width)

    def forward(self, x):
        h = self.ln1(x)
        scores = torch.matmul(self.q(h), self.k(h).transpose(1, 2)) * self.scale
        x = x + self.out(torch.matmul(torch.softmax(scores, dim=-1), self.v(h)))
        return x + self.ffn2(self.act(self.ffn1(self.ln2(x))))
