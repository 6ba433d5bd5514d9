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
void conv3d_c4_6x7x5(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  float* restrict Y_pad = (float*)aligned_alloc(64, 6272);
  for (int64_t i0 = 0; i0 < 1; ++i0) {
    for (int64_t i1 = 0; i1 < 4; ++i1) {
      for (int64_t i2 = 0; i2 < 8; ++i2) {
        for (int64_t i3 = 0; i3 < 7; ++i3) {
          #pragma omp simd
          for (int64_t i4 = 0; i4 < 7; ++i4) {
            Y_pad[(((((i0 * 1568) + (i1 * 392)) + (i2 * 49)) + (i3 * 7)) + i4)] = (((((0 <= (i2 - 1)) && ((i2 - 1) < 6)) && (0 <= (i4 - 1))) && ((i4 - 1) < 5)) ? X[((((((i0 * 840) + (i1 * 210)) + (i2 * 35)) + (i3 * 5)) + i4) - 36)] : 0.0f);
          }
        }
      }
    }
  }
  for (int64_t n = 0; n < 1; ++n) {
    for (int64_t c_0 = 0; c_0 < 1; ++c_0) {
      for (int64_t d = 0; d < 6; ++d) {
        for (int64_t h = 0; h < 5; ++h) {
          for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
            float Y_local[40] __attribute__((aligned(64)));
            for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
              for (int64_t Y_local_d = 0; Y_local_d < 1; ++Y_local_d) {
                for (int64_t Y_local_h = 0; Y_local_h < 1; ++Y_local_h) {
                  #pragma GCC unroll 8
                  for (int64_t c = 0; c < 8; ++c) {
                    #pragma omp simd
                    for (int64_t w = 0; w < 5; ++w) {
                      Y_local[(((((Y_local_d * 5) + (Y_local_h * 5)) + (Y_local_n * 40)) + (c * 5)) + w)] = 0.0f;
                    }
                  }
                  for (int64_t rc = 0; rc < 4; ++rc) {
                    for (int64_t kd = 0; kd < 3; ++kd) {
                      for (int64_t kh = 0; kh < 3; ++kh) {
                        for (int64_t kw = 0; kw < 3; ++kw) {
                          #pragma GCC unroll 8
                          for (int64_t c = 0; c < 8; ++c) {
                            #pragma omp simd
                            for (int64_t w = 0; w < 5; ++w) {
                              Y_local[(((((Y_local_d * 5) + (Y_local_h * 5)) + (Y_local_n * 40)) + (c * 5)) + w)] = (Y_local[(((((Y_local_d * 5) + (Y_local_h * 5)) + (Y_local_n * 40)) + (c * 5)) + w)] + (Y_pad[((((((((((((Y_local_d * 49) + (Y_local_h * 7)) + (Y_local_n * 1568)) + (d * 49)) + (h * 7)) + (kd * 49)) + (kh * 7)) + kw) + (n * 1568)) + (rc * 392)) + w) + (w_0 * 5))] * W[((((((c * 108) + (c_0 * 864)) + (kd * 9)) + (kh * 3)) + kw) + (rc * 27))]));
                            }
                          }
                        }
                      }
                    }
                  }
                }
              }
            }
            for (int64_t c_1 = 0; c_1 < 8; ++c_1) {
              #pragma omp simd
              for (int64_t w_1 = 0; w_1 < 5; ++w_1) {
                Y[(((((((c_0 * 1200) + (c_1 * 150)) + (d * 25)) + (h * 5)) + (n * 1200)) + (w_0 * 5)) + w_1)] = Y_local[((c_1 * 5) + w_1)];
              }
            }
          }
        }
      }
    }
  }
  free(Y_pad);
}
