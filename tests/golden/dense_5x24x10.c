void dense_5x24x10(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict bias = (float*)args[2];
  float* restrict Y = (float*)args[3];
  float* restrict Y_matmul = (float*)aligned_alloc(64, 256);
  for (int64_t i_0 = 0; i_0 < 1; ++i_0) {
    for (int64_t j_0 = 0; j_0 < 1; ++j_0) {
      for (int64_t i_1_0 = 0; i_1_0 < 2; ++i_1_0) {
        float Y_matmul_local[40] __attribute__((aligned(64)));
        #pragma GCC unroll 4
        for (int64_t i = 0; i < 4; ++i) {
          #pragma omp simd
          for (int64_t j = 0; j < 10; ++j) {
            if ((((i + (i_0 * 5)) + (i_1_0 * 4)) < 5)) {
              Y_matmul_local[((i * 10) + j)] = 0.0f;
            }
          }
        }
        for (int64_t k_0 = 0; k_0 < 1; ++k_0) {
          for (int64_t k_1 = 0; k_1 < 24; ++k_1) {
            #pragma GCC unroll 4
            for (int64_t i = 0; i < 4; ++i) {
              if ((((i + (i_0 * 5)) + (i_1_0 * 4)) < 5)) {
                #pragma omp simd
                for (int64_t j = 0; j < 10; ++j) {
                  Y_matmul_local[((i * 10) + j)] = (Y_matmul_local[((i * 10) + j)] + (X[(((((i * 24) + (i_0 * 120)) + (i_1_0 * 96)) + (k_0 * 24)) + k_1)] * W[((((j * 24) + (j_0 * 240)) + (k_0 * 24)) + k_1)]));
                }
              }
            }
          }
        }
        for (int64_t i_1_1 = 0; i_1_1 < 4; ++i_1_1) {
          if (((((i_1_0 * 4) + i_1_1) < 5) && ((((i_0 * 5) + (i_1_0 * 4)) + i_1_1) < 5))) {
            #pragma omp simd
            for (int64_t j_1 = 0; j_1 < 10; ++j_1) {
              Y_matmul[(((((i_0 * 50) + (i_1_0 * 40)) + (i_1_1 * 10)) + (j_0 * 10)) + j_1)] = Y_matmul_local[((i_1_1 * 10) + j_1)];
            }
          }
        }
      }
    }
  }
  for (int64_t i0 = 0; i0 < 5; ++i0) {
    #pragma omp simd
    for (int64_t i1 = 0; i1 < 10; ++i1) {
      Y[((i0 * 10) + i1)] = (Y_matmul[((i0 * 10) + i1)] + bias[i1]);
    }
  }
  free(Y_matmul);
}
