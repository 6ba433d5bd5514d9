void reshape_4x6x5_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 8; ++i0) {
      #pragma omp simd
      for (int64_t i1 = 0; i1 < 15; ++i1) {
        Y[((i0 * 15) + i1)] = X[((i0 * 15) + i1)];
      }
    }
  }
  tg_barrier(tg);
}
void reshape_4x6x5(void** args) {
  TG_TEAM_ALONE reshape_4x6x5_team(args, tg); TG_TEAM_ALONE_END
}
