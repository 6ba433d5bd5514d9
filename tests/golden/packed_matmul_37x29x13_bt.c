void packed_matmul_37x29x13_bt_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict C = (float*)args[2];
  static __thread float* tg_kept_C_bpack;
  if (tg->tid == 0 && !tg_kept_C_bpack) tg_kept_C_bpack = (float*)tg_keep(64, 1664);
  float* restrict C_bpack = (float*)tg_broadcast(tg, tg_kept_C_bpack);
  if (tg->tid == 0) {
    for (int64_t jo = 0; jo < 4; ++jo) {
      if ((((jo * 8) + 7) < 29)) {
        for (int64_t kk = 0; kk < 13; ++kk) {
          #pragma omp simd
          for (int64_t ji = 0; ji < 8; ++ji) {
            C_bpack[((jo * 104) + (kk * 8) + ji)] = B[((jo * 104) + kk + (ji * 13))];
          }
        }
      } else {
        for (int64_t kk = 0; kk < 13; ++kk) {
          #pragma omp simd
          for (int64_t ji = 0; ji < 8; ++ji) {
            C_bpack[((jo * 104) + (kk * 8) + ji)] = TG_BLEND_F32(((ji + (jo * 8)) < 29), B[(kk + (TG_MIN((ji + (jo * 8)), 28) * 13))], 0.0f);
          }
        }
      }
    }
  }
  tg_barrier(tg);
  { int64_t j_0_i_0_fused_lo, j_0_i_0_fused_hi; tg_loop j_0_i_0_fused_loop; tg_loop_begin(tg, 4, &j_0_i_0_fused_loop);
    while (tg_next(tg, &j_0_i_0_fused_loop, &j_0_i_0_fused_lo, &j_0_i_0_fused_hi)) {
      for (int64_t j_0_i_0_fused = j_0_i_0_fused_lo; j_0_i_0_fused < j_0_i_0_fused_hi; ++j_0_i_0_fused) {
        for (int64_t i_1_0 = 0; i_1_0 < 7; ++i_1_0) {
          float C_padded[48] __attribute__((aligned(64)));
          #pragma GCC unroll 6
          for (int64_t i = 0; i < 6; ++i) {
            #pragma omp simd
            for (int64_t j = 0; j < 8; ++j) {
              C_padded[((i * 8) + j)] = 0.0f;
            }
          }
          for (int64_t k = 0; k < 13; ++k) {
            #pragma GCC unroll 6
            for (int64_t i = 0; i < 6; ++i) {
              #pragma omp simd
              for (int64_t j = 0; j < 8; ++j) {
                C_padded[((i * 8) + j)] = (C_padded[((i * 8) + j)] + (A[(k + (TG_MIN((i + (i_1_0 * 6)), 36) * 13))] * C_bpack[((j_0_i_0_fused * 104) + (k * 8) + j)]));
              }
            }
          }
          if ((((j_0_i_0_fused * 8) + 7) < 29)) {
            if ((((i_1_0 * 6) + 5) < 37)) {
              for (int64_t i_1_1 = 0; i_1_1 < 6; ++i_1_1) {
                #pragma omp simd
                for (int64_t j_1 = 0; j_1 < 8; ++j_1) {
                  C[((j_0_i_0_fused * 8) + (i_1_0 * 174) + (i_1_1 * 29) + j_1)] = C_padded[((i_1_1 * 8) + j_1)];
                }
              }
            } else {
              for (int64_t i_1_1 = 0; i_1_1 < 1; ++i_1_1) {
                #pragma omp simd
                for (int64_t j_1 = 0; j_1 < 8; ++j_1) {
                  C[((j_0_i_0_fused * 8) + (i_1_1 * 29) + j_1 + 1044)] = C_padded[((i_1_1 * 8) + j_1)];
                }
              }
            }
          } else {
            if ((((i_1_0 * 6) + 5) < 37)) {
              for (int64_t i_1_1 = 0; i_1_1 < 6; ++i_1_1) {
                #pragma omp simd
                for (int64_t j_1 = 0; j_1 < 5; ++j_1) {
                  C[((i_1_0 * 174) + (i_1_1 * 29) + j_1 + 24)] = C_padded[((i_1_1 * 8) + j_1)];
                }
              }
            } else {
              for (int64_t i_1_1 = 0; i_1_1 < 1; ++i_1_1) {
                #pragma omp simd
                for (int64_t j_1 = 0; j_1 < 5; ++j_1) {
                  C[((i_1_1 * 29) + j_1 + 1068)] = C_padded[((i_1_1 * 8) + j_1)];
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
void packed_matmul_37x29x13_bt(void** args) {
  TG_TEAM_BEGIN packed_matmul_37x29x13_bt_team(args, tg); TG_TEAM_END
}
