"""Layering is enforced, not just documented: every import between the library's parts is an edge of one table.

A part is a package (`te`, `tune`, ...) or a top-level module (`api`, `kernel`, ...). Imports inside functions
count like any other. A new part, or a new edge, is added to the table on purpose, in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tilegrad"

BASE = {"errors", "config", "metrics", "dtype", "target", "backend", "options"}  # facts, settings and the backend
# registry, which every layer may read

# part -> the parts it may import, from the bottom of the flow (DESIGN.md §2) to the top.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "config": set(),
    "metrics": set(),
    "dtype": set(),
    "target": set(),
    "backend": {"errors", "config", "target"},
    "options": {"errors", "target"},
    "te": BASE,
    "workloads": {"te"},
    "schedule": BASE | {"te"},
    "loop": BASE | {"te", "schedule"},
    "codegen": BASE | {"te", "loop"},
    "runtime": BASE,
    "machine": BASE | {"runtime"},
    "ir": BASE | {"te"},
    "passes": BASE | {"te", "ir"},
    "frontend": BASE | {"te", "ir"},
    "kernel": BASE | {"te", "schedule", "loop", "codegen", "runtime", "ir"},
    "graph_plan": BASE | {"te", "schedule", "loop", "runtime", "ir", "passes", "kernel"},
    "executor": BASE | {"te", "loop", "codegen", "runtime", "ir", "passes", "kernel", "graph_plan"},
    "cuda_executor": BASE | {"runtime", "ir", "kernel", "graph_plan"},
    "tune": BASE | {"te", "schedule", "loop", "runtime", "ir", "passes", "frontend", "kernel", "executor"},
    "api": BASE | {"runtime", "ir", "passes", "frontend", "cuda_executor", "tune"},
    "quant": BASE | {"runtime", "ir", "frontend", "api"},
    "torch_backend": BASE | {"api"},
    "cli": BASE | {"runtime", "ir", "passes", "frontend", "executor", "tune", "api", "machine", "quant"},
    "tools": BASE | {"te", "schedule", "loop", "runtime", "ir", "passes", "frontend", "kernel", "executor", "tune",
                     "api", "cuda_executor"},
    "optim": {"errors"},  # a PyTorch optimizer, independent of the compiler
    "parallel": BASE,  # auto-parallel training on torch.distributed, independent of the compiler's code path
    "backends": BASE | {"codegen", "schedule", "runtime", "executor", "cuda_executor", "tune"},
    "__init__": {"api", "quant", "backends"},
    "__main__": {"cli"},
}


def _part(parts: tuple[str, ...]) -> str:
    return parts[0].removesuffix(".py")


def _imports(path: Path) -> set[str]:
    """The parts of tilegrad that the module at `path` imports, at any depth of its code."""
    package = list(path.relative_to(SRC).parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "tilegrad":
                target = node.module.split(".")[1:]
            else:
                continue
            # `from . import x` (or `from tilegrad import x`) at the top names parts by their aliases
            out.update([target[0]] if target else [alias.name for alias in node.names])
        elif isinstance(node, ast.Import):
            out.update(alias.name.split(".")[1] for alias in node.names if alias.name.startswith("tilegrad."))
    return out


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        part = _part(path.relative_to(SRC).parts)
        edges.setdefault(part, set()).update(_imports(path) - {part})
    return edges


def test_every_part_is_in_the_table():
    missing = sorted(set(_edges()) - set(ALLOWED))
    assert not missing, f"parts with no row in ALLOWED: {missing}"


def test_every_import_is_an_allowed_edge():
    problems = [f"{part} imports {sorted(targets - ALLOWED.get(part, set()))}"
                for part, targets in sorted(_edges().items()) if targets - ALLOWED.get(part, set())]
    assert not problems, "\n".join(problems)


def test_the_table_has_no_cycle():
    state: dict[str, int] = {}

    def visit(part: str, path: list[str]) -> None:
        if state.get(part) == 1:
            raise AssertionError(f"cycle: {' -> '.join(path + [part])}")
        if state.get(part) == 2:
            return
        state[part] = 1
        for dep in ALLOWED[part]:
            visit(dep, path + [part])
        state[part] = 2

    for part in ALLOWED:
        visit(part, [])


def test_checker_sees_relative_and_lazy_imports():
    assert "te" in _imports(SRC / "schedule" / "state.py")
    lazy = SRC / "api.py"  # imports the CUDA executor inside a function
    assert "cuda_executor" in _imports(lazy)
