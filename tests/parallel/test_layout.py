"""Layouts: the seed's figures (3 layouts of a matrix on 2 devices, 4 on a 2x2 device matrix), strategies turned
into layouts, canonical forms, and clear errors."""

import numpy as np
import pytest

from tilegrad.errors import ShapeError, TilegradError
from tilegrad.parallel.layout import Layout, all_layouts, shard


def test_a_matrix_on_two_devices_has_three_layouts_row_column_replicated():
    x = np.arange(16.0).reshape(4, 4)
    layouts = all_layouts((4, 4), 2)
    assert len(layouts) == 3
    blocks = {str(lay): [s.tolist() for s in shard(x, lay)] for lay in layouts}
    assert [x[:2].tolist(), x[2:].tolist()] in blocks.values()          # row split
    assert [x[:, :2].tolist(), x[:, 2:].tolist()] in blocks.values()    # column split
    assert [x.tolist(), x.tolist()] in blocks.values()                  # replicated


def test_the_four_layouts_of_a_matrix_on_a_two_by_two_device_matrix():
    x = np.arange(16.0).reshape(4, 4)
    row_col = shard(x, Layout.of((2, 2), (0, 1)))
    assert [b.tolist() for b in row_col] == [x[:2, :2].tolist(), x[:2, 2:].tolist(), x[2:, :2].tolist(),
                                              x[2:, 2:].tolist()]
    assert all(np.array_equal(b, x) for b in shard(x, Layout.of((2, 2), (-1, -1))))
    row_rep = shard(x, Layout.of((2, 2), (0, -1)))     # devices 0, 1 hold the top rows, 2, 3 the bottom ones
    assert [b.tolist() for b in row_rep] == [x[:2].tolist()] * 2 + [x[2:].tolist()] * 2
    col_rep = shard(x, Layout.of((2, 2), (-1, 1)))     # devices 0, 2 hold the left columns
    assert [b.tolist() for b in col_rep] == [x[:, :2].tolist(), x[:, 2:].tolist()] * 2
    assert Layout.of((2, 2), (0, -1)).replication == 2


def test_a_strategy_gives_a_device_matrix_with_the_replicas_first():
    lay = Layout.from_slices((2, 1), 4)
    assert lay.device_matrix == (2, 2, 1) and lay.replication == 2
    assert lay.local_shape((8, 6)) == (4, 6)
    assert lay.same_placement(Layout.of((2, 2), (1, -1)))


def test_canonical_form_factors_axes_so_equal_placements_compare_equal():
    assert Layout.of((4,), (0, -1)).same_placement(Layout.of((2, 2), ((0, 1), -1)))
    assert not Layout.of((4,), (0, -1)).same_placement(Layout.of((2, 2), ((1, 0), -1)))


def test_layout_errors_say_what_is_wrong():
    with pytest.raises(TilegradError, match="uses an axis twice"):
        Layout.of((2, 2), (0, 0))
    with pytest.raises(ShapeError, match="dimension 0 of size 5 cannot be cut into 2"):
        Layout.of((2,), (0, -1)).local_shape((5, 4))
    with pytest.raises(TilegradError, match="do not divide 4 devices"):
        Layout.from_slices((3, 1), 4)
