void gather_axis0_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  int64_t* restrict idx = (int64_t*)args[1];
  float* restrict Y = (float*)args[2];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 4; ++i0) {
      #pragma omp simd
      for (int64_t i1 = 0; i1 < 5; ++i1) {
        Y[((i0 * 5) + i1)] = X[((TG_MIN(TG_MAX(((idx[i0] < 0) ? (idx[i0] + 7) : idx[i0]), 0), 6) * 5) + i1)];
      }
    }
  }
  tg_barrier(tg);
}
void gather_axis0(void** args) {
  TG_TEAM_ALONE gather_axis0_team(args, tg); TG_TEAM_ALONE_END
}
