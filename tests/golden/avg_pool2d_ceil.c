void avg_pool2d_ceil(void** args) {
  float* restrict X = (float*)args[0];
  float* restrict Y = (float*)args[1];
  float* restrict Y_sum = (float*)aligned_alloc(64, 512);
  for (int64_t Y_sum_n = 0; Y_sum_n < 1; ++Y_sum_n) {
    for (int64_t Y_sum_c = 0; Y_sum_c < 3; ++Y_sum_c) {
      for (int64_t Y_sum_h = 0; Y_sum_h < 6; ++Y_sum_h) {
        for (int64_t w_0 = 0; w_0 < 1; ++w_0) {
          float Y_sum_local[7] __attribute__((aligned(64)));
          for (int64_t Y_sum_local_n = 0; Y_sum_local_n < 1; ++Y_sum_local_n) {
            for (int64_t Y_sum_local_c = 0; Y_sum_local_c < 1; ++Y_sum_local_c) {
              for (int64_t Y_sum_local_h = 0; Y_sum_local_h < 1; ++Y_sum_local_h) {
                #pragma omp simd
                for (int64_t Y_sum_local_w = 0; Y_sum_local_w < 7; ++Y_sum_local_w) {
                  Y_sum_local[((((Y_sum_local_c * 7) + (Y_sum_local_h * 7)) + (Y_sum_local_n * 7)) + Y_sum_local_w)] = 0.0f;
                }
                for (int64_t kh = 0; kh < 3; ++kh) {
                  for (int64_t kw = 0; kw < 3; ++kw) {
                    #pragma omp simd
                    for (int64_t Y_sum_local_w = 0; Y_sum_local_w < 7; ++Y_sum_local_w) {
                      Y_sum_local[((((Y_sum_local_c * 7) + (Y_sum_local_h * 7)) + (Y_sum_local_n * 7)) + Y_sum_local_w)] = (Y_sum_local[((((Y_sum_local_c * 7) + (Y_sum_local_h * 7)) + (Y_sum_local_n * 7)) + Y_sum_local_w)] + (((((0 <= ((((Y_sum_h * 2) + (Y_sum_local_h * 2)) + kh) - 1)) && (((((Y_sum_h * 2) + (Y_sum_local_h * 2)) + kh) - 1) < 11)) && (0 <= ((((Y_sum_local_w * 2) + kw) + (w_0 * 14)) - 1))) && (((((Y_sum_local_w * 2) + kw) + (w_0 * 14)) - 1) < 12)) ? X[(((((((((((Y_sum_c * 132) + (Y_sum_h * 24)) + (Y_sum_local_c * 132)) + (Y_sum_local_h * 24)) + (Y_sum_local_n * 396)) + (Y_sum_local_w * 2)) + (Y_sum_n * 396)) + (kh * 12)) + kw) + (w_0 * 14)) - 13)] : 0.0f));
                    }
                  }
                }
              }
            }
          }
          #pragma omp simd
          for (int64_t w_1 = 0; w_1 < 7; ++w_1) {
            Y_sum[(((((Y_sum_c * 42) + (Y_sum_h * 7)) + (Y_sum_n * 126)) + (w_0 * 7)) + w_1)] = Y_sum_local[w_1];
          }
        }
      }
    }
  }
  for (int64_t n = 0; n < 1; ++n) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t h = 0; h < 6; ++h) {
        #pragma omp simd
        for (int64_t w = 0; w < 7; ++w) {
          Y[((((c * 42) + (h * 7)) + (n * 126)) + w)] = (Y_sum[((((c * 42) + (h * 7)) + (n * 126)) + w)] / ((float)((TG_MIN(2, ((w * -2) + 13)) * 3) + 3)));
        }
      }
    }
  }
  free(Y_sum);
}
