void add_gelu_4x33_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict Y = (float*)args[2];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 4; ++i0) {
      for (int64_t i1_0 = 0; i1_0 < 3; ++i1_0) {
        if ((((i1_0 * 16) + 15) < 33)) {
          #pragma omp simd
          for (int64_t i1_1 = 0; i1_1 < 16; ++i1_1) {
            Y[((i0 * 33) + (i1_0 * 16) + i1_1)] = (((A[((i0 * 33) + (i1_0 * 16) + i1_1)] + B[((i1_0 * 16) + i1_1)]) * 0.5f) * (1.0f + tg_erff(((A[((i0 * 33) + (i1_0 * 16) + i1_1)] + B[((i1_0 * 16) + i1_1)]) * 0.7071067811865475f))));
          }
        } else {
          #pragma omp simd
          for (int64_t i1_1 = 0; i1_1 < 1; ++i1_1) {
            Y[((i0 * 33) + i1_1 + 32)] = (((A[((i0 * 33) + i1_1 + 32)] + B[(i1_1 + 32)]) * 0.5f) * (1.0f + tg_erff(((A[((i0 * 33) + i1_1 + 32)] + B[(i1_1 + 32)]) * 0.7071067811865475f))));
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void add_gelu_4x33(void** args) {
  TG_TEAM_ALONE add_gelu_4x33_team(args, tg); TG_TEAM_ALONE_END
}
