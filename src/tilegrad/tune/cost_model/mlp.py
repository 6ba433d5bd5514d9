"""A differentiable cost model for Felix: TenSet's MLP over each store of a program.

Felix's gradient search backpropagates from the model's score through the feature formulas to the schedule
variables, which a tree model cannot serve. This is TenSet's per-store multi-layer perceptron: an encoder (two
linear layers, 160 -> 256 -> 256, ReLU after each) reads each store's row of the program vector
(`features.program_vector`: the store slots), its outputs are summed over the program's stores, and three linear
layers (256 -> 256 -> 256 -> 1) read the sum: about 240,000 parameters. The sums and maxes over stores that a
program vector starts with blur what each store does: an MLP over them ranks held-out programs worse than the
per-store one, and worse than trees (docs/tuning.md). `per_store=False` gives that model, four
linear layers (320 -> 256 -> 256 -> 256 -> 1) over the aggregate part, which the weights shipped for CPUs without
their own (`pretrained_path`) still are. Non-finite features (programs whose features are not derived, slots
without a store) read as missing, and each feature is centred and scaled by statistics fixed at the first
training, kept with the weights.

The model predicts normalised throughput, one of two ways (`label`). "task": throughput over the best throughput
of its task among the rows given, so 1 is the task's best program and 0 a failed one, whatever the task's absolute
speed. "roofline": the throughput it is given, which the callers make the fraction of this machine's roofline the
program reaches (`Task.roofline_s` over its latency, from the measured FMA peak and memory bandwidth), capped at
ROOFLINE_CAP: a label that means the same on every task and every machine, so one model ranks the programs of
tasks it never saw on CPUs it was not trained on, and its scores compare across tasks (how much a task has left
to gain). Both rank the same within a task, which is what search uses. The loss is

    loss = mean squared error on normalised throughput  +  RANK_WEIGHT x RankNet loss over same-task pairs

Each term covers the other's weakness. Search only compares candidates of one task, so the pairwise term (a
logistic loss on the score difference of every same-task pair whose labels differ by more than PAIR_MARGIN, at
temperature TEMPERATURE) trains exactly the order that search uses, including among the many slow random programs
whose normalised throughputs are all near 0 and which squared error hardly separates. The squared-error term pins
the scores to the [0, 1] label scale: a score that means the same thing in every task, and a bounded objective for
gradient ascent, which a pure ranking loss (scores free to drift by any per-task offset or scale) does not give.
On the shipped model's dataset the two terms rank held-out programs alike: the data, not the loss, limits the
model there (docs/benchmark-history.md).

Batches are made of chunks of one task's rows (shuffled), so every batch holds many same-task pairs. `update`
fine-tunes from the current weights with Adam and a cosine learning-rate decay; a fresh optimiser each call keeps
saved models to weights alone. An update's epochs go over its new rows only, each batch topped up with REPLAY
times as many rows from earlier updates drawn at random: the model keeps what it learned (experience replay), and
an update of a tuning round costs the same after 2,000 rows as after 20, where passes over every row seen would
grow with the run. Training is deterministic for a given seed
and sequence of calls, and runs on `threads` torch threads, restored afterwards.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...target import host
from ..adam import Adam
from ..features.extract import STORE_SLOTS, feature_count

NUM_FEATURES = feature_count(gpu=False)  # features.program_vector of a CPU kernel
HIDDEN = 256
RANK_WEIGHT = 0.3
TEMPERATURE = 0.3  # score differences of about this size already order a pair confidently
PAIR_MARGIN = 0.01  # pairs closer than this in normalised throughput are measurement noise, not an order
LEARNING_RATE = 1e-3
UPDATE_EPOCHS = 10  # passes over an update's new rows
REPLAY = 3  # rows from earlier updates per new row in each batch of an update
CHUNK_ROWS = 64  # rows of one task that share a batch
BATCH_ROWS = 512
ROOFLINE_CAP = 2.0  # a "roofline" label above 1: data found in a cache beat the memory bandwidth
LABELS = ("task", "roofline")
PRETRAINED = Path(__file__).parent / "pretrained" / "mlp_cost_model.npz"
_FORMAT = "tilegrad.mlp_cost_model/1"


def pretrained_path(isa: str | None = None) -> Path:
    """The shipped weights for programs of `isa` (`Target.isa`; the host's by default): those trained on a machine
    of that ISA (`mlp_cost_model.<isa>.npz`) where they ship, else PRETRAINED. A program's features name its
    vector width and registers, so a model trained on one ISA's programs ranks another's worse (docs/tuning.md)."""
    own = PRETRAINED.with_name(f"{PRETRAINED.stem}.{isa or host().isa}{PRETRAINED.suffix}")
    return own if own.exists() else PRETRAINED


class _Net(nn.Module):
    """Four linear layers over standardised features; one score per row. It reads the leading columns it was made
    for: all of a plain matrix, the aggregate part of a program vector."""

    def __init__(self, num_features: int, hidden: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(num_features))
        self.register_buffer("scale", torch.ones(num_features))
        self.layers = nn.Sequential(
            nn.Linear(num_features, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :len(self.mean)]
        x = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
        return self.layers((x - self.mean) * self.scale).squeeze(-1)

    def standardise_by(self, x: np.ndarray) -> None:
        _set_statistics(self, x[:, :len(self.mean)])

    def stacks(self) -> list[nn.Sequential]:
        return [self.layers]

    def score_and_gradient(self, x: np.ndarray, arrays: tuple) -> tuple[np.ndarray, np.ndarray]:
        """`MLPCostModel.score_and_gradient`, for this net, whose tensors `arrays` views (`_arrays`)."""
        (mean, scale), ((weights, biases),) = arrays
        read = x[:, :len(mean)]
        finite = np.isfinite(read)
        h, back = _dense_stack((np.where(finite, read, 0.0).astype(np.float32) - mean) * scale, weights, biases)
        grad = np.zeros(x.shape)
        grad[:, :len(mean)] = np.where(finite, back(np.ones((len(x), 1), np.float32)) * scale, 0.0)
        return h[:, 0].astype(np.float64), grad


class _StoreNet(nn.Module):
    """An encoder over each store's standardised row (`features.store_slots`), summed over the program's stores,
    and three linear layers over the sum; one score per row of program vectors."""

    def __init__(self, num_features: int, hidden: int):
        super().__init__()
        self.width = num_features // (2 + STORE_SLOTS)  # one store's features
        self.register_buffer("mean", torch.zeros(self.width))
        self.register_buffer("scale", torch.ones(self.width))
        self.encoder = nn.Sequential(nn.Linear(self.width, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.layers = nn.Sequential(
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stores = self._stores(x)
        present = torch.isfinite(stores).all(dim=-1)
        encoded = self.encoder((stores[present] - self.mean) * self.scale)
        summed = torch.zeros(len(x), encoded.shape[1], dtype=encoded.dtype).index_add(
            0, present.nonzero()[:, 0], encoded)
        return self.layers(summed).squeeze(-1)

    def standardise_by(self, x: np.ndarray) -> None:
        stores = self._stores(x)
        _set_statistics(self, stores[np.isfinite(stores).all(axis=-1)])

    def stacks(self) -> list[nn.Sequential]:
        return [self.encoder, self.layers]

    def score_and_gradient(self, x: np.ndarray, arrays: tuple) -> tuple[np.ndarray, np.ndarray]:
        """`MLPCostModel.score_and_gradient`, for this net, whose tensors `arrays` views (`_arrays`): the encoder
        runs on the stores present only."""
        (mean, scale), (encoder, layers) = arrays
        stores = self._stores(x)
        present = np.isfinite(stores).all(axis=-1)
        encoded, encoder_back = _dense_stack((stores[present].astype(np.float32) - mean) * scale, *encoder,
                                             relu_last=True)
        owner = np.nonzero(present)[0]
        summed = np.zeros((len(x), encoded.shape[1]), np.float32)
        np.add.at(summed, owner, encoded)
        h, back = _dense_stack(summed, *layers)
        grad = np.zeros(stores.shape)
        grad[present] = encoder_back(back(np.ones((len(x), 1), np.float32))[owner]) * scale
        return h[:, 0].astype(np.float64), np.concatenate([np.zeros((len(x), 2 * self.width)),
                                                           grad.reshape(len(x), -1)], axis=1)

    def _stores(self, x):
        return x[:, 2 * self.width:].reshape(len(x), STORE_SLOTS, self.width)


def _set_statistics(net: nn.Module, x: np.ndarray) -> None:
    """Centre and scale each feature by the first training data; a near-constant feature is only centred
    (a tiny spread would turn an unseen value into a huge input)."""
    finite = np.where(np.isfinite(x), x, 0.0).astype(np.float64)
    net.mean.copy_(torch.from_numpy(finite.mean(axis=0)))
    net.scale.copy_(torch.from_numpy(1.0 / np.maximum(finite.std(axis=0), 1.0)))


def _arrays(net: nn.Module) -> tuple:
    """((mean, scale), ((weights, biases) of each of `net.stacks()`)) of `net`, as NumPy views of its tensors."""
    linears = [[m for m in stack if isinstance(m, nn.Linear)] for stack in net.stacks()]
    return ((net.mean.numpy(), net.scale.numpy()),
            [([m.weight.detach().numpy() for m in ms], [m.bias.detach().numpy() for m in ms]) for ms in linears])


def _dense_stack(h: np.ndarray, weights: list, biases: list, relu_last: bool = False) -> tuple:
    """`h` through linear layers with ReLU between them (and after the last, with `relu_last`), in NumPy; and the
    function taking a gradient with respect to the output to one with respect to `h`."""
    active = []
    for k, (w, b) in enumerate(zip(weights, biases)):
        h = h @ w.T + b
        active.append(h > 0 if relu_last or k < len(weights) - 1 else None)
        if active[-1] is not None:
            h = h * active[-1]

    def back(grad: np.ndarray) -> np.ndarray:
        for w, on in zip(reversed(weights), reversed(active)):
            grad = (grad if on is None else grad * on) @ w
        return grad

    return h, back


class MLPCostModel:
    """The CostModel protocol (predict/update/save/load) plus `score`, differentiable, for gradient search.

    `seed` fixes the initial weights and the batch order; `threads` is the torch thread count used while
    predicting and training (1 by default, so the model does not compete with measurement). `per_store`: read each
    store of program vectors (`num_features` wide); else the rows as they are, or a program vector's aggregate part
    where `num_features` is its width.
    """

    def __init__(self, *, num_features: int = NUM_FEATURES, hidden: int = HIDDEN, seed: int = 0, threads: int = 1,
                 label: str = "task", per_store: bool = True):
        if label not in LABELS:
            raise ValueError(f"label must be one of {', '.join(LABELS)}, got {label!r}")
        if per_store and num_features % (2 + STORE_SLOTS):
            raise ValueError(f"a per-store model reads program vectors, (2 + {STORE_SLOTS}) x one store's features "
                             f"wide; {num_features} is not (pass per_store=False for other rows)")
        self.num_features, self.hidden, self.threads, self.label = num_features, hidden, threads, label
        self.per_store = per_store
        self._rng = np.random.default_rng(seed)
        with torch.random.fork_rng(devices=[]):  # seeded initial weights without touching the global generator
            torch.manual_seed(seed)
            self.net = self._make_net()
        self.net.eval()
        self.fitted = False  # the feature statistics are set by the first update (or loaded)
        self._rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # every update's rows, for fine-tuning
        self._arrays = None  # (net, its layers as NumPy views) for score_and_gradient

    @classmethod
    def pretrained(cls, isa: str | None = None, **options) -> MLPCostModel:
        """The model trained by `python -m tilegrad.tools.dataset train` and shipped with the package, for `isa`
        (`pretrained_path`; the host's by default); a fresh (untrained) model, with a warning, if the weights are
        missing."""
        model = cls(**options)
        path = pretrained_path(isa)
        if path.exists():
            model.load(path)
        else:
            warnings.warn(f"no pretrained cost model at {path}; using an untrained MLP (train one with "
                          "`python -m tilegrad.tools.dataset train --db DATASET.db`)", stacklevel=2)
        return model

    def score_and_gradient(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predicted normalised throughput of each row of `x` (n, num_features) and its gradient in `x`, in
        NumPy: the gradient search calls this at every Adam step on a handful of rows, where PyTorch's
        autograd would be mostly dispatch; these are the net's layers written out in its own float32 (features NaN
        or infinite are missing, as in the net's `forward`, and pass no gradient)."""
        if self._arrays is None or self._arrays[0] is not self.net:  # views stay current while the net lives
            self._arrays = (self.net, _arrays(self.net))
        return self.net.score_and_gradient(self._check_features(x), self._arrays[1])

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = self._check_features(x)
        with _torch_threads(self.threads), torch.no_grad():
            return self.net(torch.from_numpy(x)).double().numpy()

    def update(self, x: np.ndarray, throughput: np.ndarray, groups: Sequence[str], *,
               epochs: int = UPDATE_EPOCHS) -> None:
        """Add these rows (features, measured throughput, task key per row) to those given since construction or
        `load`, and fine-tune from the current weights for `epochs` passes over the new rows, with REPLAY times as
        many earlier rows in each batch; the labels are throughput over the best of its task among all rows, or
        the throughput as given (`label`). (The
        tuner hands each round's new rows: their labels need the task's best so far, and fine-tuning on the new
        rows alone would forget the earlier ones.)"""
        x = self._check_features(x)
        groups = np.asarray([str(g) for g in groups])
        if not len(x) == len(throughput) == len(groups):
            raise ValueError(f"update: {len(x)} feature rows, {len(throughput)} throughputs and {len(groups)} task "
                             "keys; pass one of each per candidate")
        if not len(x):
            return
        if not self.fitted:
            self.net.standardise_by(x)
        self._rows.append((x, np.asarray(throughput, np.float64), groups))
        fresh = len(x)
        x = np.concatenate([r[0] for r in self._rows])
        throughput = np.concatenate([r[1] for r in self._rows])
        _, group_ids = np.unique(np.concatenate([r[2] for r in self._rows]), return_inverse=True)
        labels = (normalised_throughput(throughput, group_ids) if self.label == "task" else
                  np.clip(np.nan_to_num(throughput, nan=0.0, posinf=0.0), 0.0, ROOFLINE_CAP).astype(np.float32))
        with _torch_threads(self.threads):
            self._train(torch.from_numpy(x), torch.from_numpy(labels), group_ids, epochs, len(x) - fresh)
        self.fitted = True

    def save(self, path: str | Path) -> None:
        """Write the weights and feature statistics as .npz (plain arrays, no pickled objects)."""
        state = {f"state.{k}": v.numpy() for k, v in self.net.state_dict().items()}
        with open(path, "wb") as f:
            np.savez(f, format=np.array(_FORMAT), num_features=self.num_features, hidden=self.hidden,
                     fitted=self.fitted, label=np.array(self.label), per_store=self.per_store, **state)

    def load(self, path: str | Path) -> None:
        """Replace this model's weights (and sizes) by those saved at `path`."""
        with np.load(path, allow_pickle=False) as f:
            if "format" not in f.files or str(f["format"]) != _FORMAT:
                raise ValueError(f"{path}: not a saved MLPCostModel (want format {_FORMAT!r})")
            self.num_features, self.hidden = int(f["num_features"]), int(f["hidden"])
            self.fitted = bool(f["fitted"])
            self.label = str(f["label"]) if "label" in f.files else "task"  # (saved before labels had a choice)
            self.per_store = bool(f["per_store"]) if "per_store" in f.files else False  # (saved before it had one)
            state = {k.removeprefix("state."): torch.from_numpy(f[k]) for k in f.files if k.startswith("state.")}
        self.net = self._make_net()
        self.net.load_state_dict(state)
        self.net.eval()
        self._rows = []

    def _make_net(self) -> nn.Module:
        return (_StoreNet if self.per_store else _Net)(self.num_features, self.hidden)

    def _check_features(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float32, ndmin=2)
        widths = {self.num_features}
        if not self.per_store:  # a program vector whose aggregate part is what this model reads
            widths.add(self.num_features // 2 * (2 + STORE_SLOTS))
        if x.ndim != 2 or x.shape[1] not in widths:
            raise ValueError(f"features must be a matrix with {self.num_features} columns (one row per "
                             f"candidate), got shape {x.shape}")
        return x

    def _train(self, x: torch.Tensor, labels: torch.Tensor, group_ids: np.ndarray, epochs: int,
               first_new: int) -> None:
        """Adam with a cosine decay of the learning rate over the update's steps."""
        batches = [_batches(group_ids, first_new, self._rng) for _ in range(epochs)]
        steps = sum(len(b) for b in batches)
        groups = torch.from_numpy(group_ids)
        params = list(self.net.parameters())
        adam = Adam([p.detach().numpy() for p in params])  # NumPy views: the steps write the weights in place
        self.net.train()
        for k, rows in enumerate(rows for epoch in batches for rows in epoch):
            rows = torch.from_numpy(rows)
            loss = _loss(self.net(x[rows]), labels[rows], groups[rows], relative=self.label == "roofline")
            for p in params:
                p.grad = None
            loss.backward()
            adam.step([p.grad.numpy() for p in params], LEARNING_RATE * 0.5 * (1 + math.cos(math.pi * k / steps)))
        self.net.eval()


def normalised_throughput(throughput: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """Throughput over the best of its group (float32 in [0, 1]); failed rows (0, inf, nan) and groups without a
    working program get 0."""
    tp = np.asarray(throughput, dtype=np.float64).reshape(-1)
    tp = np.where(np.isfinite(tp) & (tp > 0), tp, 0.0)
    best = np.zeros(group_ids.max() + 1 if len(group_ids) else 0)
    np.maximum.at(best, group_ids, tp)
    best = best[group_ids]
    return np.divide(tp, best, out=np.zeros_like(tp), where=best > 0).astype(np.float32)


def _loss(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, relative: bool = False) -> torch.Tensor:
    """Squared error plus RankNet over the batch's same-task pairs (see the module doc); `relative`: a pair's
    labels differ by PAIR_MARGIN of the larger (roofline labels, whose scale is the task's), else by PAIR_MARGIN."""
    mse = F.mse_loss(scores, labels)
    margin = PAIR_MARGIN * labels[:, None] if relative else PAIR_MARGIN
    better = (groups[:, None] == groups[None, :]) & (labels[:, None] > labels[None, :] + margin)
    if not better.any():
        return mse
    diff = (scores[:, None] - scores[None, :])[better]
    return mse + RANK_WEIGHT * F.softplus(-diff / TEMPERATURE).mean()


def _batches(group_ids: np.ndarray, first_new: int, rng: np.random.Generator) -> list[np.ndarray]:
    """One epoch's batches over the rows from `first_new` on: each task's rows shuffled and cut into chunks of
    CHUNK_ROWS, the chunks shuffled and joined into batches of about BATCH_ROWS rows, each topped up with REPLAY
    times its rows in chunks of the earlier rows, drawn at random."""
    rows = np.arange(len(group_ids))
    new, old = _chunks(rows[first_new:], group_ids, rng), _chunks(rows[:first_new], group_ids, rng)
    per_batch = max(1, BATCH_ROWS // CHUNK_ROWS)
    order = rng.permutation(len(new))
    batches = []
    for i in range(0, len(order), per_batch):
        batch = [new[k] for k in order[i:i + per_batch]]
        want = REPLAY * sum(len(c) for c in batch)
        for k in rng.permutation(len(old)):
            if want <= 0:
                break
            batch.append(old[k])
            want -= len(old[k])
        batches.append(np.concatenate(batch))
    return batches


def _chunks(rows: np.ndarray, group_ids: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """`rows` by task, each task's shuffled and cut into chunks of CHUNK_ROWS."""
    out = []
    for g in np.unique(group_ids[rows]):
        mine = rng.permutation(rows[group_ids[rows] == g])
        out += [mine[i:i + CHUNK_ROWS] for i in range(0, len(mine), CHUNK_ROWS)]
    return out


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run with `n` torch threads and restore the process's setting after."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)
