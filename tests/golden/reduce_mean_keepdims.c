void reduce_mean_keepdims(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  float* restrict Y_sum = (float*)aligned_alloc(64, 64);
  for (int64_t Y_sum_i0 = 0; Y_sum_i0 < 1; ++Y_sum_i0) {
    for (int64_t Y_sum_i1 = 0; Y_sum_i1 < 7; ++Y_sum_i1) {
      for (int64_t Y_sum_i2 = 0; Y_sum_i2 < 1; ++Y_sum_i2) {
        Y_sum[(((Y_sum_i0 * 7) + Y_sum_i1) + Y_sum_i2)] = 0.0f;
        for (int64_t r0 = 0; r0 < 6; ++r0) {
          for (int64_t r2 = 0; r2 < 9; ++r2) {
            Y_sum[(((Y_sum_i0 * 7) + Y_sum_i1) + Y_sum_i2)] = (Y_sum[(((Y_sum_i0 * 7) + Y_sum_i1) + Y_sum_i2)] + X[(((Y_sum_i1 * 9) + (r0 * 63)) + r2)]);
          }
        }
      }
    }
  }
  for (int64_t i0 = 0; i0 < 1; ++i0) {
    for (int64_t i1 = 0; i1 < 7; ++i1) {
      for (int64_t i2 = 0; i2 < 1; ++i2) {
        Y[(((i0 * 7) + i1) + i2)] = (Y_sum[(((i0 * 7) + i1) + i2)] / 54.0f);
      }
    }
  }
  free(Y_sum);
}
