void pad_constant_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 6; ++i0) {
      if (((0 <= (i0 - 1)) && ((i0 - 1) < 3))) {
        #pragma omp simd
        for (int64_t i1 = 0; i1 < 8; ++i1) {
          Y[((i0 * 8) + i1)] = ((i1 < 5) ? X[(((i0 * 5) + i1) - 5)] : 0.5f);
        }
      } else {
        #pragma omp simd
        for (int64_t i1 = 0; i1 < 8; ++i1) {
          Y[((i0 * 8) + i1)] = ((((0 <= (i0 - 1)) && ((i0 - 1) < 3)) && (i1 < 5)) ? X[(((i0 * 5) + i1) - 5)] : 0.5f);
        }
      }
    }
  }
  tg_barrier(tg);
}
void pad_constant(void** args) {
  TG_TEAM_ALONE pad_constant_team(args, tg); TG_TEAM_ALONE_END
}
