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
void depthwise_conv2d_c8_stride2(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  for (int64_t n = 0; n < 1; ++n) {
    for (int64_t c = 0; c < 8; ++c) {
      for (int64_t h = 0; h < 7; ++h) {
        float Y_pad[51] __attribute__((aligned(64)));
        for (int64_t i0 = 0; i0 < 1; ++i0) {
          for (int64_t i1 = 0; i1 < 1; ++i1) {
            for (int64_t i2 = 0; i2 < 3; ++i2) {
              #pragma omp simd
              for (int64_t i3 = 0; i3 < 17; ++i3) {
                Y_pad[((((i0 * 51) + (i1 * 51)) + (i2 * 17)) + i3)] = (((((0 <= (((h * 2) + i2) - 1)) && ((((h * 2) + i2) - 1) < 13)) && (0 <= (i3 - 1))) && ((i3 - 1) < 15)) ? X[((((((((c * 195) + (h * 30)) + (i0 * 1560)) + (i1 * 195)) + (i2 * 15)) + i3) + (n * 1560)) - 16)] : 0.0f);
              }
            }
          }
        }
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_local[8] __attribute__((aligned(64)));
          for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
            for (int64_t Y_local_c = 0; Y_local_c < 1; ++Y_local_c) {
              for (int64_t Y_local_h = 0; Y_local_h < 1; ++Y_local_h) {
                #pragma omp simd
                for (int64_t w = 0; w < 8; ++w) {
                  Y_local[((((Y_local_c * 8) + (Y_local_h * 8)) + (Y_local_n * 8)) + w)] = 0.0f;
                }
                for (int64_t kh = 0; kh < 3; ++kh) {
                  for (int64_t kw = 0; kw < 3; ++kw) {
                    #pragma omp simd
                    for (int64_t w = 0; w < 8; ++w) {
                      Y_local[((((Y_local_c * 8) + (Y_local_h * 8)) + (Y_local_n * 8)) + w)] = (Y_local[((((Y_local_c * 8) + (Y_local_h * 8)) + (Y_local_n * 8)) + w)] + (Y_pad[(((((((Y_local_c * 51) + (Y_local_h * 34)) + (Y_local_n * 51)) + (kh * 17)) + kw) + (w * 2)) + (w_0 * 16))] * W[((((Y_local_c * 9) + (c * 9)) + (kh * 3)) + kw)]));
                    }
                  }
                }
              }
            }
          }
          #pragma omp simd
          for (int64_t w_1 = 0; w_1 < 8; ++w_1) {
            Y[(((((c * 56) + (h * 8)) + (n * 448)) + (w_0 * 8)) + w_1)] = Y_local[w_1];
          }
        }
      }
    }
  }
}
