"""An optional dependency that is not installed is an error naming the extra that installs it (extras.py), raised
where the feature that needs it is first used; a module that is installed but fails in its own imports keeps its
own error."""

import sys

import pytest

from tilegrad.errors import MissingDependencyError
from tilegrad.extras import require
from tilegrad.tune.cost_model import make_cost_model


@pytest.mark.parametrize("module, cost_model", [("lightgbm", "trees"), ("xgboost", "xgb-rank"), ("torch", "mlp")])
def test_a_cost_model_without_its_library_names_the_extra(monkeypatch, module, cost_model):
    monkeypatch.setitem(sys.modules, module, None)  # importing it now fails as if it were not installed
    with pytest.raises(MissingDependencyError, match=rf"needs {module}, which is not installed: "
                                                     r"pip install 'tilegrad\[tune\]'"):
        make_cost_model(cost_model)


def test_require_returns_the_module_and_leaves_other_import_errors_alone(tmp_path, monkeypatch):
    assert require("json", "tune", "x").dumps([1]) == "[1]"
    (tmp_path / "broken_pkg.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="not_a_module_anywhere"):
        require("broken_pkg", "tune", "x")
