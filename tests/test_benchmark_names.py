"""The benchmarks' scripts import each other as top-level modules (their folder first on sys.path), so a script
named like an installed package hides it from every library that imports it in that process: transformers 5.25
imports the `kernels` package, and a script named kernels.py broke every zoo model it loaded."""

from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_no_benchmark_script_is_named_like_an_installed_package():
    # where installed modules live: the standard library and site-packages (not folders other tests put first)
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    installed = [p for p in sys.path if p and any(Path(p).resolve().is_relative_to(x) for x in prefixes)]
    taken = sorted(f.stem for f in BENCHMARKS.glob("*.py")
                   if f.stem in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(f.stem, installed))
    assert not taken, f"benchmarks/ scripts named like installed modules: {', '.join(taken)}"
