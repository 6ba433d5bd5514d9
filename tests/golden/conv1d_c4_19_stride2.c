void conv1d_c4_19_stride2_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  if (tg->tid == 0) {
    static __thread float* tg_kept_Y_pad;
    if (!tg_kept_Y_pad) tg_kept_Y_pad = (float*)tg_keep(64, 384);
    float* restrict Y_pad = tg_kept_Y_pad;
    for (int64_t i0 = 0; i0 < 1; ++i0) {
      for (int64_t i1 = 0; i1 < 4; ++i1) {
        for (int64_t i2_0 = 0; i2_0 < 2; ++i2_0) {
          if ((((i2_0 * 16) + 15) < 21)) {
            #pragma omp simd
            for (int64_t i2_1 = 0; i2_1 < 16; ++i2_1) {
              Y_pad[((i0 * 84) + (i1 * 21) + (i2_0 * 16) + i2_1)] = ((0 <= (((i2_0 * 16) + i2_1) - 1)) ? X[(((((i0 * 76) + (i1 * 19)) + (i2_0 * 16)) + i2_1) - 1)] : 0.0f);
            }
          } else {
            #pragma omp simd
            for (int64_t i2_1 = 0; i2_1 < 5; ++i2_1) {
              Y_pad[((i0 * 84) + (i1 * 21) + i2_1 + 16)] = (((i2_1 + 15) < 19) ? X[((i0 * 76) + (i1 * 19) + i2_1 + 15)] : 0.0f);
            }
          }
        }
      }
    }
    for (int64_t n = 0; n < 1; ++n) {
      for (int64_t c_0 = 0; c_0 < 1; ++c_0) {
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_local[80] __attribute__((aligned(64)));
          for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
            #pragma GCC unroll 8
            for (int64_t c = 0; c < 8; ++c) {
              #pragma omp simd
              for (int64_t w = 0; w < 10; ++w) {
                Y_local[((Y_local_n * 80) + (c * 10) + w)] = 0.0f;
              }
            }
            for (int64_t rc = 0; rc < 4; ++rc) {
              for (int64_t kw = 0; kw < 3; ++kw) {
                #pragma GCC unroll 8
                for (int64_t c = 0; c < 8; ++c) {
                  #pragma omp simd
                  for (int64_t w = 0; w < 10; ++w) {
                    Y_local[((Y_local_n * 80) + (c * 10) + w)] = (Y_local[((Y_local_n * 80) + (c * 10) + w)] + (Y_pad[((n * 84) + (w_0 * 20) + (Y_local_n * 84) + (rc * 21) + kw + (w * 2))] * W[((c_0 * 96) + (rc * 3) + kw + (c * 12))]));
                  }
                }
              }
            }
          }
          for (int64_t c_1 = 0; c_1 < 8; ++c_1) {
            #pragma omp simd
            for (int64_t w_1 = 0; w_1 < 10; ++w_1) {
              Y[((n * 80) + (c_0 * 80) + (w_0 * 10) + (c_1 * 10) + w_1)] = Y_local[((c_1 * 10) + w_1)];
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void conv1d_c4_19_stride2(void** args) {
  TG_TEAM_ALONE conv1d_c4_19_stride2_team(args, tg); TG_TEAM_ALONE_END
}
