"""The benchmarks' scripts import each other as top-level modules (their folder first on sys.path), so a script
named like an installed package hides it from every library that imports it in that process: transformers 5.25
imports the `kernels` package, and a script named kernels.py broke every zoo model it loaded."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_no_benchmark_script_is_named_like_an_installed_package():
    # the top-level modules of the installed distributions and the standard library, by their metadata (a scan of
    # sys.path would see the folders other tests put on it)
    installed = set(importlib.metadata.packages_distributions()) | set(sys.stdlib_module_names)
    taken = sorted(f.stem for f in BENCHMARKS.glob("*.py") if f.stem in installed)
    assert not taken, f"benchmarks/ scripts named like installed modules: {', '.join(taken)}"
