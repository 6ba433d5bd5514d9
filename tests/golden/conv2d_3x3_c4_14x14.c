void conv2d_3x3_c4_14x14_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  static __thread float* tg_kept_Y_pad;
  if (tg->tid == 0 && !tg_kept_Y_pad) tg_kept_Y_pad = (float*)tg_keep(64, 4096);
  float* restrict Y_pad = (float*)tg_broadcast(tg, tg_kept_Y_pad);
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 1; ++i0) {
      for (int64_t i1 = 0; i1 < 4; ++i1) {
        for (int64_t i2 = 0; i2 < 16; ++i2) {
          if (((0 <= (i2 - 1)) && ((i2 - 1) < 14))) {
            #pragma omp simd
            for (int64_t i3 = 0; i3 < 16; ++i3) {
              Y_pad[((i0 * 1024) + (i1 * 256) + (i2 * 16) + i3)] = (((0 <= (i3 - 1)) && ((i3 - 1) < 14)) ? X[(((((i0 * 784) + (i1 * 196)) + (i2 * 14)) + i3) - 15)] : 0.0f);
            }
          } else {
            #pragma omp simd
            for (int64_t i3 = 0; i3 < 16; ++i3) {
              Y_pad[((i0 * 1024) + (i1 * 256) + (i2 * 16) + i3)] = (((((0 <= (i2 - 1)) && ((i2 - 1) < 14)) && (0 <= (i3 - 1))) && ((i3 - 1) < 14)) ? X[(((((i0 * 784) + (i1 * 196)) + (i2 * 14)) + i3) - 15)] : 0.0f);
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
  { int64_t n_c_0_h_fused_lo, n_c_0_h_fused_hi; tg_loop n_c_0_h_fused_loop; tg_loop_begin(tg, 14, &n_c_0_h_fused_loop);
    while (tg_next(tg, &n_c_0_h_fused_loop, &n_c_0_h_fused_lo, &n_c_0_h_fused_hi)) {
      for (int64_t n_c_0_h_fused = n_c_0_h_fused_lo; n_c_0_h_fused < n_c_0_h_fused_hi; ++n_c_0_h_fused) {
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_local[112] __attribute__((aligned(64)));
          for (int64_t n = 0; n < 1; ++n) {
            for (int64_t h = 0; h < 1; ++h) {
              #pragma GCC unroll 8
              for (int64_t c = 0; c < 8; ++c) {
                #pragma omp simd
                for (int64_t w = 0; w < 14; ++w) {
                  Y_local[((n * 112) + (h * 14) + (c * 14) + w)] = 0.0f;
                }
              }
              for (int64_t rc = 0; rc < 4; ++rc) {
                for (int64_t kh = 0; kh < 3; ++kh) {
                  for (int64_t kw = 0; kw < 3; ++kw) {
                    #pragma GCC unroll 8
                    for (int64_t c = 0; c < 8; ++c) {
                      #pragma omp simd
                      for (int64_t w = 0; w < 14; ++w) {
                        Y_local[((n * 112) + (h * 14) + (c * 14) + w)] = (Y_local[((n * 112) + (h * 14) + (c * 14) + w)] + (Y_pad[((n_c_0_h_fused * 16) + (w_0 * 14) + (n * 1024) + (h * 16) + (rc * 256) + (kh * 16) + kw + w)] * W[((rc * 9) + (kh * 3) + kw + (c * 36))]));
                      }
                    }
                  }
                }
              }
            }
          }
          for (int64_t c_1 = 0; c_1 < 8; ++c_1) {
            #pragma omp simd
            for (int64_t w_1 = 0; w_1 < 14; ++w_1) {
              Y[((n_c_0_h_fused * 14) + (w_0 * 14) + (c_1 * 196) + w_1)] = Y_local[((c_1 * 14) + w_1)];
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void conv2d_3x3_c4_14x14(void** args) {
  TG_TEAM_BEGIN conv2d_3x3_c4_14x14_team(args, tg); TG_TEAM_END
}
