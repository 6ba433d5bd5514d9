"""The softmax form of each attention kernel and its key block (ir/ops/attention.py, `form` and `key_block`).

The two forms give the same result at different costs: "two_pass" holds whole rows of scores (and their
exponentials) per block of query rows, "blockwise" merges the softmaxes of blocks of `key_block` keys, holding one
block of them. The blockwise form pays for its merge and its per-block accumulators, and wins once the two-pass
form's rows no longer sit in L2 beside the keys and values streaming through. `choose_form` decides by the
share of L2 those rows take (docs/fusion.md, "The online softmax", has the measurements); the compile options
`attention_form` ("auto": by shape, or a form for every attention) and `attention_key_block` (an int, or None:
`key_block_for`) override it, and tuning offers the other form as a variant graph (tune/algorithms.py).
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import TilegradError

AUTO = "auto"
FORMS = ("two_pass", "blockwise")
KEY_BLOCKS = range(64, 257, 16)  # the key blocks offered, whole vectors of keys
TWO_PASS_ROW_BYTES = 2 * 16 * 4  # per key, the two-pass rows: scores and exponentials of 16 query rows, float32
# (schedule/rules_attention.py's default block)
L2_SHARE = 8  # two_pass while those rows take at most an eighth of L2: the crossover benchmarks/attention.py
# --forms measures


class FormChoice(NamedTuple):
    """An attention node's form and key block, and why (recorded in `PassContext.decisions["attention"]`)."""

    form: str
    key_block: int
    why: str


def key_block_for(lk: int) -> int:
    """The block of KEY_BLOCKS that pads `lk` keys least to whole blocks, the larger one on a tie (fewer blocks
    to merge): a padding key costs as much as a real one."""
    return min(KEY_BLOCKS, key=lambda kb: (-lk % kb, -kb))


def long_keys(l2_bytes: int) -> int:
    """The longest key sequence whose two-pass rows take at most 1/L2_SHARE of an L2 of `l2_bytes`."""
    return l2_bytes // (L2_SHARE * TWO_PASS_ROW_BYTES)


def choose_form(lq: int, lk: int, d: int, dv: int, l2_bytes: int) -> tuple[str, int]:
    """(form, key block) for Lq queries over Lk keys of D (values of Dv) on a core with `l2_bytes` of L2:
    blockwise beyond `long_keys`. Lq, D and Dv do not move the measured crossover (the rows held are per key)."""
    return ("two_pass" if lk <= long_keys(l2_bytes) else "blockwise"), key_block_for(lk)


def requested(options: dict) -> tuple[str, int | None]:
    """The form (or AUTO) and key block (or None) that the pass options ask for, checked."""
    form = options.get("attention_form", AUTO)
    key_block = options.get("attention_key_block")
    if form not in (AUTO, *FORMS):
        raise TilegradError(f"attention_form must be one of {', '.join(map(repr, (AUTO, *FORMS)))}, got {form!r}")
    if key_block is not None and (isinstance(key_block, bool) or not isinstance(key_block, int) or key_block < 1):
        raise TilegradError(f"attention_key_block must be a positive int (keys per block of the blockwise form) "
                            f"or None (chosen by the key count), got {key_block!r}")
    return form, key_block


def attention_options(form: str = AUTO, key_block: int | None = None) -> dict:
    """The pass options of `compile`'s attention_form and attention_key_block, checked."""
    options = {"attention_form": form, "attention_key_block": key_block}
    requested(options)
    return options


def form_of(options: dict, target, lq: int, lk: int, d: int, dv: int) -> FormChoice:
    """The form and key block of an attention of this shape under the pass options, else by its shape."""
    form, key_block = requested(options)
    chosen, best_block = choose_form(lq, lk, d, dv, target.l2_bytes)
    block = best_block if key_block is None else key_block
    if form != AUTO:
        return FormChoice(form, block, "by option")
    limit = long_keys(target.l2_bytes)
    return FormChoice(chosen, block, f"{lk} keys {'>' if chosen == 'blockwise' else '<='} {limit}, the two-pass "
                                     f"rows' limit for {target.l2_bytes // 1024} KiB of L2")
