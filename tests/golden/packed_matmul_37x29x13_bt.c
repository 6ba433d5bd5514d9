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
   [-ln2/2, ln2/2], a degree-6 polynomial (Cephes), and 2^n built in the exponent bits. About 1 ulp; results below
   2^-126 flush to zero. Rounding to nearest uses the 1.5 * 2^23 trick, which vectorises where floorf does not. */
static inline float tg_expf(float x) {
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
  int32_t bits = ((int32_t)n + 126) << 23;
  float half_scale;
  memcpy(&half_scale, &bits, sizeof half_scale);
  float out = (y * half_scale) * 2.0f;
  out = x < -87.0f ? 0.0f : out;
  return x != x ? x : out;
}
#define TG_MIN(a, b) ({ __typeof__(a) _x = (a); __typeof__(b) _y = (b); _x < _y ? _x : _y; })
#define TG_MAX(a, b) ({ __typeof__(a) _x = (a); __typeof__(b) _y = (b); _x > _y ? _x : _y; })
void packed_matmul_37x29x13_bt(void** args) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict C = (float*)args[2];
  float* restrict C_apack = (float*)aligned_alloc(64, 2240);
  float* restrict C_bpack = (float*)aligned_alloc(64, 1664);
  for (int64_t io = 0; io < 7; ++io) {
    for (int64_t C_apack_k = 0; C_apack_k < 13; ++C_apack_k) {
      #pragma omp simd
      for (int64_t ii = 0; ii < 6; ++ii) {
        C_apack[(((C_apack_k * 6) + ii) + (io * 78))] = (((ii + (io * 6)) < 37) ? A[(C_apack_k + (TG_MIN((ii + (io * 6)), 36) * 13))] : 0.0f);
      }
    }
  }
  for (int64_t jo = 0; jo < 4; ++jo) {
    for (int64_t C_bpack_k = 0; C_bpack_k < 13; ++C_bpack_k) {
      #pragma omp simd
      for (int64_t ji = 0; ji < 8; ++ji) {
        C_bpack[(((C_bpack_k * 8) + ji) + (jo * 104))] = (((ji + (jo * 8)) < 29) ? B[(C_bpack_k + (TG_MIN((ji + (jo * 8)), 28) * 13))] : 0.0f);
      }
    }
  }
  for (int64_t j_0 = 0; j_0 < 4; ++j_0) {
    for (int64_t i_0 = 0; i_0 < 1; ++i_0) {
      for (int64_t i_1_0 = 0; i_1_0 < 7; ++i_1_0) {
        float C_padded[48] __attribute__((aligned(64)));
        #pragma GCC unroll 6
        for (int64_t i = 0; i < 6; ++i) {
          #pragma omp simd
          for (int64_t j = 0; j < 8; ++j) {
            C_padded[((i * 8) + j)] = 0.0f;
          }
        }
        for (int64_t k = 0; k < 13; ++k) {
          #pragma GCC unroll 6
          for (int64_t i = 0; i < 6; ++i) {
            #pragma omp simd
            for (int64_t j = 0; j < 8; ++j) {
              C_padded[((i * 8) + j)] = (C_padded[((i * 8) + j)] + (C_apack[(((i + (i_0 * 546)) + (i_1_0 * 78)) + (k * 6))] * C_bpack[((j + (j_0 * 104)) + (k * 8))]));
            }
          }
        }
        for (int64_t i_1_1 = 0; i_1_1 < 6; ++i_1_1) {
          if (((((i_0 * 42) + (i_1_0 * 6)) + i_1_1) < 37)) {
            #pragma omp simd
            for (int64_t j_1 = 0; j_1 < 8; ++j_1) {
              if ((((j_0 * 8) + j_1) < 29)) {
                C[(((((i_0 * 1218) + (i_1_0 * 174)) + (i_1_1 * 29)) + (j_0 * 8)) + j_1)] = C_padded[((i_1_1 * 8) + j_1)];
              }
            }
          }
        }
      }
    }
  }
  free(C_bpack);
  free(C_apack);
}
