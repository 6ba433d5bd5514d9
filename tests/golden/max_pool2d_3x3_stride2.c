void max_pool2d_3x3_stride2_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t n = 0; n < 1; ++n) {
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t h = 0; h < 6; ++h) {
          if (((0 <= ((h * 2) - 1)) && (((h * 2) + 1) < 11))) {
            for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
              float Y_local[6] __attribute__((aligned(64)));
              for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
                for (int64_t Y_local_c = 0; Y_local_c < 1; ++Y_local_c) {
                  for (int64_t Y_local_h = 0; Y_local_h < 1; ++Y_local_h) {
                    #pragma omp simd
                    for (int64_t w = 0; w < 6; ++w) {
                      Y_local[((Y_local_n * 6) + (Y_local_c * 6) + (Y_local_h * 6) + w)] = (-INFINITY);
                    }
                    #pragma GCC unroll 3
                    for (int64_t kh = 0; kh < 3; ++kh) {
                      #pragma GCC unroll 3
                      for (int64_t kw = 0; kw < 3; ++kw) {
                        #pragma omp simd
                        for (int64_t w = 0; w < 6; ++w) {
                          Y_local[((Y_local_n * 6) + (Y_local_c * 6) + (Y_local_h * 6) + w)] = TG_MAX(Y_local[((Y_local_n * 6) + (Y_local_c * 6) + (Y_local_h * 6) + w)], ((0 <= (((kw + (w * 2)) + (w_0 * 12)) - 1)) ? X[(((((((((((Y_local_c * 132) + (Y_local_h * 24)) + (Y_local_n * 396)) + (c * 132)) + (h * 24)) + (kh * 12)) + kw) + (n * 396)) + (w * 2)) + (w_0 * 12)) - 13)] : (-INFINITY)));
                        }
                      }
                    }
                  }
                }
              }
              #pragma omp simd
              for (int64_t w_1 = 0; w_1 < 6; ++w_1) {
                Y[((n * 108) + (c * 36) + (h * 6) + (w_0 * 6) + w_1)] = Y_local[w_1];
              }
            }
          } else {
            for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
              float Y_local[6] __attribute__((aligned(64)));
              for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
                for (int64_t Y_local_c = 0; Y_local_c < 1; ++Y_local_c) {
                  for (int64_t Y_local_h = 0; Y_local_h < 1; ++Y_local_h) {
                    #pragma omp simd
                    for (int64_t w = 0; w < 6; ++w) {
                      Y_local[((Y_local_n * 6) + (Y_local_c * 6) + (Y_local_h * 6) + w)] = (-INFINITY);
                    }
                    #pragma GCC unroll 3
                    for (int64_t kh = 0; kh < 3; ++kh) {
                      #pragma GCC unroll 3
                      for (int64_t kw = 0; kw < 3; ++kw) {
                        #pragma omp simd
                        for (int64_t w = 0; w < 6; ++w) {
                          Y_local[((Y_local_n * 6) + (Y_local_c * 6) + (Y_local_h * 6) + w)] = TG_MAX(Y_local[((Y_local_n * 6) + (Y_local_c * 6) + (Y_local_h * 6) + w)], ((((0 <= ((((Y_local_h * 2) + (h * 2)) + kh) - 1)) && (((((Y_local_h * 2) + (h * 2)) + kh) - 1) < 11)) && (0 <= (((kw + (w * 2)) + (w_0 * 12)) - 1))) ? X[(((((((((((Y_local_c * 132) + (Y_local_h * 24)) + (Y_local_n * 396)) + (c * 132)) + (h * 24)) + (kh * 12)) + kw) + (n * 396)) + (w * 2)) + (w_0 * 12)) - 13)] : (-INFINITY)));
                        }
                      }
                    }
                  }
                }
              }
              #pragma omp simd
              for (int64_t w_1 = 0; w_1 < 6; ++w_1) {
                Y[((n * 108) + (c * 36) + (h * 6) + (w_0 * 6) + w_1)] = Y_local[w_1];
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void max_pool2d_3x3_stride2(void** args) {
  TG_TEAM_ALONE max_pool2d_3x3_stride2_team(args, tg); TG_TEAM_ALONE_END
}
