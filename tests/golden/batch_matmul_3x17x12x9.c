void batch_matmul_3x17x12x9_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict C = (float*)args[2];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 3; ++i0) {
      for (int64_t i1_0 = 0; i1_0 < 1; ++i1_0) {
        for (int64_t i2_0 = 0; i2_0 < 1; ++i2_0) {
          for (int64_t i1_1_0 = 0; i1_1_0 < 5; ++i1_1_0) {
            float C_local[36] __attribute__((aligned(64)));
            if (((((i1_0 * 17) + (i1_1_0 * 4)) + 3) < 17)) {
              for (int64_t C_local_i0 = 0; C_local_i0 < 1; ++C_local_i0) {
                #pragma GCC unroll 4
                for (int64_t i1 = 0; i1 < 4; ++i1) {
                  #pragma omp simd
                  for (int64_t i2 = 0; i2 < 9; ++i2) {
                    C_local[((C_local_i0 * 36) + (i1 * 9) + i2)] = 0.0f;
                  }
                }
                for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
                  for (int64_t k_1 = 0; k_1 < 12; ++k_1) {
                    #pragma GCC unroll 4
                    for (int64_t i1 = 0; i1 < 4; ++i1) {
                      #pragma omp simd
                      for (int64_t i2 = 0; i2 < 9; ++i2) {
                        C_local[((C_local_i0 * 36) + (i1 * 9) + i2)] = (C_local[((C_local_i0 * 36) + (i1 * 9) + i2)] + (A[((i0 * 204) + (i1_0 * 204) + (i1_1_0 * 48) + (C_local_i0 * 204) + (k_0 * 12) + k_1 + (i1 * 12))] * B[((i0 * 108) + (i2_0 * 9) + (C_local_i0 * 108) + (k_0 * 108) + (k_1 * 9) + i2)]));
                      }
                    }
                  }
                }
              }
            } else {
              for (int64_t C_local_i0 = 0; C_local_i0 < 1; ++C_local_i0) {
                #pragma GCC unroll 8
                for (int64_t i1 = 0; i1 < (((i1_0 * -17) - (i1_1_0 * 4)) + 17); ++i1) {
                  #pragma omp simd
                  for (int64_t i2 = 0; i2 < 9; ++i2) {
                    C_local[((C_local_i0 * 36) + (i1 * 9) + i2)] = 0.0f;
                  }
                }
                for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
                  for (int64_t k_1 = 0; k_1 < 12; ++k_1) {
                    #pragma GCC unroll 8
                    for (int64_t i1 = 0; i1 < (((i1_0 * -17) - (i1_1_0 * 4)) + 17); ++i1) {
                      #pragma omp simd
                      for (int64_t i2 = 0; i2 < 9; ++i2) {
                        C_local[((C_local_i0 * 36) + (i1 * 9) + i2)] = (C_local[((C_local_i0 * 36) + (i1 * 9) + i2)] + (A[((i0 * 204) + (i1_0 * 204) + (i1_1_0 * 48) + (C_local_i0 * 204) + (k_0 * 12) + k_1 + (i1 * 12))] * B[((i0 * 108) + (i2_0 * 9) + (C_local_i0 * 108) + (k_0 * 108) + (k_1 * 9) + i2)]));
                      }
                    }
                  }
                }
              }
            }
            if (((((i1_1_0 * 4) + 3) < 17) && ((((i1_0 * 17) + (i1_1_0 * 4)) + 3) < 17))) {
              for (int64_t i1_1_1 = 0; i1_1_1 < 4; ++i1_1_1) {
                #pragma omp simd
                for (int64_t i2_1 = 0; i2_1 < 9; ++i2_1) {
                  C[((i0 * 153) + (i1_0 * 153) + (i2_0 * 9) + (i1_1_0 * 36) + (i1_1_1 * 9) + i2_1)] = C_local[((i1_1_1 * 9) + i2_1)];
                }
              }
            } else {
              for (int64_t i1_1_1 = 0; i1_1_1 < TG_MIN(TG_MIN(4, ((i1_1_0 * -4) + 17)), (((i1_0 * -17) - (i1_1_0 * 4)) + 17)); ++i1_1_1) {
                #pragma omp simd
                for (int64_t i2_1 = 0; i2_1 < 9; ++i2_1) {
                  C[((i0 * 153) + (i1_0 * 153) + (i2_0 * 9) + (i1_1_0 * 36) + (i1_1_1 * 9) + i2_1)] = C_local[((i1_1_1 * 9) + i2_1)];
                }
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void batch_matmul_3x17x12x9(void** args) {
  TG_TEAM_ALONE batch_matmul_3x17x12x9_team(args, tg); TG_TEAM_ALONE_END
}
