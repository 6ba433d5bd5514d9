"""Auto-parallel planning against pure data parallel, for a GPT-2-like stack and a wide classifier (a huge final
FC layer, the seed's face-recognition case): the searched strategy's and data parallel's step time and memory
per process, predicted by the cost model and measured on 2 and 4 gloo processes on this machine, and predicted
for 64 and 512 simulated devices on a two-level topology (servers of 8, racks of 8 servers). Run:

    python benchmarks/parallel.py                # a table
    python benchmarks/parallel.py --json         # one JSON document
    python benchmarks/parallel.py --quick        # small models and few steps: checks that it works

The cost model's figures are measured once per machine and cached (`tilegrad.parallel.calibrate`); the first
run takes a minute or two longer. The target: on the wide classifier at 64 devices the searched strategy's
predicted step time is at most 0.5x data parallel's, and it fits a memory cap that data parallel exceeds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time

import torch

from tilegrad.parallel import models
from tilegrad.parallel.apply import ShardedProgram
from tilegrad.parallel.calibrate import measured_machine
from tilegrad.parallel.capture import capture
from tilegrad.parallel.launch import run_workers
from tilegrad.parallel.modules import TransformerBlock
from tilegrad.parallel.search import Problem, data_parallel, search
from tilegrad.parallel.topology import Topology, plan_cluster, uniform_links

# A simulated accelerator cluster: 100 TFLOP/s devices with 32 GB of 2 TB/s memory, NVLink-like links in a server,
# slower ones between the servers of a rack and between racks.
CLUSTER = Topology(1e14, uniform_links(5e-6, 1 / 200e9), uniform_links(1e-5, 1 / 25e9),
                   uniform_links(2e-5, 1 / 12.5e9), memory_bytes=32e9, bandwidth=2e12)
SIMULATED_DEVICES = (64, 512)


class GPT(torch.nn.Module):
    """Embedded tokens in, a stack of blocks, the vocabulary projection out."""

    def __init__(self, layers, width, vocab):
        super().__init__()
        self.blocks = torch.nn.Sequential(*(TransformerBlock(width) for _ in range(layers)))
        self.ln_f, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, vocab, bias=False)

    def forward(self, x):
        return self.head(self.ln_f(self.blocks(x)))


class WideClassifier(torch.nn.Module):
    def __init__(self, features, hidden, classes):
        super().__init__()
        self.fc0, self.act0 = torch.nn.Linear(features, hidden), torch.nn.ReLU()
        self.fc1, self.act1 = torch.nn.Linear(hidden, hidden), torch.nn.ReLU()
        self.classifier = torch.nn.Linear(hidden, classes, bias=False)

    def forward(self, x):
        return torch.exp(self.classifier(self.act1(self.fc1(self.act0(self.fc0(x))))) * 0.01).sum(dim=1)


def configs(quick: bool) -> dict:
    if quick:
        return {"gpt": {"layers": 1, "batch": 8, "seq": 16, "width": 32, "vocab": 256},
                "wide": {"batch": 16, "features": 32, "hidden": 32, "classes": 4096}, "steps": 2}
    return {"gpt": {"layers": 4, "batch": 8, "seq": 64, "width": 256, "vocab": 8192},
            "wide": {"batch": 64, "features": 256, "hidden": 256, "classes": 1 << 17}, "steps": 5}


def torch_model(name: str, cfg: dict):
    torch.manual_seed(0)
    if name == "gpt":
        c = cfg["gpt"]
        return GPT(c["layers"], c["width"], c["vocab"]), torch.randn(c["batch"], c["seq"], c["width"])
    c = cfg["wide"]
    return WideClassifier(c["features"], c["hidden"], c["classes"]), torch.randn(c["batch"], c["features"])


def _measure(rank, world, name, cfg, strategies):
    model, x = torch_model(name, cfg)
    program = ShardedProgram(capture(model, x), strategies, world, dict(model.named_parameters()))
    optimizer = torch.optim.Adam(list(program.parameters.values()), lr=1e-3)
    out_shape = model(x).shape
    weights = torch.ones(out_shape)
    times = []
    for _ in range(cfg["steps"] + 1):
        torch.distributed.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        program.local_loss(weights, x).backward()
        program.sync_gradients()
        optimizer.step()
        times.append(time.perf_counter() - start)
    state = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values()
                if torch.is_tensor(t) and t.dim() > 0)
    params = sum(p.numel() * p.element_size() * 2 for p in program.parameters.values())  # values and gradients
    return statistics.median(times[1:]), params + state


def local_rows(cfg: dict) -> list[dict]:
    rows = []
    for name in ("gpt", "wide"):
        model, x = torch_model(name, cfg)
        graph = capture(model, x).graph
        for world in (2, 4):
            problem = Problem(graph, world, measured_machine(processes=world))
            for label, plan in (("searched", search(problem)), ("data parallel", data_parallel(problem))):
                measured = run_workers(_measure, world, name, cfg, plan.strategies)
                step = max(m[0] for m in measured)
                rows.append({"model": name, "devices": world, "strategy": label,
                             "predicted_step_s": plan.step_seconds, "measured_step_s": step,
                             "predicted_over_measured": plan.step_seconds / step,
                             "predicted_memory_bytes": plan.memory_bytes,
                             "measured_parameter_state_bytes": max(m[1] for m in measured)})
                print(f"{name} {world} {label} done", file=sys.stderr)
    return rows


def simulated_rows(quick: bool) -> list[dict]:
    rows = []
    # the memory cap per device: about half of what the replicated classifier weight needs with Adam
    width, classes, cap = (256, 1 << 16, 150e6) if quick else (512, 1 << 20, 4e9)
    wide = models.wide_classifier(512, width, width, classes)
    capped = dataclasses.replace(CLUSTER, memory_bytes=cap).machine()
    for devices in SIMULATED_DEVICES:
        problem = Problem(wide, devices, capped)
        for label, plan in (("searched", search(problem)), ("data parallel", data_parallel(problem))):
            rows.append({"model": "wide", "devices": devices, "strategy": label,
                         "predicted_step_s": plan.step_seconds, "predicted_memory_bytes": plan.memory_bytes,
                         "fits_cap": plan.fits, "cap_bytes": cap})
    layers, width = (2, 256) if quick else (8, 1024)

    def gpt(batch):
        return models.gpt(layers, batch, 256, width, 8192)

    for devices in SIMULATED_DEVICES:
        mapped = plan_cluster(gpt, 1024, devices, CLUSTER, stages=4, micro_batches=8)
        pure = plan_cluster(gpt, 1024, devices, dataclasses.replace(CLUSTER, devices_per_server=1, servers_per_rack=1))
        for label, p in (("gpt3 mapping (dp x pipeline 4 x operator 8)", mapped), ("data parallel", pure)):
            rows.append({"model": "gpt", "devices": devices, "strategy": label, "predicted_step_s": p.step_seconds,
                         "predicted_memory_bytes": p.memory_bytes, "fits_cap": p.fits,
                         "cap_bytes": CLUSTER.memory_bytes, "bubble_fraction": p.bubble_fraction})
    return rows


def hundred_layer_search_seconds(machine) -> float:
    """The search time of a 100-layer transformer on 8 devices (the issue's bound: 10 s)."""
    graph = models.gpt(100, 8, 128, 256, 4096)
    start = time.perf_counter()
    search(Problem(graph, 8, machine))
    return time.perf_counter() - start


def target(rows: list[dict]) -> dict:
    at64 = {r["strategy"]: r for r in rows if r["model"] == "wide" and r["devices"] == 64}
    ratio = at64["searched"]["predicted_step_s"] / at64["data parallel"]["predicted_step_s"]
    return {"wide_64_step_ratio": ratio, "searched_fits": at64["searched"]["fits_cap"],
            "data_parallel_fits": at64["data parallel"]["fits_cap"],
            "met": ratio <= 0.5 and at64["searched"]["fits_cap"] and not at64["data parallel"]["fits_cap"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    parser.add_argument("--quick", action="store_true", help="small models and few steps")
    parser.add_argument("--no-measure", action="store_true", help="predictions only (no gloo processes)")
    args = parser.parse_args()
    cfg = configs(args.quick)
    machine = measured_machine()
    rows = [] if args.no_measure else local_rows(cfg)
    simulated = simulated_rows(args.quick)
    doc = {"config": cfg, "machine": {"flops": machine.flops, "bandwidth": machine.bandwidth,
                                      "op_seconds": machine.op_seconds,
                                      "links": {k: [v.alpha, v.beta] for k, v in machine.links.items()}},
           "local": rows, "simulated": simulated, "target": target(simulated),
           "search_100_layers_s": hundred_layer_search_seconds(machine)}
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{'model':6} {'dev':>4} {'strategy':46} {'pred step s':>12} {'meas step s':>12} {'pred/meas':>9} "
          f"{'pred mem MB':>12} {'meas MB':>9} {'fits':>5}")
    for r in rows + simulated:
        print(f"{r['model']:6} {r['devices']:>4} {r['strategy']:46} {r['predicted_step_s']:>12.5f} "
              f"{r.get('measured_step_s', float('nan')):>12.5f} "
              f"{r.get('predicted_over_measured', float('nan')):>9.2f} "
              f"{r['predicted_memory_bytes'] / 1e6:>12.1f} "
              f"{r.get('measured_parameter_state_bytes', float('nan')) / 1e6:>9.1f} {r.get('fits_cap', '')!s:>5}")
    print(f"search of a 100-layer transformer on 8 devices: {doc['search_100_layers_s']:.2f} s (bound 10 s)")
    t = doc["target"]
    print(f"target: wide classifier at 64 devices, searched/data parallel step = {t['wide_64_step_ratio']:.3f} "
          f"(<= 0.5), searched fits {t['searched_fits']}, data parallel fits {t['data_parallel_fits']}: "
          f"{'met' if t['met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
