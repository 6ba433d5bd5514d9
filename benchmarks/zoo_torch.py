"""The model zoo's two PyTorch paths, each checked against eager PyTorch with the zoo's relative rule:
`tilegrad.compile(module, example_inputs)` (the torch.export frontend) and `torch.compile(module,
backend="tilegrad")`. For the second, a graph the backend runs eagerly (an `EagerFallbackWarning`) counts as not
compiled, and dynamo's graph breaks are counted."""

from __future__ import annotations

import os
import traceback
import warnings

import numpy as np
import torch


def relative_error(got, want) -> float:
    """The largest difference, relative to the largest magnitude of `want` (the zoo's measure)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-12))


def describe(stage: str, e: Exception) -> str:
    """An error as one line of a zoo row: the stage, the error's class and first line, and where it was raised."""
    last = traceback.extract_tb(e.__traceback__)[-1]
    first = str(e).splitlines()[0][:300] if str(e) else ""
    return f"{stage}: {type(e).__name__}: {first} ({os.path.basename(last.filename)}:{last.lineno})"


def through_export(module, args, want, tolerance: float) -> dict:
    """`export_correct` (and `export_error`) of `tilegrad.compile(module, args)` against eager PyTorch."""
    import tilegrad

    row = {"export_correct": False, "export_error": None}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = tilegrad.compile(module, args)
        got = compiled(*(a.numpy() for a in args))
        row["export_correct"] = relative_error(got[0] if isinstance(got, list) else got, want) <= tolerance
    except Exception as e:  # noqa: BLE001 - a model that fails is a row of the table
        row["export_error"] = describe("tilegrad.compile", e)
    return row


def through_torch_compile(module, args, want, tolerance: float) -> dict:
    """`torch_compile_correct`, `torch_compile_compiled` (every captured graph compiled by tilegrad, none run
    eagerly), `torch_compile_share` (the share of the captured graphs' op nodes tilegrad runs: 1 unless ops run
    in PyTorch), `torch_compile_graph_breaks` and `torch_compile_error` of `torch.compile(module,
    backend="tilegrad")` against eager PyTorch."""
    from torch._dynamo.utils import counters

    from tilegrad import metrics
    from tilegrad.torch_backend import EagerFallbackWarning

    row = {"torch_compile_correct": False, "torch_compile_compiled": False, "torch_compile_share": None,
           "torch_compile_graph_breaks": None, "torch_compile_error": None}
    torch._dynamo.reset()
    counters.clear()
    metrics.reset()
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            got = torch.compile(module, backend="tilegrad")(*args)
        fallbacks = [w for w in caught if issubclass(w.category, EagerFallbackWarning)]
        row["torch_compile_graph_breaks"] = sum(counters["graph_break"].values())
        row["torch_compile_correct"] = relative_error(got, want) <= tolerance
        row["torch_compile_compiled"] = not fallbacks and metrics.counters["torch_backend.compiled"] > 0
        nodes = metrics.counters["torch_backend.nodes"]
        row["torch_compile_share"] = round(metrics.counters["torch_backend.nodes_compiled"] / nodes, 3) if nodes \
            else None
        if fallbacks:
            row["torch_compile_error"] = f"eager fallback: {str(fallbacks[0].message)[:300]}"
    except Exception as e:  # noqa: BLE001
        row["torch_compile_error"] = describe("torch.compile", e)
    finally:
        torch._dynamo.reset()
    return row
