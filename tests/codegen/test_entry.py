"""The entry point of a compiled model: kernel calls in order, then the copies of outputs no kernel writes."""

from __future__ import annotations

import pytest

from tilegrad.codegen.entry import KernelCall, OutputCopy, render_entry


def test_the_entry_calls_each_kernel_then_copies():
    source = render_entry([KernelCall("k0_exp", ["args[0]", "args[1]"])], [OutputCopy("args[2]", "args[3]", 24)])
    assert source == """#include <string.h>
void k0_exp(void** args);
void tg_run(void** args) {
  { void* a[] = {args[0], args[1]}; k0_exp(a); }
  memcpy(args[2], args[3], 24);
}
"""


def test_an_output_copied_onto_itself_is_refused():
    with pytest.raises(ValueError, match=r"output args\[1\] is copied onto itself"):
        render_entry([], [OutputCopy("args[1]", "args[1]", 16)])
