"""A PyTorch module with dynamic dimensions, declared torch.export's way, as an ONNX model whose dim_params they are.

`tilegrad.compile(module, (ids,), dynamic={"ids": {1: Dim("seq", min=1, max=512)}})` takes the dimensions as
torch.export's `dynamic_shapes` takes them: each named `Dim` with its bounds. torch's exporter
(`torch.onnx.export(dynamo=True)`) traces the module symbolically and writes each Dim as a dim_param of its name;
the ONNX path then keeps them symbolic (`compile(dynamic=)`), so the module and an exported ONNX file of it
compile alike.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Mapping

from ..errors import TilegradError


def exported_with_dims(module, example_inputs, dynamic_shapes) -> tuple[object, dict[str, tuple[int, int]]]:
    """(the ONNX model torch's exporter writes for `module` with `dynamic_shapes`, {Dim name: (min, max)})."""
    import torch
    from torch.export import Dim

    if not isinstance(module, torch.nn.Module):
        raise TilegradError(f"dynamic dimensions of a torch model need a torch.nn.Module, got {type(module).__name__}")
    bounds = {}
    for d in _leaves(dynamic_shapes):
        if not isinstance(d, Dim):
            raise TilegradError(f"dynamic gives {d!r}; a torch model's dynamic dimensions are named torch.export "
                                f"Dims with bounds, Dim('seq', min=1, max=512)")
        if d.max > 2 ** 31:
            raise TilegradError(f"Dim {d.__name__!r} has no max: give it one, Dim({d.__name__!r}, min=..., max=...); "
                                f"the module's memory is planned for the largest value")
        bounds[d.__name__] = (max(1, int(d.min)), int(d.max))
    if not bounds:
        raise TilegradError("dynamic names no Dim; give torch.export's dynamic_shapes, "
                            "{'ids': {1: Dim('seq', min=1, max=512)}}")
    # Outside any tracing context: inside a torch.compile backend, dynamo's would leak its guards (on its own
    # frame's locals) into the exported program. The exporter prints its steps on stdout.
    with torch._guards.tracing(None), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecation notices, not the user's to act on
        program = torch.onnx.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes, dynamo=True,
                                    verbose=False)
    return program.model_proto, bounds


def _leaves(spec):
    """The Dims of a dynamic_shapes spec (dicts by input or axis, tuples and lists by position, None)."""
    if spec is None:
        return
    if isinstance(spec, Mapping):
        for value in spec.values():
            yield from _leaves(value)
    elif isinstance(spec, (list, tuple)):
        for value in spec:
            yield from _leaves(value)
    else:
        yield spec
