"""Winograd convolution F(m x m, 3 x 3) (Lavin and Gray, 2015): a 3 x 3, stride-1 convolution computed per tile of
m x m outputs with (m + 2)^2 multiplications per input channel instead of 9 m^2.

With alpha = m + 2, the input tile d (alpha x alpha), the kernel g (3 x 3) and the matrices below, each output tile
is Y = A^T [sum over c of (G g G^T) * (B^T d B)] A, the product taken element-wise. Stages, for x (N, C, H, W):

- `{name}_pad`: x zero-padded and laid out (N, H', W', C), channels innermost, so that the input transform
  runs as vectors across channels; H' = TH m + 2 covers every tile (tiles overhanging the output read zeros and
  their extra outputs are cropped).
- `{name}_vrows` then `{name}_v`: V = (B^T d) B in two passes (a product by a sparse matrix from each side costs
  about half as many terms as the combined one), V as (alpha^2, P, C) for P tiles, padded to the GEMM's row tile.
- `{name}_gemm`: M = V U, one GEMM of P x C by C x O per position of the alpha x alpha tile, the transformed
  weights U laid out (alpha^2, O / block, C, block) so that the GEMM's vectors run across output channels.
- `{name}_yrows` then `{name}` (tag "winograd_conv2d"): Y = A^T (M A), cropped to the output, plus the bias, in
  NCHW.

The transforms are written with the matrices' zeros dropped: each element of a transform is a select over its
position (a chain that a schedule unrolls, leaving only the position's own sum of a few terms).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction as F

import numpy as np

from ...errors import ShapeError
from .. import dims
from .. import expr as E
from .. import tensor as te
from ._arguments import check_same_dtype, int_tuple, side_pads
from ._window import in_bounds

# F(2, 3): interpolation points 0, 1, -1 and infinity.
_F2 = {
    "AT": ((1, 1, 1, 0),
           (0, 1, -1, -1)),
    "G": ((1, 0, 0),
          (F(1, 2), F(1, 2), F(1, 2)),
          (F(1, 2), F(-1, 2), F(1, 2)),
          (0, 0, 1)),
    "BT": ((1, 0, -1, 0),
           (0, 1, 1, 0),
           (0, -1, 1, 0),
           (0, 1, 0, -1)),
}
# F(4, 3): interpolation points 0, 1, -1, 2, -2 and infinity.
_F4 = {
    "AT": ((1, 1, 1, 1, 1, 0),
           (0, 1, -1, 2, -2, 0),
           (0, 1, 1, 4, 4, 0),
           (0, 1, -1, 8, -8, 1)),
    "G": ((F(1, 4), 0, 0),
          (F(-1, 6), F(-1, 6), F(-1, 6)),
          (F(-1, 6), F(1, 6), F(-1, 6)),
          (F(1, 24), F(1, 12), F(1, 6)),
          (F(1, 24), F(-1, 12), F(1, 6)),
          (0, 0, 1)),
    "BT": ((4, 0, -5, 0, 1, 0),
           (0, -4, -4, 1, 1, 0),
           (0, 4, -4, -1, 1, 0),
           (0, -2, -1, 2, 1, 0),
           (0, 2, -1, -2, 1, 0),
           (0, 4, 0, -5, 0, 1)),
}
MATRICES = {2: _F2, 4: _F4}
"""Lavin and Gray's transform matrices by output tile size m: A^T (m x alpha), G (alpha x 3), B^T (alpha x alpha),
exact as fractions."""


def matrices(m: int) -> dict[str, tuple[tuple, ...]]:
    """The transform matrices of F(m x m, 3 x 3); ShapeError for a tile size without them."""
    if m not in MATRICES:
        raise ShapeError(f"winograd: no transform for output tiles of {m} x {m}; available: "
                         f"{', '.join(map(str, sorted(MATRICES)))}")
    return MATRICES[m]


def check_applicable(kernel, stride, dilation, groups: int = 1) -> None:
    """ShapeError naming the reason when a convolution is not a 3 x 3, stride-1, undilated, ungrouped one."""
    reasons = []
    if tuple(kernel) != (3, 3):
        reasons.append(f"a {' x '.join(map(str, kernel))} kernel (it needs 3 x 3)")
    if tuple(stride) != (1, 1):
        reasons.append(f"stride {tuple(stride)} (it needs 1)")
    if tuple(dilation) != (1, 1):
        reasons.append(f"dilation {tuple(dilation)} (it needs 1)")
    if groups != 1:
        reasons.append(f"{groups} groups (it needs 1)")
    if reasons:
        raise ShapeError(f"winograd convolution does not apply to {', '.join(reasons)}")


def transformed_weight_shape(out_channels: int, channels: int, m: int, block: int) -> tuple[int, int, int, int]:
    alpha = m + 2
    return (alpha * alpha, -(-out_channels // block), channels, block)


def transform_weight_numpy(w: np.ndarray, m: int, block: int = 16) -> np.ndarray:
    """U = G g G^T for each (output, input) channel pair of w (O, C, 3, 3), laid out (alpha^2, O / block, C, block)
    with output channels zero-padded: computed once, ahead of time, for a constant weight."""
    check_applicable(w.shape[2:], (1, 1), (1, 1))
    g = np.array(matrices(m)["G"], dtype=np.float64)
    o, c = w.shape[:2]
    positions, blocks = len(g) ** 2, -(-o // block)
    u = np.zeros((positions, blocks * block, c))
    u[:, :o] = np.einsum("ek,ockl,fl->efoc", g, w.astype(np.float64), g).reshape(positions, o, c)
    return np.ascontiguousarray(u.reshape(positions, blocks, block, c).transpose(0, 1, 3, 2).astype(w.dtype))


def transform_weight(w: te.Tensor, m: int, block: int = 16, name: str = "winograd_weight") -> te.Tensor:
    """`transform_weight_numpy` as a compute, for a weight known only at run time."""
    if w.ndim != 4:
        raise ShapeError(f"winograd: expected a weight (O, C, 3, 3), got {w.shape}")
    check_applicable(w.shape[2:], (1, 1), (1, 1))
    g = matrices(m)["G"]
    alpha = len(g)
    out_channels, channels = w.shape[:2]
    zero = E.const(0, w.dtype)

    def u(xi, ob, c, oi):
        o = ob * block + oi
        safe = E.minimum(o, out_channels - 1)
        cases = [_combine([(g[e][k] * g[f][j], w[safe, c, k, j]) for k in range(3) for j in range(3)], w.dtype)
                 for e in range(alpha) for f in range(alpha)]
        return E.select(o < out_channels, _cases(xi, cases), zero)

    return te.compute(transformed_weight_shape(out_channels, channels, m, block), u, name=name, tag="pack",
                      attrs={"m": m, "block": block})


def winograd_conv2d(x: te.Tensor, weight: te.Tensor, m: int = 4, stride=1, padding=0, dilation=1,
                    bias: te.Tensor | None = None, block: int = 16, name: str = "conv2d") -> te.Tensor:
    """conv2d (groups = 1) of x (N, C, H, W) with a 3 x 3 weight (O, C, 3, 3) by F(m x m, 3 x 3); ShapeError for
    any other kernel, a stride or a dilation."""
    if weight.ndim != 4:
        raise ShapeError(f"winograd_conv2d: expected weight (O, C, KH, KW), got {weight.shape}")
    check_applicable(weight.shape[2:], int_tuple(stride, 2, "stride", "winograd_conv2d"),
                     int_tuple(dilation, 2, "dilation", "winograd_conv2d"))
    u = transform_weight(weight, m, block, name=f"{name}_u")
    return winograd_conv2d_transformed(x, u, weight.shape[0], m, padding, bias=bias, name=name)


def row_tile(tiles: int) -> int:
    """Rows (tiles) per register tile of the GEMM: 4 to 6 (6 x 2 vectors of accumulators fill AVX2's registers),
    whichever wastes the least on padding rows and on loads per multiply."""
    if tiles < 4:
        return tiles
    return min((6, 5, 4), key=lambda mr: -(-tiles // mr) * mr * (1 + 3 / mr))


@dataclasses.dataclass(frozen=True)
class _Tiling:
    """How the output is cut into m x m tiles: th x tw per image, `tiles` in all, `rows` padded for the GEMM (each
    an int, or an expression of a dynamic image size)."""

    m: int
    th: object
    tw: object
    tiles: object
    rows: object

    def tile(self, b, h0, w0):
        """The tile holding output (h0 * m, w0 * m) of image b."""
        return (b * self.th + h0) * self.tw + w0


def winograd_conv2d_transformed(x: te.Tensor, u: te.Tensor, out_channels: int, m: int, padding=0,
                                bias: te.Tensor | None = None, name: str = "conv2d",
                                out_block: int | None = None) -> te.Tensor:
    """The convolution with weights already transformed by `transform_weight` (or its NumPy twin). x is (N, C, H,
    W) or blocked (N, C / b, H, W, b) (te/nn/nchwc.py); the output is NCHW, or with `out_block` blocked
    (N, O / out_block, OH, OW, out_block) with a bias packed as (O / out_block, out_block)."""
    alpha = m + 2
    matrices(m)  # a ShapeError for a tile size without transforms
    if x.ndim not in (4, 5) or u.ndim != 4:
        raise ShapeError(f"winograd_conv2d: expected x (N, C, H, W) or (N, C / b, H, W, b) and transformed weights "
                         f"(alpha^2, O / b, C, b), got {x.shape} and {u.shape}")
    check_same_dtype([x, u], "winograd_conv2d")
    positions, blocks, channels, block = u.shape
    n, height, width = x.shape[0], x.shape[2], x.shape[3]
    held = x.shape[1] * (x.shape[4] if x.ndim == 5 else 1)
    if positions != alpha * alpha or not channels <= held < channels + (x.shape[4] if x.ndim == 5 else 1):
        raise ShapeError(f"winograd_conv2d: F({m}, 3) weights for x {x.shape} are "
                         f"({alpha * alpha}, O / b, C, b) with C its channels, got {u.shape}")
    if not (blocks - 1) * block < out_channels <= blocks * block:
        raise ShapeError(f"winograd_conv2d: {out_channels} output channels do not fit {blocks} blocks of {block}")
    pads = side_pads(padding, 2, "winograd_conv2d")
    oh, ow = dims.dim(height + sum(pads[0]) - 2), dims.dim(width + sum(pads[1]) - 2)
    if not (dims.provably_le(1, oh) and dims.provably_le(1, ow)):
        raise ShapeError(f"winograd_conv2d: a 3 x 3 kernel does not fit the padded input of {x.shape}")
    th, tw = dims.ceildiv(oh, m), dims.ceildiv(ow, m)
    tiles = dims.dim(n * th * tw)
    mr = row_tile(dims.representative(tiles))  # a dynamic image's at the size its schedules are chosen for
    tiling = _Tiling(m, th, tw, tiles, dims.dim(dims.ceildiv(tiles, mr) * mr))
    attrs = {"m": m, "mr": mr, "block": block, "tiles": tuple(dims.representative(t) for t in (n, th, tw)),
             "padding": pads}
    v = _input_transform(x, channels, tiling, pads, attrs, name)
    rc = te.reduce_axis(channels, "rc")
    gemm = te.compute((alpha * alpha, tiling.rows, blocks * block),
                      lambda xi, p, o: te.sum(v[xi, p, rc] * u[xi, o // block, rc, o % block], axis=rc),
                      name=f"{name}_gemm", tag="winograd_gemm", attrs=attrs)
    return _output_transform(gemm, tiling, (n, out_channels, oh, ow), bias, attrs, name, out_block)


def _input_transform(x: te.Tensor, channels: int, tiling: _Tiling, pads, attrs: dict, name: str) -> te.Tensor:
    """V = B^T d B for every tile, as (alpha^2, rows, C): first B^T d (`{name}_vrows`), then times B. GEMM rows past
    the last tile repeat it; their products are dropped."""
    m, bt, dtype = tiling.m, matrices(tiling.m)["BT"], x.dtype
    alpha = m + 2
    n = x.shape[0]
    (pt, _), (pl, _) = pads

    def padded(b, h, w, c):
        coords = (h - pt, w - pl)
        index = (b, c, *coords) if x.ndim == 4 else (b, c // x.shape[4], *coords, c % x.shape[4])
        return E.select(in_bounds(coords, x.shape[2:4]), x[index], E.const(0, dtype))

    d = te.compute((n, tiling.th * m + 2, tiling.tw * m + 2, channels), padded, name=f"{name}_pad",
                   tag="winograd_pad", attrs=attrs)

    def rows(p, e, j, c):
        tile = E.minimum(p, tiling.tiles - 1)
        b, rest = tile // (tiling.th * tiling.tw), tile % (tiling.th * tiling.tw)
        h0, w0 = (rest // tiling.tw) * m, (rest % tiling.tw) * m
        return _cases(e, [_combine([(bt[k][i], d[b, h0 + i, w0 + j, c]) for i in range(alpha)], dtype)
                          for k in range(alpha)])

    half = te.compute((tiling.rows, alpha, alpha, channels), rows, name=f"{name}_vrows", tag="winograd_input_rows",
                      attrs=attrs)

    def columns(xi, p, c):
        return _cases(xi, [_combine([(bt[f][j], half[p, e, j, c]) for j in range(alpha)], dtype)
                           for e in range(alpha) for f in range(alpha)])

    return te.compute((alpha * alpha, tiling.rows, channels), columns, name=f"{name}_v", tag="winograd_input",
                      attrs=attrs)


def _output_transform(gemm: te.Tensor, tiling: _Tiling, shape, bias: te.Tensor | None, attrs: dict,
                      name: str, out_block: int | None) -> te.Tensor:
    """Y = A^T M A per tile, cropped to the output: first M A (`{name}_yrows`, (tiles, alpha, m, O), O rounded up
    to whole output blocks, whose lanes past the GEMM's columns repeat its last), then A^T times it, plus the
    bias, in NCHW or blocked."""
    m, at, dtype = tiling.m, matrices(tiling.m)["AT"], gemm.dtype
    alpha = m + 2
    n, out_channels, oh, ow = shape
    lanes = out_channels if out_block is None else -(-out_channels // out_block) * out_block
    columns = gemm.shape[2]

    def rows(p, e, s, o):
        col = o if lanes <= columns else E.minimum(o, columns - 1)
        return _cases(s, [_combine([(at[k][f], gemm[e * alpha + f, p, col]) for f in range(alpha)], dtype)
                          for k in range(m)])

    half = te.compute((tiling.tiles, alpha, m, lanes), rows, name=f"{name}_yrows", tag="winograd_output",
                      attrs=attrs)

    def value(b, o, h, w):
        tile = tiling.tile(b, h // m, w // m)
        return _cases(h % m, [_combine([(at[r][e], half[tile, e, w % m, o]) for e in range(alpha)], dtype)
                              for r in range(m)])

    if out_block is None:
        def output(b, o, h, w):
            return value(b, o, h, w) if bias is None else value(b, o, h, w) + bias[o]

        return te.compute(shape, output, name=name, tag="winograd_conv2d", attrs=attrs)

    def blocked(b, ob, h, w, oi):
        y = value(b, ob * out_block + oi, h, w)
        return y if bias is None else y + bias[ob, oi]

    return te.compute((n, lanes // out_block, oh, ow, out_block), blocked, name=name, tag="winograd_conv2d",
                      attrs=attrs)


def _combine(terms, dtype: str) -> E.Expr:
    """sum of coefficient * expression over `terms`, zero coefficients dropped, unit ones not multiplied."""
    out = None
    for coef, value in terms:
        if coef == 0:
            continue
        sign = 1 if coef > 0 else -1
        magnitude = value if abs(coef) == 1 else value * E.const(float(abs(coef)), dtype)
        if out is None:
            out = magnitude if sign > 0 else -magnitude
        else:
            out = out + magnitude if sign > 0 else out - magnitude
    return E.const(0, dtype) if out is None else out


def _cases(index: E.Expr, values: list[E.Expr]) -> E.Expr:
    """values[index], as a chain of selects that folds to one value when `index` is a constant."""
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = E.select(index.eq(k), values[k], out)
    return out
