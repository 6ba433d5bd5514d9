"""CompileOptions: one value, checked once, saved and read back by a specialising module."""

import pytest

import tilegrad
from tilegrad.errors import TilegradError
from tilegrad.options import CompileOptions


def test_fields_given_as_keywords_change_the_options():
    base = CompileOptions(opt_level=3, disable_passes=["fuse"])
    changed = CompileOptions.of(base, fusion="stitch")
    assert (changed.opt_level, changed.disable_passes, changed.fusion) == (3, ("fuse",), "stitch")
    assert CompileOptions.of() == CompileOptions()


def test_an_unknown_option_names_the_options():
    with pytest.raises(TypeError, match="unknown compile option.*opt_levle.*opt_level"):
        CompileOptions.of(opt_levle=1)


@pytest.mark.parametrize("fields,match", [({"opt_level": 7}, "opt_level must be"),
                                          ({"target": "tpu"}, "target 'tpu' is not supported")])
def test_bad_values_are_refused_when_made(fields, match):
    with pytest.raises(TilegradError, match=match):
        CompileOptions(**fields)


def test_json_round_trip():
    options = CompileOptions(opt_level=1, enable_passes=("x",), db="t.db", attention_form="blockwise",
                             attention_key_block=64)
    assert CompileOptions.from_json(options.to_json()) == options


def test_compile_checks_fields_the_passes_define_before_compiling():
    with pytest.raises(TilegradError, match="fusion must be one of"):
        tilegrad.compile(b"not read", options=CompileOptions(fusion="greedy"))
    with pytest.raises(TilegradError, match="attention_form"):
        tilegrad.compile(b"not read", attention_form="three_pass")
