"""The op families; importing this package declares every op in the registry."""

from . import einsum as einsum
from . import elementwise as elementwise
from . import bitwise as bitwise
from . import activation as activation
from . import nn as nn
from . import norm as norm
from . import reduce as reduce
from . import shape as shape
from . import indexing as indexing
from . import packed as packed
from . import resize as resize
from . import fused as fused
from . import layout as layout
from . import conv_algorithms as conv_algorithms
from . import sampling as sampling
from . import signal as signal
from . import deform_conv as deform_conv
from . import quant as quant
from . import attention as attention
from . import dynamic as dynamic
from . import col2im as col2im
