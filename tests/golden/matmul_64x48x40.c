void matmul_64x48x40(void** args) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict C = (float*)args[2];
  #pragma omp parallel for
  for (int64_t i_0_j_0_fused = 0; i_0_j_0_fused < 3; ++i_0_j_0_fused) {
    for (int64_t i_1_0 = 0; i_1_0 < 16; ++i_1_0) {
      float C_local[64] __attribute__((aligned(64)));
      #pragma GCC unroll 4
      for (int64_t i = 0; i < 4; ++i) {
        #pragma omp simd
        for (int64_t j = 0; j < 16; ++j) {
          if ((((i_0_j_0_fused * 16) + j) < 40)) {
            C_local[((i * 16) + j)] = 0.0f;
          }
        }
      }
      for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
        for (int64_t k_1 = 0; k_1 < 48; ++k_1) {
          #pragma GCC unroll 4
          for (int64_t i = 0; i < 4; ++i) {
            #pragma omp simd
            for (int64_t j = 0; j < 16; ++j) {
              if ((((i_0_j_0_fused * 16) + j) < 40)) {
                C_local[((i * 16) + j)] = (C_local[((i * 16) + j)] + (A[((((i * 48) + (i_1_0 * 192)) + (k_0 * 48)) + k_1)] * B[((((i_0_j_0_fused * 16) + j) + (k_0 * 1920)) + (k_1 * 40))]));
              }
            }
          }
        }
      }
      for (int64_t i_1_1 = 0; i_1_1 < 4; ++i_1_1) {
        #pragma omp simd
        for (int64_t j_1 = 0; j_1 < 16; ++j_1) {
          if ((((i_0_j_0_fused * 16) + j_1) < 40)) {
            C[((((i_0_j_0_fused * 16) + (i_1_0 * 160)) + (i_1_1 * 40)) + j_1)] = C_local[((i_1_1 * 16) + j_1)];
          }
        }
      }
    }
  }
}
