import numpy as np
import pytest

from tilegrad import config
from tilegrad.errors import BuildError, KernelCallError, ShapeError
from tilegrad.runtime import BufferSpec, Kernel, build, random_arguments

ADD = """
void tg_add(void **args) {
    const float *a = args[0], *b = args[1];
    float *c = args[2];
    #pragma omp parallel for
    for (int i = 0; i < 64 * 32; ++i) c[i] = a[i] + b[i];
}
"""
ADD_PARAMS = [BufferSpec(name, (64, 32), "float32") for name in "ABC"]

THREADS = """
#include <omp.h>
#include <stdint.h>
void tg_threads(void **args) {
    int32_t *out = args[0];
    #pragma omp parallel
    {
        #pragma omp single
        out[0] = omp_get_num_threads();
    }
}
"""


@pytest.fixture
def add():
    return Kernel(build(ADD), "tg_add", ADD_PARAMS)


def _arrays(shape=(64, 32), dtype=np.float32):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(3)]


def test_add_matches_numpy(add):
    a, b, c = _arrays()
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_read_only_inputs_are_accepted(add):
    a, b, c = _arrays()
    a.setflags(write=False)
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_pack_holds_the_data_pointers(add):
    arrays = _arrays()
    assert list(add.pack(arrays)) == [a.ctypes.data for a in arrays]


def test_thread_count_follows_the_configuration():
    library = build(THREADS)
    out = np.zeros(1, np.int32)
    for n in (1, 3):
        with config.override(num_threads=n):
            kernel = Kernel(library, "tg_threads", [BufferSpec("out", (1,), "int32")])
        kernel(out)
        assert out[0] == n


def test_wrong_number_of_arrays(add):
    a, b, _ = _arrays()
    with pytest.raises(KernelCallError, match=r"kernel 'tg_add' takes 3 arrays \(A, B, C\), got 2"):
        add(a, b)


def test_not_an_array(add):
    a, b, _ = _arrays()
    expected = r"parameter 'C': expected a numpy.ndarray of \(64, 32\) float32, got list"
    with pytest.raises(KernelCallError, match=expected):
        add(a, b, [0.0] * 2048)


def test_wrong_shape(add):
    a, b, c = _arrays()
    with pytest.raises(KernelCallError) as info:
        add(a, b.T.copy(), c)
    assert str(info.value) == "kernel 'tg_add', parameter 'B': expected shape (64, 32) float32, got (32, 64) float32"


def test_wrong_dtype(add):
    a, b, c = _arrays()
    expected = r"parameter 'A': expected shape \(64, 32\) float32, got \(64, 32\) float64"
    with pytest.raises(KernelCallError, match=expected):
        add(a.astype(np.float64), b, c)


def test_byte_swapped_dtype_is_rejected(add):
    a, b, c = _arrays()
    with pytest.raises(KernelCallError, match="parameter 'A'"):
        add(a.astype(">f4"), b, c)


def test_non_contiguous(add):
    a, b, c = _arrays()
    strided = np.zeros((64, 64), np.float32)[:, ::2]
    with pytest.raises(KernelCallError, match=r"parameter 'B'.*not C-contiguous; pass np.ascontiguousarray\(x\)"):
        add(a, strided, c)


def test_missing_symbol():
    with pytest.raises(BuildError, match="defines no kernel 'tg_sub'"):
        Kernel(build(ADD), "tg_sub", ADD_PARAMS)


def test_unloadable_library(tmp_path):
    bogus = tmp_path / "bogus.so"
    bogus.write_text("not a library")
    with pytest.raises(BuildError, match="cannot load kernel library"):
        Kernel(bogus, "tg_add", ADD_PARAMS)


def test_buffer_spec():
    assert BufferSpec("x", (4, 8), "float16").nbytes == 64
    assert BufferSpec("m", (3,), "bool").nbytes == 3
    assert BufferSpec("b", (5,), "bfloat16").nbytes == 10 and BufferSpec("u", (2,), "uint64").nbytes == 16
    with pytest.raises(ShapeError, match="'float8_e4m3fn' is not one of"):
        BufferSpec("x", (4,), "float8_e4m3fn")
    with pytest.raises(ShapeError, match="tuple of non-negative ints"):
        BufferSpec("x", [4], "float32")


def test_random_arguments():
    params = [
        BufferSpec("f", (33, 7), "float32"),
        BufferSpec("h", (5,), "float16"),
        BufferSpec("i", (100,), "int8"),
        BufferSpec("j", (100,), "int64"),
        BufferSpec("m", (100,), "bool"),
    ]
    arrays = random_arguments(params, np.random.default_rng(1))
    again = random_arguments(params, np.random.default_rng(1))
    for spec, a, b in zip(params, arrays, again):
        assert a.shape == spec.shape and a.dtype == np.dtype(spec.dtype)
        assert a.flags.c_contiguous and a.ctypes.data % 64 == 0
        np.testing.assert_array_equal(a, b)
    assert -1 <= arrays[0].min() and arrays[0].max() < 1 and arrays[0].std() > 0.3
    assert 0 <= arrays[2].min() and arrays[2].max() < 8
    assert 0 < arrays[4].sum() < 100
