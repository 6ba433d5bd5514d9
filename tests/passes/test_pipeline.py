"""The pipeline's one ordered list: its order, and that no pass module imports back into the pipeline."""

from __future__ import annotations

import ast
from pathlib import Path

from tilegrad.passes import PIPELINE, pass_names

DRIVER = {"pipeline", "PIPELINE", "optimize", "pass_names"}  # what `from . import ...` could reach the driver by
PASSES_DIR = Path(__file__).resolve().parents[2] / "src" / "tilegrad" / "passes"


def test_the_pipeline_runs_the_passes_in_this_order_at_these_levels():
    both, cpu = ("cpu", "cuda"), ("cpu",)
    assert [(p.name, p.level, p.targets) for p in PIPELINE] == [
        ("fold_qdq", 1, both), ("fold_constants", 1, both), ("simplify", 1, both), ("cse", 1, both),
        ("bn_fold", 1, both), ("fold_bias", 1, both), ("hoist_slice", 2, both), ("attention", 2, both),
        ("expand", 2, both), ("conv_algorithm", 1, cpu), ("sink_reshape", 2, both), ("layout", 2, cpu),
        ("pointwise_gemm", 2, cpu), ("int8_layout", 2, cpu), ("conv_regions", 2, cpu), ("cse_late", 1, both),
        ("fuse", 1, both),
    ]


def test_pass_names_are_unique():
    assert len(set(pass_names())) == len(PIPELINE)


def test_no_pass_module_imports_the_pipeline():
    """The driver imports the passes; a pass importing the driver (even inside a function) would close a circle."""
    back = []
    for path in sorted(PASSES_DIR.glob("*.py")):
        if path.name in ("pipeline.py", "__init__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 1):
                continue
            if node.module == "pipeline" or (node.module is None and {a.name for a in node.names} & DRIVER):
                back.append(f"{path.name}: from .{node.module or ''} import {', '.join(a.name for a in node.names)}")
    assert not back, back
