"""Planning graphs of the models the tests and the benchmark use: an MLP, a GPT-2-like transformer stack and a
wide classifier (a small feature extractor under a huge final fully connected layer, the seed's face-recognition
case, where splitting the classes beats data parallel)."""

from __future__ import annotations

import itertools

from . import ops
from .train_graph import TrainGraph, TrainGraphBuilder


def mlp(batch: int, widths: tuple[int, ...]) -> TrainGraph:
    b = TrainGraphBuilder()
    x = b.input("x", (batch, widths[0]))
    for i, (n_in, n_out) in enumerate(itertools.pairwise(widths)):
        x = b.add(ops.matmul, f"fc{i}", x, b.parameter(f"fc{i}.weight", (n_in, n_out)))
        x = b.add(ops.elementwise, f"fc{i}.bias_add", x, b.parameter(f"fc{i}.bias", (n_out,)))
        if i < len(widths) - 2:
            x = b.add(ops.elementwise, f"relu{i}", x)
    return b.build()


def _linear(b: TrainGraphBuilder, name: str, x: str, n_in: int, n_out: int) -> str:
    y = b.add(ops.matmul, name, x, b.parameter(f"{name}.weight", (n_in, n_out)))
    return b.add(ops.elementwise, f"{name}.bias_add", y, b.parameter(f"{name}.bias", (n_out,)))


def transformer_block(b: TrainGraphBuilder, prefix: str, x: str, width: int) -> str:
    """Pre-norm block: one attention head of the full width, then a 4x feed-forward, each with a residual."""
    p = prefix
    h = b.add(ops.layer_norm, f"{p}.ln1", x, b.parameter(f"{p}.ln1.weight", (width,)),
              b.parameter(f"{p}.ln1.bias", (width,)))
    q, k, v = (_linear(b, f"{p}.{n}", h, width, width) for n in "qkv")
    kt = b.add(ops.transpose, f"{p}.kt", k, perm=(0, 2, 1))
    scores = b.add(ops.matmul, f"{p}.scores", q, kt)
    scores = b.add(ops.elementwise, f"{p}.scale", scores)
    probs = b.add(ops.softmax, f"{p}.softmax", scores)
    ctx = b.add(ops.matmul, f"{p}.context", probs, v)
    x = b.add(ops.elementwise, f"{p}.residual1", x, _linear(b, f"{p}.out", ctx, width, width))
    h = b.add(ops.layer_norm, f"{p}.ln2", x, b.parameter(f"{p}.ln2.weight", (width,)),
              b.parameter(f"{p}.ln2.bias", (width,)))
    h = b.add(ops.elementwise, f"{p}.gelu", _linear(b, f"{p}.ffn1", h, width, 4 * width), flops_per_element=8.0)
    return b.add(ops.elementwise, f"{p}.residual2", x, _linear(b, f"{p}.ffn2", h, 4 * width, width))


def gpt(layers: int, batch: int, seq: int, width: int, vocab: int) -> TrainGraph:
    """Token embedding, `layers` blocks, a final norm and the vocabulary projection."""
    b = TrainGraphBuilder()
    x = b.add(ops.embedding, "embed", b.input("tokens", (batch, seq)), b.parameter("embed.weight", (vocab, width)))
    for i in range(layers):
        x = transformer_block(b, f"h{i}", x, width)
    x = b.add(ops.layer_norm, "ln_f", x, b.parameter("ln_f.weight", (width,)), b.parameter("ln_f.bias", (width,)))
    b.add(ops.matmul, "lm_head", x, b.parameter("lm_head.weight", (width, vocab)))
    return b.build()


def wide_classifier(batch: int, features: int, hidden: int, classes: int) -> TrainGraph:
    """Two hidden layers, then a `hidden` x `classes` layer and the softmax's normalising sum (exp, sum over the
    classes), as a face-recognition head computes it: splitting the classes leaves a partial sum of `batch`
    numbers to add up instead of the huge weight's gradient."""
    b = TrainGraphBuilder()
    x = b.input("x", (batch, features))
    x = b.add(ops.elementwise, "relu0", _linear(b, "fc0", x, features, hidden))
    x = b.add(ops.elementwise, "relu1", _linear(b, "fc1", x, hidden, hidden))
    logits = b.add(ops.matmul, "classifier", x, b.parameter("classifier.weight", (hidden, classes)))
    e = b.add(ops.elementwise, "exp", logits, flops_per_element=4.0)
    b.add(ops.reduce_sum, "normalizer", e, axes=(1,))
    return b.build()
