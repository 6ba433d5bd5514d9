void packed_conv2d_o11_block8_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  { int64_t b_c_0_h_fused_lo, b_c_0_h_fused_hi; tg_loop b_c_0_h_fused_loop; tg_loop_begin(tg, 9, &b_c_0_h_fused_loop);
    while (tg_next(tg, &b_c_0_h_fused_loop, &b_c_0_h_fused_lo, &b_c_0_h_fused_hi)) {
      for (int64_t b_c_0_h_fused = b_c_0_h_fused_lo; b_c_0_h_fused < b_c_0_h_fused_hi; ++b_c_0_h_fused) {
        if (((0 <= (b_c_0_h_fused - 1)) && ((b_c_0_h_fused + 1) < 9))) {
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
                    #pragma GCC unroll 3
                    for (int64_t rx = 0; rx < 3; ++rx) {
                      #pragma GCC unroll 5
                      for (int64_t w = 0; w < 5; ++w) {
                        #pragma GCC unroll 2
                        for (int64_t co = 0; co < 2; ++co) {
                          if ((((co * 8) + 7) < 11)) {
                            #pragma omp simd
                            for (int64_t cb = 0; cb < 8; ++cb) {
                              Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] = (Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] + (((0 <= (((rx + (w * 2)) + (w_0 * 10)) - 1)) ? X[(((((((((b * 450) + (b_c_0_h_fused * 10)) + (h * 10)) + (rc * 90)) + rx) + (ry * 10)) + (w * 2)) + (w_0 * 10)) - 11)] : 0.0f) * W[((rc * 9) + (ry * 3) + rx + (co * 360) + (cb * 45))]));
                            }
                          } else {
                            #pragma omp simd
                            for (int64_t cb = 0; cb < 8; ++cb) {
                              Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] = (Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] + (((0 <= (((rx + (w * 2)) + (w_0 * 10)) - 1)) ? X[(((((((((b * 450) + (b_c_0_h_fused * 10)) + (h * 10)) + (rc * 90)) + rx) + (ry * 10)) + (w * 2)) + (w_0 * 10)) - 11)] : 0.0f) * TG_BLEND_F32(((cb + (co * 8)) < 11), W[((rc * 9) + (ry * 3) + rx + (TG_MIN((cb + (co * 8)), 10) * 45))], 0.0f)));
                            }
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
        } else {
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
                    #pragma GCC unroll 3
                    for (int64_t rx = 0; rx < 3; ++rx) {
                      #pragma GCC unroll 5
                      for (int64_t w = 0; w < 5; ++w) {
                        #pragma GCC unroll 2
                        for (int64_t co = 0; co < 2; ++co) {
                          if ((((co * 8) + 7) < 11)) {
                            #pragma omp simd
                            for (int64_t cb = 0; cb < 8; ++cb) {
                              Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] = (Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] + (((((0 <= (((b_c_0_h_fused + h) + ry) - 1)) && ((((b_c_0_h_fused + h) + ry) - 1) < 9)) && (0 <= (((rx + (w * 2)) + (w_0 * 10)) - 1))) ? X[(((((((((b * 450) + (b_c_0_h_fused * 10)) + (h * 10)) + (rc * 90)) + rx) + (ry * 10)) + (w * 2)) + (w_0 * 10)) - 11)] : 0.0f) * W[((rc * 9) + (ry * 3) + rx + (co * 360) + (cb * 45))]));
                            }
                          } else {
                            #pragma omp simd
                            for (int64_t cb = 0; cb < 8; ++cb) {
                              Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] = (Y_blocked[((b * 80) + (h * 40) + (w * 8) + (co * 40) + cb)] + (((((0 <= (((b_c_0_h_fused + h) + ry) - 1)) && ((((b_c_0_h_fused + h) + ry) - 1) < 9)) && (0 <= (((rx + (w * 2)) + (w_0 * 10)) - 1))) ? X[(((((((((b * 450) + (b_c_0_h_fused * 10)) + (h * 10)) + (rc * 90)) + rx) + (ry * 10)) + (w * 2)) + (w_0 * 10)) - 11)] : 0.0f) * TG_BLEND_F32(((cb + (co * 8)) < 11), W[((rc * 9) + (ry * 3) + rx + (TG_MIN((cb + (co * 8)), 10) * 45))], 0.0f)));
                            }
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
  }
  tg_barrier(tg);
}
void packed_conv2d_o11_block8(void** args) {
  TG_TEAM_BEGIN packed_conv2d_o11_block8_team(args, tg); TG_TEAM_END
}
