void dense_5x24x10_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict bias = (float*)args[2];
  float* restrict Y = (float*)args[3];
  if (tg->tid == 0) {
    for (int64_t i0_0 = 0; i0_0 < 1; ++i0_0) {
      for (int64_t i1_0 = 0; i1_0 < 1; ++i1_0) {
        for (int64_t i0_1_0 = 0; i0_1_0 < 2; ++i0_1_0) {
          float Y_matmul[40] __attribute__((aligned(64)));
          if (((((i0_0 * 5) + (i0_1_0 * 4)) + 3) < 5)) {
            #pragma GCC unroll 4
            for (int64_t i = 0; i < 4; ++i) {
              #pragma omp simd
              for (int64_t j = 0; j < 10; ++j) {
                Y_matmul[((i * 10) + j)] = 0.0f;
              }
            }
          } else {
            #pragma GCC unroll 8
            for (int64_t i = 0; i < (((i0_0 * -5) - (i0_1_0 * 4)) + 5); ++i) {
              #pragma omp simd
              for (int64_t j = 0; j < 10; ++j) {
                Y_matmul[((i * 10) + j)] = 0.0f;
              }
            }
          }
          if (((((i0_0 * 5) + (i0_1_0 * 4)) + 3) < 5)) {
            for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
              for (int64_t k_1 = 0; k_1 < 24; ++k_1) {
                #pragma GCC unroll 4
                for (int64_t i = 0; i < 4; ++i) {
                  #pragma omp simd
                  for (int64_t j = 0; j < 10; ++j) {
                    Y_matmul[((i * 10) + j)] = (Y_matmul[((i * 10) + j)] + (X[((i0_0 * 120) + (i0_1_0 * 96) + (k_0 * 24) + k_1 + (i * 24))] * W[((i1_0 * 240) + (k_0 * 24) + k_1 + (j * 24))]));
                  }
                }
              }
            }
          } else {
            for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
              for (int64_t k_1 = 0; k_1 < 24; ++k_1) {
                #pragma GCC unroll 8
                for (int64_t i = 0; i < (((i0_0 * -5) - (i0_1_0 * 4)) + 5); ++i) {
                  #pragma omp simd
                  for (int64_t j = 0; j < 10; ++j) {
                    Y_matmul[((i * 10) + j)] = (Y_matmul[((i * 10) + j)] + (X[((i0_0 * 120) + (i0_1_0 * 96) + (k_0 * 24) + k_1 + (i * 24))] * W[((i1_0 * 240) + (k_0 * 24) + k_1 + (j * 24))]));
                  }
                }
              }
            }
          }
          if (((((i0_1_0 * 4) + 3) < 5) && ((((i0_0 * 5) + (i0_1_0 * 4)) + 3) < 5))) {
            for (int64_t i0_1_1 = 0; i0_1_1 < 4; ++i0_1_1) {
              #pragma omp simd
              for (int64_t i1_1 = 0; i1_1 < 10; ++i1_1) {
                Y[((i0_0 * 50) + (i1_0 * 10) + (i0_1_0 * 40) + (i0_1_1 * 10) + i1_1)] = (Y_matmul[((i0_1_1 * 10) + i1_1)] + bias[((i1_0 * 10) + i1_1)]);
              }
            }
          } else {
            for (int64_t i0_1_1 = 0; i0_1_1 < TG_MIN(TG_MIN(4, ((i0_1_0 * -4) + 5)), (((i0_0 * -5) - (i0_1_0 * 4)) + 5)); ++i0_1_1) {
              #pragma omp simd
              for (int64_t i1_1 = 0; i1_1 < 10; ++i1_1) {
                Y[((i0_0 * 50) + (i1_0 * 10) + (i0_1_0 * 40) + (i0_1_1 * 10) + i1_1)] = (Y_matmul[((i0_1_1 * 10) + i1_1)] + bias[((i1_0 * 10) + i1_1)]);
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void dense_5x24x10(void** args) {
  TG_TEAM_ALONE dense_5x24x10_team(args, tg); TG_TEAM_ALONE_END
}
