"""THOR as a torch.optim optimizer: saving and loading its state, LR schedulers, weight decay and its filter,
the damping schedule, KL clipping, layers without statistics, errors."""

import copy
import io

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tilegrad.errors import OptimizerError
from tilegrad.optim import THOR, get_thor_damping


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 16, 8),
                         nn.LayerNorm(8), nn.Linear(8, 3))


def _batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    rng = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 1, 4, 4, generator=rng), torch.randint(0, 3, (16,), generator=rng)) for _ in range(n)]


def _steps(model: nn.Module, opt: torch.optim.Optimizer, batches) -> None:
    for x, y in batches:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()


def test_state_dict_round_trip_continues_training_identically():
    batches = _batches(7)
    model = _model()
    opt = THOR(model, lr=0.05, damping=0.1, frequency=2, thresholds="THOR_stop", split_dim=8,
               adaptive_interval=0.5)
    _steps(model, opt, batches[:3])
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buffer)

    twin = _model()
    saved = torch.load(io.BytesIO(buffer.getvalue()))
    twin.load_state_dict(saved["model"])
    twin_opt = THOR(twin, lr=0.05, damping=0.1, frequency=2, thresholds="THOR_stop", split_dim=8,
                    adaptive_interval=0.5)
    twin_opt.load_state_dict(saved["opt"])
    first = twin_opt.state[twin_opt.layers[1].weight]
    assert first["decisions"] == 2 and "a_inv" in first and "momentum_buffer" in first

    _steps(model, opt, batches[3:])
    _steps(twin, twin_opt, batches[3:])
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_lr_schedulers_drive_the_param_groups():
    model = _model()
    opt = THOR(model, lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    _steps(model, opt, _batches(1))
    scheduler.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05)


def test_weight_decay_skips_biases_and_norm_parameters():
    model = _model()
    opt = THOR(model, lr=0.1, momentum=0.0, weight_decay=0.5)
    before = copy.deepcopy(model.state_dict())
    for p in model.parameters():
        p.grad = torch.zeros_like(p)                      # only weight decay moves the parameters
    opt.step()
    for name, p in model.named_parameters():
        expected = before[name] * (0.95 if p.dim() > 1 else 1.0)
        torch.testing.assert_close(p.detach(), expected, msg=name)


def test_a_damping_schedule_is_read_per_step():
    damping = get_thor_damping(0, 0.3, 0.5, 2, 3)
    opt = THOR(_model(), lr=0.1, damping=damping)
    assert opt.damping_at(0) == pytest.approx(float(damping[0]))
    assert opt.damping_at(100) == pytest.approx(float(damping[-1]))


def test_kl_clipping_bounds_the_predicted_change():
    model = _model()
    x, y = _batches(1)[0]
    opt = THOR(model, lr=10.0, kl_clip=1e-4)
    _steps(model, opt, [(x, y)])                             # the inverses exist from here on
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    preconditioned = {layer.weight: opt._precondition(layer, layer.weight.grad) for layer in opt.layers}
    predicted = 10.0 ** 2 * sum(float((d * p.grad).sum()) for p, d in preconditioned.items())
    scale = opt._kl_scale(10.0, preconditioned)
    assert scale < 1 and scale ** 2 * predicted == pytest.approx(1e-4)
    opt.kl_clip = 10 * predicted
    assert opt._kl_scale(10.0, preconditioned) == 1.0


def test_a_layer_without_statistics_takes_plain_sgd():
    # MultiheadAttention calls its out_proj Linear functionally: the hooks never fire, so no inverses exist
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(4, 1, batch_first=True)
    opt = THOR(attention, lr=0.1, momentum=0.0, kl_clip=1e-12)
    assert [layer.name for layer in opt.layers] == ["out_proj"]
    x = torch.randn(2, 3, 4)
    attention(x, x, x)[0].sum().backward()
    before = attention.out_proj.weight.detach().clone()
    grad = attention.out_proj.weight.grad.clone()
    opt.step()
    assert "a_inv" not in opt.state[attention.out_proj.weight]
    torch.testing.assert_close(attention.out_proj.weight.detach(), before - 0.1 * grad)


@pytest.mark.parametrize("options, message", [
    ({"lr": 0.0}, "lr > 0"),
    ({"lr": 0.1, "frequency": 0}, "frequency"),
    ({"lr": 0.1, "split_dim": 0}, "split_dim"),
    ({"lr": 0.1, "kl_clip": 0.0}, "kl_clip"),
    ({"lr": 0.1, "adaptive_interval": -1.0}, "adaptive_interval"),
    ({"lr": 0.1, "thresholds": "fast"}, "unknown THOR preset"),
])
def test_bad_hyperparameters_are_named(options, message):
    with pytest.raises(OptimizerError, match=message):
        THOR(_model(), **options)


def test_the_package_is_reached_from_tilegrad():
    import tilegrad
    from tilegrad.optim import THOR as imported

    assert tilegrad.optim.THOR is imported
