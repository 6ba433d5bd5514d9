void global_avg_pool_7x7_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0_i1_i2_fused = 0; i0_i1_i2_fused < 10; ++i0_i1_i2_fused) {
      float Y_sum[1] __attribute__((aligned(64)));
      for (int64_t i0 = 0; i0 < 1; ++i0) {
        for (int64_t i1 = 0; i1 < 1; ++i1) {
          for (int64_t i2 = 0; i2 < 1; ++i2) {
            for (int64_t Y_sum_i3 = 0; Y_sum_i3 < 1; ++Y_sum_i3) {
              Y_sum[(i0 + i1 + i2 + Y_sum_i3)] = 0.0f;
              for (int64_t r2 = 0; r2 < 7; ++r2) {
                for (int64_t r3 = 0; r3 < 7; ++r3) {
                  Y_sum[(i0 + i1 + i2 + Y_sum_i3)] = (Y_sum[(i0 + i1 + i2 + Y_sum_i3)] + X[((i0_i1_i2_fused * 49) + (i0 * 245) + (i1 * 49) + (r2 * 7) + r3)]);
                }
              }
            }
          }
        }
      }
      #pragma omp simd
      for (int64_t i3 = 0; i3 < 1; ++i3) {
        Y[(i0_i1_i2_fused + i3)] = tg_div_by(Y_sum[i3], 49.0f);
      }
    }
  }
  tg_barrier(tg);
}
void global_avg_pool_7x7(void** args) {
  TG_TEAM_ALONE global_avg_pool_7x7_team(args, tg); TG_TEAM_ALONE_END
}
