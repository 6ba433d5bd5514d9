void reduce_max_rows(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  for (int64_t i0 = 0; i0 < 10; ++i0) {
    Y[i0] = (-INFINITY);
    for (int64_t r1 = 0; r1 < 37; ++r1) {
      Y[i0] = TG_MAX(Y[i0], X[((i0 * 37) + r1)]);
    }
  }
}
