import importlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegrad import config, metrics
from tilegrad.errors import BuildError
from tilegrad.runtime import BufferSpec, Kernel, assemble, build
from tilegrad.target import Target

# The package re-exports the function `build`, which shadows the submodule of the same name as an attribute.
build_module = importlib.import_module("tilegrad.runtime.build")
pytestmark = pytest.mark.usefixtures("cache_dir")  # tests of the cache: each its own, empty at the start

SCALE = """
void tg_scale(void **args) {
    float *x = args[0];
    for (int i = 0; i < 256; ++i) x[i] *= 2.0f;
}
"""


def _call_scale(library):
    x = np.arange(256, dtype=np.float32)
    Kernel(library, "tg_scale", [BufferSpec("x", (256,), "float32")])(x)
    np.testing.assert_array_equal(x, 2 * np.arange(256, dtype=np.float32))


def test_library_lives_under_its_key_with_the_source_kept(cache_dir):
    library = build(SCALE)
    assert library.parent == cache_dir / library.stem[:2]
    assert library.suffix == ".so" and len(library.stem) == 64
    assert library.with_suffix(".c").read_text() == SCALE
    assert not list(cache_dir.rglob("*.tmp"))
    _call_scale(library)


def test_second_build_is_a_cache_hit():
    first = build(SCALE)
    second = build(SCALE)
    assert first == second
    assert metrics.counters["build.compiled"] == 1
    assert metrics.counters["build.cache_hit"] == 1


def test_different_flags_give_a_different_library():
    default = build(SCALE)
    with config.override(cflags=(*config.get().cflags, "-O1")):
        other = build(SCALE)
    assert default != other
    assert metrics.counters["build.compiled"] == 2


def test_native_code_is_keyed_by_the_host_cpu(monkeypatch):
    here = build(SCALE)
    monkeypatch.setattr(build_module, "host", lambda: Target(model="another cpu"))
    assert build(SCALE) != here


def test_missing_configured_compiler_says_what_to_install():
    with config.override(cc="/nonexistent/cc"), pytest.raises(BuildError) as info:
        build(SCALE)
    assert "/nonexistent/cc" in str(info.value)
    assert "install gcc" in str(info.value) and "TILEGRAD_CC" in str(info.value)


def test_no_compiler_on_path_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with config.override(cc=None), pytest.raises(BuildError, match="no C compiler found.*install gcc"):
        build(SCALE)


def test_syntax_error_reports_compiler_message_command_and_source(cache_dir):
    with pytest.raises(BuildError) as info:
        build("void tg_broken(void **args) { int x = ; }\n")
    message = str(info.value)
    assert "error" in message and "expected expression" in message
    assert "command: " in message and "-shared" in message
    kept = next(cache_dir.rglob("*.c"))
    assert str(kept) in message
    assert not list(cache_dir.rglob("*.so")) and not list(cache_dir.rglob("*.tmp"))


def test_long_compiler_output_is_trimmed():
    source = "".join(f"void f{i}(void) {{ int x = ; }}\n" for i in range(400))
    with pytest.raises(BuildError, match=r"\.\.\. \(\d+ more lines\)") as info:
        build(source)
    assert len(str(info.value)) < 6000


_RACER = """
import json, sys
from tilegrad import metrics
from tilegrad.runtime import build
print("ready", flush=True)
sys.stdin.readline()  # the go signal: both processes build at the same moment
path = build(open(sys.argv[1]).read())
print(json.dumps([str(path), dict(metrics.counters)]))
"""


def test_concurrent_builds_of_one_source_yield_one_library(cache_dir, tmp_path):
    source = tmp_path / "scale.c"
    source.write_text(SCALE)
    src_dir = Path(build_module.__file__).parents[2]
    env = {**os.environ, "TILEGRAD_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(src_dir)}
    cmd = [sys.executable, "-c", _RACER, str(source)]
    pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    racers = [subprocess.Popen(cmd, **pipes) for _ in range(2)]
    for racer in racers:
        assert racer.stdout.readline() == "ready\n"
    for racer in racers:
        racer.stdin.write("go\n")
        racer.stdin.flush()
    replies = [json.loads(racer.communicate()[0]) for racer in racers]
    assert replies[0][0] == replies[1][0]
    assert sorted(r[1].get("build.compiled", 0) for r in replies) == [0, 1]
    assert sorted(r[1].get("build.cache_hit", 0) for r in replies) == [0, 1]
    assert not list(cache_dir.rglob("*.tmp"))
    _call_scale(Path(replies[0][0]))


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="AVX-512 is an x86 extension")
def test_assemble_shows_avx512_vectorisation():
    flags = ("-O3", "-march=skylake-avx512", "-mprefer-vector-width=512", "-fopenmp", "-fPIC", "-shared")
    with config.override(cflags=flags):
        asm = assemble(SCALE)
    assert "tg_scale:" in asm
    assert "zmm" in asm



def test_build_many_links_units_compiled_in_parallel():
    import importlib

    import numpy as np

    from tilegrad import metrics
    from tilegrad.runtime import BufferSpec, Kernel

    build_mod = importlib.import_module("tilegrad.runtime.build")
    helper = "void twice(float* x, int n) { for (int i = 0; i < n; ++i) x[i] *= 2.0f; }\n"
    entry = "void twice(float* x, int n);\nvoid run(void** args) { twice((float*)args[0], 4); }\n"
    metrics.reset()
    library = build_mod.build_many([helper, entry])
    assert build_mod.build_many([helper, entry]) == library and metrics.counters["build.cache_hit"] == 1
    x = np.ones(4, "float32")
    Kernel(library, "run", [BufferSpec("x", (4,), "float32")])(x)
    assert (x == 2).all()
    with pytest.raises(BuildError, match=r"\.1\.c"):
        build_mod.build_many([helper, "void broken( {"])
