"""Felix's smoothing: each smooth form tends to its original away from the steps, gradients stay finite, and the
batched evaluator of a real task's smoothed features equals the exact features at integer points as tau -> 0 and
agrees with plain PyTorch autograd in values and gradients."""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate
from tilegrad.tune.felix.smooth import smooth, smooth_all
from tilegrad.tune.model import model_graph
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.task import extract_tasks

X, Y = E.Var("x", "float64"), E.Var("y", "float64")
A, B = E.Var("a", E.INDEX, -60, 60), E.Var("b", E.INDEX, 1, 40)

_TORCH = {E.Add: torch.add, E.Sub: torch.sub, E.Mul: torch.mul, E.Div: torch.div, E.Atan: torch.atan,
          E.Sin: torch.sin, E.Cos: torch.cos}


def _torch_eval(roots: list[E.Expr], env: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Plain PyTorch, one op per node: the reference for the batched evaluator and the source of autograd."""
    like = next(iter(env.values()))
    memo: dict[int, torch.Tensor] = {}
    stack = list(roots)
    while stack:
        e = stack[-1]
        if id(e) in memo:
            stack.pop()
            continue
        todo = [k for k in e.children() if id(k) not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        t = type(e)
        if t is E.Const:
            memo[id(e)] = torch.full_like(like, e.value)
        elif t is E.Var:
            memo[id(e)] = env[e.name]
        else:
            memo[id(e)] = _TORCH[t](*(memo[id(k)] for k in e.children()))
    return [memo[id(r)] for r in roots]


def _smooth_value(e: E.Expr, tau: float, env: dict[str, float]) -> float:
    tensors = {k: torch.tensor([float(v)], dtype=torch.float64) for k, v in env.items()}
    return _torch_eval([smooth(e, tau)], tensors)[0].item()


# -- each smooth form against its original ------------------------------------------------------------------------

# Float forms, checked where x, y - x and their halves are at least 0.1 from the nearest step (an integer, or 0).
FLOAT_FORMS = {
    "lt": X < Y, "le": X <= Y, "gt": X > Y, "max": E.maximum(X, Y), "min": E.minimum(X, Y), "abs": E.abs_(X),
    "floor": E.floor(X), "ceil": E.ceil(X), "round": E.round_(X - 0.5), "select": E.select(X < Y, X * Y, Y - X),
}
# Integer forms, checked at integer points: the half-unit shifts make these exact in the limit.
INT_FORMS = {
    "lt": A < B, "le": A <= B, "ge": A >= B, "eq": A.eq(B), "ne": A.ne(B), "eq_near": A.eq(B - 1),
    "floordiv": A // B, "floormod": A % B, "floordiv_const": A // 7, "max": E.maximum(A, B), "min": E.minimum(A, B),
    "and_or_not": E.select(((A < B) & (A.ne(0))) | ~(B <= 3), A * 2, B - 1),
    "cast": E.cast("float64", A % B) * 0.5,
}


def _off_step() -> st.SearchStrategy[float]:
    return st.builds(lambda n, f: n + f, st.integers(-40, 40), st.floats(0.1, 0.9))


@pytest.mark.parametrize("name", FLOAT_FORMS)
@given(x=_off_step(), d=_off_step())
def test_float_forms_tend_to_the_originals(name, x, d):
    e, env = FLOAT_FORMS[name], {"x": x, "y": x + d}
    # relative too: the smoothed value's rounding grows with it (819.3749990 for 819.375 at x = 28.5)
    assert _smooth_value(e, 1e-9, env) == pytest.approx(float(evaluate(e, env)), rel=1e-8, abs=1e-6)


@pytest.mark.parametrize("name", INT_FORMS)
@given(a=st.integers(-60, 60), b=st.integers(1, 40))
def test_integer_forms_tend_to_the_originals_at_integers(name, a, b):
    e, env = INT_FORMS[name], {"a": a, "b": b}
    assert _smooth_value(e, 1e-9, env) == pytest.approx(float(evaluate(e, env)), abs=1e-5)


def test_smoothing_changes_the_value_near_a_step():
    """The test above can fail: at tau = 1 the step is visibly spread, and without the half-unit shift an integer
    comparison at equality would give 1/2."""
    assert 0.6 < _smooth_value(A < B, 1.0, {"a": 3, "b": 4}) < 0.9
    assert _smooth_value(A < B, 1e-9, {"a": 4, "b": 4}) == pytest.approx(0.0, abs=1e-6)
    assert _smooth_value(X < Y, 1e-9, {"x": 4.0, "y": 4.0}) == pytest.approx(0.5)


_EVERYWHERE = st.one_of(st.floats(-1e6, 1e6), st.integers(-1000, 1000).map(float), st.just(0.0), st.just(0.5))


@pytest.mark.parametrize("name", sorted(set(FLOAT_FORMS) | {f"int_{k}" for k in INT_FORMS}))
@given(x=_EVERYWHERE, y=_EVERYWHERE)
def test_gradients_are_finite_everywhere(name, x, y):
    e = INT_FORMS[name[4:]] if name.startswith("int_") else FLOAT_FORMS[name]
    s = smooth(e, 1.0)
    names = ("a", "b") if name.startswith("int_") else ("x", "y")
    env = {n: torch.tensor([v], dtype=torch.float64, requires_grad=True) for n, v in zip(names, (x, abs(y) + 1))}
    (value,) = _torch_eval([s], env)
    grads = torch.autograd.grad(value.sum(), list(env.values()), allow_unused=True)
    assert math.isfinite(value.item())
    assert all(g is None or torch.isfinite(g).all() for g in grads)


def test_shared_subexpressions_are_rewritten_once():
    q = A // B
    out = smooth_all([q * 2 + q, q - 1], 0.5)
    first = next(k for k in out[0].children() if type(k) is not E.Mul)  # the smoothed q, used three times
    assert out[1].a is first and out[0].a.a is first


def test_nodes_with_equal_smooth_operands_keep_their_own_forms():
    """cast(a) smooths to the same form as a, yet an integer comparison is shifted and a float one is not."""
    fa, fb = E.cast("float64", A), E.cast("float64", B)
    e = E.cast("float64", A < B) + E.cast("float64", fa < fb)
    assert _smooth_value(e, 1e-9, {"a": 3, "b": 3}) == pytest.approx(0.5, abs=1e-6)


def test_output_has_only_arithmetic_and_math_calls():
    allowed = {E.Const, E.Var, E.Add, E.Sub, E.Mul, E.Div, E.Atan, E.Sin, E.Cos}
    stack, seen = [smooth(e, 1.0) for e in INT_FORMS.values()], set()
    while stack:
        e = stack.pop()
        if id(e) not in seen:
            seen.add(id(e))
            assert type(e) in allowed and e.dtype == "float64", e
            stack.extend(e.children())


def test_bad_width_and_unknown_nodes_are_errors():
    with pytest.raises(ValueError, match="tau must be positive"):
        smooth(A < B, 0.0)
    with pytest.raises(ValueError, match="cannot smooth Exp"):
        smooth(E.exp(X), 1.0)


# -- the batched evaluator on a real conv task --------------------------------------------------------------------


@functools.cache
def _conv_structure():
    """A tiled sketch structure of the conv task of a small block, its exact formulas and valid assignments."""
    block = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 8 * 8, 10)).eval()
    tasks = extract_tasks(model_graph(block, example_inputs=(torch.randn(1, 16, 16, 16),)))
    space, rng = TaskSpace(tasks[0]), random.Random(0)
    sketch = space.sketches[1]
    structure = sketch.structure_of(sketch.sample(rng))
    key = (1, tuple(sorted(structure.items())))
    formulas = space._formulas_for(key)
    assert formulas is not None and len(formulas.variables) > 5
    samples = [sketch.sample(rng, fixed=structure) for _ in range(12)]
    values = np.array([[p[v] for v in formulas.variables] for p in samples], np.float64)
    return space, key, formulas, values


def test_small_tau_matches_the_exact_features_at_integer_points():
    space, key, formulas, values = _conv_structure()
    smooth_f = space.smooth_formulas(key, 1e-12)
    exact = formulas.evaluate({v: values[:, j].astype(np.int64) for j, v in enumerate(formulas.variables)})
    with torch.no_grad():
        got = smooth_f(torch.log(torch.from_numpy(values))).numpy()
    assert got.shape == exact.shape
    # Compared as the cost model sees features; the errors grow like tau times the size of the values compared.
    np.testing.assert_allclose(np.log2(1 + np.abs(got)), np.log2(1 + np.abs(exact)), atol=1e-3)
    np.testing.assert_allclose(smooth_f.features_at(dict(zip(formulas.variables, values.T))), got)
    loose = space.smooth_formulas(key, 1.0)(torch.log(torch.from_numpy(values))).detach().numpy()
    assert np.abs(np.log2(1 + np.abs(loose)) - np.log2(1 + np.abs(exact))).max() > 0.1  # the check can fail


def test_features_and_gradients_are_finite_in_the_domain():
    space, key, formulas, _ = _conv_structure()
    x = torch.from_numpy(np.random.default_rng(0).uniform(0, math.log(1e6), (64, len(formulas.variables))))
    for tau in (1.0, 1e-3):
        x.requires_grad_(True)
        out = space.smooth_formulas(key, tau)(x)
        out.sum().backward()
        assert out.shape == (64, len(formulas.stores), len(formulas.names))
        assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
        assert x.grad.abs().sum() > 0
        x = x.detach()


def test_batched_evaluator_agrees_with_plain_autograd():
    space, key, formulas, _ = _conv_structure()
    smooth_f = space.smooth_formulas(key, 1.0)
    x = torch.from_numpy(np.random.default_rng(1).uniform(0, math.log(1e3), (3, len(formulas.variables))))
    x.requires_grad_(True)
    weights = torch.from_numpy(np.random.default_rng(2).uniform(-1, 1, (3, len(formulas.stores),
                                                                        len(formulas.names))))
    got = smooth_f(x)
    (grad,) = torch.autograd.grad((got * weights).sum(), x)

    ref_x = x.detach().clone().requires_grad_(True)
    env = {v: torch.exp(ref_x[:, j]) for j, v in enumerate(formulas.variables)}
    roots = smooth_all([e for row in formulas.rows.rows for e in row], 1.0)
    want = torch.stack(_torch_eval(roots, env), dim=1).reshape(got.shape)
    (ref_grad,) = torch.autograd.grad((want * weights).sum(), ref_x)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)
    # Gradients reach 1e11 and sum many terms of both signs, in another order than autograd's.
    torch.testing.assert_close(grad, ref_grad, rtol=1e-6, atol=1e-9 * float(ref_grad.abs().max()))


def test_wrong_shape_is_an_error():
    space, key, formulas, _ = _conv_structure()
    with pytest.raises(ValueError, match="log_values must have shape"):
        space.smooth_formulas(key, 1.0)(torch.zeros(2, len(formulas.variables) + 1, dtype=torch.float64))
