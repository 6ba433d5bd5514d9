"""The entry point of a compiled model: kernel calls in order, then the copies of outputs no kernel writes."""

from __future__ import annotations

import pytest

from tilegrad.codegen.entry import KernelCall, OutputCopy, render_entry, render_profiled_entry
from tilegrad.codegen.team import TEAM


def test_the_entry_calls_each_kernel_then_copies():
    source = render_entry([KernelCall("k0_exp", ["args[0]", "args[1]"])], [OutputCopy("args[2]", "args[3]", 24)])
    assert source == "#include <stdint.h>\n#include <string.h>\n" + TEAM + """\
void k0_exp_team(void** args, tg_team* tg);
void tg_run(void** args) {
  TG_TEAM_BEGIN
  { void* a[] = {args[0], args[1]}; k0_exp_team(a, tg); }
  TG_TEAM_END
  memcpy(args[2], args[3], 24);
}
"""


def test_the_profiled_entry_clocks_each_kernel_call_into_its_counter():
    calls = [KernelCall("k0_exp", ["args[0]", "args[4]"]), KernelCall("k1_tanh", ["args[4]", "args[1]"])]
    source = render_profiled_entry(calls, [OutputCopy("args[2]", "args[3]", 24)], clock_slot=5)
    assert source == "#define _POSIX_C_SOURCE 199309L\n#include <stdint.h>\n#include <string.h>\n#include <time.h>\n" \
        + TEAM + """\
void k0_exp_team(void** args, tg_team* tg);
void k1_tanh_team(void** args, tg_team* tg);
static int64_t tg_now(void) {
  struct timespec c;
  clock_gettime(CLOCK_MONOTONIC, &c);
  return (int64_t)c.tv_sec * 1000000000 + c.tv_nsec;
}
void tg_run_profiled(void** args) {
  int64_t* ns = (int64_t*)args[5];
  int64_t start = tg_now();
  TG_TEAM_BEGIN
  int64_t t = tg_now(), u;
  { void* a[] = {args[0], args[4]}; k0_exp_team(a, tg); } if (tg->tid == 0) { u = tg_now(); ns[0] += u - t; t = u; }
  { void* a[] = {args[4], args[1]}; k1_tanh_team(a, tg); } if (tg->tid == 0) { u = tg_now(); ns[1] += u - t; t = u; }
  TG_TEAM_END
  memcpy(args[2], args[3], 24);
  ns[2] += tg_now() - start;
}
"""
    assert "tg_now" not in render_entry(calls, [])  # the plain entry reads no clock


def test_an_output_copied_onto_itself_is_refused():
    with pytest.raises(ValueError, match=r"output args\[1\] is copied onto itself"):
        render_entry([], [OutputCopy("args[1]", "args[1]", 16)])


def test_an_entry_whose_kernels_have_no_parallel_loop_opens_no_region():
    serial = [KernelCall("k0_exp", ["args[0]", "args[1]"], parallel=False)]
    assert "TG_TEAM_BEGIN" not in render_entry(serial, []).split("#endif")[-1]
    assert "{ TG_TEAM_ALONE" in render_entry(serial, [])
    assert "{ TG_TEAM_ALONE" in render_profiled_entry(serial, [], clock_slot=3)
    assert "TG_TEAM_BEGIN\n" in render_entry([*serial, KernelCall("k1", ["args[1]", "args[2]"])], [])


def test_kernels_too_small_to_share_run_back_to_back_on_thread_zero_then_one_barrier():
    calls = [KernelCall("k0", ["args[0]"]), KernelCall("k1", ["args[1]"], parallel=False),
             KernelCall("k2", ["args[2]"], parallel=False), KernelCall("k3", ["args[3]"]),
             KernelCall("k4", ["args[4]"], parallel=False)]
    assert render_entry(calls, []).split("#endif\n")[-1].split("void tg_run")[-1] == """\
(void** args) {
  TG_TEAM_BEGIN
  TG_TEAM_OF_ONE
  { void* a[] = {args[0]}; k0_team(a, tg); }
  if (tg->tid == 0) {
    { void* a[] = {args[1]}; k1_team(a, tg_one); }
    { void* a[] = {args[2]}; k2_team(a, tg_one); }
  }
  tg_barrier(tg);
  { void* a[] = {args[3]}; k3_team(a, tg); }
  if (tg->tid == 0) {
    { void* a[] = {args[4]}; k4_team(a, tg_one); }
  }
  TG_TEAM_END
}
"""
    profiled = render_profiled_entry(calls, [], clock_slot=9)
    assert "{ void* a[] = {args[1]}; k1_team(a, tg_one); } { u = tg_now(); ns[1] += u - t; t = u; }" in profiled
