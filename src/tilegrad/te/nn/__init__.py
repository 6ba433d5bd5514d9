"""The op library: computes for the usual neural-network operators, grouped by family.

Each op returns a Tensor whose compute carries a `tag` naming its family, by which default schedules are chosen,
and `attrs` recording its parameters. Tags used: "matmul", "batch_matmul", "dense", "conv1d", "conv2d", "conv3d",
"depthwise_conv2d", "packed_matmul", "packed_conv2d", "packed_int8_matmul", "pack", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose", "pool", "reduce", "elemwise",
"broadcast", "injective", and for the final stage of multi-stage ops "softmax", "log_softmax" and "layer_norm",
whose `row_axes` attribute (the leading axes that are rows) asks the default schedule to run the chain row by row.
"""

from .conv import (
    conv1d as conv1d, conv2d as conv2d, conv3d as conv3d, depthwise_conv2d as depthwise_conv2d,
    conv1d_transpose as conv1d_transpose, conv2d_transpose as conv2d_transpose, conv3d_transpose as conv3d_transpose,
)
from .elementwise import (
    broadcast_shape as broadcast_shape, broadcast_index as broadcast_index, add as add, sub as sub, mul as mul,
    div as div, maximum as maximum, minimum as minimum, power as power, equal as equal, not_equal as not_equal,
    less as less, less_equal as less_equal, greater as greater, greater_equal as greater_equal, where as where,
    relu as relu, leaky_relu as leaky_relu, sigmoid as sigmoid, tanh as tanh, exp as exp, log as log, sqrt as sqrt,
    erf as erf, gelu as gelu, clip as clip, cast as cast, mod as mod, prelu as prelu, softplus as softplus,
    softsign as softsign, mish as mish, elu as elu, selu as selu, celu as celu, thresholded_relu as thresholded_relu,
    shrink as shrink,
)
from .linalg import (
    matmul as matmul, batch_matmul as batch_matmul, dense as dense, packed_matmul as packed_matmul,
    pack_matmul_rhs as pack_matmul_rhs, panel_matmul as panel_matmul,
)
from .packed_conv import (
    blocked_conv2d as blocked_conv2d, pack_conv_weight as pack_conv_weight, packed_conv2d as packed_conv2d,
)
from .quantized import (
    DOT_GROUP as DOT_GROUP, QUANTIZED_RANGES as QUANTIZED_RANGES, quantize as quantize, dequantize as dequantize,
    quantized_matmul as quantized_matmul, quantized_conv2d as quantized_conv2d,
    int8_conv_weight_shape as int8_conv_weight_shape, pack_int8_conv_weight as pack_int8_conv_weight,
    quantized_im2col_conv as quantized_im2col_conv,
    quantized_depthwise_nhwc as quantized_depthwise_nhwc, group_channels as group_channels,
)
from .attention import attention as attention, attention_shape as attention_shape
from .attention_blockwise import DEFAULT_KEY_BLOCK as DEFAULT_KEY_BLOCK
from .attention_blockwise import attention_blockwise as attention_blockwise
from .normalization import softmax as softmax, log_softmax as log_softmax, layer_norm as layer_norm, lrn as lrn
from .pool import (
    max_pool1d as max_pool1d, max_pool2d as max_pool2d, max_pool3d as max_pool3d, avg_pool1d as avg_pool1d,
    avg_pool2d as avg_pool2d, avg_pool3d as avg_pool3d, global_avg_pool as global_avg_pool,
    global_max_pool as global_max_pool,
)
from .reduction import (
    reduce_sum as reduce_sum, reduce_mean as reduce_mean, reduce_max as reduce_max, reduce_min as reduce_min,
    reduce_prod as reduce_prod,
)
from .transform import (
    transpose as transpose, reshape as reshape, flatten as flatten, pad as pad, concat as concat, slice_ as slice,
    gather as gather, gather_elements as gather_elements, broadcast_to as broadcast_to, expand as expand,
)
from .indexing import (
    gather_nd as gather_nd, scatter_elements as scatter_elements, scatter_nd as scatter_nd, one_hot as one_hot,
    topk_indices as topk_indices,
)
