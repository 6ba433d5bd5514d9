"""The optional dependencies: what each extra of the package (pyproject.toml) brings, and the error that names
the one to install.

The core install is what compiling an ONNX model and running it needs (NumPy, onnx, ml_dtypes, tqdm); a saved
module loads with NumPy and ml_dtypes alone, and no C compiler. The tuner's cost models and search, its report's
plots, the PyTorch frontend and the rest come with extras, and are imported where first used (`require`), so
that a missing one is an error saying what to install, not a bare ModuleNotFoundError.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """`module` imported, or MissingDependencyError naming the extra that installs it and what it is for."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name != module and not module.startswith(exc.name + "."):
            raise  # the module is there, one of its own imports is not: not ours to explain
        raise MissingDependencyError(f"{purpose} needs {module.split('.')[0]}, which is not installed: "
                                     f"pip install 'tilegrad[{extra}]'") from exc
