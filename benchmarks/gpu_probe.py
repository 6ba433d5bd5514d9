"""Which layer of a model gives wrong numbers on the GPU: each distinct layer compiled alone for CUDA and checked
against PyTorch on the device, a wrong composite searched through its sequential parts, and the wrong leaves'
CUDA source written out and run once more under compute-sanitizer (memcheck, racecheck) where it is installed.

    python benchmarks/gpu_probe.py OUT resnet50 dcgan_generator     # OUT/probe.json, OUT/probe_sources.cu

The models are those of benchmarks/models.py; a layer is one element of the model's nn.Sequential, fed with
what the layers before it give (so a layer's input is realistic), and layers alike in type, configuration and
input shape are checked once.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

import models  # benchmarks/models.py, beside this script
from gpu_check import relative_error


def _wrong(module: nn.Module, x: torch.Tensor) -> tuple[float, object]:
    """The largest error against the output's scale of `module` compiled for CUDA, and the compiled module."""
    import tilegrad

    compiled = tilegrad.compile(module, (x,), target="cuda")
    got = compiled(x.numpy())
    got = got[0] if isinstance(got, list) else got
    with torch.no_grad():
        want = module.cuda()(x.cuda()).cpu().numpy()
    module.cpu()
    return relative_error(got, want), compiled


def probe(module: nn.Module, x: torch.Tensor, path: str, found: list, seen: set, deadline: float) -> None:
    """Check `module` on input `x`; where it is wrong, look inside its sequential parts."""
    key = (repr(module), tuple(x.shape))
    if key in seen or time.monotonic() > deadline:
        return
    seen.add(key)
    try:
        error, _ = _wrong(module, x)
    except Exception as e:  # noqa: BLE001 - a failure to compile or run is a finding too
        found.append({"layer": path, "shape": list(x.shape), "error": f"{type(e).__name__}: {e}"})
        return
    row = {"layer": path, "module": repr(module)[:300], "shape": list(x.shape), "max_rel_error": error}
    parts = [(n, c) for n, c in module.named_children() if isinstance(c, nn.Sequential)]
    if isinstance(module, nn.Sequential):
        parts = [(str(i), module[i]) for i in range(len(module))]
        if error > 1e-3:
            row["leaf"] = False
            found.append(row)
            with torch.no_grad():
                for name, child in parts:
                    probe(child, x, f"{path}.{name}", found, seen, deadline)
                    x = child(x)
            return
    elif error > 1e-3 and parts:
        row["leaf"] = False
        found.append(row)
        for name, child in parts:
            probe(child, x, f"{path}.{name}", found, seen, deadline)
        return
    row["leaf"] = True
    found.append(row)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("models", nargs="+", choices=sorted(models.MODELS))
    parser.add_argument("--budget", type=float, default=120)
    a = parser.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + a.budget
    report: dict = {}
    sources = []
    for name in a.models:
        module, (x,) = models.MODELS[name]()
        module.eval()
        found: list = []
        seen: set = set()
        with torch.no_grad():
            for i, layer in enumerate(module):
                probe(layer, x, f"{name}.{i}", found, seen, deadline)
                x = layer(x)
        report[name] = found
        for row in found:
            if row.get("leaf") and row.get("max_rel_error", 0) > 1e-3:
                sources.append(_source(name, row))
        (a.out / "probe.json").write_text(json.dumps(report, indent=1))
    (a.out / "probe_sources.cu").write_text("\n\n".join(sources))
    wrong = [r for rows in report.values() for r in rows if r.get("leaf") and r.get("max_rel_error", 0) > 1e-3]
    print(json.dumps([{k: r[k] for k in ("layer", "shape", "max_rel_error")} for r in wrong], indent=1))
    if wrong and shutil.which("compute-sanitizer"):
        report["sanitizer"] = _sanitize(a.out, a.models, wrong[0])
        (a.out / "probe.json").write_text(json.dumps(report, indent=1))
    return 0


def _layer(model: str, path: str) -> tuple[nn.Module, torch.Tensor]:
    """The layer at `path` ("resnet50.4.body.3") of a fresh model, and its input."""
    module, (x,) = models.MODELS[model]()
    module.eval()
    steps = path.split(".")[1:]
    with torch.no_grad():
        for i in range(int(steps[0])):
            x = module[i](x)
        layer = module[int(steps[0])]
        for step in steps[1:]:
            parent = layer
            layer = getattr(parent, step) if not step.isdigit() else parent[int(step)]
            if step.isdigit():
                for j in range(int(step)):
                    x = parent[j](x)
    return layer, x


def _source(model: str, row: dict) -> str:
    """The CUDA source and launches of a wrong leaf, for reading away from the device."""
    import tilegrad.api

    layer, x = _layer(model, row["layer"])
    source, _ = tilegrad.api.cuda_source(layer, (x,))
    return f"// {row['layer']} {row['module']} input {row['shape']} error {row['max_rel_error']:.3g}\n{source}"


def _sanitize(out: Path, names: list[str], row: dict) -> dict:
    """Run the first wrong leaf once under compute-sanitizer's memcheck and racecheck; their reports' ends."""
    model = row["layer"].split(".")[0]
    script = (f"import sys; sys.path.insert(0, 'benchmarks'); import gpu_probe; "
              f"layer, x = gpu_probe._layer({model!r}, {row['layer']!r}); print(gpu_probe._wrong(layer, x)[0])")
    results = {}
    for tool in ("memcheck", "racecheck"):
        cmd = ["compute-sanitizer", "--tool", tool, "--print-limit", "20", sys.executable, "-c", script]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=45)
            text = done.stdout + done.stderr
        except subprocess.TimeoutExpired:
            text = "timed out after 45 s"
        (out / f"sanitizer_{tool}.log").write_text(text)
        results[tool] = text[-3000:]
    return results


if __name__ == "__main__":
    sys.exit(main())
