void log_softmax_axis0_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  if (tg->tid == 0) {
    static __thread float* tg_kept_Y_max;
    if (!tg_kept_Y_max) tg_kept_Y_max = (float*)tg_keep(64, 128);
    float* restrict Y_max = tg_kept_Y_max;
    static __thread float* tg_kept_Y_expsum;
    if (!tg_kept_Y_expsum) tg_kept_Y_expsum = (float*)tg_keep(64, 128);
    float* restrict Y_expsum = tg_kept_Y_expsum;
    for (int64_t Y_max_i0_0 = 0; Y_max_i0_0 < 2; ++Y_max_i0_0) {
      if ((((Y_max_i0_0 * 16) + 15) < 18)) {
        #pragma omp simd
        for (int64_t Y_max_i0_1 = 0; Y_max_i0_1 < 16; ++Y_max_i0_1) {
          Y_max[((Y_max_i0_0 * 16) + Y_max_i0_1)] = (-INFINITY);
        }
      } else {
        #pragma omp simd
        for (int64_t Y_max_i0_1 = 0; Y_max_i0_1 < 2; ++Y_max_i0_1) {
          Y_max[(Y_max_i0_1 + 16)] = (-INFINITY);
        }
      }
      if ((((Y_max_i0_0 * 16) + 15) < 18)) {
        for (int64_t Y_max_r0 = 0; Y_max_r0 < 5; ++Y_max_r0) {
          #pragma omp simd
          for (int64_t Y_max_i0_1 = 0; Y_max_i0_1 < 16; ++Y_max_i0_1) {
            Y_max[((Y_max_i0_0 * 16) + Y_max_i0_1)] = TG_MAX(Y_max[((Y_max_i0_0 * 16) + Y_max_i0_1)], X[((Y_max_i0_0 * 16) + (Y_max_r0 * 18) + Y_max_i0_1)]);
          }
        }
      } else {
        for (int64_t Y_max_r0 = 0; Y_max_r0 < 5; ++Y_max_r0) {
          #pragma omp simd
          for (int64_t Y_max_i0_1 = 0; Y_max_i0_1 < 2; ++Y_max_i0_1) {
            Y_max[(Y_max_i0_1 + 16)] = TG_MAX(Y_max[(Y_max_i0_1 + 16)], X[((Y_max_r0 * 18) + Y_max_i0_1 + 16)]);
          }
        }
      }
    }
    for (int64_t i0_0 = 0; i0_0 < 2; ++i0_0) {
      if ((((i0_0 * 16) + 15) < 18)) {
        #pragma omp simd
        for (int64_t i0_1 = 0; i0_1 < 16; ++i0_1) {
          Y_expsum[((i0_0 * 16) + i0_1)] = 0.0f;
        }
      } else {
        #pragma omp simd
        for (int64_t i0_1 = 0; i0_1 < 2; ++i0_1) {
          Y_expsum[(i0_1 + 16)] = 0.0f;
        }
      }
      if ((((i0_0 * 16) + 15) < 18)) {
        for (int64_t r0 = 0; r0 < 5; ++r0) {
          #pragma omp simd
          for (int64_t i0_1 = 0; i0_1 < 16; ++i0_1) {
            Y_expsum[((i0_0 * 16) + i0_1)] = (Y_expsum[((i0_0 * 16) + i0_1)] + tg_expf((X[((i0_0 * 16) + (r0 * 18) + i0_1)] - Y_max[((i0_0 * 16) + i0_1)])));
          }
        }
      } else {
        for (int64_t r0 = 0; r0 < 5; ++r0) {
          #pragma omp simd
          for (int64_t i0_1 = 0; i0_1 < 2; ++i0_1) {
            Y_expsum[(i0_1 + 16)] = (Y_expsum[(i0_1 + 16)] + tg_expf((X[((r0 * 18) + i0_1 + 16)] - Y_max[(i0_1 + 16)])));
          }
        }
      }
    }
    #pragma omp simd
    for (int64_t i0_i1_fused = 0; i0_i1_fused < 90; ++i0_i1_fused) {
      Y[i0_i1_fused] = ((X[i0_i1_fused] - Y_max[(i0_i1_fused % 18)]) - logf(Y_expsum[(i0_i1_fused % 18)]));
    }
  }
  tg_barrier(tg);
}
void log_softmax_axis0(void** args) {
  TG_TEAM_ALONE log_softmax_axis0_team(args, tg); TG_TEAM_ALONE_END
}
