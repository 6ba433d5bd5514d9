void concat_axis1_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict Y = (float*)args[2];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 2; ++i0) {
      #pragma omp simd
      for (int64_t i1 = 0; i1 < 8; ++i1) {
        #pragma GCC unroll 4
        for (int64_t i2 = 0; i2 < 4; ++i2) {
          Y[((i0 * 32) + (i1 * 4) + i2)] = ((i1 < 3) ? A[((i0 * 12) + (i1 * 4) + i2)] : B[((((i0 * 20) + (i1 * 4)) + i2) - 12)]);
        }
      }
    }
  }
  tg_barrier(tg);
}
void concat_axis1(void** args) {
  TG_TEAM_ALONE concat_axis1_team(args, tg); TG_TEAM_ALONE_END
}
