void reduce_mean_keepdims_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0_i1_fused = 0; i0_i1_fused < 7; ++i0_i1_fused) {
      float Y_sum[1] __attribute__((aligned(64)));
      for (int64_t i0 = 0; i0 < 1; ++i0) {
        for (int64_t i1 = 0; i1 < 1; ++i1) {
          for (int64_t Y_sum_i2 = 0; Y_sum_i2 < 1; ++Y_sum_i2) {
            Y_sum[(i0 + i1 + Y_sum_i2)] = 0.0f;
            for (int64_t r0 = 0; r0 < 6; ++r0) {
              for (int64_t r2 = 0; r2 < 9; ++r2) {
                Y_sum[(i0 + i1 + Y_sum_i2)] = (Y_sum[(i0 + i1 + Y_sum_i2)] + X[((i0_i1_fused * 9) + (i1 * 9) + (r0 * 63) + r2)]);
              }
            }
          }
        }
      }
      #pragma omp simd
      for (int64_t i2 = 0; i2 < 1; ++i2) {
        Y[(i0_i1_fused + i2)] = tg_div_by(Y_sum[i2], 54.0f);
      }
    }
  }
  tg_barrier(tg);
}
void reduce_mean_keepdims(void** args) {
  TG_TEAM_ALONE reduce_mean_keepdims_team(args, tg); TG_TEAM_ALONE_END
}
