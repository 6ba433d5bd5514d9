"""Which input channels a block of output channels of a grouped convolution reads.

A grouped convolution (ResNeXt's 3x3, AlexNet's halves) computed in blocks of b output channels runs the dense
blocked kernel, vectorised across the block: block cb reduces over the `span` input channels from `start(cb)`,
those of the groups its lanes belong to, and its packed weights are zero where a lane's group does not reach.
Where a group has fewer output channels than a block (ResNeXt's 4 and 8 against 16 lanes), a block covers b /
out_per_group groups and multiplies that many times the weights the convolution needs, most of them zero: the
price of keeping the dense kernel's register tile and full vectors, where the generic grouped convolution runs
scalar.

In the blocked layout, groups of k in and k out channels inside one vector run without the waste as rotations
(te/nn/lane_groups.py); this blocking serves the other groupings.

Blocks line up with groups when one divides the other (b % out_per_group == 0 or out_per_group % b == 0) and the
output channels fill whole blocks; then the blocks' spans tile the input channels exactly. Other groupings keep
the generic convolution (`BlockGroups.of` says None).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BlockGroups:
    """Channels per group, in and out, and the block of output channels computed together."""

    in_per_group: int
    out_per_group: int
    block: int

    @staticmethod
    def of(in_channels: int, out_channels: int, groups: int, block: int) -> BlockGroups | None:
        """The blocking of a convolution with `groups` groups, or None where blocks and groups do not line up."""
        if groups < 1 or in_channels % groups or out_channels % groups or out_channels % block:
            return None
        out_per_group = out_channels // groups
        if block % out_per_group and out_per_group % block:
            return None
        return BlockGroups(in_channels // groups, out_per_group, block)

    @property
    def groups_per_block(self) -> int:
        """Groups one block covers (1 when a group spans several blocks)."""
        return max(1, self.block // self.out_per_group)

    @property
    def span(self) -> int:
        """Input channels one block reads."""
        return self.groups_per_block * self.in_per_group

    def reads_whole_blocks(self, in_block: int) -> bool:
        """Whether each block's span is whole blocks of an input blocked by `in_block` lanes."""
        return self.span % in_block == 0

    def start(self, cb):
        """The first input channel block `cb` (an int or an index expression) reads."""
        if self.out_per_group <= self.block:
            return cb * self.span
        return cb // (self.out_per_group // self.block) * self.in_per_group

    def start_block(self, cb, in_block: int):
        """`start(cb)` in blocks of `in_block` input lanes (the span being whole blocks)."""
        if self.out_per_group <= self.block:
            return cb * (self.span // in_block)
        return cb // (self.out_per_group // self.block) * (self.in_per_group // in_block)

    def pack(self, weight: np.ndarray) -> np.ndarray:
        """A grouped weight (O, in_per_group, KH, KW) as (O / b, span, KH, KW, b): lane o of block cb holds
        output channel cb * b + o, its group's input channels at their place in the block's span, zero
        elsewhere."""
        out_channels, _, kh, kw = weight.shape
        packed = np.zeros((out_channels // self.block, self.span, kh, kw, self.block), weight.dtype)
        for o in range(out_channels):
            packed[self._place(o)] = weight[o]
        return packed

    def unpack(self, packed: np.ndarray) -> np.ndarray:
        """`pack`'s inverse: (O / b, span, KH, KW, b) back to (O, in_per_group, KH, KW)."""
        blocks, _, kh, kw, _ = packed.shape
        weight = np.empty((blocks * self.block, self.in_per_group, kh, kw), packed.dtype)
        for o in range(len(weight)):
            weight[o] = packed[self._place(o)]
        return weight

    def _place(self, o: int) -> tuple:
        """Where output channel `o`'s weights (in_per_group x KH x KW) lie in the packed array."""
        cb, lane = divmod(o, self.block)
        first = o // self.out_per_group * self.in_per_group - self.start(cb)
        return cb, slice(first, first + self.in_per_group), slice(None), slice(None), lane

    def dense(self, packed: np.ndarray, in_channels: int) -> np.ndarray:
        """The packed weights as the dense (O, in_channels, KH, KW) weight they multiply by, zero between
        groups: what the blocked kernel computes, for references."""
        blocks, span, kh, kw, block = packed.shape
        weight = np.zeros((blocks * block, in_channels, kh, kw), packed.dtype)
        for cb in range(blocks):
            first = self.start(cb)
            weight[cb * block:(cb + 1) * block, first:first + span] = packed[cb].transpose(3, 0, 1, 2)
        return weight
