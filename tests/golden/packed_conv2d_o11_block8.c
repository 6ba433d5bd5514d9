void packed_conv2d_o11_block8_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  static __thread float* tg_kept_Y_pad;
  if (tg->tid == 0 && !tg_kept_Y_pad) tg_kept_Y_pad = (float*)tg_keep(64, 2688);
  float* restrict Y_pad = (float*)tg_broadcast(tg, tg_kept_Y_pad);
  static __thread float* tg_kept_Y_wpack;
  if (tg->tid == 0 && !tg_kept_Y_wpack) tg_kept_Y_wpack = (float*)tg_keep(64, 2880);
  float* restrict Y_wpack = (float*)tg_broadcast(tg, tg_kept_Y_wpack);
  if (tg->tid == 0) {
    for (int64_t i0 = 0; i0 < 1; ++i0) {
      for (int64_t i1 = 0; i1 < 5; ++i1) {
        for (int64_t i2 = 0; i2 < 11; ++i2) {
          if (((0 <= (i2 - 1)) && ((i2 - 1) < 9))) {
            #pragma omp simd
            for (int64_t i3 = 0; i3 < 12; ++i3) {
              Y_pad[((i0 * 660) + (i1 * 132) + (i2 * 12) + i3)] = (((0 <= (i3 - 1)) && ((i3 - 1) < 10)) ? X[(((((i0 * 450) + (i1 * 90)) + (i2 * 10)) + i3) - 11)] : 0.0f);
            }
          } else {
            #pragma omp simd
            for (int64_t i3 = 0; i3 < 12; ++i3) {
              Y_pad[((i0 * 660) + (i1 * 132) + (i2 * 12) + i3)] = (((((0 <= (i2 - 1)) && ((i2 - 1) < 9)) && (0 <= (i3 - 1))) && ((i3 - 1) < 10)) ? X[(((((i0 * 450) + (i1 * 90)) + (i2 * 10)) + i3) - 11)] : 0.0f);
            }
          }
        }
      }
    }
    for (int64_t Y_wpack_co = 0; Y_wpack_co < 2; ++Y_wpack_co) {
      if ((((Y_wpack_co * 8) + 7) < 11)) {
        for (int64_t c = 0; c < 5; ++c) {
          for (int64_t y = 0; y < 3; ++y) {
            for (int64_t z = 0; z < 3; ++z) {
              #pragma omp simd
              for (int64_t Y_wpack_cb = 0; Y_wpack_cb < 8; ++Y_wpack_cb) {
                Y_wpack[((Y_wpack_co * 360) + (c * 72) + (y * 24) + (z * 8) + Y_wpack_cb)] = W[((c * 9) + (y * 3) + z + (TG_MIN((Y_wpack_cb + (Y_wpack_co * 8)), 10) * 45))];
              }
            }
          }
        }
      } else {
        for (int64_t c = 0; c < 5; ++c) {
          for (int64_t y = 0; y < 3; ++y) {
            for (int64_t z = 0; z < 3; ++z) {
              #pragma omp simd
              for (int64_t Y_wpack_cb = 0; Y_wpack_cb < 8; ++Y_wpack_cb) {
                Y_wpack[((Y_wpack_co * 360) + (c * 72) + (y * 24) + (z * 8) + Y_wpack_cb)] = TG_BLEND_F32(((Y_wpack_cb + (Y_wpack_co * 8)) < 11), W[((c * 9) + (y * 3) + z + (TG_MIN((Y_wpack_cb + (Y_wpack_co * 8)), 10) * 45))], 0.0f);
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
  { int64_t b_c_0_h_fused_lo, b_c_0_h_fused_hi; tg_loop b_c_0_h_fused_loop; tg_loop_begin(tg, 9, &b_c_0_h_fused_loop);
    while (tg_next(tg, &b_c_0_h_fused_loop, &b_c_0_h_fused_lo, &b_c_0_h_fused_hi)) {
      for (int64_t b_c_0_h_fused = b_c_0_h_fused_lo; b_c_0_h_fused < b_c_0_h_fused_hi; ++b_c_0_h_fused) {
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_blocked[80] __attribute__((aligned(64)));
          for (int64_t b = 0; b < 1; ++b) {
            for (int64_t h = 0; h < 1; ++h) {
              #pragma GCC unroll 5
              for (int64_t w = 0; w < 5; ++w) {
                #pragma GCC unroll 2
                for (int64_t co = 0; co < 2; ++co) {
                  #pragma omp simd
                  for (int64_t cb = 0; cb < 8; ++cb) {
                    Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] = 0.0f;
                  }
                }
              }
              for (int64_t rc = 0; rc < 5; ++rc) {
                for (int64_t ry = 0; ry < 3; ++ry) {
                  for (int64_t rx = 0; rx < 3; ++rx) {
                    #pragma GCC unroll 5
                    for (int64_t w = 0; w < 5; ++w) {
                      #pragma GCC unroll 2
                      for (int64_t co = 0; co < 2; ++co) {
                        #pragma omp simd
                        for (int64_t cb = 0; cb < 8; ++cb) {
                          Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] = (Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] + (Y_pad[((b_c_0_h_fused * 12) + (w_0 * 10) + (b * 660) + (h * 12) + (rc * 132) + (ry * 12) + rx + (w * 2))] * Y_wpack[((rc * 72) + (ry * 24) + (rx * 8) + (co * 360) + cb)]));
                        }
                      }
                    }
                  }
                }
              }
            }
          }
          for (int64_t c_1_0 = 0; c_1_0 < 2; ++c_1_0) {
            if ((((c_1_0 * 8) + 7) < 11)) {
              for (int64_t c_1_1 = 0; c_1_1 < 8; ++c_1_1) {
                for (int64_t w_1 = 0; w_1 < 5; ++w_1) {
                  Y[((b_c_0_h_fused * 5) + (w_0 * 5) + (c_1_0 * 360) + (c_1_1 * 45) + w_1)] = Y_blocked[((c_1_0 * 40) + c_1_1 + (w_1 * 8))];
                }
              }
            } else {
              for (int64_t c_1_1 = 0; c_1_1 < 3; ++c_1_1) {
                for (int64_t w_1 = 0; w_1 < 5; ++w_1) {
                  Y[((b_c_0_h_fused * 5) + (w_0 * 5) + (c_1_1 * 45) + w_1 + 360)] = Y_blocked[(c_1_1 + (w_1 * 8) + 40)];
                }
              }
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void packed_conv2d_o11_block8(void** args) {
  TG_TEAM_BEGIN packed_conv2d_o11_block8_team(args, tg); TG_TEAM_END
}
