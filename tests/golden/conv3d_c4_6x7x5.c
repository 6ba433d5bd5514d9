void conv3d_c4_6x7x5_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  static __thread float* tg_kept_Y_pad;
  if (tg->tid == 0 && !tg_kept_Y_pad) tg_kept_Y_pad = (float*)tg_keep(64, 6272);
  float* restrict Y_pad = (float*)tg_broadcast(tg, tg_kept_Y_pad);
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 1; ++i0) {
      for (int64_t i1 = 0; i1 < 4; ++i1) {
        for (int64_t i2 = 0; i2 < 8; ++i2) {
          if (((0 <= (i2 - 1)) && ((i2 - 1) < 6))) {
            for (int64_t i3 = 0; i3 < 7; ++i3) {
              #pragma omp simd
              for (int64_t i4 = 0; i4 < 7; ++i4) {
                Y_pad[((i0 * 1568) + (i1 * 392) + (i2 * 49) + (i3 * 7) + i4)] = (((0 <= (i4 - 1)) && ((i4 - 1) < 5)) ? X[((((((i0 * 840) + (i1 * 210)) + (i2 * 35)) + (i3 * 5)) + i4) - 36)] : 0.0f);
              }
            }
          } else {
            for (int64_t i3 = 0; i3 < 7; ++i3) {
              #pragma omp simd
              for (int64_t i4 = 0; i4 < 7; ++i4) {
                Y_pad[((i0 * 1568) + (i1 * 392) + (i2 * 49) + (i3 * 7) + i4)] = (((((0 <= (i2 - 1)) && ((i2 - 1) < 6)) && (0 <= (i4 - 1))) && ((i4 - 1) < 5)) ? X[((((((i0 * 840) + (i1 * 210)) + (i2 * 35)) + (i3 * 5)) + i4) - 36)] : 0.0f);
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
  { int64_t n_c_0_d_h_fused_lo, n_c_0_d_h_fused_hi; tg_loop n_c_0_d_h_fused_loop; tg_loop_begin(tg, 30, &n_c_0_d_h_fused_loop);
    while (tg_next(tg, &n_c_0_d_h_fused_loop, &n_c_0_d_h_fused_lo, &n_c_0_d_h_fused_hi)) {
      for (int64_t n_c_0_d_h_fused = n_c_0_d_h_fused_lo; n_c_0_d_h_fused < n_c_0_d_h_fused_hi; ++n_c_0_d_h_fused) {
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_local[40] __attribute__((aligned(64)));
          for (int64_t n = 0; n < 1; ++n) {
            for (int64_t d = 0; d < 1; ++d) {
              for (int64_t h = 0; h < 1; ++h) {
                #pragma GCC unroll 8
                for (int64_t c = 0; c < 8; ++c) {
                  #pragma omp simd
                  for (int64_t w = 0; w < 5; ++w) {
                    Y_local[((n * 40) + (d * 5) + (h * 5) + (c * 5) + w)] = 0.0f;
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
                            Y_local[((n * 40) + (d * 5) + (h * 5) + (c * 5) + w)] = (Y_local[((n * 40) + (d * 5) + (h * 5) + (c * 5) + w)] + (Y_pad[(((n_c_0_d_h_fused % 5) * 7) + ((n_c_0_d_h_fused / 5) * 49) + (w_0 * 5) + (n * 1568) + (d * 49) + (h * 7) + (rc * 392) + (kd * 49) + (kh * 7) + kw + w)] * W[((rc * 27) + (kd * 9) + (kh * 3) + kw + (c * 108))]));
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
              Y[((n_c_0_d_h_fused * 5) + (w_0 * 5) + (c_1 * 150) + w_1)] = Y_local[((c_1 * 5) + w_1)];
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void conv3d_c4_6x7x5(void** args) {
  TG_TEAM_BEGIN conv3d_c4_6x7x5_team(args, tg); TG_TEAM_END
}
