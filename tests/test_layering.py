"""Layering is enforced, not just documented: every import between the library's parts is an edge of one table.

A part is a package (`te`, `tune`, ...) or a top-level module (`api`, `kernel`, ...). Imports inside functions
count like any other. A new part, or a new edge, is added to the table on purpose, in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tilegrad"

# facts, settings, counters and progress, the backend, the optional dependencies' import registry and weights
# mapped from files, which every layer may read
BASE = {"errors", "config", "metrics", "progress", "dtype", "target", "backend", "options", "extras", "mapped"}

# part -> the parts it may import, from the bottom of the flow (DESIGN.md §2) to the top.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "extras": {"errors"},
    "config": set(),
    "metrics": set(),
    "progress": set(),
    "dtype": set(),
    "target": set(),
    "backend": {"errors", "config", "target"},
    "options": {"errors", "target"},
    "mapped": set(),  # weights mapped from a model's file: read by the frontend, the passes and the runtime
    "te": BASE,
    "workloads": {"te"},
    "schedule": BASE | {"te"},
    "loop": BASE | {"te", "schedule"},
    "codegen": BASE | {"te", "loop"},
    "runtime": BASE,
    "machine": BASE | {"runtime"},
    "peers": BASE | {"runtime"},  # other runtimes timed beside a module, for reports
    "ir": BASE | {"te"},
    "passes": BASE | {"te", "ir"},
    "frontend": BASE | {"te", "ir"},
    "kernel": BASE | {"te", "schedule", "loop", "codegen", "runtime", "ir"},
    "graph_plan": BASE | {"te", "schedule", "loop", "runtime", "ir", "passes", "kernel"},
    "executor": BASE | {"te", "loop", "codegen", "runtime", "ir", "passes", "kernel", "graph_plan"},
    "cuda_executor": BASE | {"runtime", "ir", "kernel", "graph_plan"},
    "tune": BASE | {"te", "schedule", "loop", "runtime", "ir", "passes", "frontend", "kernel", "executor", "peers"},
    "module_cache": BASE | {"runtime", "frontend"},
    "torch_partition": BASE | {"runtime"},
    "api": BASE | {"runtime", "ir", "passes", "frontend", "cuda_executor", "tune", "module_cache", "torch_partition"},
    "quant": BASE | {"runtime", "ir", "frontend", "api"},
    "torch_sizes": BASE,  # which input dimension each of a dynamo graph's symbolic sizes is
    "torch_backend": BASE | {"api", "runtime", "torch_partition", "torch_sizes"},
    "cli": BASE | {"runtime", "ir", "passes", "frontend", "executor", "tune", "api", "machine", "quant", "peers"},
    "tools": BASE | {"te", "schedule", "loop", "runtime", "ir", "passes", "frontend", "kernel", "executor", "tune",
                     "api", "cuda_executor"},
    "optim": {"errors"},  # a PyTorch optimizer, independent of the compiler
    "parallel": BASE,  # auto-parallel training on torch.distributed, independent of the compiler's code path
    "backends": BASE | {"codegen", "schedule", "runtime", "executor", "cuda_executor", "tune"},
    "__init__": {"api", "quant", "backends", "options"},
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


# -- modules: no import circles, no private names across packages, no target kind compared ------------------------

# Registry leaves that fill themselves by importing their entries (registry -> entries -> registry is the one
# circle allowed): leaf -> the modules it imports to fill itself.
FILLS: dict[str, set[str]] = {
    "ir.registry": {"ir.ops"},
}
BACKEND_TABLE = "backends"  # the one module where kinds of target are told apart
# Registries that drivers and entries both import: none of them may reach, through its imports, a module that
# registers into it or reads it.
REGISTRY_LEAVES = ("backend", "ir.registry", "schedule.rules", "frontend.onnx_op_table", "frontend.torch_op_table",
                   "passes.context", "tune.search.policy", "tune.cost_model.model")


def _modules() -> dict[str, Path]:
    """Every module by its dotted name under tilegrad (a package by its own name)."""
    modules = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _package(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _module_imports(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(module imported, name taken from it) for every import in `module`; a submodule is imported as itself."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package(module, path).split(".") if _package(module, path) else []
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            elif node.module and node.module.split(".")[0] == "tilegrad":
                target = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                out.append((sub, "") if sub in modules else (target, alias.name))
        elif isinstance(node, ast.Import):
            out.extend((a.name.partition(".")[2], "") for a in node.names if a.name.startswith("tilegrad."))
    return [(m, name) for m, name in out if m in modules]


def test_no_module_takes_part_in_an_import_circle():
    modules = _modules()
    edges = {m: {t for t, _ in _module_imports(m, p, modules)} - {m} - FILLS.get(m, set())
             for m, p in modules.items()}
    state: dict[str, int] = {}
    circles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                circles.append(" -> ".join(path[path.index(t):] + [m, t]) if t in path else f"{m} -> {t}")
            elif t not in state:
                visit(t, path + [m])
        state[m] = 2

    for m in sorted(modules):
        if m not in state:
            visit(m, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_no_private_name_is_imported_from_another_package():
    modules = _modules()
    problems = [f"{m} imports {name} from {t}"
                for m, p in modules.items() for t, name in _module_imports(m, p, modules)
                if name.startswith("_") and _package(t, modules[t]) != _package(m, p)]
    assert not problems, "\n".join(problems)


def test_target_kinds_are_compared_only_in_the_backend_table():
    kinds = {"cpu", "cuda"}
    problems = []
    for m, path in _modules().items():
        if m == BACKEND_TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                named = [c.value for o in operands for c in ([o] if isinstance(o, ast.Constant) else
                                                              getattr(o, "elts", []))
                         if isinstance(c, ast.Constant) and c.value in kinds]
                if named:
                    problems.append(f"{m}:{node.lineno} compares with {named[0]!r}")
    assert not problems, "read the backend table (backend.backend_for) instead:\n" + "\n".join(problems)


def test_registry_leaves_reach_none_of_their_users():
    modules = _modules()
    edges = {m: {t for t, _ in _module_imports(m, p, modules)} - {m} - FILLS.get(m, set())
             for m, p in modules.items()}
    for leaf in REGISTRY_LEAVES:
        assert leaf in modules, f"registry leaf {leaf} is gone: update REGISTRY_LEAVES"
        users = {m for m, targets in edges.items() if leaf in targets}
        reached, todo = set(), [leaf]
        while todo:
            for t in edges[todo.pop()] - reached:
                reached.add(t)
                todo.append(t)
        assert not reached & users, f"{leaf} reaches its users {sorted(reached & users)}"
