void slice_steps_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 4; ++i0) {
      #pragma omp simd
      for (int64_t i1 = 0; i1 < 3; ++i1) {
        Y[((i0 * 3) + i1)] = X[((i0 * 20) + (i1 * 3) + 12)];
      }
    }
  }
  tg_barrier(tg);
}
void slice_steps(void** args) {
  TG_TEAM_ALONE slice_steps_team(args, tg); TG_TEAM_ALONE_END
}
