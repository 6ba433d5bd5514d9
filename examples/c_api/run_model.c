/* Run a saved tilegrad module from C, without Python:

     python -c "import tilegrad; print(tilegrad.c_include_dir())"        # where tilegrad.h is
     cc -O2 -I "$(python -c 'import tilegrad; print(tilegrad.c_include_dir())')" run_model.c -o run_model -ldl
     ./run_model out/ inputs.bin outputs.bin [NAME=VALUE ...]

   inputs.bin holds the inputs' bytes one after the other (C order, the element types the module declares);
   outputs.bin receives the outputs' bytes the same way. A module compiled with dynamic dimensions takes each one's
   value as NAME=VALUE (`seq=17`), which sizes the inputs and outputs. The buffers are the caller's: here,
   malloc'd. */
#include <stdio.h>
#include <stdlib.h>

#include "tilegrad.h"

static void show(const char* kind, const tg_buffer_info* b, const int64_t* shape) {
  printf("%s %s %s[", kind, b->name, b->dtype);
  for (int d = 0; d < b->rank; ++d) printf(d ? ", %lld" : "%lld", (long long)shape[d]);
  printf("]\n");
}

/* The value given for each dynamic dimension as NAME=VALUE among `args`; 0 on success. */
static int read_dims(const tg_model_info* info, int count, char** args, int64_t* values) {
  for (int d = 0; d < info->num_dims; ++d) {
    size_t length = strlen(info->dims[d].name);
    int found = 0;
    for (int a = 0; a < count && !found; ++a)
      if (!strncmp(args[a], info->dims[d].name, length) && args[a][length] == '=') {
        values[d] = atoll(args[a] + length + 1);
        found = 1;
      }
    if (!found) {
      fprintf(stderr, "give the dynamic dimension '%s' (%lld to %lld) as %s=VALUE\n", info->dims[d].name,
              (long long)info->dims[d].lo, (long long)info->dims[d].hi, info->dims[d].name);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODULE_DIR INPUTS.bin OUTPUTS.bin [NAME=VALUE ...]\n", argv[0]);
    return 2;
  }
  char error[512];
  tg_model* model = tg_model_load(argv[1], 0, error, sizeof error);
  if (!model) {
    fprintf(stderr, "%s\n", error);
    return 1;
  }
  const tg_model_info* info = tg_model_describe(model);
  int64_t* dims = malloc(sizeof(int64_t) * (size_t)(info->num_dims + 1));
  if (!dims || read_dims(info, argc - 4, argv + 4, dims)) return 1;
  if (info->num_dims && tg_model_set_dims(model, dims, error, sizeof error)) {
    fprintf(stderr, "%s\n", error);
    return 1;
  }
  int n = info->num_inputs, m = info->num_outputs;
  int64_t in_bytes = 0, out_bytes = 0;
  for (int k = 0; k < n + m; ++k) *(k < n ? &in_bytes : &out_bytes) += tg_model_nbytes(model, k);
  char* in = malloc((size_t)in_bytes + 1);
  char* out = malloc((size_t)out_bytes + 1);
  void** inputs = malloc(sizeof(void*) * (size_t)(n + 1));
  void** outputs = malloc(sizeof(void*) * (size_t)(m + 1));
  FILE* f = fopen(argv[2], "rb");
  if (!in || !out || !inputs || !outputs || !f || fread(in, 1, (size_t)in_bytes, f) != (size_t)in_bytes) {
    fprintf(stderr, "cannot read %lld bytes of inputs from %s\n", (long long)in_bytes, argv[2]);
    return 1;
  }
  fclose(f);
  int64_t at = 0;
  for (int i = 0; i < n; at += tg_model_nbytes(model, i++)) {
    inputs[i] = in + at;
    show("input", &info->inputs[i], tg_model_shape(model, i));
  }
  at = 0;
  for (int j = 0; j < m; at += tg_model_nbytes(model, n + j++)) {
    outputs[j] = out + at;
    show("output", &info->outputs[j], tg_model_shape(model, n + j));
  }
  tg_model_run(model, inputs, outputs);
  f = fopen(argv[3], "wb");
  if (!f || fwrite(out, 1, (size_t)out_bytes, f) != (size_t)out_bytes) {
    fprintf(stderr, "cannot write %s\n", argv[3]);
    return 1;
  }
  fclose(f);
  tg_model_free(model);
  free(in), free(out), free(inputs), free(outputs), free(dims);
  return 0;
}
