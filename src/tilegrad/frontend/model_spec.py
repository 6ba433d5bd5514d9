"""A model named on the command line: an ONNX file, or a PyTorch module made by a factory function.

    model.onnx                      an ONNX file
    path/to/models.py:resnet        a function (or nn.Module class) in a Python file, called with no arguments
    some.package.models:resnet      the same in an importable module

The factory returns an nn.Module, or a pair (module, example_inputs). `input_shapes` ({name: shape}, the
`--input-shape NAME=D0,D1,...` flags) names forward's parameters: with a module alone, each parameter without a
default needs a shape and gets a float32 tensor of normal random numbers; with example inputs, a named shape
replaces that input by random values of the example's dtype (integers in [0, the example's largest], so token ids
stay in the vocabulary). Every tensor is drawn from a generator seeded with 0, and the module is put in eval mode.
`tilegrad compile`, `run`, `bench` and `tune` read their model argument through `load_model_spec`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import TilegradError

_SPEC = re.compile(r"(?P<source>.+\.py|[A-Za-z_][\w.]*):(?P<factory>[A-Za-z_]\w*)")


class ModelSpecError(TilegradError):
    """A model argument that names no loadable model (a missing file or factory, a factory that fails, shapes
    that do not fit forward's parameters)."""


class ModelSpec(NamedTuple):
    """What `tilegrad.compile` takes: `compile(spec.model, spec.example_inputs, input_shapes=spec.input_shapes)`."""

    kind: str  # "onnx" or "torch"
    model: Any  # an onnx.ModelProto, or a torch.nn.Module in eval mode
    example_inputs: tuple | None  # the module's inputs (torch); None for ONNX
    input_shapes: dict[str, tuple[int, ...]] | None  # fixed symbolic dimensions (ONNX); None for torch


def is_torch_spec(text: str) -> bool:
    """True when `text` reads `file.py:factory` or `package.module:factory` (and is not an existing file)."""
    return _SPEC.fullmatch(text) is not None and not Path(text).is_file()


def load_model_spec(text: str, input_shapes: Mapping[str, Sequence[int]] | None = None) -> ModelSpec:
    """The model `text` names, with its example inputs (PyTorch) or fixed input shapes (ONNX)."""
    shapes = {name: tuple(int(d) for d in dims) for name, dims in (input_shapes or {}).items()}
    if not is_torch_spec(text):
        from .onnx_file import load_model

        return ModelSpec("onnx", load_model(text), None, shapes)
    match = _SPEC.fullmatch(text)
    made = _call_factory(_load_factory(match["source"], match["factory"], text), text)
    module, examples = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ModelSpecError(f"{text} returned {type(module).__name__}; a factory returns a torch.nn.Module or a "
                             f"pair (module, example_inputs)")
    if isinstance(examples, torch.Tensor):
        examples = (examples,)
    module.eval()
    return ModelSpec("torch", module, _example_inputs(module, examples, shapes, text), None)


def _load_factory(source: str, factory: str, text: str):
    if source.endswith(".py"):
        path = Path(source)
        if not path.is_file():
            raise ModelSpecError(f"{text}: no Python file at {path}")
        name = "_tilegrad_model_" + re.sub(r"\W", "_", path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.resolve().parent))  # the file may import its neighbours
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # any error in the user's file is reported in one line, not a traceback
            raise ModelSpecError(f"{text}: running {path} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            sys.path.remove(str(path.resolve().parent))
    else:
        try:
            module = importlib.import_module(source)
        except ImportError as exc:
            raise ModelSpecError(f"{text}: cannot import {source}: {exc}") from None
    fn = getattr(module, factory, None)
    if not callable(fn):
        raise ModelSpecError(f"{text}: {source} has no function {factory!r}")
    return fn


def _call_factory(fn, text: str):
    try:
        return fn()
    except Exception as exc:
        raise ModelSpecError(f"{text}: calling the factory failed: {type(exc).__name__}: {exc}") from exc


def _example_inputs(module, examples: Sequence | None, shapes: dict[str, tuple[int, ...]], text: str) -> tuple:
    import torch

    params = [p for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise ModelSpecError(f"--input-shape names {', '.join(unknown)}, which {type(module).__name__}.forward does "
                             f"not take; its inputs are {', '.join(names) or 'none'}")
    rng = torch.Generator().manual_seed(0)
    if examples is None:
        missing = [p.name for p in params if p.default is p.empty and p.name not in shapes]
        if missing:
            wanted = " ".join(f"--input-shape {n}=D0,D1,..." for n in missing)
            raise ModelSpecError(f"{text} gives a module without example inputs: pass {wanted} (or return "
                                 f"(module, example_inputs) from the factory)")
        return tuple(torch.randn(shapes[n], generator=rng) for n in names if n in shapes)
    examples = list(examples)
    for i, name in enumerate(names[:len(examples)]):
        if name in shapes:
            examples[i] = _random_like(examples[i], shapes[name], rng)
    return tuple(examples)


def _random_like(example, shape: tuple[int, ...], rng):
    import torch

    if not isinstance(example, torch.Tensor):
        raise ModelSpecError(f"--input-shape gives a shape to an input whose example is {type(example).__name__}, "
                             f"not a tensor")
    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=rng, dtype=example.dtype)
    if example.dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=rng).bool()
    top = int(example.max()) + 1 if example.numel() else 1
    return torch.randint(0, max(top, 1), shape, generator=rng, dtype=example.dtype)
