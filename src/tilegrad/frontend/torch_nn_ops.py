"""ATen's layer ops (matrix products, convolutions, norms, attention, pooling, resizing) mapped onto the registry,
one small function each like `torch_ops.py`; the fused fast paths PyTorch takes for `nn.TransformerEncoderLayer`
and `nn.MultiheadAttention` at inference are spelled out in registry ops."""

from __future__ import annotations

import math

import numpy as np

from ..errors import TrainingModeError, UnsupportedFeatureError
from .torch_builder import TorchBuilder as B
from .torch_op_table import Missing, torch_op
from .transposed_conv import transposed_as_conv

# ---- matrix products and convolution ----

@torch_op("linear", keep=True)
def _linear(b: B, name, x, w, bias=None):
    if len(x.shape) == 2:
        return b.op("gemm", x, w, *([bias] if bias is not None else []), name=name, trans_b=1)
    wt = (b.const(np.ascontiguousarray(w.data.T), f"{name}_weight_t") if w.is_constant
          else b.op("transpose", w, name=f"{name}_weight_t", perm=(1, 0)))
    out = b.op("matmul", x, wt, name=name if bias is None else f"{name}_matmul")
    return out if bias is None else b.op("add", out, bias, name=name)


@torch_op("addmm")
def _addmm(b: B, name, c, x, w, *, beta=1, alpha=1):
    return b.op("gemm", x, w, c, name=name, alpha=float(alpha), beta=float(beta))


@torch_op("mm", "bmm")
@torch_op("matmul", keep=True)
def _matmul(b: B, name, x, y):
    return b.op("matmul", x, y, name=name)


def _per_axis(values, nd: int) -> tuple[int, ...]:
    values = tuple(values) if isinstance(values, (list, tuple)) else (values,)
    return values * nd if len(values) == 1 else values


@torch_op("convolution")
def _convolution(b: B, name, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    nd = len(x.shape) - 2
    strides, dilations = _per_axis(stride, nd), _per_axis(dilation, nd)
    pads = _per_axis(padding, nd) * 2
    inputs = (x, w) if bias is None else (x, w, bias)
    if not transposed:
        return b.op("conv", *inputs, name=name, strides=strides, pads=pads, dilations=dilations, group=groups)
    extra = _per_axis(output_padding, nd)
    as_conv = transposed_as_conv(b, name, x, w, bias, strides, pads, dilations, extra, groups)
    if as_conv is not None:
        return as_conv
    return b.op("conv_transpose", *inputs, name=name, strides=strides, pads=pads, dilations=dilations, group=groups,
                output_padding=extra)


# ---- normalisation and attention ----

@torch_op("_native_batch_norm_legit_no_training")
def _batch_norm(b: B, name, x, weight, bias, mean, var, momentum, eps):
    channels = x.shape[1]
    scale = b.const(np.ones(channels, x.dtype), f"{name}_scale") if weight is None else weight
    shift = b.const(np.zeros(channels, x.dtype), f"{name}_shift") if bias is None else bias
    out = b.op("batch_norm", x, scale, shift, mean, var, name=name, epsilon=float(eps))
    return out, Missing("the saved mean of a batch norm"), Missing("the saved variance of a batch norm")


@torch_op("native_layer_norm")
def _native_layer_norm(b: B, name, x, normalized_shape, weight, bias, eps):
    out = _layer_norm(b, name, x, normalized_shape, weight, bias, eps)
    return out, Missing("the mean of a layer norm"), Missing("the inverse deviation of a layer norm")


@torch_op("layer_norm", keep=True)
def _layer_norm(b: B, name, x, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    axis = -len(normalized_shape)
    if weight is None and bias is not None:
        weight = b.const(np.ones(tuple(normalized_shape), x.dtype), f"{name}_scale")
    inputs = tuple(v for v in (weight, bias) if v is not None)
    return b.op("layer_norm", x, *inputs, name=name, axis=axis, epsilon=float(eps))


@torch_op("native_group_norm")
def _native_group_norm(b: B, name, x, weight, bias, batch, channels, spatial, groups, eps):
    out = _group_norm(b, name, x, groups, weight, bias, eps)
    return out, Missing("the mean of a group norm"), Missing("the inverse deviation of a group norm")


@torch_op("group_norm", keep=True)
def _group_norm(b: B, name, x, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """A layer norm over each group of channels with their spatial axes (x viewed as (N, groups, rest)), then
    the per-channel scale and shift."""
    grouped = b.op("reshape", x, name=f"{name}_groups", shape=(x.shape[0], num_groups, -1))
    normed = b.op("layer_norm", grouped, name=f"{name}_norm", axis=-1, epsilon=float(eps))
    out = b.op("reshape", normed, name=f"{name}_ungrouped" if weight is not None or bias is not None else name,
               shape=x.shape)
    per_channel = (x.shape[1],) + (1,) * (len(x.shape) - 2)
    for op, v in (("mul", weight), ("add", bias)):
        if v is not None:
            out = b.op(op, out, b.op("reshape", v, name=f"{name}_{op}_per_channel", shape=per_channel),
                       name=f"{name}_{op}")
    return out


def _attend(b: B, name, q, k, v, mask=None, *, masked_when=True, scale=None):
    """softmax(q k^T * scale + mask) v over the last two axes, and the weights. A float mask is added to the
    scores; a bool one drops the scores where it equals `masked_when` (True in nn.MultiheadAttention, False in
    scaled_dot_product_attention, whose bool masks say where to attend)."""
    rank = len(k.shape)
    perm = (*range(rank - 2), rank - 1, rank - 2)
    scores = b.op("matmul", q, b.op("transpose", k, name=f"{name}_keys_t", perm=perm), name=f"{name}_scores")
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = b.op("mul", scores, b.scalar(factor, scores.dtype, f"{name}_scale"), name=f"{name}_scaled")
    if mask is not None and mask.dtype == "bool":
        lowest = b.scalar(-math.inf, scores.dtype, f"{name}_masked")
        kept = (lowest, scores) if masked_when else (scores, lowest)
        scores = b.op("where", mask, *kept, name=f"{name}_masked")
    elif mask is not None:
        scores = b.op("add", scores, b.cast(mask, scores.dtype, f"{name}_mask"), name=f"{name}_masked")
    weights = b.op("softmax", scores, name=f"{name}_weights", axis=-1)
    return b.op("matmul", weights, v, name=name), weights


@torch_op("scaled_dot_product_attention", keep=True)
def _attention(b: B, name, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
    """The math of PyTorch's reference implementation."""
    if dropout_p:
        raise TrainingModeError("attention dropout; tilegrad compiles inference: call module.eval()")
    if enable_gqa and q.shape[-3:-2] != k.shape[-3:-2]:
        raise UnsupportedFeatureError("grouped-query attention (enable_gqa with fewer key heads) is not supported")
    if is_causal:
        attn_mask = b.const(np.tril(np.ones((q.shape[-2], k.shape[-2]), bool)), f"{name}_causal")
    return _attend(b, name, q, k, v, attn_mask, masked_when=False, scale=scale)[0]


def _heads(b: B, name, x, heads: int):
    """(N, L, E) -> (N, heads, L, E / heads)."""
    n, length, e = x.shape
    split = b.op("reshape", x, name=f"{name}_split", shape=(n, length, heads, e // heads))
    return b.op("transpose", split, name=f"{name}_heads", perm=(0, 2, 1, 3))


def _fast_mask(b: B, name, mask, mask_type, batch: int):
    """The mask of PyTorch's fused attention paths, shaped to broadcast over (N, heads, L, S): type 0 is (L, S),
    type 1 a key padding mask (N, S), type 2 already (N, heads, L, S)."""
    if mask is None or mask_type != 1:
        return mask
    return b.op("reshape", mask, name=f"{name}_mask_rows", shape=(batch, 1, 1, mask.shape[-1]))


def _self_attention(b: B, name, query, key, value, embed_dim, heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                    mask, mask_type):
    """The attention of nn.MultiheadAttention's fast path: projections, heads, attention, output projection."""
    if query is key is value:
        qkv = _linear(b, f"{name}_qkv", query, qkv_weight, qkv_bias)
        q, k, v = (b.op("slice", qkv, name=f"{name}_{part}", starts=(i * embed_dim,), ends=((i + 1) * embed_dim,),
                        axes=(2,)) for i, part in enumerate("qkv"))
    else:
        def rows(w, i, what):
            return b.op("slice", w, name=f"{name}_{what}", starts=(i * embed_dim,), ends=((i + 1) * embed_dim,),
                        axes=(0,))
        q, k, v = (_linear(b, f"{name}_{part}", x, rows(qkv_weight, i, f"w{part}"), rows(qkv_bias, i, f"b{part}"))
                   for i, (part, x) in enumerate(zip("qkv", (query, key, value))))
    mask = _fast_mask(b, name, mask, mask_type, query.shape[0])
    q, k, v = (_heads(b, f"{name}_{part}", t, heads) for part, t in zip("qkv", (q, k, v)))
    out, weights = _attend(b, f"{name}_attention", q, k, v, mask)
    n, length, e = query.shape
    merged = b.op("reshape", b.op("transpose", out, name=f"{name}_merge", perm=(0, 2, 1, 3)), name=f"{name}_merged",
                  shape=(n, length, e))
    return _linear(b, name, merged, proj_weight, proj_bias), weights


@torch_op("_native_multi_head_attention")
def _multi_head_attention(b: B, name, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                          proj_bias, mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    out, weights = _self_attention(b, name, query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                   proj_weight, proj_bias, mask, mask_type)
    if not need_weights:
        return out, Missing("the attention weights of aten._native_multi_head_attention (need_weights=False)")
    if average_attn_weights:
        weights = b.op("reduce_mean", weights, name=f"{name}_mean_weights", axes=(1,), keepdims=0)
    return out, weights


@torch_op("_transformer_encoder_layer_fwd")
def _encoder_layer(b: B, name, src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                   norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
                   ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    """nn.TransformerEncoderLayer's fast path: attention and feed-forward blocks, each with a residual and a
    layer norm (before the block with norm_first, after it otherwise)."""
    def norm(x, w, bias, tag):
        return b.op("layer_norm", x, w, bias, name=f"{name}_{tag}", axis=-1, epsilon=float(eps))

    def attention(x):
        return _self_attention(b, f"{name}_attention", x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                               proj_weight, proj_bias, mask, mask_type)[0]

    def feed_forward(x):
        hidden = _linear(b, f"{name}_ffn_1", x, ffn_weight_1, ffn_bias_1)
        hidden = b.op("gelu" if use_gelu else "relu", hidden, name=f"{name}_activation")
        return _linear(b, f"{name}_ffn_2", hidden, ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = b.op("add", x, attention(norm(x, norm_weight_1, norm_bias_1, "norm_1")), name=f"{name}_residual_1")
        return b.op("add", x, feed_forward(norm(x, norm_weight_2, norm_bias_2, "norm_2")), name=name)
    x = norm(b.op("add", x, attention(x), name=f"{name}_residual_1"), norm_weight_1, norm_bias_1, "norm_1")
    return norm(b.op("add", x, feed_forward(x), name=f"{name}_residual_2"), norm_weight_2, norm_bias_2, "norm_2")


# ---- pooling and resizing ----

def _max_pool(b: B, name, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    nd = len(kernel_size)
    kernel = tuple(kernel_size)
    out = b.op("max_pool", x, name=name, kernel_shape=kernel, strides=_per_axis(stride or kernel, nd),
               pads=_per_axis(padding, nd) * 2, dilations=_per_axis(dilation, nd), ceil_mode=int(ceil_mode))
    return out, Missing("the indices of a max pool")


torch_op("max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices")(_max_pool)


@torch_op("max_pool1d", "max_pool2d", "max_pool3d")
def _max_pool_values(b: B, name, *args):
    return _max_pool(b, name, *args)[0]


@torch_op("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(b: B, name, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    if divisor_override is not None:
        raise UnsupportedFeatureError("average pooling with divisor_override is not supported")
    nd = len(kernel_size)
    kernel = tuple(kernel_size)
    return b.op("avg_pool", x, name=name, kernel_shape=kernel, strides=_per_axis(stride or kernel, nd),
                pads=_per_axis(padding, nd) * 2, dilations=(1,) * nd, ceil_mode=int(ceil_mode),
                count_include_pad=int(count_include_pad))


@torch_op("adaptive_avg_pool1d", "_adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool3d")
@torch_op("adaptive_avg_pool2d", keep=True)
def _adaptive_avg_pool(b: B, name, x, output_size):
    sizes, out = x.shape[2:], _per_axis(output_size, len(x.shape) - 2)
    if all(o == 1 for o in out):
        return b.op("global_avg_pool", x, name=name)
    if any(n % o for n, o in zip(sizes, out)):
        return _uneven_adaptive_avg_pool(b, name, x, sizes, out)
    kernel = tuple(n // o for n, o in zip(sizes, out))
    return b.op("avg_pool", x, name=name, kernel_shape=kernel, strides=kernel, pads=(0,) * (2 * len(kernel)),
                dilations=(1,) * len(kernel))


def _uneven_adaptive_avg_pool(b: B, name, x, sizes, out):
    """Windows of unequal, overlapping extent (VGG pools 2x2 to 7x7): per spatial axis, a product with the
    constant matrix that averages window i = [floor(i*n/o), ceil((i+1)*n/o)), the axis moved last and back."""
    rank = len(x.shape)
    for k, (n, o) in enumerate(zip(sizes, out)):
        if n == o:
            continue
        axis = rank - len(sizes) + k
        perm = tuple(i for i in range(rank) if i != axis) + (axis,)
        back = tuple(int(np.argsort(perm)[i]) for i in range(rank))
        moved = x if axis == rank - 1 else b.op("transpose", x, name=f"{name}_axis{k}_last", perm=perm)
        mean = np.zeros((n, o), np.float32)
        for i in range(o):
            lo, hi = i * n // o, -(-(i + 1) * n // o)
            mean[lo:hi, i] = 1.0 / (hi - lo)
        pooled = b.op("matmul", moved, b.const(mean.astype(x.dtype), f"{name}_axis{k}_windows"),
                      name=f"{name}_axis{k}")
        x = pooled if axis == rank - 1 else b.op("transpose", pooled, name=f"{name}_axis{k}_back", perm=back)
    return x


@torch_op("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max_pool(b: B, name, x, output_size):
    sizes, out = x.shape[2:], _per_axis(output_size, len(x.shape) - 2)
    if all(o == 1 for o in out):
        return b.op("global_max_pool", x, name=name), Missing("the indices of an adaptive max pool")
    if any(n % o for n, o in zip(sizes, out)):
        raise UnsupportedFeatureError(f"adaptive max pooling of spatial size {list(sizes)} to {list(out)}: "
                                      f"only sizes that divide evenly are supported")
    kernel = tuple(n // o for n, o in zip(sizes, out))
    return _max_pool(b, name, x, kernel, kernel)


@torch_op("im2col", keep=True)
def _im2col(b: B, name, x, kernel_size, dilation, padding, stride):
    """`F.unfold` (ConvBERT's span convolution): each kernel offset's strided window of the padded input, laid
    out as (N, C * kh * kw, positions) with the channel outermost, as PyTorch orders them."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = (_per_axis(v, 2) for v in (kernel_size, dilation, padding, stride))
    batched = x if len(x.shape) == 4 else b.op("reshape", x, name=f"{name}_batched", shape=(1, *x.shape))
    n, c, h, w = batched.shape
    oh, ow = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if ph or pw:
        batched = b.op("pad", batched, name=f"{name}_pad", pads=(0, 0, ph, pw, 0, 0, ph, pw), value=0.0)
    windows = []
    for i in range(kh):
        for j in range(kw):
            window = b.op("slice", batched, name=f"{name}_offset_{i}_{j}", starts=(i * dh, j * dw),
                          ends=(i * dh + (oh - 1) * sh + 1, j * dw + (ow - 1) * sw + 1), axes=(2, 3), steps=(sh, sw))
            windows.append(b.op("reshape", window, name=f"{name}_offset_{i}_{j}_flat", shape=(n, c, 1, oh * ow)))
    stacked = windows[0] if len(windows) == 1 else b.op("concat", *windows, name=f"{name}_offsets", axis=2)
    return b.op("reshape", stacked, name=name, shape=b.out_shape)


@torch_op("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d")
def _upsample_nearest(b: B, name, x, output_size=None, scale_factors=None):
    if scale_factors and any(n * f != o for n, f, o in zip(x.shape[2:], scale_factors, b.out_shape[2:])):
        raise UnsupportedFeatureError(f"nearest upsampling by the fractional factors {list(scale_factors)}")
    return b.op("resize", x, name=name, sizes=b.out_shape, mode="nearest", transform="asymmetric",
                nearest_mode="floor")


@torch_op("upsample_bilinear2d")
def _upsample_bilinear(b: B, name, x, output_size=None, align_corners=False, scale_factors=None):
    if scale_factors and any(n * f != o for n, f, o in zip(x.shape[2:], scale_factors, b.out_shape[2:])):
        raise UnsupportedFeatureError(f"bilinear upsampling by the fractional factors {list(scale_factors)}")
    return b.op("resize", x, name=name, sizes=b.out_shape, mode="linear",
                transform="align_corners" if align_corners else "pytorch_half_pixel")
