"""Digits (scikit-learn's 8x8 handwritten digits, shipped inside the package): a small CNN and an MLP trained
here in seconds with fixed seeds, exported to ONNX, for the accuracy tests of quantization."""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")

BATCH = 256  # the exported models' batch: calibration and evaluation go in batches of it
TEST = 2 * BATCH  # held-out digits


def _digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    return (x[:-TEST], y[:-TEST]), (x[-TEST:], y[-TEST:])


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 10))


def cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64, 10))


def train(model: torch.nn.Module, x: np.ndarray, y: np.ndarray, epochs: int, seed: int = 0,
          lr: float = 0.01) -> torch.nn.Module:
    """Adam over shuffled batches of 64, with a fixed seed."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
    return model.eval()


def to_onnx(model: torch.nn.Module, batch: int) -> bytes:
    f = io.BytesIO()
    torch.onnx.export(model.eval(), (torch.zeros(batch, 1, 8, 8),), f, input_names=["x"], output_names=["logits"],
                      opset_version=17, dynamo=False)
    return f.getvalue()


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == y) * 100)


def batched(x: np.ndarray) -> list[np.ndarray]:
    return [x[k:k + BATCH] for k in range(0, len(x) - BATCH + 1, BATCH)]


def predict(run, x: np.ndarray) -> np.ndarray:
    """`run` (a batch of BATCH -> logits) over `x` in batches."""
    return np.concatenate([run(b) for b in batched(x)])


@pytest.fixture(scope="session")
def digits():
    return _digits()


@pytest.fixture(scope="session")
def trained(digits):
    """{"mlp": module, "cnn": module}, trained on the digits' training split."""
    (x, y), _ = digits
    torch.set_num_threads(1)  # small batches: threads cost more than they give
    torch.manual_seed(0)
    models = {"mlp": mlp(), "cnn": cnn()}
    return {name: train(m, x, y, epochs=8) for name, m in models.items()}
