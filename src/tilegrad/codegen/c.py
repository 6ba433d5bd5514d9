"""Loop IR to C99 (GNU C) with OpenMP: a printer, with target differences as class attributes.

The kernel ABI is `void name(void** args)`: args[i] is the data pointer of parameter i. Multi-dimensional
indices are flattened here with row-major strides. Each kernel is a team function, `name_team(args, tg)`, run by
every thread of a parallel region (codegen/team.py): the outermost parallel loop of a nest takes the thread's
share of its iterations, statements with no parallel loop run on thread 0, a buffer around parallel loops is
thread 0's, shared, and each step ends at a barrier. `name(args)` opens a region around it; a model's entry
point opens one for all its kernels. Vectorized loops become `omp simd`, unrolled loops `GCC unroll`.
"""

from __future__ import annotations

import math

from ..dtype import INT_RANGES, is_unsigned, itemsize
from ..loop.transpose import TILES
from ..loop.prefetch import PREFETCH, PREFETCH_L2
from ..loop.rotations import GROUPS as ROTATION_GROUPS, LANES as ROTATION_LANES, helpers as rotation_helpers
from ..loop.ir import Allocate, For, IfThenElse, Kernel, Seq, Stmt, Store, has_parallel
from ..te import expr as E
from ..te.simplify import simplify
from .renderer import Renderer
from .team import TEAM

KEPT = """\
/* Buffers kept from call to call by each calling thread (`tg_keep`): each block starts with a link of the
   library's list, so that unloading the library frees them all. The runtime calls `tg_release_on_unload` just
   before it closes the library; the destructor then frees the list if the library is unloaded, and not when the
   process exits, where a thread may still run a kernel. One list per library: weak definitions, which the linker
   merges across the library's files. */
typedef struct tg_kept_link { struct tg_kept_link* next; } tg_kept_link;
__attribute__((weak, visibility("hidden"))) tg_kept_link* tg_kept_list;
__attribute__((weak, visibility("hidden"))) int tg_kept_release;
__attribute__((weak, visibility("hidden"))) void* tg_keep(size_t align, size_t bytes) {
  char* block = (char*)aligned_alloc(align, align + bytes);
  if (!block) return NULL;
  tg_kept_link* link = (tg_kept_link*)block;
  link->next = __atomic_load_n(&tg_kept_list, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(&tg_kept_list, &link->next, link, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {}
  return block + align;
}
__attribute__((weak)) void tg_release_on_unload(void) { __atomic_store_n(&tg_kept_release, 1, __ATOMIC_RELEASE); }
__attribute__((destructor)) static void tg_free_kept(void) {
  if (!__atomic_load_n(&tg_kept_release, __ATOMIC_ACQUIRE)) return;
  for (tg_kept_link* link = __atomic_exchange_n(&tg_kept_list, NULL, __ATOMIC_ACQUIRE); link;) {
    tg_kept_link* next = link->next;
    free(link);
    link = next;
  }
}
"""

CALL = """\
/* How the runtime calls a kernel: on `num_threads` threads, set on the calling thread first (an environment
   variable would act only before the OpenMP runtime starts). Every library carries it (a weak definition, one per
   library), so that loading a saved module needs no C compiler. */
__attribute__((weak)) void tg_call(void (*fn)(void**), void** args, int num_threads) {
  if (omp_get_max_threads() != num_threads) omp_set_num_threads(num_threads);
  fn(args);
}
"""

PRELUDE = """\
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <math.h>
static inline int64_t tg_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tg_floormod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
#include <string.h>
/* exp for float32 that gcc can vectorise (libm's expf is a scalar call): Cody-Waite range reduction to
   [-ln2/2, ln2/2], a degree-6 polynomial (Cephes), and 2^n built in the exponent bits, as two normal halves
   (2^128 has no float, 2^-127 is a denormal that FTZ/DAZ would read as zero). About 1 ulp; results below 2^-126
   flush to zero. Rounding to nearest uses the 1.5 * 2^23 trick, which vectorises where floorf does not. */
static inline __attribute__((always_inline)) float tg_expf(float x) {
  float c = x < 88.7228390520683f ? x : 88.7228390520683f;
  c = c > -87.0f ? c : -87.0f;
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  int32_t e = (int32_t)n, half = e >> 1;
  int32_t low_bits = (half + 127) << 23, high_bits = (e - half + 127) << 23;
  float low, high;
  memcpy(&low, &low_bits, sizeof low);
  memcpy(&high, &high_bits, sizeof high);
  float out = (y * low) * high;
  out = x < -87.0f ? 0.0f : out;
  return x != x ? x : out;
}
/* tanh: the odd Taylor series (to x^15, error < 1e-7) below 0.55, else 1 - 2 / (exp(2|x|) + 1). Both branches are
   computed and one is selected, so gcc vectorises it like tg_expf. The clamp puts its bound first (`b < a ? b :
   a`, which a NaN fails) so that a NaN flows through to the result; fabsf and copysignf are one bitwise
   operation each, where a comparison and a select were two or three (see tg_erff). */
static inline float tg_tanhf(float x) {
  float a = fabsf(x);
  float x2 = x * x;
  float small = x * (((((((-0.0014558343870513183f * x2
      + 0.003592128036572481f) * x2
      + -0.008863235529902197f) * x2
      + 0.021869488536155203f) * x2
      + -0.05396825396825397f) * x2
      + 0.13333333333333333f) * x2
      + -0.3333333333333333f) * x2
      + 1.0f);
  float e = tg_expf(2.0f * (10.0f < a ? 10.0f : a));
  float large = copysignf(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.55f ? small : large;
}
/* erf: one rational function x P(x^2) / Q(x^2), degrees 5 and 5 in x^2, fitted for the least relative error on
   [0, 3.925] by reweighted least squares (under 4e-7 in float); past 3.925 erf rounds to 1 in float. Eleven
   multiply-adds and one division, no exp and no second branch: a GELU epilogue is a large part of its product's
   time, and it is bound by the vector operations it issues, so the sign is taken and restored by bitwise
   operations and a NaN propagates through clamps that it fails, with no test of its own. */
static inline float tg_erff(float x) {
  float a = fabsf(x);
  a = 3.925f < a ? 3.925f : a;
  float t = a * a;
  float p = ((((2.046186637e-06f * t + 2.848340373e-04f) * t + 3.771943506e-03f) * t + 5.276741087e-02f) * t
      + 1.905789971e-01f) * t + 1.128379107e+00f;
  float q = ((((3.804895096e-05f * t + 1.163719222e-03f) * t + 1.498196833e-02f) * t + 1.141766757e-01f) * t
      + 5.022289753e-01f) * t + 1.0f;
  float r = a * p / q;
  return copysignf(1.0f < r ? 1.0f : r, x);
}
/* x / y for a y that the loop around does not change, correctly rounded with no division in the loop: gcc hoists
   1 / y out of it, and the quotient by that reciprocal is corrected once by its remainder, which one multiply-add
   computes exactly (Markstein's theorem: r the rounded 1 / y and q within an ulp of x / y, q + (x - q y) r
   rounds to x / y). A y past 2^126, whose reciprocal would be denormal, is scaled by 2^-64 first. Zeros,
   infinities and NaNs come out as division's; so does every quotient with x and x / y at least 2^-100 in size
   (tests/codegen/test_division.py), which the corrections need as normal floats; below, within an ulp. The
   divider is not pipelined as the multiply-adds are: GELU's x / sqrt(2) and a quantization's x / scale in an
   epilogue waited on it. */
static inline float tg_div_by(float x, float y) {
  float s = fabsf(y) > 0x1p126f ? 0x1p-64f : 1.0f, ys = y * s, r = 1.0f / ys;
  float q = x * r, e = fmaf(-q, ys, x), c = fmaf(e, r, q);
  return (e == 0.0f || c != c ? q : c) * s;
}
/* min and max propagate NaN from either side, as ONNX Runtime's Min and Max do (a NaN `a` fails every comparison,
   hence `_x != _x`; for integers that test folds away). Between -0.0 and 0.0 they return `b`, as ONNX Runtime does. */
#define TG_MIN(a, b) ({ __typeof__(a) _x = (a); __typeof__(b) _y = (b); _x < _y || _x != _x ? _x : _y; })
#define TG_MAX(a, b) ({ __typeof__(a) _x = (a); __typeof__(b) _y = (b); _x > _y || _x != _x ? _x : _y; })
/* A choice between two float values that are safe to compute whatever the condition (every read in bounds), made
   on their bits: gcc sinks a read used by one arm of `c ? a : b` into a branch, which no loop vectorises. */
#define TG_BLEND_F32(c, a, b) ({ union { float f; int32_t i; } _a = {(a)}, _b = {(b)}; int32_t _m = -(int32_t)(c); \
                                 _a.i = (_a.i & _m) | (_b.i & ~_m); _a.f; })
/* A prefetch into L2 only (prefetcht1): a block that the next tiles read (loop/prefetch.py), kept out of the L1
   that this tile's own operands stream through. */
#define tg_prefetch_l2(p) __builtin_prefetch((p), 0, 2)
""" + KEPT + TEAM + CALL


BFLOAT16 = """\
#ifndef TG_BFLOAT16
#define TG_BFLOAT16
/* bfloat16 is stored as the upper 16 bits of a float32 and computed in float32; a value is rounded to bfloat16
   (to nearest, ties to even, as ml_dtypes and ONNX Runtime do) once, where it is stored or cast. */
static inline float tg_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, sizeof f); return f;
}
static inline uint16_t tg_float_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* a NaN stays a quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#endif
"""

TRANSPOSES = """\
#ifndef TG_TRANSPOSES
#define TG_TRANSPOSES
/* out[r * so + c] = in[r + c * si] for r, c < T, elements of the type's size (loop/transpose.py): the tile's
   rows of the input copied whole into a square on the stack, then each row of the output written whole, a vector
   along c whose T elements of each lane gcc gathers from the square by permutes (an interleaved group). */
#define TG_TRANSPOSE(NAME, TYPE, T) \\
static inline void NAME(void* restrict to, const void* restrict from, int64_t so, int64_t si) { \\
  TYPE* restrict out = (TYPE*)to; const TYPE* restrict in = (const TYPE*)from; \\
  TYPE square[T * T] __attribute__((aligned(64))); \\
  for (int c = 0; c < T; ++c) { \\
    _Pragma("omp simd") for (int r = 0; r < T; ++r) square[c * T + r] = in[c * si + r]; \\
  } \\
  _Pragma("omp simd") for (int c = 0; c < T; ++c) { \\
    _Pragma("GCC unroll 16") for (int r = 0; r < T; ++r) out[r * so + c] = square[c * T + r]; \\
  } \\
}
TG_TRANSPOSE(tg_transpose_1x16, uint8_t, 16)
TG_TRANSPOSE(tg_transpose_4x8, uint32_t, 8)
TG_TRANSPOSE(tg_transpose_4x16, uint32_t, 16)
#endif
"""

NARROW_LANES = 16  # floats narrowed to bytes per helper call (`tg_narrow_*`, in DOT4's text)
BYTES = ("uint8", "int8")

DOT4 = """\
#ifndef TG_DOT4
#define TG_DOT4
/* acc[j] += a[0] * w[4j] + a[1] * w[4j + 1] + a[2] * w[4j + 2] + a[3] * w[4j + 3] for j < 8 (or 16): a u8, w s8,
   exact int32 sums (loop/dot4.py). AVX-512 VNNI and AVX-VNNI: vpdpbusd, which sums the four products in int32
   without saturating. AVX2 without VNNI: vpmaddubsw would saturate pairs of products at int16 (255 * -128 * 2
   does not fit) unless the weights had 7 bits (ONNX Runtime's reduce_range), so the bytes are widened to 16 bits
   and paired by vpmaddwd, exact for every s8 weight, and the pairs summed by vphaddd (whose 128-bit halves
   vpermq puts back in column order). Elsewhere: plain C. */
#if defined(__AVX2__)
#include <immintrin.h>
#endif
static inline void tg_dot4_u8s8x8(int32_t* acc, const uint8_t* a, const int8_t* w) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  int32_t a4; memcpy(&a4, a, 4);
  __m256i c = _mm256_loadu_si256((const __m256i*)acc);
  c = _mm256_dpbusd_epi32(c, _mm256_set1_epi32(a4), _mm256_loadu_si256((const __m256i*)w));
  _mm256_storeu_si256((__m256i*)acc, c);
#elif defined(__AVXVNNI__)
  int32_t a4; memcpy(&a4, a, 4);
  __m256i c = _mm256_loadu_si256((const __m256i*)acc);
  c = _mm256_dpbusd_avx_epi32(c, _mm256_set1_epi32(a4), _mm256_loadu_si256((const __m256i*)w));
  _mm256_storeu_si256((__m256i*)acc, c);
#elif defined(__AVX2__)
  int32_t a4; memcpy(&a4, a, 4);
  __m256i a16 = _mm256_cvtepu8_epi16(_mm_set1_epi32(a4));
  __m256i lo = _mm256_madd_epi16(a16, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)w)));
  __m256i hi = _mm256_madd_epi16(a16, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(w + 16))));
  __m256i sums = _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8);
  _mm256_storeu_si256((__m256i*)acc, _mm256_add_epi32(_mm256_loadu_si256((const __m256i*)acc), sums));
#else
  for (int j = 0; j < 8; ++j)
    acc[j] += a[0] * w[4 * j] + a[1] * w[4 * j + 1] + a[2] * w[4 * j + 2] + a[3] * w[4 * j + 3];
#endif
}
static inline void tg_dot4_u8s8x16(int32_t* acc, const uint8_t* a, const int8_t* w) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
  int32_t a4; memcpy(&a4, a, 4);
  __m512i c = _mm512_loadu_si512((const void*)acc);
  c = _mm512_dpbusd_epi32(c, _mm512_set1_epi32(a4), _mm512_loadu_si512((const void*)w));
  _mm512_storeu_si512((void*)acc, c);
#else
  tg_dot4_u8s8x8(acc, a, w);
  tg_dot4_u8s8x8(acc + 8, a, w + 32);
#endif
}
/* acc[j] += a[j] * w[4j] + a[16 + j] * w[4j + 1] + a[32 + j] * w[4j + 2] + a[48 + j] * w[4j + 3] for j < 16
   (loop/dot4.py's transposed form: a depthwise convolution's four pixels of 16 channels): with AVX-512 VNNI and
   VBMI one vpermb gathers each lane's four bytes, then one vpdpbusd; elsewhere plain C. */
static inline void tg_dot4t_u8s8x16(int32_t* acc, const uint8_t* a, const int8_t* w) {
#if defined(__AVX512VNNI__) && defined(__AVX512VBMI__)
  static const uint8_t lanes_together[64] __attribute__((aligned(64))) = {
    0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51,
    4, 20, 36, 52, 5, 21, 37, 53, 6, 22, 38, 54, 7, 23, 39, 55,
    8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59,
    12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63,
  };
  __m512i grouped = _mm512_permutexvar_epi8(_mm512_load_si512((const void*)lanes_together),
                                            _mm512_loadu_si512((const void*)a));
  __m512i c = _mm512_loadu_si512((const void*)acc);
  _mm512_storeu_si512((void*)acc, _mm512_dpbusd_epi32(c, grouped, _mm512_loadu_si512((const void*)w)));
#else
  for (int j = 0; j < 16; ++j)
    acc[j] += a[j] * w[4 * j] + a[16 + j] * w[4 * j + 1] + a[32 + j] * w[4 * j + 2] + a[48 + j] * w[4 * j + 3];
#endif
}
/* 16 floats holding integers in range, stored as bytes (a requantization's last step, codegen/c.py's narrowed
   stores): with AVX-512 one vcvttps2dq and one vpmovdb, where gcc's own vectorisation of the byte loop took
   four 4-lane conversions and three byte permutes. */
#define TG_NARROW(T)                                                                                  \
  static inline void tg_narrow_##T##x16(T* dst, const float* src) {                                   \
    TG_NARROW_BODY(T)                                                                                 \
  }
#if defined(__AVX512F__)
#define TG_NARROW_BODY(T) \
  _mm_storeu_si128((__m128i*)dst, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(_mm512_loadu_ps(src))));
#else
#define TG_NARROW_BODY(T) for (int i = 0; i < 16; ++i) dst[i] = (T)src[i];
#endif
TG_NARROW(uint8_t)
TG_NARROW(int8_t)
/* 16 floats x requantized to bytes: round(x) (half to even) + zero, saturated to [lo, hi], all integers. With
   AVX-512, x is clamped to [lo - zero, hi - zero] first (rounding commutes with a clamp to integers), so that
   one vcvtps2dq rounds it in the default rounding mode and no int32 overflows; then the zero point is added and
   vpmovdb narrows: 6 operations where the rounding, compare-and-blend saturation and conversion took 8. */
#if defined(__AVX512F__)
#define TG_REQUANTIZE(T)                                                                              \
  static inline void tg_requantize_##T##x16(T* dst, const float* x, float zero, float lo, float hi) { \
    __m512 v = _mm512_max_ps(_mm512_loadu_ps(x), _mm512_set1_ps(lo - zero));                         \
    v = _mm512_min_ps(v, _mm512_set1_ps(hi - zero));                                                  \
    __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32((int32_t)zero));            \
    _mm_storeu_si128((__m128i*)dst, _mm512_cvtepi32_epi8(q));                                         \
  }
#else
#define TG_REQUANTIZE(T)                                                                              \
  static inline void tg_requantize_##T##x16(T* dst, const float* x, float zero, float lo, float hi) { \
    for (int i = 0; i < 16; ++i) {                                                                    \
      float v = nearbyintf(x[i]) + zero;                                                              \
      dst[i] = (T)(v < lo ? lo : v > hi ? hi : v);                                                    \
    }                                                                                                 \
  }
#endif
TG_REQUANTIZE(uint8_t)
TG_REQUANTIZE(int8_t)
/* The same sums where every weight lies in [-64, 64] (loop/dot4.py's u8s7 form): on AVX2 without VNNI,
   vpmaddubsw's int16 pair sums cannot saturate (2 * 255 * 64 < 2^15), and vpmaddwd by ones adds the pairs. */
static inline void tg_dot4_u8s7x8(int32_t* acc, const uint8_t* a, const int8_t* w) {
#if defined(__AVX2__) && !defined(__AVX512VNNI__) && !defined(__AVXVNNI__)
  int32_t a4; memcpy(&a4, a, 4);
  __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi32(a4), _mm256_loadu_si256((const __m256i*)w));
  __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  _mm256_storeu_si256((__m256i*)acc, _mm256_add_epi32(_mm256_loadu_si256((const __m256i*)acc), sums));
#else
  tg_dot4_u8s8x8(acc, a, w);
#endif
}
static inline void tg_dot4_u8s7x16(int32_t* acc, const uint8_t* a, const int8_t* w) {
#if defined(__AVX2__) && !defined(__AVX512VNNI__) && !defined(__AVXVNNI__)
  tg_dot4_u8s7x8(acc, a, w);
  tg_dot4_u8s7x8(acc + 8, a, w + 32);
#else
  tg_dot4_u8s8x16(acc, a, w);
#endif
}
#endif
"""


class CRenderer(Renderer):
    prelude = PRELUDE
    signature = "void {name}(void** args)"
    param = "{type}* restrict {name} = ({type}*)args[{index}];"
    dim_param = "const int64_t {name} = *(const int64_t*)args[{index}];"
    dims: tuple[E.Var, ...] = ()  # the dynamic dimensions of the kernel being rendered
    parallel_for = None  # parallel loops are shared out by the team (`_team`), never a region of their own
    simd = "#pragma omp simd"
    unroll = "#pragma GCC unroll {n}"
    stack_limit_bytes = 64 * 1024  # larger local buffers go to the heap
    restrict_stack_bytes = 4096  # stack buffers from this size on are read through a restrict pointer
    types = {"float32": "float", "float64": "double", "float16": "_Float16", "bfloat16": "float", "int8": "int8_t",
             "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t", "int32": "int32_t", "uint32": "uint32_t",
             "int64": "int64_t", "uint64": "uint64_t", "bool": "bool"}
    storage = {"bfloat16": "uint16_t"}
    widen = {"bfloat16": "tg_bf16_to_float"}
    narrow = {"bfloat16": "tg_float_to_bf16"}
    helpers = {"bfloat16": BFLOAT16}
    promoted = ("int8", "uint8", "int16", "uint16")
    intrinsics = {PREFETCH: "__builtin_prefetch", PREFETCH_L2: "tg_prefetch_l2",
                  **{f"dot4_{kind}x{lanes}": f"tg_dot4_{kind}x{lanes}"
                     for kind in ("u8s8", "u8s7") for lanes in (8, 16)}, "dot4t_u8s8x16": "tg_dot4t_u8s8x16",
                  **{f"transpose_{size}x{side}": f"tg_transpose_{size}x{side}"
                     for size, sides in TILES.items() for side in sides},
                  **{f"rotate_sum_{k}x{lanes}": f"tg_rotate_sum_{k}x{lanes}"
                     for lanes in ROTATION_LANES for k in ROTATION_GROUPS if k < lanes}}
    intrinsic_helpers = DOT4 + TRANSPOSES + rotation_helpers()
    prefetches_streams = True
    calls = {E.Exp: "exp", E.Log: "log", E.Sqrt: "sqrt", E.Tanh: "tanh", E.Erf: "erf", E.Sin: "sin", E.Cos: "cos",
             E.Floor: "floor", E.Ceil: "ceil", E.Round: "nearbyint", E.Pow: "pow", E.Abs: "fabs",
             E.Fmod: "fmod", E.Tan: "tan", E.Asin: "asin", E.Acos: "acos", E.Atan: "atan", E.Sinh: "sinh",
             E.Cosh: "cosh", E.Asinh: "asinh", E.Acosh: "acosh", E.Atanh: "atanh", E.Rsqrt: None, E.Sigmoid: None}

    def _for(self, s: For, ind: int) -> None:
        narrowed = _narrowed_float_store(s, self.target.vector_bits // 32)
        if narrowed is None:
            return super()._for(s, ind)
        # A vectorized loop storing bytes computed in float (a requantization: round, clamp, cast to u8) is
        # vectorized by the byte: 16 lanes of u8 make gcc compute the floats four to an xmm register. Computed
        # into a float array first, the math runs in whole float vectors, and the narrowing is a second loop.
        v, n, wide = s.var.name, s.extent.value, f"tg_wide_{s.var.name}"
        self._emit(ind, f"{{ float {wide}[{n}] __attribute__((aligned(64)));")
        target = f"{narrowed.buffer.name}[{self._flat(narrowed.buffer, narrowed.indices)}]"
        dtype = self.types[narrowed.buffer.dtype]
        if n < NARROW_LANES or not _unit_stride(narrowed, s.var):
            for line in (f"{wide}[{v}] = {self._in_loop(s.var, self.expr, narrowed.value.a)};",
                         f"{target} = (({dtype}){wide}[{v}]);"):
                self._emit(ind + 1, self.simd)
                self._emit(ind + 1, f"for (int64_t {v} = 0; {v} < {n}; ++{v}) {{")
                self._emit(ind + 2, line)
                self._emit(ind + 1, "}")
            self._emit(ind, "}")
            return
        # Whole vectors of NARROW_LANES narrowed by `tg_narrow_*` or `tg_requantize_*` (DOT4's helpers); where
        # they do not divide the row, a last vector overlapping the one before it computes and rewrites a few of
        # the same values, where gcc ran the rest as a scalar tail. Bytes the row reads are widened in a loop of
        # their own, and a requantized value's round trip through a byte dropped: a byte among the floats has gcc
        # size the vectors by the byte, four floats to an xmm register.
        self._uses_intrinsics = True
        saturated = _saturation(narrowed.value.a)
        scaled = _exact_byte_round_trips(saturated[0] if saturated else narrowed.value.a)
        whole = n - n % NARROW_LANES
        spans = [(0, whole)] + ([(n - NARROW_LANES, n)] if whole < n else [])
        byte_loads = sorted(_byte_loads(scaled, s.var), key=str)
        for k in range(len(byte_loads)):
            self._emit(ind + 1, f"int32_t tg_bytes{k}_{v}[{n}] __attribute__((aligned(64)));")
        widened = {load: f"tg_bytes{k}_{v}[{v}]" for k, load in enumerate(byte_loads)}
        for lo, hi in spans:
            loop = f"for (int64_t {v} = {lo}; {v} < {hi}; ++{v}) {{"
            lines = [f"tg_bytes{k}_{v}[{v}] = {self._in_loop(s.var, self.expr, load)};"
                     for k, load in enumerate(byte_loads)]
            outer_scalars, self._scalars = self._scalars, {**self._scalars, **widened}
            try:
                lines.append(f"{wide}[{v}] = {self._in_loop(s.var, self.expr, scaled)};")
            finally:
                self._scalars = outer_scalars
            for line in lines:
                self._emit(ind + 1, self.simd)
                self._emit(ind + 1, loop)
                self._emit(ind + 2, line)
                self._emit(ind + 1, "}")
        for lo, hi in spans:  # every read before the first write: the row may be written in place over its input
            self._emit(ind + 1, f"for (int64_t {v} = {lo}; {v} < {hi}; {v} += {NARROW_LANES}) {{")
            if saturated:
                bounds = ", ".join(self._const(c) for c in saturated[1:])
                self._emit(ind + 2, f"tg_requantize_{dtype}x{NARROW_LANES}(&{target}, &{wide}[{v}], {bounds});")
            else:
                self._emit(ind + 2, f"tg_narrow_{dtype}x{NARROW_LANES}(&{target}, &{wide}[{v}]);")
            self._emit(ind + 1, "}")
        self._emit(ind, "}")

    def expr(self, e: E.Expr) -> str:
        if type(e) is E.Select and e.dtype == "float32" and safe_anyway(e.t) and safe_anyway(e.f):
            return f"TG_BLEND_F32({self.expr(e.cond)}, {self.expr(e.t)}, {self.expr(e.f)})"
        if type(e) is E.Div and e.dtype == "float32" and self._by_reciprocal(e):
            return f"tg_div_by({self.expr(e.a)}, {self.expr(e.b)})"
        return super().expr(e)

    def _by_reciprocal(self, e: E.Div) -> bool:
        """Whether `e` is `tg_div_by`'s: its divisor is the same in every iteration of the innermost loop around
        it and its dividend is not, and the divisor is no power of two (whose exact reciprocal gcc multiplies by
        itself). A division the loop does not change at all is left to gcc, which hoists it: as a call inside
        an invariant expression (1 / sqrt(var + eps) in a LayerNorm) it kept gcc from vectorising the loop."""
        inner = self._innermost
        if "fma" not in self.target.flags or inner is None:
            return False
        if inner in E.free_vars(e.b) or inner not in E.free_vars(e.a):
            return False
        return not (type(e.b) is E.Const and math.isfinite(e.b.value) and e.b.value != 0
                    and math.frexp(e.b.value)[0] in (0.5, -0.5))

    @property
    def alignment(self) -> int:
        """Bytes a buffer is aligned to: a cache line, and at least the widest vector."""
        return max(self.target.cache_line_bytes, self.target.vector_bits // 8)

    def _allocate(self, s: Allocate, ind: int) -> None:
        b = s.buffer
        t = self._storage(b.dtype)
        nbytes = self._bytes(b)
        if b.scope == "local" and nbytes <= self.stack_limit_bytes:
            self._stack_array(b, t, nbytes, ind)
            self._stmt(s.body, ind)
            return
        # Allocated once per calling thread and kept: a buffer allocated and freed per call above glibc's mmap
        # threshold is mapped afresh each call, and faulting its zeroed pages in can cost more than the kernel.
        kept = self._kept(b, nbytes, ind)
        self._emit(ind, f"if (!{kept}) {kept} = ({t}*)tg_keep({self.alignment}, {self._aligned_size(nbytes)});")
        self._emit(ind, f"{t}* restrict {b.name} = {kept};")
        self._stmt(s.body, ind)

    def _stack_array(self, b, t: str, nbytes: int, ind: int) -> None:
        """A local buffer on the stack. One of a page or more (a block of rows, attention's K^T) is read through a
        restrict pointer: once vectorised, gcc cannot tell two stack arrays apart, and a register tile
        accumulating from such a buffer was kept on the stack (a load and a store per multiply-add)."""
        array = f"[{nbytes // itemsize(b.dtype)}] __attribute__((aligned({self.alignment})));"
        if nbytes < self.restrict_stack_bytes:
            self._emit(ind, f"{t} {b.name}{array}")
            return
        self._emit(ind, f"{t} {b.name}_stack{array}")
        self._emit(ind, f"{t}* restrict {b.name} = {b.name}_stack;")

    def _bytes(self, b) -> int:
        """A buffer's bytes; one sized by dynamic dimensions holds their largest values (a loop's tile of rows)."""
        size = simplify(E.substitute(b.size(), {d.name: d.hi for d in self.dims}))
        if type(size) is not E.Const:
            raise ValueError(f"buffer {b.name} has a symbolic size {size}; bind the schedule's variables first")
        return size.value * itemsize(b.dtype)

    def _aligned_size(self, nbytes: int) -> int:
        return -(-nbytes // self.alignment) * self.alignment

    def _kept(self, b, nbytes: int, ind: int) -> str:
        kept = f"tg_kept_{b.name}"
        self._emit(ind, f"static __thread {self._storage(b.dtype)}* {kept};")
        return kept

    # -- the team -----------------------------------------------------------------------------------------
    def _function(self, k: Kernel) -> None:
        self.dims = k.dims
        self._emit(0, f"void {k.name}_team(void** args, tg_team* tg) {{")
        self._params(k)
        self._team(k.body, 1)
        self._emit(0, "}")
        self._emit(0, self.signature.format(name=k.name) + " {")
        if has_parallel(k.body):
            self._emit(1, f"TG_TEAM_BEGIN {k.name}_team(args, tg); TG_TEAM_END")
        else:
            self._emit(1, f"TG_TEAM_ALONE {k.name}_team(args, tg); TG_TEAM_ALONE_END")
        self._emit(0, "}")

    def _team(self, s: Stmt, ind: int) -> None:
        """`s` as each thread of the team runs it (module docstring)."""
        if not has_parallel(s):
            self._on_thread0([s], ind)
        elif isinstance(s, Seq):
            serial: list[Stmt] = []
            for x in s.stmts:
                if has_parallel(x):
                    self._on_thread0(serial, ind)
                    serial = []
                    self._team(x, ind)
                else:
                    serial.append(x)
            self._on_thread0(serial, ind)
        elif isinstance(s, For) and s.kind == "parallel":
            v = s.var.name
            self._emit(ind, f"{{ int64_t {v}_lo, {v}_hi; tg_loop {v}_loop; tg_loop_begin(tg, {self.expr(s.extent)}, "
                            f"&{v}_loop);")
            self._emit(ind + 1, f"while (tg_next(tg, &{v}_loop, &{v}_lo, &{v}_hi)) {{")
            self._emit(ind + 2, f"for (int64_t {v} = {v}_lo; {v} < {v}_hi; ++{v}) {{")
            self._parallel_depth += 1
            self._in_loop(s.var, self._stmt, s.body, ind + 3)
            self._parallel_depth -= 1
            self._emit(ind + 2, "}")
            self._emit(ind + 1, "}")
            self._emit(ind, "}")
            self._emit(ind, "tg_barrier(tg);")
        elif isinstance(s, For):  # around a parallel loop: every thread runs it, and shares what is inside
            self._emit(ind, f"for (int64_t {s.var.name} = 0; {s.var.name} < {self.expr(s.extent)}; ++{s.var.name}) {{")
            self._team(s.body, ind + 1)
            self._emit(ind, "}")
        elif isinstance(s, IfThenElse):  # its condition reads no thread's own values: every thread takes one branch
            self._emit(ind, f"if ({self.expr(s.cond)}) {{")
            self._team(s.then, ind + 1)
            if s.orelse is not None:
                self._emit(ind, "} else {")
                self._team(s.orelse, ind + 1)
            self._emit(ind, "}")
        elif isinstance(s, Allocate):  # around a parallel loop: thread 0's buffer, which all of them use
            b, t = s.buffer, self._storage(s.buffer.dtype)
            nbytes = self._bytes(b)
            kept = self._kept(b, nbytes, ind)
            self._emit(ind, f"if (tg->tid == 0 && !{kept}) {kept} = ({t}*)tg_keep({self.alignment}, "
                            f"{self._aligned_size(nbytes)});")
            self._emit(ind, f"{t}* restrict {b.name} = ({t}*)tg_broadcast(tg, {kept});")
            self._team(s.body, ind)
        else:
            raise TypeError(f"no C rendering for {type(s).__name__} around a parallel loop")

    def _on_thread0(self, stmts: list[Stmt], ind: int) -> None:
        """Statements with no parallel loop: thread 0 runs them while the others wait at the barrier."""
        if not stmts:
            return
        self._emit(ind, "if (tg->tid == 0) {")
        for x in stmts:
            self._stmt(x, ind + 1)
        self._emit(ind, "}")
        self._emit(ind, "tg_barrier(tg);")

    def _call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        if E.is_int(e.dtype):  # only abs takes integers
            return args[0] if is_unsigned(e.dtype) else f"llabs({args[0]})"
        suffix = "" if e.dtype == "float64" else "f"
        # double's functions are named like ops (exp, sqrt, erf), so a local buffer of that name would hide them;
        # GCC's builtins cannot be hidden
        prefix = "__builtin_" if e.dtype == "float64" else ""
        if e.dtype == "float16":
            args = [f"((float){a})" for a in args]
        t = type(e)
        exp = "tg_expf" if e.dtype != "float64" else "__builtin_exp"
        if t is E.Rsqrt:
            text = f"(1.0{suffix} / {prefix}sqrt{suffix}({args[0]}))"
        elif t is E.Sigmoid:
            text = f"(1.0{suffix} / (1.0{suffix} + {exp}(-{args[0]})))"
        elif t is E.Exp:
            text = f"{exp}({args[0]})"
        elif t in (E.Tanh, E.Erf) and e.dtype != "float64":
            text = f"tg_{self.calls[t]}f({args[0]})"
        else:
            text = f"{prefix}{self.calls[t]}{suffix}({', '.join(args)})"
        return f"((_Float16){text})" if e.dtype == "float16" else text



def render_c(k: Kernel) -> str:
    """C source of kernel `k`."""
    return CRenderer().render(k)


def _narrowed_float_store(s: For, lanes: int) -> Store | None:
    """The store of a vectorized loop of at least `lanes` (float vector lanes) constant steps whose body is one
    store of a one-byte integer cast from a float32 value; else None."""
    body = s.body
    if s.kind != "vectorized" or type(s.extent) is not E.Const or s.extent.value < lanes or type(body) is not Store:
        return None
    value = body.value
    narrow = body.buffer.dtype in BYTES and type(value) is E.Cast
    return body if narrow and value.a.dtype == "float32" else None


def _saturation(e: E.Expr) -> tuple[E.Expr, E.Const, E.Const, E.Const] | None:
    """(x, zero point, lo, hi) where `e` is a requantization's last steps, round(x) + zero point saturated to
    [lo, hi] by comparisons (te.nn.quantized's `_saturated`), all three float constants; else None."""
    if not (type(e) is E.Select and type(e.cond) is E.LT and type(e.f) is E.Select and type(e.f.cond) is E.LT):
        return None
    value, lo, inner = e.cond.a, e.t, e.f
    hi = inner.t
    if not (e.cond.b == lo and inner.cond.a == hi and inner.cond.b == value and inner.f == value):
        return None
    zero = E.Const(0.0, "float32")
    if type(value) is E.Add and type(value.b) is E.Const:
        value, zero = value.a, value.b
    if not (type(value) is E.Round and all(type(c) is E.Const for c in (lo, hi, zero))):
        return None
    return value.args[0], zero, lo, hi


def _byte_loads(e: E.Expr, var: E.Var) -> set:
    """The reads of one-byte elements in `e` that move with `var`."""
    return {x for x in E.loads(e) if x.buffer.dtype in BYTES and var in E.free_vars(x)}


def _exact_byte_round_trips(e: E.Expr) -> E.Expr:
    """`e` with each float32 <- byte <- float32 cast pair of a requantized value (a quantized tensor dequantized
    in the same kernel) dropped: the value is an integer saturated to the byte's range, which the round trip
    leaves as it is, and a byte cast among the floats would size gcc's vectors by the byte."""
    def drop(x: E.Expr) -> E.Expr:
        if type(x) is E.Cast and x.dtype == "float32" and type(x.a) is E.Cast and x.a.dtype in BYTES:
            found = _saturation(x.a.a)
            lo, hi = INT_RANGES[x.a.dtype]
            if found and lo <= found[2].value and found[3].value <= hi:
                return drop(x.a.a)
        return E.map_children(x, drop)
    return drop(e)


def _unit_stride(store: Store, var: E.Var) -> bool:
    """Whether `store`'s element moves by one for each step of `var`."""
    flat = E.flat_index(store.buffer, store.indices)
    step = simplify(E.substitute(flat, {var: var + 1}) - flat)
    return type(step) is E.Const and step.value == 1


def safe_anyway(e: E.Expr) -> bool:
    """Whether `e` may be computed whatever condition guards it: every read inside its buffer by the indices'
    bounds (col2im clamps its reads for this) and no integer division by a divisor that may be zero."""
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Load and not all(_inside(i, extent) for i, extent in zip(x.indices, x.buffer.shape)):
            return False
        if type(x) in (E.FloorDiv, E.FloorMod) and x.b.lo <= 0 <= x.b.hi:
            return False
        stack.extend(x.children())
    return True


def _inside(index: E.Expr, extent) -> bool:
    smallest = extent if isinstance(extent, int) else extent.lo
    return index.lo >= 0 and index.hi <= smallest - 1
