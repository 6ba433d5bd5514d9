void conv2d_transpose_stride2_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  { int64_t n_c_h_fused_lo, n_c_h_fused_hi; tg_loop n_c_h_fused_loop; tg_loop_begin(tg, 36, &n_c_h_fused_loop);
    while (tg_next(tg, &n_c_h_fused_loop, &n_c_h_fused_lo, &n_c_h_fused_hi)) {
      for (int64_t n_c_h_fused = n_c_h_fused_lo; n_c_h_fused < n_c_h_fused_hi; ++n_c_h_fused) {
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_local[14] __attribute__((aligned(64)));
          for (int64_t n = 0; n < 1; ++n) {
            for (int64_t c = 0; c < 1; ++c) {
              for (int64_t h = 0; h < 1; ++h) {
                #pragma omp simd
                for (int64_t w = 0; w < 14; ++w) {
                  Y_local[((n * 14) + (c * 14) + (h * 14) + w)] = 0.0f;
                }
                #pragma GCC unroll 4
                for (int64_t rc = 0; rc < 4; ++rc) {
                  #pragma GCC unroll 3
                  for (int64_t kh = 0; kh < 3; ++kh) {
                    #pragma GCC unroll 3
                    for (int64_t kw = 0; kw < 3; ++kw) {
                      #pragma omp simd
                      for (int64_t w = 0; w < 14; ++w) {
                        Y_local[((n * 14) + (c * 14) + (h * 14) + w)] = (Y_local[((n * 14) + (c * 14) + (h * 14) + w)] + (((((tg_floormod((((h + (n_c_h_fused % 12)) - kh) + 1), 2) == 0) && (tg_floormod(((w - kw) + 1), 2) == 0)) && ((((0 <= tg_floordiv((((h + (n_c_h_fused % 12)) - kh) + 1), 2)) && (tg_floordiv((((h + (n_c_h_fused % 12)) - kh) + 1), 2) < 6)) && (0 <= ((w_0 * 7) + tg_floordiv(((w - kw) + 1), 2)))) && (((w_0 * 7) + tg_floordiv(((w - kw) + 1), 2)) < 7))) ? X[((w_0 * 7) + (n * 168) + (rc * 42) + (tg_floordiv((((h + (n_c_h_fused % 12)) - kh) + 1), 2) * 7) + tg_floordiv(((w - kw) + 1), 2))] : 0.0f) * W[(((n_c_h_fused / 12) * 9) + (c * 9) + (rc * 27) + (kh * 3) + kw)]));
                      }
                    }
                  }
                }
              }
            }
          }
          #pragma omp simd
          for (int64_t w_1 = 0; w_1 < 14; ++w_1) {
            Y[((n_c_h_fused * 14) + (w_0 * 14) + w_1)] = Y_local[w_1];
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void conv2d_transpose_stride2(void** args) {
  TG_TEAM_BEGIN conv2d_transpose_stride2_team(args, tg); TG_TEAM_END
}
