"""BlockGroups: which input channels each block of a grouped convolution reads. Packing puts every weight at its
place in its block's span and nothing else (the dense weight it stands for is the grouped weight, block-diagonal),
and unpacking gives the weight back, for every grouping where blocks and groups line up."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from tilegrad.te.nn.conv_groups import BlockGroups


def _block_diagonal(weight: np.ndarray, groups: int) -> np.ndarray:
    """A grouped weight (O, C / groups, KH, KW) as the dense (O, C, KH, KW) weight of the same convolution."""
    out_channels, per_group, kh, kw = weight.shape
    dense = np.zeros((out_channels, per_group * groups, kh, kw), weight.dtype)
    out_per_group = out_channels // groups
    for o in range(out_channels):
        g = o // out_per_group
        dense[o, g * per_group:(g + 1) * per_group] = weight[o]
    return dense


@st.composite
def groupings(draw):
    """(in channels, out channels, groups, block) where blocks and groups line up."""
    block = draw(st.sampled_from([4, 8, 16]))
    out_per_group = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if d % block == 0 or block % d == 0]))
    groups = draw(st.integers(1, 8).filter(lambda g: g * out_per_group % block == 0))
    return draw(st.integers(1, 6)) * groups, out_per_group * groups, groups, block


@given(groupings(), st.integers(0, 2 ** 31))
def test_packing_is_the_block_diagonal_weight_and_unpacks_to_the_weight(grouping, seed):
    in_channels, out_channels, groups, block = grouping
    g = BlockGroups.of(in_channels, out_channels, groups, block)
    weight = np.random.default_rng(seed).standard_normal((out_channels, in_channels // groups, 2, 3)).astype("float32")
    packed = g.pack(weight)
    assert packed.shape == (out_channels // block, g.span, 2, 3, block)
    np.testing.assert_array_equal(g.dense(packed, in_channels), _block_diagonal(weight, groups))
    np.testing.assert_array_equal(g.unpack(packed), weight)
    starts = [g.start(cb) for cb in range(out_channels // block)]
    assert starts[0] == 0 and starts[-1] + g.span == in_channels  # the spans end at the last channel
    assert all(g.start_block(cb, 1) == s for cb, s in enumerate(starts))


def test_groupings_that_do_not_line_up_have_no_blocking():
    assert BlockGroups.of(24, 24, 2, 16) is None  # 12 output channels a group: neither divides 16
    assert BlockGroups.of(8, 8, 2, 16) is None  # 8 output channels: not a whole block
    assert BlockGroups.of(10, 12, 3, 4) is None  # 10 input channels in 3 groups
    assert BlockGroups.of(128, 128, 32, 16).span == 16  # ResNeXt's first stage: 4 groups a block
    assert BlockGroups.of(1024, 1024, 32, 16).span == 32  # its last: 2 blocks a group
