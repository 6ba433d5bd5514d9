void broadcast_where_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict Y = (float*)args[2];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 3; ++i0) {
      for (int64_t i1 = 0; i1 < 4; ++i1) {
        #pragma omp simd
        for (int64_t i2 = 0; i2 < 5; ++i2) {
          Y[((i0 * 20) + (i1 * 5) + i2)] = TG_BLEND_F32((A[((i0 * 5) + i2)] < B[i1]), A[((i0 * 5) + i2)], (1.0f / (1.0f + tg_expf(-B[i1]))));
        }
      }
    }
  }
  tg_barrier(tg);
}
void broadcast_where(void** args) {
  TG_TEAM_ALONE broadcast_where_team(args, tg); TG_TEAM_ALONE_END
}
