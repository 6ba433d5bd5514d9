void conv2d_groups2_dilation2(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict W = (float*)args[1];
  float* restrict Y = (float*)args[2];
  for (int64_t n = 0; n < 1; ++n) {
    for (int64_t c = 0; c < 8; ++c) {
      for (int64_t h = 0; h < 14; ++h) {
        float Y_pad[180] __attribute__((aligned(64)));
        for (int64_t i0 = 0; i0 < 1; ++i0) {
          for (int64_t i1 = 0; i1 < 2; ++i1) {
            for (int64_t i2 = 0; i2 < 5; ++i2) {
              #pragma omp simd
              for (int64_t i3 = 0; i3 < 18; ++i3) {
                Y_pad[((((i0 * 180) + (i1 * 90)) + (i2 * 18)) + i3)] = (((((0 <= ((h + i2) - 2)) && (((h + i2) - 2) < 14)) && (0 <= (i3 - 2))) && ((i3 - 2) < 14)) ? X[((((((((h * 14) + (i0 * 784)) + (i1 * 196)) + (i2 * 14)) + i3) + (n * 784)) + ((c / 4) * 392)) - 30)] : 0.0f);
              }
            }
          }
        }
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_local[14] __attribute__((aligned(64)));
          for (int64_t Y_local_n = 0; Y_local_n < 1; ++Y_local_n) {
            for (int64_t Y_local_c = 0; Y_local_c < 1; ++Y_local_c) {
              for (int64_t Y_local_h = 0; Y_local_h < 1; ++Y_local_h) {
                #pragma omp simd
                for (int64_t w = 0; w < 14; ++w) {
                  Y_local[((((Y_local_c * 14) + (Y_local_h * 14)) + (Y_local_n * 14)) + w)] = 0.0f;
                }
                for (int64_t rc = 0; rc < 2; ++rc) {
                  for (int64_t kh = 0; kh < 3; ++kh) {
                    for (int64_t kw = 0; kw < 3; ++kw) {
                      #pragma omp simd
                      for (int64_t w = 0; w < 14; ++w) {
                        Y_local[((((Y_local_c * 14) + (Y_local_h * 14)) + (Y_local_n * 14)) + w)] = (Y_local[((((Y_local_c * 14) + (Y_local_h * 14)) + (Y_local_n * 14)) + w)] + (Y_pad[(((((((((Y_local_h * 18) + (Y_local_n * 180)) + (kh * 36)) + (kw * 2)) + (rc * 90)) + w) + (w_0 * 14)) + (((Y_local_c + c) / 4) * 180)) - ((c / 4) * 180))] * W[(((((Y_local_c * 18) + (c * 18)) + (kh * 3)) + kw) + (rc * 9))]));
                      }
                    }
                  }
                }
              }
            }
          }
          #pragma omp simd
          for (int64_t w_1 = 0; w_1 < 14; ++w_1) {
            Y[(((((c * 196) + (h * 14)) + (n * 1568)) + (w_0 * 14)) + w_1)] = Y_local[w_1];
          }
        }
      }
    }
  }
}
