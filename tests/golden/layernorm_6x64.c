void layernorm_6x64_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict G = (float*)args[1];
  float* restrict Bt = (float*)args[2];
  float* restrict Y = (float*)args[3];
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 6; ++i0) {
      float Y_mean_rf[16] __attribute__((aligned(64)));
      float Y_mean[1] __attribute__((aligned(64)));
      float Y_var_rf[16] __attribute__((aligned(64)));
      float Y_var[1] __attribute__((aligned(64)));
      for (int64_t Y_mean_rf_i0 = 0; Y_mean_rf_i0 < 1; ++Y_mean_rf_i0) {
        #pragma omp simd
        for (int64_t Y_mean_rf_r1_1 = 0; Y_mean_rf_r1_1 < 16; ++Y_mean_rf_r1_1) {
          Y_mean_rf[(Y_mean_rf_i0 + Y_mean_rf_r1_1)] = 0.0f;
        }
        for (int64_t Y_mean_rf_r1_0 = 0; Y_mean_rf_r1_0 < 4; ++Y_mean_rf_r1_0) {
          #pragma omp simd
          for (int64_t Y_mean_rf_r1_1 = 0; Y_mean_rf_r1_1 < 16; ++Y_mean_rf_r1_1) {
            Y_mean_rf[(Y_mean_rf_i0 + Y_mean_rf_r1_1)] = (Y_mean_rf[(Y_mean_rf_i0 + Y_mean_rf_r1_1)] + (X[((i0 * 64) + (Y_mean_rf_i0 * 64) + (Y_mean_rf_r1_0 * 16) + Y_mean_rf_r1_1)] / 64.0f));
          }
        }
      }
      for (int64_t Y_mean_i0 = 0; Y_mean_i0 < 1; ++Y_mean_i0) {
        Y_mean[Y_mean_i0] = 0.0f;
        for (int64_t Y_mean_r1_1 = 0; Y_mean_r1_1 < 16; ++Y_mean_r1_1) {
          Y_mean[Y_mean_i0] = (Y_mean[Y_mean_i0] + Y_mean_rf[(Y_mean_i0 + Y_mean_r1_1)]);
        }
      }
      for (int64_t Y_var_rf_i0 = 0; Y_var_rf_i0 < 1; ++Y_var_rf_i0) {
        #pragma omp simd
        for (int64_t Y_var_rf_r1_1 = 0; Y_var_rf_r1_1 < 16; ++Y_var_rf_r1_1) {
          Y_var_rf[(Y_var_rf_i0 + Y_var_rf_r1_1)] = 0.0f;
        }
        for (int64_t r1_0 = 0; r1_0 < 4; ++r1_0) {
          #pragma omp simd
          for (int64_t Y_var_rf_r1_1 = 0; Y_var_rf_r1_1 < 16; ++Y_var_rf_r1_1) {
            Y_var_rf[(Y_var_rf_i0 + Y_var_rf_r1_1)] = (Y_var_rf[(Y_var_rf_i0 + Y_var_rf_r1_1)] + (((X[((i0 * 64) + (Y_var_rf_i0 * 64) + (r1_0 * 16) + Y_var_rf_r1_1)] - Y_mean[Y_var_rf_i0]) * (X[((i0 * 64) + (Y_var_rf_i0 * 64) + (r1_0 * 16) + Y_var_rf_r1_1)] - Y_mean[Y_var_rf_i0])) / 64.0f));
          }
        }
      }
      for (int64_t Y_var_i0 = 0; Y_var_i0 < 1; ++Y_var_i0) {
        Y_var[Y_var_i0] = 0.0f;
        for (int64_t r1_1 = 0; r1_1 < 16; ++r1_1) {
          Y_var[Y_var_i0] = (Y_var[Y_var_i0] + Y_var_rf[(Y_var_i0 + r1_1)]);
        }
      }
      #pragma omp simd
      for (int64_t i1 = 0; i1 < 64; ++i1) {
        Y[((i0 * 64) + i1)] = ((((X[((i0 * 64) + i1)] - Y_mean[0]) * (1.0f / sqrtf((Y_var[0] + 1e-05f)))) * G[i1]) + Bt[i1]);
      }
    }
  }
  tg_barrier(tg);
}
void layernorm_6x64(void** args) {
  TG_TEAM_ALONE layernorm_6x64_team(args, tg); TG_TEAM_ALONE_END
}
