"""Bytes a training step moves through memory: each operator's reads and writes, forward and backward, from its
local shapes, and each optimizer's per parameter.

Counted as PyTorch's CPU kernels move them (one pass over a tensor reads or writes it once; a view moves
nothing), since that is what a measured step runs. Element-wise work, normalisations and the optimizer update
do a few operations per element and are bound by these bytes, not by their FLOPs (`cost.operator_seconds`).
"""

from __future__ import annotations

import math

from ..errors import TilegradError
from .ops import Operator

# Passes over a parameter-sized tensor in one step of torch's single-tensor CPU optimizers (CPU has no foreach or
# fused kernels), each pass reading or writing every element once:
#   sgd:           param.add_(grad)                                  read p, g; write p                    3
#   sgd_momentum:  buf.mul_(m).add_(grad); param.add_(buf)           2 + 3 + 3                             8
#   adam:          exp_avg.lerp_(grad)                               read m, g; write m                    3
#                  exp_avg_sq.mul_(b2).addcmul_(grad, grad)          2 + 3                                 5
#                  denom = (exp_avg_sq.sqrt() / c).add_(eps)         2 + 2 + 2 (two fresh temporaries)     6
#                  param.addcdiv_(exp_avg, denom)                    read p, m, denom; write p             4
OPTIMIZER_PASSES = {"sgd": 3, "sgd_momentum": 8, "adam": 18}
OPTIMIZER_STATES = {"sgd": 0, "sgd_momentum": 1, "adam": 2}  # parameter-sized tensors of state per parameter
OPTIMIZER_TEMPORARIES = {"sgd": 0, "sgd_momentum": 0, "adam": 2}  # parameter-sized tensors allocated per step

# glibc serves an allocation above its mmap threshold (which grows to at most 32 MiB on 64-bit) with fresh pages,
# which the kernel faults in and zeroes on first touch, at every step: a fresh tensor that large costs its bytes
# again at the page-fault rate (calibrated: under a hypervisor, several times the streaming cost).
FRESH_THRESHOLD_BYTES = 32 << 20

_GEMM = ("matmul", "batch_matmul", "linear", "conv2d")


def optimizer_states(optimizer: str) -> int:
    """Parameter-sized state tensors the optimizer keeps (Adam's two moments, SGD-momentum's buffer)."""
    _check(optimizer)
    return OPTIMIZER_STATES[optimizer]


def optimizer_bytes(optimizer: str, elements: float, element_bytes: int, shards: int = 1) -> float:
    """Bytes one optimizer step moves for a parameter block of `elements`; under optimizer-state sharding (ZeRO)
    each of the `shards` replicas updates its 1/shards slice (padded up, as `zero.ShardedOptimizer` pads)."""
    _check(optimizer)
    return OPTIMIZER_PASSES[optimizer] * math.ceil(elements / shards) * element_bytes


def operator_bytes(op: Operator, inputs: tuple[tuple[int, ...], ...], output: tuple[int, ...],
                   element_bytes: int) -> tuple[float, float]:
    """(forward, backward) bytes of `op` on these local input and output shapes.

    Forward reads the inputs and writes the output. Backward, by kind:
    - matmul, linear, convolution: each input's gradient is a product of the output's gradient and the other
      input, so every operand is read twice and every input gradient written: 2x the forward bytes;
    - softmax: reads the output's gradient and the saved output, writes the input's gradient: 3x the output;
    - a reduction: its gradient is the output's gradient broadcast (a view), read once;
    - an embedding: the table's gradient is zeroed, then the rows' gradients added in;
    - a transpose is a view both ways;
    - element-wise and layer norm: read the output's gradient and the saved inputs, write the inputs' gradients.
    """
    ins = [math.prod(s) for s in inputs]
    out = math.prod(output)
    forward = sum(ins) + out
    if op.kind == "transpose":
        elements = (0, 0)
    elif op.kind in _GEMM:
        elements = (forward, 2 * forward)
    elif op.kind == "softmax":
        elements = (forward, 3 * out)
    elif op.kind == "reduce_sum":
        elements = (forward, out)
    elif op.kind == "embedding":
        elements = (ins[0] + 2 * out, ins[1] + 2 * out)
    else:
        elements = (forward, out + 2 * sum(ins))
    return elements[0] * element_bytes, elements[1] * element_bytes


def fresh_bytes(op: Operator, inputs: tuple[tuple[int, ...], ...], output: tuple[int, ...],
                element_bytes: int) -> tuple[float, float]:
    """(forward, backward) bytes of newly allocated tensors above `FRESH_THRESHOLD_BYTES`: the output, then
    the inputs' gradients (none for a view, nor for a reduction, whose gradient is a broadcast view)."""
    if op.kind == "transpose":
        return 0.0, 0.0
    forward = _fresh(math.prod(output) * element_bytes)
    if op.kind == "reduce_sum":
        return forward, 0.0
    return forward, sum(_fresh(math.prod(s) * element_bytes) for s in inputs)


def optimizer_fresh_bytes(optimizer: str, elements: float, element_bytes: int, shards: int = 1) -> float:
    """Bytes of the temporaries one optimizer step allocates above `FRESH_THRESHOLD_BYTES` for a block."""
    _check(optimizer)
    return OPTIMIZER_TEMPORARIES[optimizer] * _fresh(math.ceil(elements / shards) * element_bytes)


def _fresh(nbytes: float) -> float:
    return nbytes if nbytes > FRESH_THRESHOLD_BYTES else 0.0


def _check(optimizer: str) -> None:
    if optimizer not in OPTIMIZER_PASSES:
        raise TilegradError(f"cost: optimizer {optimizer!r} has no update cost; use one of "
                            f"{sorted(OPTIMIZER_PASSES)}")
