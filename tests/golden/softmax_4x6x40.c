void softmax_4x6x40_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    for (int64_t i0_i1_fused = 0; i0_i1_fused < 24; ++i0_i1_fused) {
      float Y_max[1] __attribute__((aligned(64)));
      float Y_exp[40] __attribute__((aligned(64)));
      float Y_expsum[1] __attribute__((aligned(64)));
      for (int64_t Y_max_i0 = 0; Y_max_i0 < 1; ++Y_max_i0) {
        for (int64_t Y_max_i1 = 0; Y_max_i1 < 1; ++Y_max_i1) {
          Y_max[(Y_max_i0 + Y_max_i1)] = (-INFINITY);
          for (int64_t Y_max_r2 = 0; Y_max_r2 < 40; ++Y_max_r2) {
            Y_max[(Y_max_i0 + Y_max_i1)] = TG_MAX(Y_max[(Y_max_i0 + Y_max_i1)], X[((i0_i1_fused * 40) + (Y_max_i0 * 240) + (Y_max_i1 * 40) + Y_max_r2)]);
          }
        }
      }
      for (int64_t Y_exp_i0 = 0; Y_exp_i0 < 1; ++Y_exp_i0) {
        for (int64_t Y_exp_i1 = 0; Y_exp_i1 < 1; ++Y_exp_i1) {
          #pragma omp simd
          for (int64_t Y_exp_i2 = 0; Y_exp_i2 < 40; ++Y_exp_i2) {
            Y_exp[((Y_exp_i0 * 40) + (Y_exp_i1 * 40) + Y_exp_i2)] = tg_expf((X[((i0_i1_fused * 40) + (Y_exp_i0 * 240) + (Y_exp_i1 * 40) + Y_exp_i2)] - Y_max[(Y_exp_i0 + Y_exp_i1)]));
          }
        }
      }
      for (int64_t i0 = 0; i0 < 1; ++i0) {
        for (int64_t i1 = 0; i1 < 1; ++i1) {
          Y_expsum[(i0 + i1)] = 0.0f;
          for (int64_t r2 = 0; r2 < 40; ++r2) {
            Y_expsum[(i0 + i1)] = (Y_expsum[(i0 + i1)] + Y_exp[((i0 * 40) + (i1 * 40) + r2)]);
          }
        }
      }
      #pragma omp simd
      for (int64_t i2 = 0; i2 < 40; ++i2) {
        Y[((i0_i1_fused * 40) + i2)] = (Y_exp[i2] * (1.0f / Y_expsum[0]));
      }
    }
  }
  tg_barrier(tg);
}
void softmax_4x6x40(void** args) {
  TG_TEAM_ALONE softmax_4x6x40_team(args, tg); TG_TEAM_ALONE_END
}
