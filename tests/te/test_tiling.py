"""A row's register tile: as few tiles as any width allows, the least padding among those, a divisor where one
does as well."""

from hypothesis import given
from hypothesis import strategies as st

from tilegrad.schedule.tiling import largest_divisor
from tilegrad.te.tiling import row_tile


@given(st.integers(1, 300), st.integers(1, 40))
def test_row_tile_takes_the_fewest_tiles_then_the_least_padding(n, at_most):
    c = row_tile(n, at_most)
    tiles = -(-n // c)
    assert 1 <= c <= min(n, at_most)
    others = range(1, min(n, at_most) + 1)
    assert tiles == min(-(-n // d) for d in others)
    assert tiles * c - n == min(-(-n // d) * d - n for d in others if -(-n // d) == tiles)
    if -(-n // largest_divisor(n, at_most)) == tiles:  # a divisor does as well: no guarded tail
        assert n % c == 0


def test_a_prime_row_runs_in_near_even_tiles():
    assert [row_tile(17, 7), row_tile(17, 14), row_tile(13, 7), row_tile(62, 30)] == [6, 9, 7, 21]
    assert [row_tile(56, 7), row_tile(56, 30), row_tile(112, 30), row_tile(7, 30)] == [7, 28, 28, 7]
