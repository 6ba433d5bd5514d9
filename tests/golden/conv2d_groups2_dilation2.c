void conv2d_groups2_dilation2_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  { int64_t n_c_h_fused_lo, n_c_h_fused_hi; tg_loop n_c_h_fused_loop; tg_loop_begin(tg, 112, &n_c_h_fused_loop);
    while (tg_next(tg, &n_c_h_fused_loop, &n_c_h_fused_lo, &n_c_h_fused_hi)) {
      for (int64_t n_c_h_fused = n_c_h_fused_lo; n_c_h_fused < n_c_h_fused_hi; ++n_c_h_fused) {
        if (((0 <= ((n_c_h_fused % 14) - 2)) && (((n_c_h_fused % 14) + 2) < 14))) {
          float Y_pad[180] __attribute__((aligned(64)));
          for (int64_t i0 = 0; i0 < 1; ++i0) {
            for (int64_t i1 = 0; i1 < 2; ++i1) {
              for (int64_t i2 = 0; i2 < 5; ++i2) {
                #pragma omp simd
                for (int64_t i3 = 0; i3 < 18; ++i3) {
                  Y_pad[((i0 * 180) + (i1 * 90) + (i2 * 18) + i3)] = (((0 <= (i3 - 2)) && ((i3 - 2) < 14)) ? X[(((((((i0 * 784) + (i1 * 196)) + (i2 * 14)) + i3) + ((n_c_h_fused % 14) * 14)) + ((n_c_h_fused / 56) * 392)) - 30)] : 0.0f);
                }
              }
            }
          }
          for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
            float Y_local[14] __attribute__((aligned(64)));
            for (int64_t n = 0; n < 1; ++n) {
              for (int64_t c = 0; c < 1; ++c) {
                for (int64_t h = 0; h < 1; ++h) {
                  #pragma omp simd
                  for (int64_t w = 0; w < 14; ++w) {
                    Y_local[((n * 14) + (c * 14) + (h * 14) + w)] = 0.0f;
                  }
                  #pragma GCC unroll 2
                  for (int64_t rc = 0; rc < 2; ++rc) {
                    #pragma GCC unroll 3
                    for (int64_t kh = 0; kh < 3; ++kh) {
                      #pragma GCC unroll 3
                      for (int64_t kw = 0; kw < 3; ++kw) {
                        #pragma omp simd
                        for (int64_t w = 0; w < 14; ++w) {
                          Y_local[((n * 14) + (c * 14) + (h * 14) + w)] = (Y_local[((n * 14) + (c * 14) + (h * 14) + w)] + (Y_pad[(((((((((h * 18) + (kh * 36)) + (kw * 2)) + (n * 180)) + (rc * 90)) + w) + (w_0 * 14)) + (((c + (n_c_h_fused / 14)) / 4) * 180)) - ((n_c_h_fused / 56) * 180))] * W[(((n_c_h_fused / 14) * 18) + (c * 18) + (rc * 9) + (kh * 3) + kw)]));
                        }
                      }
                    }
                  }
                }
              }
            }
            #pragma omp simd
            for (int64_t w_1 = 0; w_1 < 14; ++w_1) {
              Y[((n_c_h_fused * 14) + (w_0 * 14) + w_1)] = Y_local[w_1];
            }
          }
        } else {
          float Y_pad[180] __attribute__((aligned(64)));
          for (int64_t i0 = 0; i0 < 1; ++i0) {
            for (int64_t i1 = 0; i1 < 2; ++i1) {
              for (int64_t i2 = 0; i2 < 5; ++i2) {
                #pragma omp simd
                for (int64_t i3 = 0; i3 < 18; ++i3) {
                  Y_pad[((i0 * 180) + (i1 * 90) + (i2 * 18) + i3)] = (((((0 <= ((i2 + (n_c_h_fused % 14)) - 2)) && (((i2 + (n_c_h_fused % 14)) - 2) < 14)) && (0 <= (i3 - 2))) && ((i3 - 2) < 14)) ? X[(((((((i0 * 784) + (i1 * 196)) + (i2 * 14)) + i3) + ((n_c_h_fused % 14) * 14)) + ((n_c_h_fused / 56) * 392)) - 30)] : 0.0f);
                }
              }
            }
          }
          for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
            float Y_local[14] __attribute__((aligned(64)));
            for (int64_t n = 0; n < 1; ++n) {
              for (int64_t c = 0; c < 1; ++c) {
                for (int64_t h = 0; h < 1; ++h) {
                  #pragma omp simd
                  for (int64_t w = 0; w < 14; ++w) {
                    Y_local[((n * 14) + (c * 14) + (h * 14) + w)] = 0.0f;
                  }
                  #pragma GCC unroll 2
                  for (int64_t rc = 0; rc < 2; ++rc) {
                    #pragma GCC unroll 3
                    for (int64_t kh = 0; kh < 3; ++kh) {
                      #pragma GCC unroll 3
                      for (int64_t kw = 0; kw < 3; ++kw) {
                        #pragma omp simd
                        for (int64_t w = 0; w < 14; ++w) {
                          Y_local[((n * 14) + (c * 14) + (h * 14) + w)] = (Y_local[((n * 14) + (c * 14) + (h * 14) + w)] + (Y_pad[(((((((((h * 18) + (kh * 36)) + (kw * 2)) + (n * 180)) + (rc * 90)) + w) + (w_0 * 14)) + (((c + (n_c_h_fused / 14)) / 4) * 180)) - ((n_c_h_fused / 56) * 180))] * W[(((n_c_h_fused / 14) * 18) + (c * 18) + (rc * 9) + (kh * 3) + kw)]));
                        }
                      }
                    }
                  }
                }
              }
            }
            #pragma omp simd
            for (int64_t w_1 = 0; w_1 < 14; ++w_1) {
              Y[((n_c_h_fused * 14) + (w_0 * 14) + w_1)] = Y_local[w_1];
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void conv2d_groups2_dilation2(void** args) {
  TG_TEAM_BEGIN conv2d_groups2_dilation2_team(args, tg); TG_TEAM_END
}
