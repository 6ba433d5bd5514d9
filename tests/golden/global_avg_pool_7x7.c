void global_avg_pool_7x7(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  float* restrict Y_sum = (float*)aligned_alloc(64, 64);
  for (int64_t Y_sum_i0 = 0; Y_sum_i0 < 2; ++Y_sum_i0) {
    for (int64_t Y_sum_i1 = 0; Y_sum_i1 < 5; ++Y_sum_i1) {
      for (int64_t Y_sum_i2 = 0; Y_sum_i2 < 1; ++Y_sum_i2) {
        for (int64_t Y_sum_i3 = 0; Y_sum_i3 < 1; ++Y_sum_i3) {
          Y_sum[((((Y_sum_i0 * 5) + Y_sum_i1) + Y_sum_i2) + Y_sum_i3)] = 0.0f;
          for (int64_t r2 = 0; r2 < 7; ++r2) {
            for (int64_t r3 = 0; r3 < 7; ++r3) {
              Y_sum[((((Y_sum_i0 * 5) + Y_sum_i1) + Y_sum_i2) + Y_sum_i3)] = (Y_sum[((((Y_sum_i0 * 5) + Y_sum_i1) + Y_sum_i2) + Y_sum_i3)] + X[((((Y_sum_i0 * 245) + (Y_sum_i1 * 49)) + (r2 * 7)) + r3)]);
            }
          }
        }
      }
    }
  }
  for (int64_t i0 = 0; i0 < 2; ++i0) {
    for (int64_t i1 = 0; i1 < 5; ++i1) {
      for (int64_t i2 = 0; i2 < 1; ++i2) {
        for (int64_t i3 = 0; i3 < 1; ++i3) {
          Y[((((i0 * 5) + i1) + i2) + i3)] = (Y_sum[((((i0 * 5) + i1) + i2) + i3)] / 49.0f);
        }
      }
    }
  }
  free(Y_sum);
}
