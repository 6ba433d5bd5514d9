void depthwise_conv2d_c8_stride2_team(void** args, tg_team* tg) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  if (tg->tid == 0) {
    for (int64_t n = 0; n < 1; ++n) {
      for (int64_t c = 0; c < 8; ++c) {
        float Y_pad[255] __attribute__((aligned(64)));
        for (int64_t i0 = 0; i0 < 1; ++i0) {
          for (int64_t i1 = 0; i1 < 1; ++i1) {
            for (int64_t i2 = 0; i2 < 15; ++i2) {
              if (((0 <= (i2 - 1)) && ((i2 - 1) < 13))) {
                #pragma omp simd
                for (int64_t i3 = 0; i3 < 17; ++i3) {
                  Y_pad[((i0 * 255) + (i1 * 255) + (i2 * 17) + i3)] = (((0 <= (i3 - 1)) && ((i3 - 1) < 15)) ? X[(((((((c * 195) + (i0 * 1560)) + (i1 * 195)) + (i2 * 15)) + i3) + (n * 1560)) - 16)] : 0.0f);
                }
              } else {
                #pragma omp simd
                for (int64_t i3 = 0; i3 < 17; ++i3) {
                  Y_pad[((i0 * 255) + (i1 * 255) + (i2 * 17) + i3)] = (((((0 <= (i2 - 1)) && ((i2 - 1) < 13)) && (0 <= (i3 - 1))) && ((i3 - 1) < 15)) ? X[(((((((c * 195) + (i0 * 1560)) + (i1 * 195)) + (i2 * 15)) + i3) + (n * 1560)) - 16)] : 0.0f);
                }
              }
            }
          }
        }
        for (int64_t h = 0; h < 7; ++h) {
          for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
            float Y_local[8] __attribute__((aligned(64)));
            for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
              for (int64_t Y_local_c = 0; Y_local_c < 1; ++Y_local_c) {
                for (int64_t Y_local_h = 0; Y_local_h < 1; ++Y_local_h) {
                  #pragma omp simd
                  for (int64_t w = 0; w < 8; ++w) {
                    Y_local[((Y_local_n * 8) + (Y_local_c * 8) + (Y_local_h * 8) + w)] = 0.0f;
                  }
                  #pragma GCC unroll 3
                  for (int64_t kh = 0; kh < 3; ++kh) {
                    #pragma GCC unroll 3
                    for (int64_t kw = 0; kw < 3; ++kw) {
                      #pragma omp simd
                      for (int64_t w = 0; w < 8; ++w) {
                        Y_local[((Y_local_n * 8) + (Y_local_c * 8) + (Y_local_h * 8) + w)] = (Y_local[((Y_local_n * 8) + (Y_local_c * 8) + (Y_local_h * 8) + w)] + (Y_pad[((h * 34) + (w_0 * 16) + (Y_local_n * 255) + (Y_local_c * 255) + (Y_local_h * 34) + (kh * 17) + kw + (w * 2))] * W[((c * 9) + (Y_local_c * 9) + (kh * 3) + kw)]));
                      }
                    }
                  }
                }
              }
            }
            #pragma omp simd
            for (int64_t w_1 = 0; w_1 < 8; ++w_1) {
              Y[((n * 448) + (c * 56) + (h * 8) + (w_0 * 8) + w_1)] = Y_local[w_1];
            }
          }
        }
      }
    }
  }
  tg_barrier(tg);
}
void depthwise_conv2d_c8_stride2(void** args) {
  TG_TEAM_ALONE depthwise_conv2d_c8_stride2_team(args, tg); TG_TEAM_ALONE_END
}
