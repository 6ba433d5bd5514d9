"""Grouped convolutions whose groups lie inside one vector: the weights of the rotation form.

A grouped convolution with k input and k output channels per group, k smaller than the block b (ResNeXt-50's 3 x 3
convolutions: 32 groups of 4 on 128 channels, of 8 on 256), has in one block of b channels b / k whole groups.
The blocked kernel of te/nn/conv_groups.py broadcasts each input channel against a vector of b output channels
of which only k are its group's: b / k times the multiply-adds the convolution needs. Here none is wasted and
nothing is broadcast. Lane l = g k + i of a block holds channel i of group g; for each rotation d < k a
lane-wise multiply-add of the input vector by a weight vector

    acc_d[g k + i] += U_d[g k + i] * x[g k + i],    U_d[g k + i] = W[g k + (i - d) mod k, i]

accumulates what input channel i gives output channel (i - d) mod k of its group, in lane i. Output lane
g k + j then sums the k accumulators, each read rotated within its group of k lanes:

    y[g k + j] = sum_d acc_d[g k + (j + d) mod k]

so the k rotations (shuffles inside a group of lanes, vpermilps where k = 4) are paid once per output vector,
after the whole window, where the multiply-adds are k per input vector and tap (te/nn/nchwc.py's
`lane_group_conv2d_nchwc`; schedule/rules_lane_groups.py its register tile).
"""

from __future__ import annotations

import numpy as np


def lane_group_size(in_channels: int, out_channels: int, groups: int, block: int) -> int | None:
    """k, the channels (in and out) of each group, where the rotation form applies: groups of k in and k out, k
    dividing the block and smaller than it (a group of one channel is a depthwise convolution, with kernels of its
    own), and the channels filling whole blocks; else None."""
    if groups < 2 or in_channels != out_channels or in_channels % groups or in_channels % block:
        return None
    k = in_channels // groups
    return k if 1 < k < block and block % k == 0 else None


def pack_lane_groups(weight: np.ndarray, block: int) -> np.ndarray:
    """A grouped weight (C, k, KH, KW) as (C / b, k, KH, KW, b): [cb, d, :, :, l] is U_d of block cb's lane l."""
    channels, k, kh, kw = weight.shape
    lane = np.arange(channels)
    inner = lane % k
    packed = np.empty((channels // block, k, kh, kw, block), weight.dtype)
    for d in range(k):
        taken = weight[lane - inner + (inner - d) % k, inner]  # (C, KH, KW): U_d lane by lane
        packed[:, d] = taken.reshape(channels // block, block, kh, kw).transpose(0, 2, 3, 1)
    return packed


def unpack_lane_groups(packed: np.ndarray) -> np.ndarray:
    """`pack_lane_groups`' inverse: (C / b, k, KH, KW, b) back to the grouped weight (C, k, KH, KW)."""
    blocks, k, kh, kw, block = packed.shape
    channels = blocks * block
    lane = np.arange(channels)
    inner = lane % k
    weight = np.empty((channels, k, kh, kw), packed.dtype)
    for d in range(k):
        weight[lane - inner + (inner - d) % k, inner] = packed[:, d].transpose(0, 3, 1, 2).reshape(channels, kh, kw)
    return weight
