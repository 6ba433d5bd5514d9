void transpose_3d_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 5; ++i0) {
      for (int64_t i1 = 0; i1 < 3; ++i1) {
        #pragma omp simd
        for (int64_t i2 = 0; i2 < 4; ++i2) {
          Y[((i0 * 12) + (i1 * 4) + i2)] = X[(i0 + (i1 * 20) + (i2 * 5))];
        }
      }
    }
  }
  tg_barrier(tg);
}
void transpose_3d(void** args) {
  TG_TEAM_ALONE transpose_3d_team(args, tg); TG_TEAM_ALONE_END
}
