"""The natural-gradient step in its Kronecker form: the identity THOR's update rests on, and one THOR step
compared with the explicit ((A + λI) ⊗ (G + λI))⁻¹ vec(∇W) on small layers, factors computed here directly."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tilegrad.optim import THOR, split_blocks


def _vec(x: torch.Tensor) -> torch.Tensor:
    """Column-major vec: the columns of x stacked."""
    return x.T.reshape(-1)


def test_kronecker_identity_with_column_major_vec():
    rng = torch.Generator().manual_seed(0)
    a, g, x = (torch.randn(s, generator=rng, dtype=torch.float64) for s in [(5, 5), (3, 3), (3, 5)])
    torch.testing.assert_close(torch.kron(a, g) @ _vec(x), _vec(g @ x @ a.T))


def _explicit_step(a: torch.Tensor, g: torch.Tensor, grad: torch.Tensor, damping: float) -> torch.Tensor:
    """((A + λI) ⊗ (G + λI))⁻¹ vec(∇W), reshaped back to ∇W's shape (out, in)."""
    damped = torch.kron(a + damping * torch.eye(a.shape[0], dtype=a.dtype),
                        g + damping * torch.eye(g.shape[0], dtype=g.dtype))
    return torch.linalg.solve(damped, _vec(grad)).reshape(grad.shape[1], grad.shape[0]).T


def _one_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, damping: float, **options) -> dict:
    """∇W before and the change of every weight after one THOR step of lr 1 and no momentum."""
    opt = THOR(model, lr=1.0, damping=damping, momentum=0.0, kl_clip=None, **options)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    outputs = {}
    hooks = [m.register_forward_hook(lambda m, args, out, n=n: outputs.__setitem__(n, (args[0], out)))
             for n, m in model.named_modules() if n]
    loss = F.cross_entropy(model(x), y)
    for _, out in outputs.values():
        out.retain_grad()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    for h in hooks:
        h.remove()
    return {"grads": grads, "change": {n: before[n] - p.detach() for n, p in model.named_parameters()}, "io": outputs}


def test_linear_step_equals_the_kronecker_inverse_form():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3)).double()
    x, y = torch.randn(8, 4, dtype=torch.float64), torch.randint(0, 3, (8,))
    run = _one_step(model, x, y, damping=0.1)
    inp, out = run["io"]["0"]
    a = inp.T @ inp / 8
    g_rows = out.grad * 8                   # a mean loss divides each sample's gradient by the batch size
    g = g_rows.T @ g_rows / 8
    expected = _explicit_step(a, g, run["grads"]["0.weight"], 0.1)
    torch.testing.assert_close(run["change"]["0.weight"], expected)
    torch.testing.assert_close(run["change"]["0.bias"], run["grads"]["0.bias"])   # SGD for the bias


def test_conv_step_equals_the_kronecker_inverse_form():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(2, 3, 2, stride=1, padding=1), nn.Flatten(), nn.Linear(3 * 25, 4)).double()
    x, y = torch.randn(2, 2, 4, 4, dtype=torch.float64), torch.randint(0, 4, (2,))
    run = _one_step(model, x, y, damping=0.05)
    inp, out = run["io"]["0"]
    patches = F.unfold(inp, 2, padding=1).transpose(1, 2).reshape(-1, 8)     # (2·25, 2·2·2)
    a = patches.T @ patches / patches.shape[0]
    g_rows = out.grad.movedim(1, -1).reshape(-1, 3) * 2
    g = g_rows.T @ g_rows / g_rows.shape[0]
    grad = run["grads"]["0.weight"].reshape(3, -1)
    expected = _explicit_step(a, g, grad, 0.05).reshape(3, 2, 2, 2)
    torch.testing.assert_close(run["change"]["0.weight"], expected)


def test_embedding_step_equals_the_kronecker_inverse_form():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Embedding(5, 3), nn.Flatten(), nn.Linear(6, 2)).double()
    x, y = torch.tensor([[0, 1], [1, 4], [4, 4]]), torch.tensor([0, 1, 1])
    run = _one_step(model, x, y, damping=0.2)
    _, out = run["io"]["0"]
    onehot = F.one_hot(x.reshape(-1), 5).double()
    a = onehot.T @ onehot / 6
    g_rows = out.grad.reshape(-1, 3) * 3
    g = g_rows.T @ g_rows / 6
    # an Embedding's weight is (tokens, features) = Wᵀ of the layer out = onehot @ weight: precondition Wᵀ
    expected = _explicit_step(a, g, run["grads"]["0.weight"].T, 0.2).T
    torch.testing.assert_close(run["change"]["0.weight"], expected)


def test_float16_preconditioning_is_close_to_float32():
    torch.manual_seed(3)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    changes = []
    for half in (False, True):
        torch.manual_seed(4)
        changes.append(_one_step(nn.Sequential(nn.Linear(6, 3)), x, y, 0.1, half_precision=half)["change"])
    torch.testing.assert_close(changes[1]["0.weight"], changes[0]["0.weight"], rtol=1e-2, atol=1e-3)
    assert not torch.equal(changes[1]["0.weight"], changes[0]["0.weight"])


@pytest.mark.parametrize("size", [2, 3])
def test_split_factors_precondition_by_their_blocks(size):
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(5, 4)).double()
    x, y = torch.randn(10, 5, dtype=torch.float64), torch.randint(0, 4, (10,))
    run = _one_step(model, x, y, damping=0.1, split_dim=size)
    inp, out = run["io"]["0"]
    a = split_blocks(inp.T @ inp / 10, size)
    g_rows = out.grad * 10
    g = split_blocks(g_rows.T @ g_rows / 10, size)
    torch.testing.assert_close(run["change"]["0.weight"], _explicit_step(a, g, run["grads"]["0.weight"], 0.1))
