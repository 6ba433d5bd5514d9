void reduce_max_rows_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 10; ++i0) {
      Y[i0] = (-INFINITY);
      for (int64_t r1 = 0; r1 < 37; ++r1) {
        Y[i0] = TG_MAX(Y[i0], X[((i0 * 37) + r1)]);
      }
    }
  }
  tg_barrier(tg);
}
void reduce_max_rows(void** args) {
  TG_TEAM_ALONE reduce_max_rows_team(args, tg); TG_TEAM_ALONE_END
}
