"""The GraphBuilder every ATen mapping builds with, and the dtypes it accepts: it knows what PyTorch says the node
being converted produces, and refuses values of a dtype the native code has no buffers for."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..errors import UnsupportedFeatureError
from ..ir.graph import GraphBuilder, Value

# The dtypes the native code has buffers for and torch's tensors convert to NumPy in (not bfloat16; torch barely
# computes in uint16-uint64).
DTYPES = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def check_dtype(dtype: torch.dtype, what: str) -> None:
    """Refuse a dtype the native code has no buffers for, saying which ones it has."""
    name = dtype_name(dtype)
    if name not in DTYPES:
        hint = " (convert the model with .float())" if dtype.is_floating_point or dtype.is_complex else ""
        raise UnsupportedFeatureError(f"{what} has dtype {name}, which tilegrad does not compile; supported "
                                      f"dtypes: {', '.join(DTYPES)}{hint}")


class TorchBuilder(GraphBuilder):
    """A GraphBuilder that knows what PyTorch says the ATen node being converted produces (`val`)."""

    def __init__(self):
        super().__init__()
        self.val: Any = None  # the FakeTensor (or tuple of them) of the current node

    @property
    def out_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.val.shape)

    @property
    def out_dtype(self) -> str:
        return dtype_name(self.val.dtype)

    def scalar(self, value, dtype: str, name: str) -> Value:
        return self.const(np.array(value, dtype), f"{name}_scalar")

    def cast(self, v: Value, dtype: str, name: str) -> Value:
        return v if v.dtype == dtype else self.op("cast", v, name=f"{name}_cast", to=dtype)

    def op(self, op: str, *inputs: Value, name: str | None = None, **attrs):
        for v in inputs:  # (constants may have any dtype while PyTorch folds them; not once they reach an op)
            check_dtype(torch_dtype(v.dtype), f"{'constant' if v.is_constant else 'value'} {v.name!r}")
        return super().op(op, *inputs, name=name, **attrs)
