void slice_steps(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  for (int64_t i0 = 0; i0 < 4; ++i0) {
    #pragma omp simd
    for (int64_t i1 = 0; i1 < 3; ++i1) {
      Y[((i0 * 3) + i1)] = X[(((i0 * 20) + (i1 * 3)) + 12)];
    }
  }
}
