"""The registry of default-schedule rules: the tag sets the driver (defaults.py) dispatches on, what a rule is
given (`Anchor`), and the tables that rule modules (rules_*.py) fill at import time with `rule` and `kernel_rule`.

This module imports no rule, so a rule module can register itself here without importing the driver.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ..target import Target
from .knobs import Knobs
from .schedule import Schedule
from .state import Stage

INJECTIVE_TAGS = {"elemwise", "broadcast", "injective", "pad", ""}
CONV_TAGS = {"conv1d", "conv2d", "conv3d"}
PACKED_TAGS = {"packed_conv2d_tiles", "packed_matmul_tiles"}
WINDOW_TAGS = {"depthwise_conv2d", "depthwise_nhwc", "pool", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose"}
MATMUL_TAGS = {"matmul", "batch_matmul", "dense"}  # and "packed_matmul", its own rule (rules_packed.py)
HEAVY_TAGS = CONV_TAGS | WINDOW_TAGS | MATMUL_TAGS | {"packed_matmul", "packed_conv2d"}


@dataclasses.dataclass(frozen=True)
class Anchor:
    """What a rule schedules when the stage is the epilogue of a fused group (bias, residual, activation applied
    to a convolution's output): the anchor op's tag and attributes, and `accumulator`, the anchor's reduction
    stage, which the rule computes at its register tile of the output in place of a cache_write. An anchor whose
    last stage is an injective copy-out (the packed ops) is inlined into the epilogue before the rule runs, and
    `accumulator` is None. For a stage scheduled on its own, the anchor is the stage's own op."""

    tag: str
    attrs: dict
    accumulator: str | None = None


# Rules kept beside the computes they schedule (new algorithms, layouts): tag -> rule(sch, stage, target,
# anchor, knobs). Looked up before the driver's built-in rules.
RULES: dict[str, Callable[[Schedule, Stage, Target, Anchor, Knobs], None]] = {}


def rule(*tags: str):
    """Register a default-schedule rule for stages with one of `tags`."""
    def add(fn):
        for t in tags:
            RULES[t] = fn
        return fn
    return add


# Rules over a whole kernel whose stages no one tag describes (a product whose epilogue normalises its rows):
# rule(sch, target, knobs) -> whether it scheduled the kernel. Tried in order before the per-stage rules.
KERNEL_RULES: list[Callable[[Schedule, Target, Knobs], bool]] = []


def kernel_rule(fn):
    """Register a default-schedule rule for whole kernels."""
    KERNEL_RULES.append(fn)
    return fn
