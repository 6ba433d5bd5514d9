"""The benchmarks' scripts import each other as top-level modules (their folder first on sys.path), so a script
named like an installed package hides it from every library that imports it in that process: transformers 5.25
imports the `kernels` package, and a script named kernels.py broke every zoo model it loaded."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_no_benchmark_script_is_named_like_an_installed_package():
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != BENCHMARKS]
    taken = sorted(f.stem for f in BENCHMARKS.glob("*.py")
                   if f.stem in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(f.stem, elsewhere))
    assert not taken, f"benchmarks/ scripts named like installed modules: {', '.join(taken)}"
