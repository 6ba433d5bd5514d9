"""The `torch.compile` backend "tilegrad": every graph dynamo captures becomes one native module.

    opt = torch.compile(model, backend="tilegrad")                      # registered by the package's entry point
    opt = torch.compile(model, backend="tilegrad", options={"db": "tune.db", "opt_level": 2})

Dynamo hands over an FX graph whose parameters and buffers are inputs. They are frozen into the module as
constants (so bias folding, batch-norm folding and weight packing apply), and the graph is compiled through
`tilegrad.compile` like any module, for the device its inputs are on: CPU tensors compile for the CPU, CUDA
tensors for the GPU (`target="cuda"`; the graph is exported from CPU copies of its inputs and weights). A call
passes the other inputs as NumPy arrays, without copies on the CPU (a GPU call copies them to the host and the
module copies them to the device: `CudaModule` takes NumPy), and wraps the outputs as tensors on the inputs'
device. The weights are checked on every call (same tensors, no in-place update since compiling); a change
recompiles. A graph with symbolic shapes (`torch.compile(dynamic=True)`, or dynamo's automatic dynamic shapes
once a second shape is seen) compiles once with those dimensions dynamic, for values up to a bound
(`torch_sizes.py`); a larger value compiles again. Ops tilegrad does not lower run in PyTorch between native
segments of the graph (`torch_partition.py`, after one `EagerOpsWarning` listing them); a graph tilegrad cannot
compile at all (an unsupported dtype, a size that is not an input's dimension, gradients needed) runs eagerly,
after one `EagerFallbackWarning` that says why; other errors (unknown options, a missing records database, a
compiler failure) are raised.
"""

from __future__ import annotations

import warnings

import torch

from . import metrics
from .backend import backend_for
from .errors import ShapeError, TilegradError, UnsupportedOpError
from .target import TARGETS
from .torch_partition import FrozenWeights, as_array
from .runtime.automatic_dims import lower, upper
from .torch_sizes import NotDimensions, dynamic_shapes, sizes_of

OPTIONS = ("db", "opt_level", "disable_passes", "enable_passes")
TARGETS_BY_DEVICE = {"cpu": "cpu", "cuda": "cuda"}  # a tensor's device type -> the target compiled for


class EagerFallbackWarning(UserWarning):
    """A graph tilegrad does not compile runs in PyTorch eagerly; the message says why."""


def backend(gm: torch.fx.GraphModule, example_inputs, *, options: dict | None = None, mode: str | None = None):
    """The torch.compile backend: `gm` and its example inputs in, a callable over tensors out."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TilegradError(f"torch.compile options {unknown} are not tilegrad's; it takes {', '.join(OPTIONS)}")
    if mode not in (None, "default"):
        raise TilegradError(f"torch.compile mode={mode!r} is Inductor's; the tilegrad backend takes options instead")
    return CompiledGraph(gm, list(example_inputs), options)


class CompiledGraph:
    """A dynamo graph as a callable over tensors: its native module, or the graph itself when tilegrad cannot
    compile it."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: list, options: dict):
        self.gm, self.options = gm, options
        self.weights = {i: t for i, t in enumerate(example_inputs) if _is_weight(t)}
        self.scalars = {i: float(t) for i, t in _lifted_floats(gm, example_inputs).items()}
        self.user = [i for i, t in enumerate(example_inputs)
                     if i not in self.weights and i not in self.scalars and isinstance(t, torch.Tensor)]
        self.seen: dict[str, tuple[int, int]] = {}  # symbol -> the least and largest value compiled for so far
        self.bounds: dict[str, tuple[int, int]] = {}  # symbol -> the least and largest value it is compiled for
        try:  # size inputs (a graph with symbolic shapes): slot -> symbol; symbol -> its Size
            self.slots, self.sizes = sizes_of(gm, example_inputs, self.user)
            self.not_sizes = None
        except NotDimensions as exc:
            self.slots, self.sizes, self.not_sizes = {}, {}, str(exc)
        self.versions: dict[int, int] = {}
        self.device = torch.device("cpu")
        self.module = self._compile(example_inputs)

    def _compile(self, example_inputs: list):
        why = self.not_sizes or _eager_reason(example_inputs)
        target = TARGETS_BY_DEVICE.get(_device_of(example_inputs).type)
        if why is None and self.sizes and not backend_for(TARGETS[target]()).symbolic_dims:
            why = f"the graph has dynamic shapes, which tilegrad's {target} target compiles as fixed shapes only"
        if why is None:
            from . import api

            self.versions = {i: _version(t) for i, t in self.weights.items()}
            self.device = _device_of(example_inputs)
            host = {i: t.detach().cpu() for i, t in self.weights.items()}
            frozen = FrozenWeights(self.gm, host, len(example_inputs),
                                   {slot: self.sizes[name].places[0] for slot, name in self.slots.items()},
                                   self.scalars).eval()
            tensors = tuple(example_inputs[i].cpu() for i in self.user)
            dynamic = {}
            if self.sizes:
                for name, s in self.sizes.items():
                    value = _value(s, tensors)
                    least, largest = self.seen.get(name, (value, value))
                    self.seen[name] = (min(least, value), max(largest, value))
                # a factor HEADROOM about the values seen (runtime/automatic_dims), never below dynamo's least
                self.bounds = {name: (max(s.lo, lower(self.seen[name][0])), upper(self.seen[name][1]))
                               for name, s in self.sizes.items()}
                dynamic = {"dynamic": {"inputs": dynamic_shapes(self.sizes, self.bounds, len(tensors))}}
            try:
                module = api.compile(frozen, tensors, target=TARGETS_BY_DEVICE[self.device.type], **dynamic,
                                     **self.options)
            except (UnsupportedOpError, ShapeError) as exc:  # the graph, not the setup: run it eagerly
                why = " ".join(str(exc).split())
            else:
                metrics.bump("torch_backend.compiled")
                self._count_nodes(getattr(module, "compiled_share", 1.0))
                return module
        metrics.bump("torch_backend.eager")
        self._count_nodes(0.0)
        warnings.warn(f"tilegrad runs this graph eagerly: {why}", EagerFallbackWarning, stacklevel=2)
        return None

    def _count_nodes(self, share: float) -> None:
        """The graph's op nodes and the share of them tilegrad runs (a partitioned graph's share is its ATen
        nodes'), summed over graphs in `metrics` for reports of how much of a model was compiled."""
        nodes = sum(n.op in ("call_function", "call_method", "call_module") for n in self.gm.graph.nodes)
        metrics.bump("torch_backend.nodes", nodes)
        metrics.bump("torch_backend.nodes_compiled", round(share * nodes))

    def __call__(self, *args):
        if self.module is None:
            return self.gm(*args)
        if any(args[i] is not t or _version(t) != self.versions[i] for i, t in self.weights.items()) \
                or any(not self.bounds[name][0] <= args[slot] <= self.bounds[name][1]
                       for slot, name in self.slots.items()) \
                or any(float(args[i]) != value for i, value in self.scalars.items()):
            self.weights = {i: args[i] for i in self.weights}
            self.module = self._compile(list(args))
            if self.module is None:
                return self.gm(*args)
        outs = self.module(*(as_array(args[i]) for i in self.user))
        return tuple(torch.from_numpy(y).to(self.device) for y in (outs if isinstance(outs, list) else [outs]))


def _is_weight(t) -> bool:
    """A parameter or buffer of the compiled module: dynamo marks those it passes as graph inputs."""
    return isinstance(t, torch.Tensor) and (isinstance(t, torch.nn.Parameter)
                                            or getattr(t, "_dynamo_static_input_type", None) is not None)


def _lifted_floats(gm: torch.fx.GraphModule, example_inputs: list) -> dict:
    """{slot: tensor} of the Python floats of the model that dynamo passes as 0-d tensors (with dynamic=True)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {i: t for i, (n, t) in enumerate(zip(placeholders, example_inputs))
            if getattr(n.meta.get("grapharg"), "pass_arg_as_tensor", False) and isinstance(t, torch.Tensor)}


def _value(size, tensors) -> int:
    """The value of a Size in a call with these input tensors."""
    tensor, axis = size.places[0]
    return int(tensors[tensor].shape[axis])


def _eager_reason(example_inputs: list) -> str | None:
    """Why the graph must run eagerly, or None when tilegrad can compile it (as far as its inputs tell)."""
    example_inputs = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    devices = sorted({t.device.type for t in example_inputs})
    if len(devices) > 1:
        return f"the graph's tensors are on several devices ({', '.join(devices)}); tilegrad compiles for one"
    if devices and devices[0] not in TARGETS_BY_DEVICE:
        return f"the graph's tensors are on {devices[0]}, where tilegrad has no target (it has cpu and cuda)"
    if torch.is_grad_enabled() and any(t.requires_grad for t in example_inputs):
        return ("the graph needs gradients and tilegrad compiles inference: call the model under torch.no_grad() "
                "or torch.inference_mode()")
    return None


def _device_of(example_inputs: list) -> torch.device:
    """The one device of the graph's tensors (the CPU for a graph without input tensors)."""
    return next((t.device for t in example_inputs if isinstance(t, torch.Tensor)), torch.device("cpu"))


def _version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:  # inference tensors have no version counter, and cannot be updated in place
        return 0
