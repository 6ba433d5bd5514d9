void avg_pool2d_ceil_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t n = 0; n < 1; ++n) {
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t h = 0; h < 6; ++h) {
          if (((0 <= ((h * 2) - 1)) && (((h * 2) + 1) < 11))) {
            for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
              float Y_sum[7] __attribute__((aligned(64)));
              for (int64_t Y_sum_n = 0; Y_sum_n < 1; ++Y_sum_n) {
                for (int64_t Y_sum_c = 0; Y_sum_c < 1; ++Y_sum_c) {
                  for (int64_t Y_sum_h = 0; Y_sum_h < 1; ++Y_sum_h) {
                    #pragma omp simd
                    for (int64_t w = 0; w < 7; ++w) {
                      Y_sum[((Y_sum_n * 7) + (Y_sum_c * 7) + (Y_sum_h * 7) + w)] = 0.0f;
                    }
                    #pragma GCC unroll 3
                    for (int64_t kh = 0; kh < 3; ++kh) {
                      #pragma GCC unroll 3
                      for (int64_t kw = 0; kw < 3; ++kw) {
                        #pragma omp simd
                        for (int64_t w = 0; w < 7; ++w) {
                          Y_sum[((Y_sum_n * 7) + (Y_sum_c * 7) + (Y_sum_h * 7) + w)] = (Y_sum[((Y_sum_n * 7) + (Y_sum_c * 7) + (Y_sum_h * 7) + w)] + (((0 <= (((kw + (w * 2)) + (w_0 * 14)) - 1)) && ((((kw + (w * 2)) + (w_0 * 14)) - 1) < 12)) ? X[(((((((((((Y_sum_c * 132) + (Y_sum_h * 24)) + (Y_sum_n * 396)) + (c * 132)) + (h * 24)) + (kh * 12)) + kw) + (n * 396)) + (w * 2)) + (w_0 * 14)) - 13)] : 0.0f));
                        }
                      }
                    }
                  }
                }
              }
              #pragma omp simd
              for (int64_t w_1 = 0; w_1 < 7; ++w_1) {
                Y[((n * 126) + (c * 42) + (h * 7) + (w_0 * 7) + w_1)] = (Y_sum[w_1] / ((float)((TG_MIN(2, (((w_0 * -14) - (w_1 * 2)) + 13)) * 3) + 3)));
              }
            }
          } else {
            for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
              float Y_sum[7] __attribute__((aligned(64)));
              for (int64_t Y_sum_n = 0; Y_sum_n < 1; ++Y_sum_n) {
                for (int64_t Y_sum_c = 0; Y_sum_c < 1; ++Y_sum_c) {
                  for (int64_t Y_sum_h = 0; Y_sum_h < 1; ++Y_sum_h) {
                    #pragma omp simd
                    for (int64_t w = 0; w < 7; ++w) {
                      Y_sum[((Y_sum_n * 7) + (Y_sum_c * 7) + (Y_sum_h * 7) + w)] = 0.0f;
                    }
                    #pragma GCC unroll 3
                    for (int64_t kh = 0; kh < 3; ++kh) {
                      #pragma GCC unroll 3
                      for (int64_t kw = 0; kw < 3; ++kw) {
                        #pragma omp simd
                        for (int64_t w = 0; w < 7; ++w) {
                          Y_sum[((Y_sum_n * 7) + (Y_sum_c * 7) + (Y_sum_h * 7) + w)] = (Y_sum[((Y_sum_n * 7) + (Y_sum_c * 7) + (Y_sum_h * 7) + w)] + (((((0 <= ((((Y_sum_h * 2) + (h * 2)) + kh) - 1)) && (((((Y_sum_h * 2) + (h * 2)) + kh) - 1) < 11)) && (0 <= (((kw + (w * 2)) + (w_0 * 14)) - 1))) && ((((kw + (w * 2)) + (w_0 * 14)) - 1) < 12)) ? X[(((((((((((Y_sum_c * 132) + (Y_sum_h * 24)) + (Y_sum_n * 396)) + (c * 132)) + (h * 24)) + (kh * 12)) + kw) + (n * 396)) + (w * 2)) + (w_0 * 14)) - 13)] : 0.0f));
                        }
                      }
                    }
                  }
                }
              }
              #pragma omp simd
              for (int64_t w_1 = 0; w_1 < 7; ++w_1) {
                Y[((n * 126) + (c * 42) + (h * 7) + (w_0 * 7) + w_1)] = (Y_sum[w_1] / ((float)((TG_MIN(2, (((w_0 * -14) - (w_1 * 2)) + 13)) * 3) + 3)));
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void avg_pool2d_ceil(void** args) {
  TG_TEAM_ALONE avg_pool2d_ceil_team(args, tg); TG_TEAM_ALONE_END
}
