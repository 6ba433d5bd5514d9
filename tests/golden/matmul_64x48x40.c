void matmul_64x48x40_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict C = (float*)args[2];
  { int64_t i_0_j_0_fused_lo, i_0_j_0_fused_hi; tg_loop i_0_j_0_fused_loop; tg_loop_begin(tg, 2, &i_0_j_0_fused_loop);
    while (tg_next(tg, &i_0_j_0_fused_loop, &i_0_j_0_fused_lo, &i_0_j_0_fused_hi)) {
      for (int64_t i_0_j_0_fused = i_0_j_0_fused_lo; i_0_j_0_fused < i_0_j_0_fused_hi; ++i_0_j_0_fused) {
        if ((((i_0_j_0_fused * 32) + 31) < 40)) {
          for (int64_t i_1_0 = 0; i_1_0 < 16; ++i_1_0) {
            float C_local[128] __attribute__((aligned(64)));
            #pragma GCC unroll 4
            for (int64_t i = 0; i < 4; ++i) {
              #pragma omp simd
              for (int64_t j = 0; j < 32; ++j) {
                C_local[((i * 32) + j)] = 0.0f;
              }
            }
            for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
              for (int64_t k_1 = 0; k_1 < 48; ++k_1) {
                #pragma GCC unroll 4
                for (int64_t i = 0; i < 4; ++i) {
                  #pragma omp simd
                  for (int64_t j = 0; j < 32; ++j) {
                    C_local[((i * 32) + j)] = (C_local[((i * 32) + j)] + (A[((i_1_0 * 192) + (k_0 * 48) + k_1 + (i * 48))] * B[((i_0_j_0_fused * 32) + (k_0 * 1920) + (k_1 * 40) + j)]));
                  }
                }
              }
            }
            for (int64_t i_1_1 = 0; i_1_1 < 4; ++i_1_1) {
              #pragma omp simd
              for (int64_t j_1 = 0; j_1 < 32; ++j_1) {
                C[((i_0_j_0_fused * 32) + (i_1_0 * 160) + (i_1_1 * 40) + j_1)] = C_local[((i_1_1 * 32) + j_1)];
              }
            }
          }
        } else {
          for (int64_t i_1_0 = 0; i_1_0 < 16; ++i_1_0) {
            float C_local[128] __attribute__((aligned(64)));
            #pragma GCC unroll 4
            for (int64_t i = 0; i < 4; ++i) {
              #pragma omp simd
              for (int64_t j = 0; j < 8; ++j) {
                C_local[((i * 32) + j)] = 0.0f;
              }
            }
            for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
              for (int64_t k_1 = 0; k_1 < 48; ++k_1) {
                #pragma GCC unroll 4
                for (int64_t i = 0; i < 4; ++i) {
                  #pragma omp simd
                  for (int64_t j = 0; j < 8; ++j) {
                    C_local[((i * 32) + j)] = (C_local[((i * 32) + j)] + (A[((i_1_0 * 192) + (k_0 * 48) + k_1 + (i * 48))] * B[((k_0 * 1920) + (k_1 * 40) + j + 32)]));
                  }
                }
              }
            }
            for (int64_t i_1_1 = 0; i_1_1 < 4; ++i_1_1) {
              #pragma omp simd
              for (int64_t j_1 = 0; j_1 < 8; ++j_1) {
                C[((i_1_0 * 160) + (i_1_1 * 40) + j_1 + 32)] = C_local[((i_1_1 * 32) + j_1)];
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void matmul_64x48x40(void** args) {
  TG_TEAM_BEGIN matmul_64x48x40_team(args, tg); TG_TEAM_END
}
