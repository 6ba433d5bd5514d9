"""Model zoo: public architectures with random weights, exported to ONNX, compiled by tilegrad, checked against
ONNX Runtime; and the same modules through tilegrad's two PyTorch paths, checked against eager PyTorch.

Every model is built offline (nothing is downloaded), in eval mode, batch 1, float32: from its configuration with
Hugging Face transformers' model classes, or, for the CNN families transformers does not carry, from tilegrad's
own definitions of torchvision's architectures (`zoo_vision.py`). "full" is the published configuration; "tiny"
shrinks widths and depths so that the whole zoo runs in minutes (the test suite's subset); "shallow" keeps the
full widths and cuts a transformer to two layers (the same kernels; the cost model's dataset). Each model is exported
with torch.onnx (the TorchScript exporter, opset 17; torch.export's exporter for models the first cannot trace,
when onnxscript is installed), run by ONNX Runtime and by tilegrad (untuned, opt level 2); it is correct when the
largest difference is at most 1e-4 of the output's largest value. `tilegrad.compile(module, inputs)` and
`torch.compile(module, backend="tilegrad")` are held to the same rule against eager PyTorch (`zoo_torch.py`).
Run:

    python benchmarks/zoo.py --size tiny                 # table
    python benchmarks/zoo.py --size full --json          # [{"model", "source", "correct", "max_rel_err",
                                                         #   "compile_s", "tilegrad_ms", "onnxruntime_ms", "exporter",
                                                         #   "error", "export_correct", "export_error",
                                                         #   "torch_compile_correct", "torch_compile_compiled",
                                                         #   "torch_compile_share",
                                                         #   "torch_compile_graph_breaks", "torch_compile_error"}]
    python benchmarks/zoo.py --only bert,vit --size full
    python benchmarks/zoo.py --size full --paths ''      # only build each model and run it in PyTorch

Needs `pip install transformers` (the `zoo` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))

from timing import median_time
from zoo_torch import describe, relative_error, through_export, through_torch_compile
from zoo_vision import VISION
from zoo_vision import build as build_vision

TOLERANCE = 1e-4
IDLE_S = 0.5

# Shrunken settings per configuration attribute; only those a configuration has are applied.
TINY = {
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "vocab_size": 1000, "n_embd": 64, "n_layer": 2, "n_head": 4, "d_model": 64,
    "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "num_layers": 2, "num_heads": 4, "d_ff": 128, "d_kv": 16,
    "embedding_size": 64, "max_position_embeddings": 128, "image_size": 64, "patch_size": 16,
    "hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1], "embed_dim": 32, "ffn_dim": 128,
    "projection_dim": 64, "attention_types": [[["global", "local"], 1]], "window_size": 4,
}

TEXT, IMAGE = "text", "image"
VISION_SOURCE = "tilegrad definitions (torchvision architecture)"

# name -> (transformers class, input kind, configuration overrides for both sizes, overrides for tiny only)
ZOO: dict[str, tuple[str, str, dict, dict]] = {
    "bert": ("BertModel", TEXT, {}, {}),
    "roberta": ("RobertaModel", TEXT, {}, {}),
    "distilbert": ("DistilBertModel", TEXT, {}, {"dim": 64, "hidden_dim": 128, "n_layers": 2, "n_heads": 4}),
    "albert": ("AlbertModel", TEXT, {}, {}),
    "electra": ("ElectraModel", TEXT, {}, {}),
    "deberta": ("DebertaModel", TEXT, {}, {}),
    "mpnet": ("MPNetModel", TEXT, {}, {}),
    "xlm_roberta": ("XLMRobertaModel", TEXT, {}, {}),
    "squeezebert": ("SqueezeBertModel", TEXT, {}, {"embedding_size": 64}),
    "mobilebert": ("MobileBertModel", TEXT, {}, {"embedding_size": 64, "intra_bottleneck_size": 32,
                                                  "true_hidden_size": 32}),
    "funnel": ("FunnelModel", TEXT, {}, {"block_sizes": [1, 1], "num_hidden_layers": None, "n_head": 4,
                                         "d_head": 16}),
    "convbert": ("ConvBertModel", TEXT, {}, {}),
    "gpt2": ("GPT2Model", TEXT, {"use_cache": False}, {}),
    "gpt_neo": ("GPTNeoModel", TEXT, {"use_cache": False}, {}),
    "opt": ("OPTModel", TEXT, {"use_cache": False}, {"word_embed_proj_dim": 64}),
    "llama": ("LlamaModel", TEXT, {"use_cache": False}, {}),
    "mistral": ("MistralModel", TEXT, {"use_cache": False}, {}),
    "qwen2": ("Qwen2Model", TEXT, {"use_cache": False}, {}),
    "falcon": ("FalconModel", TEXT, {"use_cache": False}, {}),
    "phi": ("PhiModel", TEXT, {"use_cache": False}, {}),
    "gemma": ("GemmaModel", TEXT, {"use_cache": False}, {"head_dim": 16}),
    "t5_encoder": ("T5EncoderModel", TEXT, {}, {}),
    "bart_encoder": ("BartModel", "bart", {}, {}),
    "clip_text": ("CLIPTextModel", TEXT, {}, {}),
    "vit": ("ViTModel", IMAGE, {}, {}),
    "deit": ("DeiTModel", IMAGE, {}, {}),
    "beit": ("BeitModel", IMAGE, {}, {}),
    "dinov2": ("Dinov2Model", IMAGE, {}, {}),
    "swin": ("SwinModel", IMAGE, {}, {"image_size": 56, "patch_size": 4, "window_size": 7, "embed_dim": 32,
                                      "depths": [1, 1], "num_heads": [2, 4]}),
    "clip_vision": ("CLIPVisionModel", IMAGE, {}, {}),
    "resnet": ("ResNetModel", IMAGE, {}, {"embedding_size": 16}),
    "convnext": ("ConvNextModel", IMAGE, {}, {"num_hidden_layers": None, "patch_size": None}),
    "convnextv2": ("ConvNextV2Model", IMAGE, {}, {"num_hidden_layers": None, "patch_size": None}),
    "regnet": ("RegNetModel", IMAGE, {}, {"embedding_size": 16, "groups_width": 8}),
    "mobilenet_v1": ("MobileNetV1Model", IMAGE, {}, {"depth_multiplier": 0.25}),
    "mobilenet_v2": ("MobileNetV2Model", IMAGE, {}, {"depth_multiplier": 0.35}),
    "efficientnet": ("EfficientNetModel", IMAGE, {}, {"width_coefficient": 0.25, "depth_coefficient": 0.25,
                                                      "hidden_dim": 320}),
    "mobilevit": ("MobileViTModel", IMAGE, {}, {"hidden_sizes": [32, 48, 64], "neck_hidden_sizes":
                                                [8, 16, 24, 24, 32, 40, 160]}),
    "segformer": ("SegformerModel", IMAGE, {}, {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]}),
    "poolformer": ("PoolFormerModel", IMAGE, {}, {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1]}),
    "levit": ("LevitModel", IMAGE, {}, {}),
    "cvt": ("CvtModel", IMAGE, {}, {}),
    "bit": ("BitModel", IMAGE, {}, {"hidden_sizes": [128, 256, 512, 1024], "embedding_size": 64}),
    "wav2vec2": ("Wav2Vec2Model", "audio", {}, {"conv_dim": [32] * 7, "num_conv_pos_embeddings": 16}),
    "whisper_encoder": ("WhisperModel", "whisper", {}, {"num_mel_bins": 80, "max_source_positions": 64,
                                                        "vocab_size": None}),
}

MODELS = [*ZOO, *VISION]


class FirstOutput(torch.nn.Module):
    """The model's first output alone (the last hidden state), so every export has one output."""

    def __init__(self, model, part: str | None = None):
        super().__init__()
        self.model = model.get_encoder() if part == "encoder" else model

    def forward(self, *args):
        out = self.model(*args)
        return out[0] if isinstance(out, (tuple, list)) or hasattr(out, "to_tuple") else out


def _config(config_class, both: dict, tiny: dict | None):
    """The model's configuration: its defaults with `both`, and for the tiny size the shrunken settings that fit
    it (the same kind of value as its default, lists of the same length; `tiny`'s own always, None skips one)."""
    default = config_class(**both)
    if tiny is None:
        return default
    changes = {}
    for key, value in {**TINY, **tiny}.items():
        if value is None or not hasattr(default, key):
            continue
        old = getattr(default, key)
        sequence = isinstance(old, (list, tuple))
        fits = (isinstance(value, list) and len(old) == len(value)) if sequence else type(old) is type(value)
        if key in tiny or fits:
            changes[key] = value
    return config_class(**both, **changes)


# Layer counts a "shallow" model cuts to SHALLOW_LAYERS, and vocabularies to SHALLOW_VOCABULARY: its layers keep
# the full size's shapes (the same kernels), so it holds what a dataset of kernels needs from a 7B-parameter
# configuration in a few GB.
DEPTHS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers")
SHALLOW_LAYERS = 2
SHALLOW_VOCABULARY = 32000


def _make_shallow(config) -> None:
    """Cut `config`'s layers and vocabulary, where they are what they say: not a hierarchical model's stages (its
    `depths` list holds the layers), not a vocabulary that special tokens sit beyond (Whisper's padding id)."""
    tokens = [getattr(config, k, None) for k in ("pad_token_id", "bos_token_id", "eos_token_id",
                                                 "decoder_start_token_id")]
    if getattr(config, "vocab_size", 0) > SHALLOW_VOCABULARY and all(
            not isinstance(t, int) or t < SHALLOW_VOCABULARY for t in tokens):
        config.vocab_size = SHALLOW_VOCABULARY
    if hasattr(config, "depths"):
        return
    for key in DEPTHS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > SHALLOW_LAYERS:
            try:
                setattr(config, key, SHALLOW_LAYERS)
            except (AttributeError, NotImplementedError):  # derived from other settings (Funnel's block sizes)
                pass


def build(name: str, size: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model `name` with random weights, and an example input. `size` is "full", "tiny" or "shallow" (full
    widths and input shapes, at most SHALLOW_LAYERS layers and SHALLOW_VOCABULARY tokens of a transformer; the
    CNNs at full size)."""
    if name in VISION:
        return build_vision(name, "full" if size == "shallow" else size)
    import transformers

    cls_name, kind, both, tiny = ZOO[name]
    model_cls = getattr(transformers, cls_name)
    config = _config(model_cls.config_class, both, tiny if size == "tiny" else None)
    if size == "shallow":
        _make_shallow(config)
    torch.manual_seed(0)
    model = model_cls(config).eval()
    g = torch.Generator().manual_seed(0)
    if kind in (TEXT, "bart"):
        vocab = getattr(config, "vocab_size", 1000)
        length = min(32 if size == "tiny" else 128, getattr(config, "max_position_embeddings", 128))  # CLIP: 77
        inputs = (torch.randint(0, min(vocab, 1000), (1, length), generator=g),)
    elif kind == IMAGE:
        side = getattr(config, "image_size", 224)
        side = side[0] if isinstance(side, (list, tuple)) else side
        inputs = (torch.randn(1, getattr(config, "num_channels", 3), side, side, generator=g),)
    elif kind == "audio":
        inputs = (torch.randn(1, 4000 if size == "tiny" else 16000, generator=g),)
    else:  # whisper: the encoder takes 2 x max_source_positions mel frames
        inputs = (torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions, generator=g),)
    part = "encoder" if kind in ("bart", "whisper") else None
    return FirstOutput(model, part).eval(), inputs


@contextlib.contextmanager
def _stdout_silenced():
    """The exporters print whole graphs when they fail, some from C++: stdout (the --json document) stays clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def _export(module, args) -> tuple[bytes, str]:
    """The ONNX model and the exporter that wrote it: the TorchScript exporter, else torch.export's (which
    needs onnxscript) for models the first cannot trace."""
    names = [f"in{i}" for i in range(len(args))]
    with warnings.catch_warnings(), torch.no_grad(), _stdout_silenced():
        warnings.simplefilter("ignore")
        try:
            f = io.BytesIO()
            torch.onnx.export(module, args, f, dynamo=False, opset_version=17, input_names=names)
            return f.getvalue(), "torchscript"
        except Exception as first:  # noqa: BLE001 - try the other exporter, and report the first failure
            try:
                program = torch.onnx.export(module, args, dynamo=True, input_names=names, verbose=False)
                return program.model_proto.SerializeToString(), "dynamo"
            except Exception:  # noqa: BLE001
                raise first from None


PATHS = ("onnx", "export", "torch_compile")


def source(name: str) -> str:
    """Where the model's definition comes from: a transformers class, or zoo_vision's own."""
    return VISION_SOURCE if name in VISION else f"transformers.{ZOO[name][0]}"


def measure(name: str, size: str, rounds: int, repeats: int, paths=PATHS) -> dict:
    """One row: for each of `paths`, correctness (ONNX against ONNX Runtime, with latencies; the PyTorch paths
    against eager PyTorch), or the error that stopped the model there."""
    row = {"model": name, "source": source(name), "correct": False, "max_rel_err": None, "compile_s": None,
           "tilegrad_ms": None, "onnxruntime_ms": None, "exporter": None, "error": None}
    try:
        module, args = build(name, size)
        with torch.no_grad():
            eager = module(*args)
    except Exception as e:  # noqa: BLE001 - a model that fails is a row of the table, not the end of the run
        row["error"] = describe("build", e)
        return row
    if "onnx" in paths:
        row.update(_through_onnx(module, args, rounds, repeats))
    else:
        row["correct"] = None  # not tried
    # The PyTorch paths get the model afresh: an exporter may leave state behind in it (tracing Swin turns its
    # clamped window size into a tensor, which torch.export then reads as data).
    if "export" in paths:
        row.update(through_export(*build(name, size), eager.numpy(), TOLERANCE))
    if "torch_compile" in paths:
        row.update(through_torch_compile(*build(name, size), eager.numpy(), TOLERANCE))
    return row


def _through_onnx(module, args, rounds: int, repeats: int) -> dict:
    """The ONNX path's fields: exported, run by ONNX Runtime and by tilegrad, compared, timed."""
    import onnxruntime as ort

    import tilegrad

    row, stage = {}, "export"
    try:
        model, row["exporter"] = _export(module, args)
        feeds = {f"in{i}": a.numpy() for i, a in enumerate(args)}
        stage = "onnxruntime"
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)[0]
        stage = "tilegrad compile"
        start = time.perf_counter()
        compiled = tilegrad.compile(model)
        row["compile_s"] = time.perf_counter() - start
        stage = "tilegrad run"
        got = compiled(**feeds)
        err = relative_error(got[0] if isinstance(got, list) else got, want)
        row["max_rel_err"], row["correct"] = err, bool(err <= TOLERANCE)
        stage = "timing"
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(median_time(lambda: compiled(**feeds), repeats))
            time.sleep(IDLE_S)
            theirs.append(median_time(lambda: session.run(None, feeds), repeats))
            time.sleep(IDLE_S)
        if rounds:
            row["tilegrad_ms"] = statistics.median(ours) * 1e3
            row["onnxruntime_ms"] = statistics.median(theirs) * 1e3
    except Exception as e:  # noqa: BLE001
        row["error"] = describe(stage, e)
    return row


def _table(rows: list[dict]) -> str:
    """Fixed-width lines: ONNX correctness and times, then the PyTorch paths (export, torch.compile: correct /
    compiled by tilegrad / share of the graphs' nodes compiled / graph breaks), then the first error."""
    def yes(value):
        return "-" if value is None else "yes" if value else "no"

    def num(r, key, fmt):
        width = int(fmt.split(".")[0].rstrip("d"))
        return format(r[key], fmt) if r.get(key) is not None else "-".rjust(width)

    lines = [(f"{'model':<20} {'ok':<3} {'rel err':>8} {'compile s':>9} {'tilegrad ms':>11} {'ORT ms':>8} "
              f"{'export':<6} {'t.c ok':<6} {'t.c tg':<6} {'share':>5} {'breaks':>6}  error")]
    for r in rows:
        error = r["error"] or r.get("export_error") or r.get("torch_compile_error") or ""
        lines.append(f"{r['model']:<20} {yes(r['correct']):<3} {num(r, 'max_rel_err', '8.1e')} "
                     f"{num(r, 'compile_s', '9.1f')} {num(r, 'tilegrad_ms', '11.2f')} {num(r, 'onnxruntime_ms', '8.2f')} "
                     f"{yes(r.get('export_correct')):<6} {yes(r.get('torch_compile_correct')):<6} "
                     f"{yes(r.get('torch_compile_compiled')):<6} {num(r, 'torch_compile_share', '5.2f')} "
                     f"{num(r, 'torch_compile_graph_breaks', '6d')}  {error}")
    lines.append(f"{sum(bool(r['correct']) for r in rows)} of {len(rows)} correct through ONNX, "
                 f"{sum(bool(r.get('export_correct')) for r in rows)} through tilegrad.compile(module), "
                 f"{sum(bool(r.get('torch_compile_correct') and r.get('torch_compile_compiled')) for r in rows)} "
                 f"compiled and correct through torch.compile")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", choices=("tiny", "full", "shallow"), default="full")
    p.add_argument("--only", default=None, help="comma-separated model names: " + ", ".join(MODELS))
    p.add_argument("--paths", default=",".join(PATHS),
                   help=f"comma-separated, of: {', '.join(PATHS)} ('': only build and run each model in PyTorch)")
    p.add_argument("--rounds", type=int, default=3, help="timing rounds (0: correctness only)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else MODELS
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; the zoo: {', '.join(MODELS)}")
    paths = tuple(path for path in args.paths.split(",") if path)  # none: build and run eagerly only
    if set(paths) - set(PATHS):
        p.error(f"unknown path(s) {sorted(set(paths) - set(PATHS))}; the paths: {', '.join(PATHS)}")
    rows = []
    for i, name in enumerate(names, 1):
        rows.append(measure(name, args.size, args.rounds, args.repeats, paths))
        row = rows[-1]
        if args.json:  # stdout holds the one JSON document; progress goes to stderr
            done = "correct" if row["correct"] else f"not correct: {row['error'] or 'numbers differ'}"
            print(f"[{i}/{len(names)}] {name}: {done}", file=sys.stderr, flush=True)
        else:
            print(_table(rows[-1:]).splitlines()[1], flush=True)
    print(json.dumps(rows, indent=1) if args.json else _table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
