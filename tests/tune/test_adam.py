"""The one Adam: it steps like torch.optim.Adam, on the cost model's float32 weights and on float64 points."""

import numpy as np
import torch

from tilegrad.tune.adam import Adam


def test_adam_steps_as_torchs():
    torch.manual_seed(0)
    ours, theirs = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    theirs.load_state_dict(ours.state_dict())
    reference = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    adam = Adam([p.detach().numpy() for p in ours.parameters()])
    for _ in range(20):
        x = torch.randn(8, 5)
        for net in (ours, theirs):
            net.zero_grad()
            (net(x) ** 2).sum().backward()
        reference.step()
        adam.step([p.grad.numpy() for p in ours.parameters()], 1e-2)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_adam_descends_in_place_in_float64():
    x = np.array([[3.0, -2.0]])
    start = x.copy()
    reference = torch.tensor(start, requires_grad=True)
    ref_opt = torch.optim.Adam([reference], lr=0.05)
    adam = Adam([x])
    for _ in range(50):
        adam.step([2 * x], 0.05)  # the gradient of |x|^2
        ref_opt.zero_grad()
        (reference ** 2).sum().backward()
        ref_opt.step()
    assert x.dtype == np.float64 and np.abs(x).sum() < np.abs(start).sum()
    np.testing.assert_allclose(x, reference.detach().numpy(), rtol=1e-12)
