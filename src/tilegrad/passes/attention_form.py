"""The softmax form of each attention kernel and its key block (ir/ops/attention.py, `form` and `key_block`).

The two forms give the same result at different costs: "two_pass" holds whole rows of scores per block of query
rows, "blockwise" merges the softmaxes of blocks of `key_block` keys, which wins at long key sequences and loses at
short ones and where the keys pad badly to whole blocks. `choose_form` decides by shape; the compile options
`attention_form` ("auto": by shape, or a form for every attention) and `attention_key_block` (an int, or None:
`key_block_for`) override it, and tuning offers the other form as a variant graph (tune/algorithms.py).
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import TilegradError

AUTO = "auto"
FORMS = ("two_pass", "blockwise")
LONG_KEYS = 512  # longest key sequence kept two_pass: the crossover `benchmarks/attention.py --forms` measures
KEY_BLOCKS = range(64, 257, 16)  # the key blocks offered, whole vectors of keys


class FormChoice(NamedTuple):
    """An attention node's form and key block, and why (recorded in `PassContext.decisions["attention"]`)."""

    form: str
    key_block: int
    why: str


def key_block_for(lk: int) -> int:
    """The block of KEY_BLOCKS that pads `lk` keys least to whole blocks, the larger one on a tie (fewer blocks
    to merge): a padding key costs as much as a real one."""
    return min(KEY_BLOCKS, key=lambda kb: (-lk % kb, -kb))


def choose_form(lq: int, lk: int, d: int, dv: int) -> tuple[str, int]:
    """(form, key block) for Lq queries over Lk keys of D (values of Dv): blockwise beyond LONG_KEYS keys. The
    rule reads Lk alone until measurements show where the other sizes move the threshold."""
    return ("two_pass" if lk <= LONG_KEYS else "blockwise"), key_block_for(lk)


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


def form_of(options: dict, target_kind: str, lq: int, lk: int, d: int, dv: int) -> FormChoice:
    """The form and key block of an attention of this shape under the pass options. By shape on a CPU only: the
    GPU schedules of the blockwise form are not checked on a device yet, so "auto" keeps two_pass there."""
    form, key_block = requested(options)
    chosen, best_block = choose_form(lq, lk, d, dv)
    block = best_block if key_block is None else key_block
    if form != AUTO:
        return FormChoice(form, block, "by option")
    if target_kind != "cpu":
        return FormChoice("two_pass", block, f"the {target_kind} target: blockwise is chosen on a CPU only")
    return FormChoice(chosen, block, f"{lk} keys {'>' if chosen == 'blockwise' else '<='} {LONG_KEYS}")
