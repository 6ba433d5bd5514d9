"""Layering is enforced, not just documented: no module imports from a layer above it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tilegrad"

# package -> packages it must never import
FORBIDDEN = {
    "te": {"ir", "passes", "schedule", "loop", "codegen", "runtime", "tune", "frontend"},
    "schedule": {"loop", "codegen", "runtime", "tune", "ir", "passes", "frontend"},
    "loop": {"codegen", "runtime", "tune", "ir", "passes", "frontend"},
    "codegen": {"schedule", "tune", "runtime", "ir", "passes", "frontend"},
    "runtime": {"te", "schedule", "loop", "codegen", "tune", "ir", "passes", "frontend"},
    "ir": {"schedule", "loop", "codegen", "runtime", "passes", "frontend", "tune"},
    "frontend": {"schedule", "loop", "codegen", "runtime", "passes", "tune"},
    "tune": {"api", "cli", "tools"},
}


def _imports(path: Path) -> set[str]:
    pkg = path.relative_to(SRC).parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg[:-1])[: len(pkg) - node.level]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("tilegrad."):
                target = node.module.split(".")[1:]
            else:
                continue
            if target:
                out.add(target[0])
                if not node.module:
                    out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("tilegrad."):
                    out.add(alias.name.split(".")[1])
    return out


def test_no_upward_imports():
    problems = []
    for path in SRC.rglob("*.py"):
        layer = path.relative_to(SRC).parts[0]
        bad = _imports(path) & FORBIDDEN.get(layer, set())
        if bad:
            problems.append(f"{path.relative_to(SRC)} imports {sorted(bad)}")
    assert not problems, "\n".join(problems)


def test_checker_sees_relative_imports(tmp_path):
    assert "te" in _imports(SRC / "schedule" / "state.py")
