"""A saved module runs where only the runtime's dependencies are (docs/deployment.md): a fresh virtual environment
holding tilegrad as pip installs it (without its dependencies), NumPy and ml_dtypes and nothing else (no torch, no
onnx, no tuner's libraries), with no C compiler on PATH, loads a ResNet-like module saved by the full install and
gives its outputs."""

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from torch import nn

import tilegrad

pytestmark = pytest.mark.slow  # starts a Python of its own

CHILD = """
import sys
for name in ("torch", "onnx", "onnxruntime", "lightgbm", "xgboost", "matplotlib", "sklearn", "tqdm", "scipy"):
    try:
        __import__(name)
    except ImportError:
        continue
    sys.exit(f"{name} is importable: the environment is not the runtime's alone")
import numpy as np
import tilegrad
if sys.prefix == sys.base_prefix or not tilegrad.__file__.startswith(sys.prefix):
    sys.exit(f"not the virtual environment's tilegrad: {tilegrad.__file__} (prefix {sys.prefix})")
module = tilegrad.load(sys.argv[1])
np.save(sys.argv[3], module(np.load(sys.argv[2])))
"""


class Block(nn.Module):
    """A residual block of ResNet (two 3 x 3 convolutions with batch norm, the skip), a pool and a classifier."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.body(x) + x)
        return self.head(y.mean(dim=(2, 3)))


def _runtime_environment(root: Path) -> Path:
    """A virtual environment at `root` (no pip, no system packages) with tilegrad installed by pip from this
    source tree (a copy of it, so the build leaves nothing in the tree) and links to the installed NumPy and
    ml_dtypes; its Python."""
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(root)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    tree = Path(tilegrad.__file__).resolve().parents[2]
    assert (tree / "pyproject.toml").is_file(), f"tilegrad is not installed from a source tree: {tree}"
    source = root.parent / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(tree / name, source / name)
    shutil.copytree(tree / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(source)], check=True, capture_output=True, timeout=300)
    for package in (Path(np.__file__).parent, Path(ml_dtypes.__file__).parent):
        (site / package.name).symlink_to(package)
    libs = Path(np.__file__).parent.with_name("numpy.libs")  # a manylinux wheel's bundled libraries
    if libs.is_dir():
        (site / libs.name).symlink_to(libs)
    return python


def test_a_saved_module_runs_with_numpy_alone_and_no_compiler(tmp_path):
    torch.manual_seed(0)
    block = Block().eval()
    x = torch.randn(1, 16, 14, 14)
    saved = tilegrad.compile(block, (x,)).save(tmp_path / "block")
    np.save(tmp_path / "x.npy", x.numpy())
    (tmp_path / "bin").mkdir()  # PATH: no compiler, nothing at all
    python = _runtime_environment(tmp_path / "venv")
    run = subprocess.run([str(python), "-c", CHILD, str(saved), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                         env={"PATH": str(tmp_path / "bin"), "TILEGRAD_CACHE_DIR": str(tmp_path / "cache"),
                              "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), block(x).detach().numpy(), rtol=1e-4, atol=1e-5)
