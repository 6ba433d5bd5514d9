"""THOR against SGD-momentum and Adam on scikit-learn's digits (8x8 images, 1437 train / 360 test), with a small
CNN and an MLP: epochs and seconds of training until the test accuracy first reaches the target, the final
accuracy, and the time per step. Each optimizer's learning rate is tuned over a small grid (the rate whose median
epochs to target over the seeds is least). Then every optimizer at its rate, and THOR_stop and THOR_NT at THOR's,
train again, interleaved seed by seed, and a row gives the medians over the seeds of that second run (the same
accuracy curves, since a seeded run on one thread is deterministic, but timings taken side by side). One thread
(torch.set_num_threads(1)); seeds outermost, so a busy moment on a shared machine falls on every contender alike.
Run:

    python benchmarks/thor.py                       # table, and docs/thor_digits.png
    python benchmarks/thor.py --json                # [{"task", "optimizer", "lr", "epochs_to_target",
                                                    #   "seconds_to_target", "final_metric", "seconds_per_step"}]
    python benchmarks/thor.py --block-size          # also the block-size chooser's curves for both models
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn

from tilegrad.optim import THOR, choose_thor_block_size

BATCH = 32
THOR_OPTIONS = {"damping": 0.3, "frequency": 10}
TASKS = {  # name -> (epochs, target test accuracy)
    "digits_cnn": (12, 0.97),
    "digits_mlp": (15, 0.97),
}
GRIDS = {
    "sgd": [0.01, 0.03, 0.1, 0.3],
    "adam": [0.001, 0.003, 0.01, 0.03],
    "thor": [0.01, 0.03, 0.1, 0.3],
}
VARIANTS = {"thor_stop": "THOR_stop", "thor_nt": "THOR_NT"}   # run at THOR's tuned rate


def digits() -> tuple[torch.Tensor, ...]:
    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32)[:, None] / 16.0
    y = torch.tensor(data.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, test = order[:1437], order[1437:]
    return x[train], y[train], x[test], y[test]


def model_for(task: str) -> nn.Module:
    if task == "digits_cnn":
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 16, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def optimizer_for(name: str, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr)
    return THOR(model, lr=lr, momentum=0.9, thresholds=VARIANTS.get(name, "THOR"), **THOR_OPTIONS)


def train(task: str, name: str, lr: float, seed: int, data) -> dict:
    """One run: the test accuracy after each epoch and the training seconds (evaluation excluded) up to it."""
    x, y, x_test, y_test = data
    epochs, _ = TASKS[task]
    torch.manual_seed(seed)
    model = model_for(task)
    opt = optimizer_for(name, model, lr)
    rng = torch.Generator().manual_seed(seed)
    accuracy, seconds, elapsed, steps = [], [], 0.0, 0
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=rng)
        start = time.perf_counter()
        for i in range(0, len(order), BATCH):
            batch = order[i:i + BATCH]
            opt.zero_grad()
            F.cross_entropy(model(x[batch]), y[batch]).backward()
            opt.step()
            steps += 1
        elapsed += time.perf_counter() - start
        with torch.no_grad():
            logits = model(x_test)
        accuracy.append(float((logits.argmax(1) == y_test).float().mean()) if torch.isfinite(logits).all() else 0.0)
        seconds.append(elapsed)
    return {"accuracy": accuracy, "seconds": seconds, "seconds_per_step": elapsed / steps}


def to_target(run: dict, target: float) -> tuple[int | None, float | None]:
    """(epochs, training seconds) until the test accuracy first reaches `target`; None when it never does."""
    for epoch, (acc, sec) in enumerate(zip(run["accuracy"], run["seconds"]), start=1):
        if acc >= target:
            return epoch, sec
    return None, None


def _median(values: list) -> float | None:
    """The median, with a run that missed the target (None) counted as worse than any that reached it."""
    ranked = sorted(values, key=lambda v: (v is None, v or 0))
    middle = ranked[len(ranked) // 2] if len(ranked) % 2 else None
    if len(ranked) % 2 == 0:
        low, high = ranked[len(ranked) // 2 - 1], ranked[len(ranked) // 2]
        middle = None if high is None else (low + high) / 2
    return middle


def summarize(task: str, name: str, lr: float, runs: list[dict]) -> dict:
    target = TASKS[task][1]
    reached = [to_target(run, target) for run in runs]
    return {"task": task, "optimizer": name, "lr": lr, "target": target,
            "epochs_to_target": _median([e for e, _ in reached]),
            "seconds_to_target": _median([s for _, s in reached]),
            "final_metric": statistics.median(run["accuracy"][-1] for run in runs),
            "seconds_per_step": statistics.median(run["seconds_per_step"] for run in runs),
            "epochs_to_target_per_seed": [e for e, _ in reached],
            "curve": [statistics.median(c) for c in zip(*(run["accuracy"] for run in runs))],
            "curve_seconds": [statistics.median(c) for c in zip(*(run["seconds"] for run in runs))]}


def _rank(row: dict) -> tuple:
    epochs = row["epochs_to_target"]
    return (epochs is None, epochs or 0, -row["final_metric"])


def run_all(seeds: int, tasks: list[str], log) -> list[dict]:
    data = digits()
    rows = []
    for task in tasks:
        runs: dict[tuple[str, float], list[dict]] = {}
        for seed in range(seeds):
            for name, grid in GRIDS.items():
                for lr in grid:
                    runs.setdefault((name, lr), []).append(train(task, name, lr, seed, data))
        grid_rows = {key: summarize(task, *key, value) for key, value in runs.items()}
        for key, row in grid_rows.items():
            log(f"{task} {key[0]:<6} lr={key[1]:<6} epochs to target {row['epochs_to_target_per_seed']} "
                f"final {row['final_metric']:.3f}")
        best = {name: min((grid_rows[(name, lr)] for lr in grid), key=_rank)["lr"] for name, grid in GRIDS.items()}
        contenders = [(name, lr) for name, lr in best.items()] + [(variant, best["thor"]) for variant in VARIANTS]
        final: dict[str, list[dict]] = {name: [] for name, _ in contenders}
        for seed in range(seeds):
            for name, lr in contenders:
                final[name].append(train(task, name, lr, seed, data))
        rows += [summarize(task, name, lr, final[name]) for name, lr in contenders]
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(2, len(tasks), figsize=(5.5 * len(tasks), 7.5), squeeze=False)
    for col, task in enumerate(tasks):
        for row in (r for r in rows if r["task"] == task):
            label = f"{row['optimizer']} (lr {row['lr']})"
            epochs = range(1, len(row["curve"]) + 1)
            axes[0][col].plot(epochs, row["curve"], marker=".", label=label)
            axes[1][col].plot(row["curve_seconds"], row["curve"], marker=".", label=label)
        for ax, xlabel in zip((axes[0][col], axes[1][col]), ("epoch", "training seconds (1 thread)")):
            ax.axhline(TASKS[task][1], color="grey", linestyle=":", linewidth=1)
            ax.set_ylim(0.8, 1.0)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("test accuracy (median of seeds)")
            ax.set_title(task)
            ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def block_sizes(data, log) -> None:
    for task in TASKS:
        torch.manual_seed(0)
        log(f"block size for {task}:")
        choice = choose_thor_block_size(model_for(task), data[0][:256], data[1][:256], out=None)
        log(choice.table())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated subset of " + ",".join(TASKS))
    parser.add_argument("--plot", default=str(Path(__file__).resolve().parents[1] / "docs" / "thor_digits.png"))
    parser.add_argument("--block-size", action="store_true", help="also print the block-size chooser's curves")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    def log(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    rows = run_all(args.seeds, args.tasks.split(","), log)
    if args.block_size:
        block_sizes(digits(), log)
    if args.plot:
        plot(rows, Path(args.plot))
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if not k.startswith("curve")} for r in rows], indent=1))
        return 0
    print(f"{'task':<11} {'optimizer':<10} {'lr':>6} {'target':>6} {'epochs':>6} {'seconds':>8} {'final':>6} "
          f"{'ms/step':>8}  epochs per seed")
    for r in rows:
        epochs = "-" if r["epochs_to_target"] is None else f"{r['epochs_to_target']:g}"
        seconds = "-" if r["seconds_to_target"] is None else f"{r['seconds_to_target']:.2f}"
        print(f"{r['task']:<11} {r['optimizer']:<10} {r['lr']:>6g} {r['target']:>6.2f} {epochs:>6} {seconds:>8} "
              f"{r['final_metric']:>6.3f} {1e3 * r['seconds_per_step']:>8.2f}  {r['epochs_to_target_per_seed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
